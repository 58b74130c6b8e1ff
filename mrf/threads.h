/// @file threads.h
/// @brief How many CPU threads a run's parallel loops may use (SolveOptions::num_threads, the programs'
/// --threads).
#pragma once

#include <functional>

namespace mrf {

/// The threads a request for `requested` gets: the calling thread's TBB arena's count when it is 0, else
/// `requested`, at most the cores TBB may use (more would only make TBB print a warning).
int ThreadsFor(int requested);

/// Runs `work` on at most ThreadsFor(requested) threads: in a TBB arena of that size, or in the calling
/// thread's own arena when `requested` is 0 (so a caller's limit holds for the work too). Exceptions
/// from `work` reach the caller.
void RunOnThreads(int requested, const std::function<void()>& work);

}  // namespace mrf
