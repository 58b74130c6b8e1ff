#pragma once
/// @file iteration_control.h
/// @brief The bookkeeping every iterative solver shares: its clock, the time limit, the per-iteration
/// log and the user's callback.

#include <chrono>
#include <string>

#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Runs the clock of one solve and writes its log into a Result.
class IterationControl {
 public:
  /// Starts the clock. `options` supplies the time limit and the callback; records go to out->log.
  IterationControl(const SolveOptions& options, Result* out);
  /// Milliseconds since construction.
  double elapsed_ms() const;
  /// True when options.time_limit_s is set and has passed.
  bool TimeUp() const;
  /// Appends the record of iteration `iteration` (its energy and a note) to the log, sets
  /// out->iterations, and calls the callback. Returns false when the callback asks to stop.
  bool Record(int iteration, Energy energy, const std::string& note);

 private:
  std::chrono::steady_clock::time_point start_;
  double time_limit_ms_;
  const SolveOptions& options_;
  Result* out_;
};

/// "0.5 s" and the like, for messages.
std::string SecondsText(double seconds);

}  // namespace mrf
