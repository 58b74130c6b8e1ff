#include "mrf/memory.h"

#include <unistd.h>

#include <cstdio>

namespace mrf {

double PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string MemoryShortfall(double bytes, const std::string& what) {
  const double have = PhysicalMemoryBytes();
  if (have <= 0 || bytes <= have) return {};
  char amounts[120];
  std::snprintf(amounts, sizeof amounts, " need about %.1f GiB of memory, more than this machine's %.1f GiB",
                bytes / (1 << 30), have / (1 << 30));
  return what + amounts;
}

}  // namespace mrf
