#include "mrf/solve.h"

#include <cxxabi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "inference/alpha_beta_swap.h"
#include "inference/iteration_control.h"
#include "inference/move_graph.h"
#include "mrf/binary_graph.h"
#include "mrf/registry.h"
#include "mrf/threads.h"

namespace mrf {

Algorithm AutoAlgorithm(const Model& model) {
  model.CheckShapeOrThrow();
  if (model.num_labels == 2 && IsSubmodularBinary(model)) return Algorithm::kMaxFlow;
  if (model.pairwise.IsMetric(model.num_labels)) return Algorithm::kExpansion;
  // BP's engines take 4-connected 2-D grids only; elsewhere swap, when its moves are graph cuts and its
  // cycle's label pairs fit, or ICM, which takes anything.
  if (model.topology.kind() == TopologyKind::kGrid4) return Algorithm::kBeliefPropagation;
  return AutoAlternative(model, Algorithm::kBeliefPropagation);
}

Algorithm AutoAlternative(const Model& model, Algorithm refused) {
  // Only belief propagation has limits that auto's other choices do not share: expansion and swap are
  // picked only where their moves are graph cuts, and max-flow's refusal (a flow past 64 bits) must stand.
  if (refused != Algorithm::kBeliefPropagation) return Algorithm::kAuto;
  const bool swap_applies = SwapTakesLabelCount(model.num_labels) && FindNonSubmodularMoveTerm(model, false).empty();
  return swap_applies ? Algorithm::kSwap : Algorithm::kIcm;
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

// A failure of --start's labelling, which is not the chosen algorithm refusing the model.
struct StartFailed : Error {
  using Error::Error;
};

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string MsText(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ms);
  return text;
}

// The labelling --start bp starts from: tiled BP (2 outer x 2 inner iterations, coarse-to-fine) on the
// device the moves use. When cuda-bp cannot take the model (more than 256 labels, a GPU fault), tbb-bp
// computes it: the same labelling. The user's time limit and callback apply to it (records numbered 0);
// `*stopped` says the callback stopped it.
Result BpStart(const SolverEntry& moves, const Model& model, const SolveOptions& options, std::string* solver,
               bool* stopped) {
  SolveOptions bp;
  bp.max_iterations = 2;
  bp.time_limit_s = options.time_limit_s;
  bp.bp.schedule = "tiled";
  bp.bp.inner_iterations = 2;
  bp.bp.coarse_to_fine = true;
  if (options.callback)
    bp.callback = [&options, stopped](IterationRecord record) {
      record.note = "start: BP iteration " + std::to_string(record.iteration);
      record.iteration = 0;
      *stopped = !options.callback(record);
      return !*stopped;
    };
  std::string gpu_failure;
  for (const char* name : {"cuda-bp", "tbb-bp"}) {
    if (moves.device != Device::kCuda && std::string(name) == "cuda-bp") continue;
    const SolverEntry* entry = Registry::Global().Find(name);
    if (!entry) continue;
    bp.solver = *solver = name;
    Result first;
    try {
      entry->solve(model, bp, &first);
      if (!gpu_failure.empty()) first.message += "; " + gpu_failure;
      return first;
    } catch (const std::exception& e) {
      if (moves.device != Device::kCuda || !gpu_failure.empty())
        throw StartFailed(std::string("start bp: ") + e.what());
      gpu_failure = std::string("cuda-bp could not compute the start (") + e.what() + "): tbb-bp did";
    }
  }
  throw StartFailed("start bp: this build has no belief-propagation solver");
}

// Options set away from their defaults that `entry` does not read, named in its message (empty, or
// "; ... not used by NAME") rather than silently ignored.
std::string UnusedOptionsNote(const SolverEntry& entry, const SolveOptions& o) {
  std::string note;
  auto add = [&](const std::vector<std::string>& unused, const char* scope) {
    if (unused.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < unused.size(); ++i)
      list += (i == 0 ? "" : i + 1 == unused.size() ? " and " : ", ") + unused[i];
    note += "; " + list + (unused.size() > 1 ? " apply to " : " applies to ") + scope + " only: not used by " +
            entry.name;
  };
  if (entry.algorithm != Algorithm::kExpansion && entry.algorithm != Algorithm::kSwap) {
    std::vector<std::string> unused;
    if (o.start != StartLabels::kZero) unused.push_back(std::string("--start ") + ToString(o.start));
    if (o.label_order != LabelOrder::kSequential)
      unused.push_back(std::string("label order ") + ToString(o.label_order));
    if (o.maxflow_backend != "auto") unused.push_back("max-flow backend " + PrintableText(o.maxflow_backend));
    add(unused, "expansion and swap");
  }
  if (entry.algorithm != Algorithm::kBeliefPropagation) {
    const BpOptions defaults;
    std::vector<std::string> unused;
    if (o.bp.schedule != defaults.schedule) unused.push_back("BP schedule " + PrintableText(o.bp.schedule));
    if (o.bp.tile_size != defaults.tile_size) unused.push_back("BP tile size " + std::to_string(o.bp.tile_size));
    if (o.bp.inner_iterations != defaults.inner_iterations)
      unused.push_back("BP inner iterations " + std::to_string(o.bp.inner_iterations));
    if (o.bp.coarse_to_fine != defaults.coarse_to_fine) unused.push_back("BP coarse-to-fine start");
    add(unused, "belief propagation");
  }
  return note;
}

// Runs `entry`; expansion and swap asked to start from belief propagation start from BpStart's labelling.
// The start is log record 0; the moves' records are shifted by its time (each solver's own clock starts
// with its cycle loop, so its setup before the first cycle is not in the log's times).
void RunSolver(const SolverEntry& entry, const Model& model, const SolveOptions& options, Result* result) {
  const bool moves = entry.algorithm == Algorithm::kExpansion || entry.algorithm == Algorithm::kSwap;
  if (moves) MoveOrder::CheckUsable(options.label_order, entry.algorithm == Algorithm::kSwap);  // before the start
  if (options.start == StartLabels::kZero || !moves) {
    entry.solve(model, options, result);
    result->message += UnusedOptionsNote(entry, options);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::string start_solver;
  bool stopped = false;
  Result first = BpStart(entry, model, options, &start_solver, &stopped);
  const double start_ms = MsSince(start);
  const Energy start_energy = EvaluateEnergy(model, first.labels).total;
  // Where the start's time went, so that its cost can be weighed against the moves it saves (a phase
  // that did not run, such as tbb-bp's transfers, is left out).
  std::string phases;
  for (const auto& [name, ms] : {std::pair<const char*, double>{"setup", first.timings.setup_ms},
                                 {"transfers", first.timings.transfer_ms}, {"solve", first.timings.solve_ms}})
    if (ms >= 0) phases += std::string(phases.empty() ? ": " : ", ") + name + " " + MsText(ms);
  const std::string split = " (" + MsText(start_ms) + " ms" + phases + ")";
  const IterationRecord start_record{0, start_energy, start_ms, "start: " + start_solver + split + ", " + first.message};
  result->timings.start_ms = start_ms;
  if (stopped) {  // the user's callback said stop: the start is the answer
    result->labels = std::move(first.labels);
    result->log = {start_record};
    result->message = "stopped by the callback during the start (" + start_solver + ")";
    return;
  }

  SolveOptions from_start = options;
  from_start.start = StartLabels::kZero;
  from_start.initial_labels = std::move(first.labels);
  if (options.time_limit_s > 0)  // what is left of it (a spent limit stops the moves at their first check)
    from_start.time_limit_s = std::max(options.time_limit_s - start_ms / 1000.0, 1e-6);
  if (options.callback)
    from_start.callback = [&options, start_ms](IterationRecord record) {
      record.time_ms += start_ms;
      return options.callback(record);
    };
  entry.solve(model, from_start, result);
  // A solver stopped by the time limit names the limit it was given: name the user's.
  if (options.time_limit_s > 0) {
    const std::string given = "(" + SecondsText(from_start.time_limit_s) + ")";
    const std::size_t at = result->message.find(given);
    if (at != std::string::npos)
      result->message.replace(at, given.size(), "(" + SecondsText(options.time_limit_s) + ", the start included)");
  }
  for (IterationRecord& record : result->log) record.time_ms += start_ms;
  result->log.insert(result->log.begin(), start_record);
  result->message += "; started from " + start_solver + "'s labelling (energy " + std::to_string(start_energy) + ")";
  result->message += UnusedOptionsNote(entry, options);
}

Result SolveInThisArena(const Model& model, const SolveOptions& options) {
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
    // Starts over with `next`, the result recording `why` and `note` (what choosing `next` skipped).
    auto start_over = [&](const SolverEntry& next, const std::string& why) {
      entry = &next;
      const std::string requested = result.backend_requested;
      result = Result{};
      result.backend_requested = requested;
      result.cost_scale = model.cost_scale;
      result.fallback_reason = why + (note.empty() ? "" : "; " + note) + "; ran " + entry->name + " instead";
    };
    while (true) {
      try {
        RunSolver(*entry, model, options, &result);
        break;
      } catch (const StartFailed&) {  // --start's labelling, not the solver, failed: no other solver helps
        throw;
      } catch (const std::exception& e) {
        const std::string before = result.fallback_reason.empty() ? "" : result.fallback_reason + "; then ";
        // A GPU failure at run time falls back to the CPU when the device was left to us.
        if (automatic && options.device == Device::kAuto && entry->device == Device::kCuda) {
          const SolverEntry& cpu = registry.Choose("auto", entry->algorithm, Device::kCpu, &note, accepts);
          start_over(cpu, before + entry->name + " failed: " + e.what());
          continue;
        }
        // An algorithm that auto chose and that cannot represent this model's values (ModelRefused:
        // belief propagation's 32-bit messages) gives way to the next one auto would take. Mistakes in
        // the options are not refusals: they stand.
        const bool refusal = dynamic_cast<const ModelRefused*>(&e) != nullptr;
        const Algorithm next = refusal && automatic && options.algorithm == Algorithm::kAuto
                                   ? AutoAlternative(model, entry->algorithm)
                                   : Algorithm::kAuto;
        if (next == Algorithm::kAuto) throw;
        const std::exception_ptr refused = std::current_exception();
        const SolverEntry* next_entry = nullptr;
        try {
          next_entry = &registry.Choose("auto", next, options.device, &note, accepts);
        } catch (const Error&) {  // no solver of the next algorithm on this device: the refusal says more
          std::rethrow_exception(refused);
        }
        start_over(*next_entry, before + entry->name + " cannot solve this model: " + e.what());
      }
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
  } catch (abi::__forced_unwind&) {  // a cancelled thread must unwind
    throw;
  } catch (...) {  // Solve never throws, whatever a callback throws
    result.ok = false;
    result.message = kForeignException;
  }
  if (!result.ok && options.kept_cut) *options.kept_cut = KeptCut{};  // nothing to build on after a failure
  result.threads = ThreadsFor(0);  // this arena's: RunOnThreads made it
  result.timings.total_ms = MsSince(start);
  return result;
}

}  // namespace

Result Solve(const Model& model, const SolveOptions& options) {
  // Every TBB loop of the run (the solver's, the start's, the graph fills, the energy) on at most
  // options.num_threads threads; options.IsValid() refuses negative counts inside.
  Result result;
  RunOnThreads(options.num_threads, [&] { result = SolveInThisArena(model, options); });
  return result;
}

}  // namespace mrf
