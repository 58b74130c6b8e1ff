// The binary suite: one exact max-flow on the synthetic segmentation scene (BENCHMARKS.md section 2)
// at several sizes, for every available max-flow engine of the registry and, on the same
// instances in the same run, Kolmogorov's BK library when it was found at configure time.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/app.h"
#include "energies/synthetic_scene.h"
#include "mrf-bench/bench_common.h"
#include "mrf/model.h"
#include "mrf/registry.h"
#include "mrf/st_graph.h"

#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
#include <maxflow.h>
#endif

namespace mrf::bench {
namespace {

constexpr const char* kKolmogorov = "kolmogorov-bk";  // Kolmogorov's maxflow library v3.04
constexpr const char* kBaseline = "cpu-bk";

// Heap bytes in use (small blocks plus mmapped ones), the same measure for every library.
std::int64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
}

// One cell of the table: a solver on one instance.
struct Row {
  int size = 0;
  std::string solver;
  double setup_ms = -1, transfer_ms = -1, solve_ms = -1;  // medians; -1 = phase not reported
  double memory_mb = -1;  // heap growth over building and solving, the returned cut excluded; -1 = not seen
  double engine_mb = -1;  // what the engine says it holds (MemoryBytes), -1 = not reported
  Energy flow = -1;
};

struct Run {
  double setup_ms = -1, transfer_ms = -1, solve_ms = -1, memory_mb = 0, engine_mb = -1;
  Energy flow = -1;
};

Row Summarise(int size, const std::string& solver, const std::vector<Run>& runs) {
  Row row;
  row.size = size;
  row.solver = solver;
  std::vector<double> setup, transfer, solve, memory;
  for (const Run& r : runs) {
    setup.push_back(r.setup_ms);
    transfer.push_back(r.transfer_ms);
    solve.push_back(r.solve_ms);
    memory.push_back(r.memory_mb);
  }
  row.setup_ms = Median(setup);
  row.transfer_ms = Median(transfer);
  row.solve_ms = Median(solve);
  row.memory_mb = Median(memory);
  // An engine that frees its data before returning (boost-bk does) shows no growth: not measured.
  if (row.memory_mb < 0.05) row.memory_mb = -1;
  row.engine_mb = runs.back().engine_mb;
  row.flow = runs.back().flow;
  return row;
}

Run RunEngine(const SolverEntry& entry, const StGraph& graph, const Model& model) {
  Run run;
  const std::int64_t before = HeapInUse();
  std::unique_ptr<MaxFlowEngine> engine = entry.make_engine();
  Result result;
  engine->Solve(graph, &result);
  const std::int64_t after = HeapInUse();
  const auto label_bytes = static_cast<std::int64_t>(result.labels.capacity() * sizeof(Label));
  run.memory_mb = static_cast<double>(after - before - label_bytes) / (1 << 20);
  if (engine->MemoryBytes()) run.engine_mb = static_cast<double>(engine->MemoryBytes()) / (1 << 20);
  run.setup_ms = result.timings.setup_ms;
  run.transfer_ms = result.timings.transfer_ms;
  run.solve_ms = result.timings.solve_ms;
  run.flow = result.flow + graph.constant();
  if (graph.CutCapacity(result.labels) != run.flow)
    throw Error(entry.name + ": cut capacity " + std::to_string(graph.CutCapacity(result.labels)) +
                " differs from its flow " + std::to_string(run.flow));
  const Energy energy = EvaluateEnergy(model, result.labels).total;
  if (energy != run.flow)
    throw Error(entry.name + ": the energy of its cut " + std::to_string(energy) + " differs from its flow " +
                std::to_string(run.flow));
  return run;
}

#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
// Kolmogorov's library on the same graph: built with the same netting-free calls a user would make
// (terminal pairs and edge pairs, empty edges skipped); max-flow timed alone.
Run RunKolmogorov(const StGraph& graph) {
  using KGraph = maxflow::Graph_III;
  Run run;
  const NodeId n = graph.num_nodes();
  for (NodeId v = 0; v < n; ++v)
    if (graph.source_cap(v) > kMaxCost || graph.sink_cap(v) > kMaxCost)
      throw Error(std::string(kKolmogorov) + ": terminal capacity of node " + std::to_string(v) +
                  " does not fit its 32-bit capacities");
  const std::int64_t before = HeapInUse();
  const auto t0 = std::chrono::steady_clock::now();
  auto g = std::make_unique<KGraph>(n, static_cast<int>(graph.topology().num_edges()));
  g->add_node(n);
  for (NodeId v = 0; v < n; ++v)
    g->add_tweights(v, static_cast<int>(graph.source_cap(v)), static_cast<int>(graph.sink_cap(v)));
  graph.topology().ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
    if (graph.edge_cap(e) || graph.edge_rev_cap(e)) g->add_edge(p, q, graph.edge_cap(e), graph.edge_rev_cap(e));
  });
  const auto t1 = std::chrono::steady_clock::now();
  g->maxflow();  // its int flow may wrap on large scenes: the flow is read back as the cut capacity
  const auto t2 = std::chrono::steady_clock::now();
  const std::int64_t after = HeapInUse();
  run.memory_mb = static_cast<double>(after - before) / (1 << 20);
  run.setup_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  run.solve_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  Labeling sink_side(n);
  for (NodeId v = 0; v < n; ++v) sink_side[v] = g->what_segment(v, KGraph::SINK) == KGraph::SINK;
  run.flow = graph.CutCapacity(sink_side);
  return run;
}
#endif

