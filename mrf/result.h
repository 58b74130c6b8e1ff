#pragma once
/// @file result.h
/// @brief The one result type every solver returns.

#include <string>
#include <vector>

#include "mrf/types.h"

namespace mrf {

/// Wall-clock times in milliseconds; -1 means "this phase did not run".
struct Timings {
  double setup_ms = -1;     ///< Building the solver's own data (graphs, messages, workspaces).
  double transfer_ms = -1;  ///< Host <-> device copies (GPU solvers only).
  double solve_ms = -1;     ///< The optimisation itself.
  double start_ms = -1;     ///< Computing the starting labelling (SolveOptions::start), before the solver's own.
  double total_ms = -1;     ///< Everything inside mrf::Solve, validation and evaluation included.
};

/// One entry of a solver's progress log (an expansion cycle, a BP iteration, a relabel round...).
struct IterationRecord {
  int iteration = 0;        ///< 1-based counter in the solver's own unit.
  Energy energy = -1;       ///< Energy after this iteration, -1 when not computed.
  double time_ms = 0;       ///< Time since the solve started.
  std::string note;         ///< What happened (e.g. "label 5: 1203 pixels changed").
};

/// Result::message when a callback threw something that is not a std::exception (Solve and
/// StGraph::maxflow catch it too, and never throw).
inline constexpr const char* kForeignException =
    "stopped by an exception that is not a std::exception (thrown by the callback?)";

/// What a solve produced. Starts honest: nothing solved, times at -1.
struct Result {
  bool ok = false;                          ///< True when labels hold a valid answer.
  std::string message = "Solve was not called";  ///< Why the solver stopped, or the error.
  Labeling labels;                          ///< One label per node (binary cuts: 0 = source side).
  Energy energy = -1;                       ///< Energy of labels, from the reference evaluator.
  bool has_lower_bound = false;             ///< True when lower_bound is meaningful.
  Energy lower_bound = 0;                   ///< A bound <= the optimum (equal to energy for exact cuts).
  Energy flow = -1;                         ///< Max-flow value, when the solver computed a cut.
  std::string backend_requested;            ///< What the options asked for ("auto", "cuda-pr", ...).
  std::string backend_used;                 ///< The solver that actually produced labels.
  std::string fallback_reason;              ///< Why backend_used differs from the preferred choice.
  double cost_scale = 1.0;                  ///< Integer costs = real costs x cost_scale.
  Timings timings;                          ///< Where the time went.
  std::vector<IterationRecord> log;         ///< Progress, one record per iteration.
  std::int64_t iterations = 0;              ///< Iterations (cycles, sweeps, pulses) the solver ran.
  /// CPU threads the solve's parallel loops could use: SolveOptions::num_threads (at most the cores), or
  /// the calling thread's TBB arena's count when that is 0. Set by mrf::Solve and StGraph::maxflow, also
  /// when they fail; 0 on a Result no solve returned.
  int threads = 0;

  /// A few lines for a terminal: backend, energy, bound, time, termination.
  std::string BriefReport() const;
  /// BriefReport() plus the timing split and the iteration log.
  std::string FullReport() const;
  /// One JSON object: ok, message, energy, lower_bound, flow, backend, backend_requested,
  /// fallback_reason, cost_scale, start_ms, setup_ms, transfer_ms, solve_ms, time_ms, iterations, threads, log.
  std::string ToJson() const;
};

}  // namespace mrf
