#include "mrf/name_values.h"

#include <sstream>

#include "mrf/types.h"

namespace mrf {

std::vector<std::pair<std::string, std::string>> SplitNameValues(const std::string& list, const std::string& owner) {
  std::vector<std::pair<std::string, std::string>> items;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw Error(owner + ": '" + item + "' is not name=value");
    items.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return items;
}

}  // namespace mrf