// Re-solving after an edit (dynamic graph cuts): one engine keeps its residual graph while brush
// strokes (discs of side/32 pixels radius forced to one label) are painted one after another;
// each re-solve is timed against a fresh solve of the same edited graph.
struct DynamicRow {
  int size = 0;
  std::string solver;
  double resolve_ms = -1, fresh_ms = -1;  // medians, setup (edit or build) + solve
  std::int64_t pixels_changed = 0;        // per stroke, median
  Energy flow = -1;                       // after the last stroke
};

DynamicRow RunDynamic(const SolverEntry& entry, const Model& model, int side, int repeat) {
  StGraph graph = SceneGraph(model);
  const Result first = graph.maxflow(entry.name);
  if (!first.ok) throw Error(entry.name + ": " + first.message);
  EditStream stream(0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(side));
  std::vector<double> resolve, fresh, changed;
  DynamicRow row;
  row.size = side;
  row.solver = entry.name;
  const int radius = std::max(1, side / 32);
  for (int k = 0; k < repeat; ++k) {
    const int cx = static_cast<int>(stream.Next(side)), cy = static_cast<int>(stream.Next(side));
    const bool foreground = k % 2 == 0;  // label 1 = foreground = sink side
    const std::int64_t count = PaintStroke(&graph, cx, cy, radius, foreground);
    const Result again = graph.maxflow(entry.name);
    if (!again.ok) throw Error(entry.name + " re-solve: " + again.message);
    Result scratch;
    entry.make_engine()->Solve(graph, &scratch);
    CheckResolvedFlow(entry.name, again.flow, scratch, graph);
    resolve.push_back(std::max(0.0, again.timings.setup_ms) + again.timings.solve_ms);
    fresh.push_back(std::max(0.0, scratch.timings.setup_ms) + scratch.timings.solve_ms);
    changed.push_back(static_cast<double>(count));
    row.flow = again.flow;
  }
  row.resolve_ms = Median(resolve);
  row.fresh_ms = Median(fresh);
  row.pixels_changed = static_cast<std::int64_t>(Median(changed));
  return row;
}

