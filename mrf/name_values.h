/// @file name_values.h
/// @brief "name=value,name=value" lists, such as the tunings of MRF_PR_TUNING and
/// MRF_CUDA_EXPANSION_TUNING, read against a table of the names a settings struct knows: each name
/// is written once, and the message for an unknown one lists the table.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mrf {

/// One name of a settings struct and how its value is read into it.
template <class Settings>
struct NamedSetting {
  const char* name;
  /// Reads `text` into `settings`; throws mrf::Error that names `name` when the value is not valid.
  void (*read)(Settings& settings, const std::string& name, const std::string& text);
};

/// A NamedSetting reader that stores kParse(name, text) in the field kField of the settings.
template <class Settings, class Value, Value Settings::*kField, Value (*kParse)(const std::string&, const std::string&)>
void ReadInto(Settings& settings, const std::string& name, const std::string& text) {
  settings.*kField = kParse(name, text);
}

/// The items of `list` split at commas (empty ones skipped) into name and value. Throws mrf::Error
/// "<owner>: 'item' is not name=value" for an item without '='.
std::vector<std::pair<std::string, std::string>> SplitNameValues(const std::string& list, const std::string& owner);

/// The entry of `table` called `name`, or nullptr.
template <class Settings, std::size_t N>
const NamedSetting<Settings>* FindSetting(const NamedSetting<Settings> (&table)[N], const std::string& name) {
  for (const NamedSetting<Settings>& entry : table)
    if (name == entry.name) return &entry;
  return nullptr;
}

/// "a, b, c": the names of `table` in its order, for messages that list the known ones.
template <class Settings, std::size_t N>
std::string JoinSettingNames(const NamedSetting<Settings> (&table)[N]) {
  std::string names;
  for (const NamedSetting<Settings>& entry : table) names += (names.empty() ? "" : ", ") + std::string(entry.name);
  return names;
}

}  // namespace mrf
