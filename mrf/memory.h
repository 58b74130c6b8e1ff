/// @file memory.h
/// @brief A check, before a large allocation, that it can fit in this machine's memory at all.
#pragma once

#include <string>

namespace mrf {

/// This machine's physical memory in bytes (0 when the system does not say).
double PhysicalMemoryBytes();

/// "" when `bytes` fit in this machine's physical memory; else a one-line reason, "<what> need about
/// X GiB of memory, more than this machine's Y GiB". A header of a few bytes can ask for terabytes: the
/// caller refuses it with this message instead of allocating until the system kills the process.
std::string MemoryShortfall(double bytes, const std::string& what);

}  // namespace mrf
