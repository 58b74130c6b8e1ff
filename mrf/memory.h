/// @file memory.h
/// @brief A check, before a large allocation, that it can fit in the memory this process may use at all;
/// large labellings made and copied on all cores; and "12.3 MiB" for messages.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "mrf/types.h"

namespace mrf {

/// The memory this process may use, in bytes: the least of this machine's physical memory, its control
/// group's limit (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`) and its address-space limit
/// (`ulimit -v`); 0 when none is known.
double UsableMemoryBytes();

/// "" when `bytes` fit in UsableMemoryBytes(); else a one-line reason, "<what> need about X GiB of memory,
/// more than this machine's Y GiB" (or the control group's or address-space limit, when that is lower).
/// A header of a few bytes can ask for terabytes: the caller refuses it with this message instead of
/// allocating until the system kills the process.
std::string MemoryShortfall(double bytes, const std::string& what);

/// Throws mrf::Error with MemoryShortfall()'s reason when `bytes` do not fit.
void CheckFitsInMemory(double bytes, const std::string& what);

/// "12.3 MiB": an amount of memory for messages (the GPU backends' allocation errors).
std::string MiB(double bytes);

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

/// Writes one byte of every 4 KB page of `storage` on all cores when it is large (4 MB or more), so
/// that the kernel maps and zeroes the pages there rather than on the one core that fills them next.
/// It first asks for transparent huge pages (madvise; honoured where the kernel's mode is "madvise"
/// or "always"): fewer faults and a cheaper free.
void FirstTouchOnAllCores(void* storage, std::size_t bytes);

/// A vector of `n` zeros (T a number type). A large one has its pages first touched on all cores
/// before the vector zeroes them: a fresh 64 MB vector took one core of the GPU machine's host 30-52 ms
/// to fault in, several times the max-flow of a 4096 x 4096 cut.
/// Under AddressSanitizer the pages are not touched first: where its container-overflow checks are on
/// (libc++'s annotations, libstdc++'s with _GLIBCXX_SANITIZE_VECTOR) they forbid writes into reserved
/// capacity.
template <class T>
std::vector<T> NewZeroedVector(std::size_t n) {
  std::vector<T> values;
  values.reserve(n);
  if (!kAddressSanitizer) FirstTouchOnAllCores(values.data(), n * sizeof(T));
  values.resize(n);
  return values;
}

/// A Labeling of `n` zeros, made by NewZeroedVector.
inline Labeling NewLabeling(std::size_t n) { return NewZeroedVector<Label>(n); }

/// Calls body(begin, end) on consecutive pieces of [0, n): on all cores when n is large, else once.
void ForPiecesOfLabels(std::size_t n, const std::function<void(std::size_t begin, std::size_t end)>& body);

/// Makes *to a copy of `from`, on all cores: in place when the sizes match, else in NewLabeling's memory.
void AssignLabeling(Labeling* to, const Labeling& from);

/// A NewLabeling made on another thread while its caller does other work: an engine starts one when
/// a solve begins and takes it for the cut, so that the vector's zeroing (one core, about 5 ms for
/// the 64 MB of a 4096 x 4096 labelling on the H200 machine) overlaps with the host's part of the
/// solve. Labellings below 4 MB are made when taken.
class LabelingAhead {
 public:
  /// Begins making NewLabeling(n) in the background when it is large (and not already begun).
  void Start(std::size_t n);
  /// Waits until the labelling begun is made: before work that it would slow down. cuda-pr's
  /// device re-solve at 4096 x 4096 took 4.3-6.2 instead of 1.4-1.5 ms while one was being made.
  void Wait() const {
    if (making_.valid()) making_.wait();
  }
  /// The labelling begun for `n` (waiting for it; rethrows its failure), else NewLabeling(n) now.
  Labeling Take(std::size_t n);

 private:
  std::future<Labeling> making_;
  std::size_t n_ = 0;
};

}  // namespace mrf
