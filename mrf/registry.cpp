#include "mrf/registry.h"

#include <algorithm>

#include "mrf/binary_graph.h"
#include "mrf/device.h"
#include "mrf/model.h"

namespace mrf {

const Registry& Registry::Global() {
  static const Registry registry = [] {
    Registry r;
    RegisterBuiltinSolvers(r);
    return r;
  }();
  return registry;
}

namespace {

// The model-level solve of a max-flow engine: one exact graph cut of a two-label model, or, when
// the time limit or the callback of `options` stops the engine, the cut it holds at that point.
// With options.kept_cut, a model whose graph differs from the kept one only in its terminal
// capacities is re-solved on that graph (the engine decides how: from its residual graph, or afresh
// for dense edits); otherwise the new graph and engine are kept for the next solve.
void SolveWithOneCut(const SolverEntry& entry, const Model& model, const SolveOptions& options, Result* out) {
  const StopCheck stop_check = MakeStopCheck(options.time_limit_s, options.callback);
  CheckBinaryModel(model);  // the model's errors first, as when the graph was built before the engine was made
  KeptCut* kept = options.kept_cut.get();
  KeptCut fresh;         // this solve's graph and engine when none is kept for it
  KeptCut* cut = &fresh;  // the graph and engine this solve runs on
  Energy offset = 0;
  bool reuse = false;
  try {
    reuse = kept && kept->graph && kept->engine && kept->engine_name == entry.name &&
            UpdateBinaryGridTerminals(model, kept->graph.get(), &offset);
    if (reuse) {
      cut = kept;
    } else {
      if (kept) *kept = KeptCut{};  // its memory (the GPU's too) goes before the new graph's comes
      cut->engine_name = entry.name;
      cut->engine = entry.make_engine();
      const std::string cannot = cut->engine->CannotSolve(model.topology);
      if (!cannot.empty()) throw Error(entry.name + " cannot solve this model: " + cannot);
      cut->engine->PrepareAhead(model.topology);  // a GPU engine's context and workspace while the graph is built
      cut->graph = std::make_unique<StGraph>(BuildCheckedBinaryGraph(model, &offset));
    }
    cut->engine->set_stop_check(stop_check);
    if (reuse) cut->engine->Resolve(*cut->graph, out);
    else cut->engine->Solve(*cut->graph, out);
    cut->engine->set_stop_check({});  // the check refers to this solve's clock and callback
    cut->graph->MarkSolved();         // capacity changes from here on are what a re-solve reads
  } catch (...) {
    // A failed solve, or a kept graph rewritten part way, leaves nothing to re-solve from.
    if (kept) *kept = KeptCut{};
    throw;
  }
  out->flow += cut->graph->constant() + offset;
  const std::string stopped = cut->engine->stop_reason();
  if (kept && !reuse) *kept = std::move(fresh);
  if (!stopped.empty()) {
    // mrf::Solve scores the labelling; without a bound it does not expect the flow to match it.
    out->has_lower_bound = false;
    out->message = "stopped early: " + stopped + "; the labelling is a valid cut but not a minimum one (flow routed so far " +
                   std::to_string(out->flow) + ")";
    return;
  }
  out->has_lower_bound = true;
  out->lower_bound = out->flow;  // exact: the minimum energy equals the maximum flow
  if (out->message == "Solve was not called") out->message = "exact minimum cut found";
  if (reuse) out->message += " (on the kept graph, its terminal capacities rewritten)";
}

}  // namespace

void Registry::Add(SolverEntry entry) {
  if (Find(entry.name)) throw Error("solver '" + entry.name + "' is registered twice");
  if (!entry.unavailable_reason) entry.unavailable_reason = [] { return std::string(); };
  if (entry.make_engine && !entry.solve) {
    const std::string name = entry.name;
    auto make = entry.make_engine;
    entry.solve = [name, make](const Model& model, const SolveOptions& options, Result* out) {
      SolverEntry e;
      e.name = name;
      e.make_engine = make;
      SolveWithOneCut(e, model, options, out);
    };
  }
  entries_.push_back(std::move(entry));
}

const SolverEntry* Registry::Find(const std::string& name) const {
  for (const SolverEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> Registry::Names(Algorithm algorithm) const {
  std::vector<std::string> names;
  for (const SolverEntry& e : entries_)
    if (algorithm == Algorithm::kAuto || e.algorithm == algorithm) names.push_back(e.name);
  return names;
}

std::string Registry::NameList(Algorithm algorithm) const {
  std::string list;
  for (const std::string& n : Names(algorithm)) list += (list.empty() ? "" : ", ") + n;
  return list;
}

bool Registry::IsCompiledIn(const std::string& name) const {
  const SolverEntry* e = Find(name);
  return e && e->compiled_in;
}

bool Registry::IsAvailable(const std::string& name, std::string* why) const {
  const SolverEntry* e = Find(name);
  std::string reason;
  if (!e) reason = "unknown solver '" + PrintableText(name) + "'";
  else if (!e->compiled_in) reason = "not compiled in (this build has no CUDA)";
  else reason = e->unavailable_reason();
  if (why) *why = reason;
  return reason.empty();
}

const SolverEntry& Registry::Choose(const std::string& name, Algorithm algorithm, Device device,
                                    std::string* note,
                                    const std::function<std::string(const SolverEntry&)>& accepts) const {
  if (name != "auto") {
    const SolverEntry* e = Find(name);
    if (!e) throw Error("unknown backend '" + PrintableText(name) + "' (known: " + NameList() + ")");
    if (algorithm != Algorithm::kAuto && e->algorithm != algorithm)
      throw Error("backend '" + name + "' runs " + ToString(e->algorithm) + ", not " + ToString(algorithm) +
                  " (" + ToString(algorithm) + " backends: " + NameList(algorithm) + ")");
    if (device != Device::kAuto && e->device != device)
      throw Error("backend '" + name + "' runs on " + ToString(e->device) + ", not " + ToString(device));
    std::string why;
    if (!IsAvailable(name, &why)) throw Error("backend '" + name + "' is unavailable: " + why);
    if (accepts) {
      const std::string cannot = accepts(*e);
      if (!cannot.empty()) throw Error("backend '" + name + "' cannot solve this problem: " + cannot);
    }
    return *e;
  }
  // auto: GPU solvers first when the device is auto, then by priority.
  std::vector<const SolverEntry*> candidates;
  for (const SolverEntry& e : entries_)
    if ((algorithm == Algorithm::kAuto || e.algorithm == algorithm) && (device == Device::kAuto || e.device == device))
      candidates.push_back(&e);
  std::stable_sort(candidates.begin(), candidates.end(), [](const SolverEntry* a, const SolverEntry* b) {
    if (a->device != b->device) return a->device == Device::kCuda;
    return a->priority > b->priority;
  });
  std::string skipped;
  for (const SolverEntry* e : candidates) {
    std::string why;
    if (IsAvailable(e->name, &why) && accepts) why = accepts(*e);
    if (why.empty()) {
      if (note) *note = skipped;
      return *e;
    }
    skipped += (skipped.empty() ? "" : "; ") + e->name + " skipped: " + why;  // every reason: the last may be the one that matters
  }
  throw Error(std::string("no available ") + ToString(algorithm) + " solver on device " + ToString(device) +
              (skipped.empty() ? std::string() : " (" + skipped + ")"));
}

}  // namespace mrf
