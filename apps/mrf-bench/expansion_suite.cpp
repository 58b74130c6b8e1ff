// The expansion suite: alpha-expansion, swap and ICM on the Middlebury problems of BENCHMARKS.md
// section 1 (Tsukuba, Venus), next to the energies the reference implementation reached. The
// baseline, measured in the same run on the same model, is expansion done the way the reference
// library does it: every move cut on a freshly built graph by Kolmogorov's maxflow library (when
// it was found at configure time; otherwise by cpu-bk).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/app.h"
#include "energies/stereo.h"
#include "inference/alpha_beta_swap.h"
#include "inference/alpha_expansion.h"
#include "inference/icm.h"
#include "mrf-bench/bench_common.h"
#include "mrf/io/image.h"
#include "mrf/registry.h"

#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
#include <maxflow.h>
#endif

namespace mrf::bench {
namespace {

// What the reference implementation reached (BENCHMARKS.md section 1: MRF library 2.2, 500
// iterations, labels initialised to 0, sequential label order).
struct Problem {
  std::string name;
  bool truncate;  // expansion on a non-metric term truncates, as the reference does
  Energy expansion, swap, icm;
  const char* reference_time;  // the reference's expansion time on one core of this machine type
};
const Problem kProblems[] = {
    {"tsukuba", false, 370825, 372233, 2412321, "1.3-1.7 s"},
    {"venus", true, 3125962, 3141772, 12347398, "6.1 s"},
};

#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
// Kolmogorov's maxflow library v3.04 behind the binary-cut interface, building its graph afresh for
// every solve, as the reference expansion does for every move.
class KolmogorovEngine final : public MaxFlowEngine {
 public:
  std::string name() const override { return "kolmogorov-bk"; }
  void Solve(const StGraph& graph, Result* out) override {
    using KGraph = maxflow::Graph_III;
    const auto t0 = std::chrono::steady_clock::now();
    const NodeId n = graph.num_nodes();
    KGraph g(n, static_cast<int>(graph.topology().num_edges()));
    g.add_node(n);
    for (NodeId v = 0; v < n; ++v) {
      if (graph.source_cap(v) > kMaxCost || graph.sink_cap(v) > kMaxCost)
        throw Error("kolmogorov-bk: terminal capacity of node " + std::to_string(v) + " does not fit 32 bits");
      if (graph.source_cap(v) || graph.sink_cap(v))
        g.add_tweights(v, static_cast<int>(graph.source_cap(v)), static_cast<int>(graph.sink_cap(v)));
    }
    graph.topology().ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if (graph.edge_cap(e) || graph.edge_rev_cap(e)) g.add_edge(p, q, graph.edge_cap(e), graph.edge_rev_cap(e));
    });
    const auto t1 = std::chrono::steady_clock::now();
    out->flow = g.maxflow();
    const auto t2 = std::chrono::steady_clock::now();
    out->labels.resize(static_cast<std::size_t>(n));
    for (NodeId v = 0; v < n; ++v) out->labels[v] = g.what_segment(v) == KGraph::SINK;
    out->timings.setup_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    out->timings.solve_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  }
};
#endif

// One way of solving a problem: a row of the table.
struct Method {
  std::string name;     // row name, also what --solvers selects
  std::string summary;  // what it is, for the header
  std::function<void(const Model&, const SolveOptions&, Result*)> run;
  bool quick = true;    // part of --quick
  bool repeat = true;   // timed --repeat times (else once: the slow reference points)
};