void WriteJson(const std::string& path, const std::vector<Row>& rows, const std::vector<DynamicRow>& dynamic) {
  std::vector<std::string> objects;
  for (const Row& r : rows) {
    std::ostringstream out;
    out << "{\"suite\": \"binary\", \"size\": " << r.size << ", \"solver\": \"" << r.solver
        << "\", \"setup_ms\": " << r.setup_ms << ", \"transfer_ms\": " << r.transfer_ms
        << ", \"solve_ms\": " << r.solve_ms << ", \"memory_mb\": " << r.memory_mb << ", \"engine_mb\": " << r.engine_mb
        << ", \"flow\": " << r.flow << "}";
    objects.push_back(out.str());
  }
  for (const DynamicRow& d : dynamic) {
    std::ostringstream out;
    out << "{\"suite\": \"binary-resolve\", \"size\": " << d.size << ", \"solver\": \"" << d.solver
        << "\", \"pixels_changed\": " << d.pixels_changed << ", \"resolve_ms\": " << d.resolve_ms
        << ", \"fresh_ms\": " << d.fresh_ms << ", \"flow\": " << d.flow << "}";
    objects.push_back(out.str());
  }
  WriteJsonRows(path, objects);
}

int RunBinary(const BenchOptions& options) {
  const std::vector<int> sizes = SceneSides(options, {128, 256}, {256, 512, 1024, 2048});
  const int repeat = Repeats(options);

  // Which solvers: every available max-flow engine, plus Kolmogorov's library when built in.
  const Registry& registry = Registry::Global();
  const std::vector<std::string> wanted = SplitNames(options.solvers);
  const std::vector<const SolverEntry*> engines = AvailableSolvers(
      wanted, [](const SolverEntry& e) { return e.algorithm == Algorithm::kMaxFlow && e.make_engine != nullptr; });
  bool kolmogorov = false;
#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
  kolmogorov = IsWanted(wanted, kKolmogorov);
#else
  std::printf("# %s skipped: Kolmogorov's maxflow library was not found at configure time\n", kKolmogorov);
#endif
  for (const std::string& name : wanted) {
    const SolverEntry* e = registry.Find(name);
    if (name != kKolmogorov && (!e || e->algorithm != Algorithm::kMaxFlow))
      throw Error("--solvers: '" + name + "' is not a max-flow solver (max-flow solvers: " +
                  registry.NameList(Algorithm::kMaxFlow) + ", " + kKolmogorov + ")");
  }

  std::printf("# scene: MakeSyntheticScene(side, side, seed 1) (BENCHMARKS.md section 2), 4-connected, costs x100;\n"
              "# graph: t-links = the two data costs, n-links = the contrast weight both ways; flow = min energy\n");
  std::printf("# times: medians of %d interleaved runs; heap_MB: heap held after build + solve (returned cut\n"
              "# excluded; '-' when the engine frees its data before returning); engine_MB: what it reports\n",
              repeat);
  std::printf("%6s  %-14s %10s %10s %10s %9s %10s %16s %8s %8s %8s\n", "size", "solver", "setup_ms", "xfer_ms",
              "solve_ms", "heap_MB", "engine_MB", "flow", "t/cpu-bk", "t/kolm", "m/kolm");
  std::vector<Row> rows;
  std::vector<DynamicRow> dynamic;
  int status = 0;
  for (int side : sizes) {
    app::Progress("mrf-bench", "binary: building the " + std::to_string(side) + "x" + std::to_string(side) + " scene");
    const SyntheticScene scene = MakeSyntheticScene(side, side, 1);
    const StGraph graph = SceneGraph(scene.model);
    // Runs interleave (every solver once per round) so that load from elsewhere hits all alike.
    std::vector<std::string> names;
    for (const SolverEntry* e : engines) names.push_back(e->name);
    if (kolmogorov) names.push_back(kKolmogorov);
    std::vector<std::vector<Run>> runs(names.size());
    for (int k = 0; k < repeat; ++k) {
      app::Progress("mrf-bench", "binary: " + std::to_string(side) + ": round " + std::to_string(k + 1) + " of " +
                                     std::to_string(repeat));
      for (std::size_t i = 0; i < engines.size(); ++i) runs[i].push_back(RunEngine(*engines[i], graph, scene.model));
#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
      if (kolmogorov) runs.back().push_back(RunKolmogorov(graph));
#endif
    }
    std::vector<Row> cells;
    for (std::size_t i = 0; i < names.size(); ++i) cells.push_back(Summarise(side, names[i], runs[i]));
    const Row* base = nullptr;
    const Row* kolm = nullptr;
    for (const Row& r : cells) {
      if (r.solver == kBaseline) base = &r;
      if (r.solver == kKolmogorov) kolm = &r;
    }
    for (const Row& r : cells) {
      const std::string vs_base = base ? Cell(r.solve_ms / base->solve_ms, "%.2f") : "-";
      const std::string vs_kolm_t = kolm ? Cell(r.solve_ms / kolm->solve_ms, "%.2f") : "-";
      const std::string vs_kolm_m =
          kolm && r.memory_mb >= 0 ? Cell(r.memory_mb / kolm->memory_mb, "%.2f") : "-";
      std::printf("%6d  %-14s %10s %10s %10s %9s %10s %16lld %8s %8s %8s\n", side, r.solver.c_str(),
                  Cell(r.setup_ms, "%.2f").c_str(), Cell(r.transfer_ms, "%.2f").c_str(),
                  Cell(r.solve_ms, "%.2f").c_str(), Cell(r.memory_mb, "%.1f").c_str(), Cell(r.engine_mb, "%.1f").c_str(),
                  static_cast<long long>(r.flow), vs_base.c_str(), vs_kolm_t.c_str(), vs_kolm_m.c_str());
      if (r.flow != cells.front().flow) {
        std::fprintf(stderr,
                     "mrf-bench: error: FLOW MISMATCH at %dx%d: %s found %lld but %s found %lld\n", side, side,
                     r.solver.c_str(), static_cast<long long>(r.flow), cells.front().solver.c_str(),
                     static_cast<long long>(cells.front().flow));
        std::printf("!!! FLOW MISMATCH: %s disagrees with %s at %d\n", r.solver.c_str(),
                    cells.front().solver.c_str(), side);
        status = 1;
      }
      rows.push_back(r);
    }
    std::fflush(stdout);
    for (const SolverEntry* e : engines)
      if (e->make_engine()->SupportsResolve()) {
        app::Progress("mrf-bench", "binary: " + std::to_string(side) + ": " + e->name + " re-solves");
        dynamic.push_back(RunDynamic(*e, scene.model, side, repeat));
      }
  }
  if (!dynamic.empty()) {
    std::printf("\n# re-solve after a brush stroke (a disc of side/32 radius forced to one label, strokes\n"
                "# accumulating), against a fresh solve of the same edited graph; times include the edit or build\n");
    std::printf("%6s  %-14s %9s %11s %10s %8s %16s\n", "size", "solver", "pixels", "resolve_ms", "fresh_ms",
                "ratio", "flow");
    for (const DynamicRow& d : dynamic)
      std::printf("%6d  %-14s %9lld %11.2f %10.2f %8.3f %16lld\n", d.size, d.solver.c_str(),
                  static_cast<long long>(d.pixels_changed), d.resolve_ms, d.fresh_ms, d.resolve_ms / d.fresh_ms,
                  static_cast<long long>(d.flow));
  }
  if (!options.json_path.empty()) WriteJson(options.json_path, rows, dynamic);
  return status;
}

const SuiteRegistration registration{{"binary",
                                      "one exact max-flow on the synthetic segmentation scene (256..2048 square) for "
                                      "every max-flow engine, and Kolmogorov's library when present",
                                      &RunBinary}};

}  // namespace
}  // namespace mrf::bench
