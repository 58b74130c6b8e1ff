/// @file memory.h
/// @brief A check, before a large allocation, that it can fit in the memory this process may use at all.
#pragma once

#include <string>

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

}  // namespace mrf