std::vector<Method> Methods(std::string* baseline_name) {
  std::vector<Method> methods;
  MoveTuning scratch;
  scratch.reuse_flow = false;
#ifdef MRF_HAVE_KOLMOGOROV_MAXFLOW
  MoveTuning reference = scratch;
  reference.engine = [] { return std::unique_ptr<MaxFlowEngine>(new KolmogorovEngine); };
  reference.engine_name = "kolmogorov-bk";
  *baseline_name = "reference-style";
  methods.push_back({"reference-style",
                     "expansion, a fresh graph per move cut by Kolmogorov's maxflow library (as MRF 2.2 does)",
                     [reference](const Model& m, const SolveOptions& o, Result* r) { RunAlphaExpansion(m, o, r, reference); }});
#else
  *baseline_name = "cpu-expansion-scratch";
#endif
  methods.push_back({"cpu-expansion-scratch", "expansion, a fresh cpu-bk solve per move (no flow reuse)",
                     [scratch](const Model& m, const SolveOptions& o, Result* r) {
                       SolveOptions with_bk = o;
                       with_bk.maxflow_backend = "cpu-bk";
                       RunAlphaExpansion(m, with_bk, r, scratch);
                     }});
  methods.push_back({"cpu-expansion", "expansion as mrf runs it: per-label graphs, flow reuse, incremental updates",
                     [](const Model& m, const SolveOptions& o, Result* r) { RunAlphaExpansion(m, o, r); }});
  MoveTuning lower;
  lower.rule = TruncationRule::kLowerAgreement;
  methods.push_back({"cpu-expansion-lower",
                     "cpu-expansion truncating non-submodular terms by lowering E(1,1) (Venus only differs)",
                     [lower](const Model& m, const SolveOptions& o, Result* r) { RunAlphaExpansion(m, o, r, lower); },
                     false});
  methods.push_back({"cpu-swap", "alpha-beta swap (pairs in the reference order)",
                     [](const Model& m, const SolveOptions& o, Result* r) { RunAlphaBetaSwap(m, o, r); }, false,
                     false});
  methods.push_back({"cpu-icm", "ICM from the cheapest data labels",
                     [](const Model& m, const SolveOptions& o, Result* r) { RunIcm(m, o, r); }, false, false});
  return methods;
}

struct Row {
  std::string problem, method, engine, message;
  Energy energy = -1, reference = -1;
  std::int64_t cycles = 0;
  int runs = 0;
  double wall_ms = -1, cpu_ms = -1;
};

