#include "mrf/solve.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "mrf/registry.h"

namespace mrf {

Algorithm AutoAlgorithm(const Model& model) {
  if (model.num_labels == 2 && IsSubmodularBinary(model)) return Algorithm::kMaxFlow;
  if (model.pairwise.IsMetric(model.num_labels)) return Algorithm::kExpansion;
  return Algorithm::kBeliefPropagation;
}

namespace {

void CheckInitialLabels(const Model& model, const Labeling& labels) {
  if (labels.empty()) return;
  if (static_cast<NodeId>(labels.size()) != model.num_nodes())
    throw Error("initial labelling has " + std::to_string(labels.size()) + " labels for " +
                std::to_string(model.num_nodes()) + " nodes");
  for (std::size_t p = 0; p < labels.size(); ++p)
    if (labels[p] < 0 || labels[p] >= model.num_labels)
      throw Error("initial label " + std::to_string(labels[p]) + " at node " + std::to_string(p) +
                  " is outside 0.." + std::to_string(model.num_labels - 1));
}

// Whether a solver entry can take this model's shape (max-flow engines: two labels, engine shape).
std::string Accepts(const SolverEntry& e, const Model& model) {
  if (e.algorithm == Algorithm::kMaxFlow) {
    if (model.num_labels != 2) return "max-flow solves two-label models only";
    if (e.make_engine) return e.make_engine()->CannotSolve(model.topology);
  }
  return {};
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Runs `entry`; expansion and swap asked to start from belief propagation first run tiled BP (2 outer x
// 2 inner iterations, coarse-to-fine) on the device the moves use, and start from its labelling. The
// log keeps times since the solve started: the start is record 0, the moves' records come after it.
void RunSolver(const SolverEntry& entry, const Model& model, const SolveOptions& options, Result* result) {
  const bool moves = entry.algorithm == Algorithm::kExpansion || entry.algorithm == Algorithm::kSwap;
  if (options.start == StartLabels::kZero || !moves) {
    entry.solve(model, options, result);
    if (options.start != StartLabels::kZero)
      result->message += std::string("; --start ") + ToString(options.start) +
                         " applies to expansion and swap only: not used by " + entry.name;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  SolveOptions bp;
  bp.solver = entry.device == Device::kCuda ? "cuda-bp" : "tbb-bp";
  bp.max_iterations = 2;
  bp.num_threads = options.num_threads;
  bp.bp.schedule = "tiled";
  bp.bp.inner_iterations = 2;
  bp.bp.coarse_to_fine = true;
  const SolverEntry* bp_entry = Registry::Global().Find(bp.solver);
  if (!bp_entry) throw Error("start bp: this build has no " + bp.solver);
  Result first;
  try {
    bp_entry->solve(model, bp, &first);
  } catch (const std::exception& e) {
    throw Error(std::string("start bp: ") + e.what());
  }
  const double start_ms = MsSince(start);
  const Energy start_energy = EvaluateEnergy(model, first.labels).total;

  SolveOptions from_start = options;
  from_start.start = StartLabels::kZero;
  from_start.initial_labels = std::move(first.labels);
  if (options.time_limit_s > 0)  // what is left of it; a spent limit still lets the first cycle run
    from_start.time_limit_s = std::max(options.time_limit_s - start_ms / 1000.0, 1e-6);
  if (options.callback)
    from_start.callback = [&options, start_ms](IterationRecord record) {
      record.time_ms += start_ms;
      return options.callback(record);
    };
  entry.solve(model, from_start, result);
  for (IterationRecord& record : result->log) record.time_ms += start_ms;
  result->log.insert(result->log.begin(),
                     IterationRecord{0, start_energy, start_ms, "start: " + bp.solver + ", " + first.message});
  result->timings.start_ms = start_ms;
  result->message += "; started from " + bp.solver + "'s labelling (energy " + std::to_string(start_energy) + ")";
}

}  // namespace

Result Solve(const Model& model, const SolveOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Result result;
  result.backend_requested = options.solver;
  result.cost_scale = model.cost_scale;
  try {
    std::string error;
    if (!options.IsValid(&error)) throw Error(error);
    model.ValidateOrThrow();
    CheckInitialLabels(model, options.initial_labels);

    const bool automatic = options.solver == "auto";
    const Algorithm algorithm =
        automatic && options.algorithm == Algorithm::kAuto ? AutoAlgorithm(model) : options.algorithm;
    if (automatic)
      result.backend_requested = std::string("auto (") + ToString(algorithm) + ", " + ToString(options.device) + ")";
    auto accepts = [&model](const SolverEntry& e) { return Accepts(e, model); };
    const Registry& registry = Registry::Global();
    std::string note;
    const SolverEntry* entry = &registry.Choose(options.solver, algorithm, options.device, &note, accepts);
    result.fallback_reason = note;
    try {
      RunSolver(*entry, model, options, &result);
    } catch (const std::exception& e) {
      // A GPU failure at run time falls back to the CPU when the device was left to us.
      if (!(automatic && options.device == Device::kAuto && entry->device == Device::kCuda)) throw;
      const std::string failure = entry->name + " failed: " + e.what();
      entry = &registry.Choose("auto", entry->algorithm, Device::kCpu, &note, accepts);
      result = Result{};
      result.backend_requested = std::string("auto (") + ToString(algorithm) + ", auto)";
      result.cost_scale = model.cost_scale;
      result.fallback_reason = failure + "; ran " + entry->name + " instead";
      RunSolver(*entry, model, options, &result);
    }
    result.backend_used = entry->name;
    result.energy = EvaluateEnergy(model, result.labels).total;
    if (result.has_lower_bound && result.lower_bound > result.energy)
      throw Error("internal error in " + entry->name + ": lower bound " + std::to_string(result.lower_bound) +
                  " exceeds the energy " + std::to_string(result.energy));
    // A completed cut claims its flow as the bound and must match it; a cut stopped early by the
    // time limit or the callback claims no bound and is only scored.
    if (entry->algorithm == Algorithm::kMaxFlow && result.has_lower_bound && result.flow != result.energy)
      throw Error("internal error in " + entry->name + ": cut energy " + std::to_string(result.energy) +
                  " differs from the flow " + std::to_string(result.flow));
    result.ok = true;
    if (result.message == "Solve was not called") result.message = "finished";
  } catch (const std::bad_alloc&) {
    result.ok = false;
    result.message = "out of memory";
  } catch (const std::exception& e) {
    result.ok = false;
    result.message = e.what();
  }
  result.timings.total_ms = MsSince(start);
  return result;
}

}  // namespace mrf
