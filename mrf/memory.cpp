#include "mrf/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

#include "mrf/threads.h"
#include "mrf/types.h"

namespace mrf {
namespace {

struct MemoryLimit {
  double bytes = 0;          // 0: unknown
  const char* whose = "";   // completes "more than ... X GiB"
};

// A limit file's number ("max" and unreadable files: none).
double ReadLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && value > 0 ? value : 0;
}

// This process's memory-limit files, from /proc/self/cgroup: its cgroup v2 group (the line with no
// controller names), its v1 memory group, and the roots of both hierarchies.
std::vector<std::string> CgroupLimitFiles() {
  std::string v2, v1;
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string names = line.substr(a + 1, b - a - 1);
    if (names.empty()) v2 = line.substr(b + 1);
    else if (("," + names + ",").find(",memory,") != std::string::npos) v1 = line.substr(b + 1);
  }
  return {"/sys/fs/cgroup" + v2 + "/memory.max", "/sys/fs/cgroup/memory.max",
          "/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
}

MemoryLimit UsableMemory() {
  MemoryLimit least;
  auto consider = [&least](double bytes, const char* whose) {
    if (bytes > 0 && (least.bytes == 0 || bytes < least.bytes)) least = {bytes, whose};
  };
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) consider(static_cast<double>(pages) * static_cast<double>(page), "this machine's");
  for (const std::string& path : CgroupLimitFiles()) consider(ReadLimit(path), "the limit of this process's control group,");
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(address_space.rlim_cur), "this process's address-space limit (ulimit -v),");
  return least;
}

}  // namespace

double UsableMemoryBytes() { return UsableMemory().bytes; }

std::string MemoryShortfall(double bytes, const std::string& what) {
  const MemoryLimit limit = UsableMemory();
  if (limit.bytes <= 0 || bytes <= limit.bytes) return {};
  char amounts[200];
  std::snprintf(amounts, sizeof amounts, " need about %.1f GiB of memory, more than %s %.1f GiB", bytes / (1 << 30),
                limit.whose, limit.bytes / (1 << 30));
  return what + amounts;
}

void CheckFitsInMemory(double bytes, const std::string& what) {
  const std::string shortfall = MemoryShortfall(bytes, what);
  if (!shortfall.empty()) throw Error(shortfall);
}

namespace {
// Below this many labels (4 MB) one core is as quick as starting the others.
constexpr std::size_t kParallelLabels = std::size_t{1} << 20;
constexpr std::size_t kLabelsPerPiece = std::size_t{1} << 16;

// Asks the kernel to back the 2 MB-aligned part of [storage, storage + bytes) with huge pages, where
// transparent huge pages are on for regions that ask ("madvise", Debian's default): a fresh 64 MB
// labelling then faults in 32 pages instead of 16,384: made in 4.9-6.1 instead of 7.1-8.5 ms and freed in
// 0.3 instead of 2-3.6 ms (4096 x 4096, the H200 machine's 16 cores).
void AskForHugePages(void* storage, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(storage), end = begin + bytes;
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = end & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // a hint: failure is fine
}

}  // namespace

void FirstTouchOnAllCores(void* storage, std::size_t bytes) {
  constexpr std::size_t kPage = 4096, kPagesPerPiece = 64;
  if (bytes < kParallelLabels * sizeof(Label)) return;
  auto* first = static_cast<unsigned char*>(storage);
  AskForHugePages(storage, bytes);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, (bytes + kPage - 1) / kPage, kPagesPerPiece),
                    [first](const tbb::blocked_range<std::size_t>& pages) {
                      for (std::size_t page = pages.begin(); page < pages.end(); ++page) first[page * kPage] = 0;
                    });
}

void ForPiecesOfLabels(std::size_t n, const std::function<void(std::size_t begin, std::size_t end)>& body) {
  if (n < kParallelLabels) {
    if (n > 0) body(0, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, kLabelsPerPiece),
                    [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); });
}

void LabelingAhead::Start(std::size_t n) {
  if (n < kParallelLabels || (making_.valid() && n_ == n)) return;
  try {
    // The background thread's loops on as many threads as its caller's arena allows (--threads).
    making_ = std::async(std::launch::async, [n, threads = ThreadsFor(0)] {
      Labeling labels;
      RunOnThreads(threads, [&] { labels = NewLabeling(n); });
      return labels;
    });
    n_ = n;
  } catch (const std::system_error&) {  // no thread to be had: Take() makes it
    making_ = {};
  }
}

Labeling LabelingAhead::Take(std::size_t n) {
  if (making_.valid() && n_ == n) return making_.get();
  making_ = {};
  return NewLabeling(n);
}

void AssignLabeling(Labeling* to, const Labeling& from) {
  if (to == &from) return;
  if (to->size() != from.size()) *to = NewLabeling(from.size());
  Label* out = to->data();
  const Label* in = from.data();
  ForPiecesOfLabels(from.size(), [&](std::size_t begin, std::size_t end) { std::copy(in + begin, in + end, out + begin); });
}

std::string MiB(double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace mrf