int RunExpansionSuite(const BenchOptions& options) {
  std::string baseline;
  std::vector<Method> methods = Methods(&baseline);
  const std::vector<std::string> wanted = SplitNames(options.solvers);
  for (const std::string& name : wanted)
    if (std::none_of(methods.begin(), methods.end(), [&](const Method& m) { return m.name == name; })) {
      std::string known;
      for (const Method& m : methods) known += (known.empty() ? "" : ", ") + m.name;
      throw Error("--solvers: '" + name + "' is not a method of the expansion suite (" + known + ")");
    }
  auto selected = [&](const Method& m) {
    return wanted.empty() ? !options.quick || m.quick : IsWanted(wanted, m.name);
  };
  const int repeat = Repeats(options);

  std::printf("# Middlebury problems of BENCHMARKS.md section 1, built by energies/stereo.h (BuildStereoModel);\n"
              "# labels start at 0 (ICM: cheapest data label), sequential label order, at most 500 cycles.\n"
              "# Methods:\n");
  for (const Method& m : methods)
    if (selected(m)) std::printf("#   %-22s %s\n", m.name.c_str(), m.summary.c_str());
  std::printf("# wall_ms, cpu_ms: medians of %d interleaved runs (swap and ICM: one run), the model already built;\n"
              "# t/base: wall time over the baseline's (%s) on the same problem in this run.\n",
              repeat, baseline.c_str());
#ifndef MRF_HAVE_KOLMOGOROV_MAXFLOW
  std::printf("# reference-style skipped: Kolmogorov's maxflow library was not found at configure time\n");
#endif
  std::printf("%-8s %-22s %-14s %6s %10s %10s %8s %9s %9s %7s\n", "problem", "method", "engine", "cycles", "energy",
              "reference", "E-ref", "wall_ms", "cpu_ms", "t/base");
  std::vector<Row> rows;
  for (const Problem& problem : kProblems) {
    if (options.quick && problem.name != "tsukuba") continue;
    const std::string left_path = options.data_dir + "/middlebury/" + problem.name + "-imL.png";
    const std::string right_path = options.data_dir + "/middlebury/" + problem.name + "-imR.png";
    if (!Exists(left_path) || !Exists(right_path)) {
      std::printf("# %s skipped: %s not found (--data-dir)\n", problem.name.c_str(), app::OneLine(left_path).c_str());
      continue;
    }
    app::Progress("mrf-bench", "expansion: building " + problem.name);
    const Model model = BuildStereoModel(LoadImage(left_path, 3), LoadImage(right_path, 3),
                                         StereoParams::Preset(problem.name));
    SolveOptions options_base;
    options_base.max_iterations = 500;
    std::vector<Row> cells;
    std::vector<std::vector<double>> walls(methods.size()), cpus(methods.size());
    std::vector<Result> results(methods.size());
    for (int round = 0; round < repeat; ++round)
      for (std::size_t i = 0; i < methods.size(); ++i) {
        const Method& m = methods[i];
        if (!selected(m) || (!m.repeat && round > 0)) continue;
        app::Progress("mrf-bench", "expansion: " + problem.name + ": " + m.name + " (round " + std::to_string(round + 1) +
                                       ")");
        SolveOptions o = options_base;
        o.truncate_nonsubmodular = problem.truncate && m.name.find("expansion") != std::string::npos;
        if (m.name == "reference-style") o.truncate_nonsubmodular = problem.truncate;
        Result r;
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        m.run(model, o, &r);
        walls[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        cpus[i].push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
        results[i] = std::move(r);
      }
    double base_ms = -1;
    for (std::size_t i = 0; i < methods.size(); ++i)
      if (methods[i].name == baseline && !walls[i].empty()) base_ms = Median(walls[i]);
    for (std::size_t i = 0; i < methods.size(); ++i) {
      if (walls[i].empty()) continue;
      const Method& m = methods[i];
      const Result& r = results[i];
      Row row;
      row.problem = problem.name;
      row.method = m.name;
      row.message = r.message;
      row.energy = EvaluateEnergy(model, r.labels).total;
      row.reference = m.name == "cpu-swap" ? problem.swap : m.name == "cpu-icm" ? problem.icm : problem.expansion;
      row.cycles = r.iterations;
      row.runs = static_cast<int>(walls[i].size());
      row.wall_ms = Median(walls[i]);
      row.cpu_ms = Median(cpus[i]);
      const std::size_t at = r.message.find("max-flow engine ");
      row.engine = at == std::string::npos ? "-" : r.message.substr(at + 16, r.message.find_first_of(" ;", at + 16) - at - 16);
      char ratio[32] = "-";
      if (base_ms > 0) std::snprintf(ratio, sizeof ratio, "%.2f", row.wall_ms / base_ms);
      std::printf("%-8s %-22s %-14s %6lld %10lld %10lld %+8lld %9.1f %9.1f %7s\n", row.problem.c_str(),
                  row.method.c_str(), row.engine.c_str(), static_cast<long long>(row.cycles),
                  static_cast<long long>(row.energy), static_cast<long long>(row.reference),
                  static_cast<long long>(row.energy - row.reference), row.wall_ms, row.cpu_ms, ratio);
      rows.push_back(row);
    }
    std::printf("# %s: the reference's expansion took %s on one core of this machine type\n", problem.name.c_str(),
                problem.reference_time);
    std::fflush(stdout);
  }
  if (!options.json_path.empty()) {
    std::vector<std::string> objects;
    for (const Row& r : rows) {
      std::ostringstream out;
      out << "{\"suite\": \"expansion\", \"problem\": \"" << r.problem << "\", \"solver\": \"" << r.method
          << "\", \"engine\": \"" << r.engine << "\", \"cycles\": " << r.cycles << ", \"energy\": " << r.energy
          << ", \"reference_energy\": " << r.reference << ", \"runs\": " << r.runs << ", \"wall_ms\": " << r.wall_ms
          << ", \"cpu_ms\": " << r.cpu_ms << "}";
      objects.push_back(out.str());
    }
    WriteJsonRows(options.json_path, objects);
  }
  return rows.empty() ? kNothingMeasured : 0;
}

const SuiteRegistration registration{
    {"expansion",
     "expansion, swap and ICM on Tsukuba and Venus (BENCHMARKS.md section 1) against the reference energies, "
     "timed against reference-style expansion (a fresh graph per move)",
     &RunExpansionSuite}};

}  // namespace
}  // namespace mrf::bench
