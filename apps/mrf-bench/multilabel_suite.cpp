// The multilabel suite: the Middlebury stereo benchmark (BENCHMARKS.md section 1: Tsukuba, Venus) and
// Debian's Aloe pair (section 4) for every available multilabel solver of the registry (expansion,
// swap, ICM, BP on any device): energy, time, bad-pixel rate, and the energy-versus-time curve of
// each solve as an SVG plot. Energies are compared with the reference implementation's where
// BENCHMARKS.md lists them; times with cpu-expansion measured in the same run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/app.h"
#include "energies/stereo.h"
#include "mrf-bench/bench_common.h"
#include "mrf/io/image.h"
#include "mrf/io/read_file.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

namespace mrf::bench {
namespace {

constexpr const char* kBaseline = "cpu-expansion";
constexpr double kTimeLimitSeconds = 300;
constexpr const char* kAloeDir = "/usr/share/doc/opencv-doc/examples/data";

// One stereo problem: its model, ground truth, and the reference figures BENCHMARKS.md gives.
struct Problem {
  std::string name;
  Model model;
  int width = 0, height = 0;
  Image ground_truth;
  double gt_scale = 1;
  std::map<Algorithm, Energy> reference;  // energies of MRF 2.2 (BP: BP-M)
  double lower_bound = -1;                // TRW-S bound, -1 when unknown
};

// One solve of one problem.
struct Row {
  std::string problem, solver, algorithm, device;
  int width = 0, height = 0;
  Label labels = 0;
  Energy energy = -1, reference = -1;
  double time_ms = -1, solve_ms = -1, bad_percent = -1;
  std::int64_t iterations = 0;
  std::string message;
  bool ok = false;
  std::vector<std::pair<double, Energy>> curve;  // (time_ms, energy) from the solver's log
};

// Tsukuba or Venus from <data_dir>/middlebury, or a "skipped" line.
bool LoadMiddlebury(const std::string& data_dir, const std::string& name, double gt_scale, Problem* problem) {
  const std::string base = data_dir + "/middlebury/" + name;
  for (const char* suffix : {"-imL.png", "-imR.png", "-truedispL.png"})
    if (!Exists(base + suffix)) {
      std::printf("# %s skipped: %s%s not found (--data-dir)\n", name.c_str(), app::OneLine(base).c_str(), suffix);
      return false;
    }
  app::Progress("mrf-bench", "multilabel: building " + name);
  const Image left = LoadImage(base + "-imL.png"), right = LoadImage(base + "-imR.png");
  problem->name = name;
  problem->model = BuildStereoModel(left, right, StereoParams::Preset(name));
  problem->width = left.width;
  problem->height = left.height;
  problem->ground_truth = LoadGreyValues(base + "-truedispL.png");
  problem->gt_scale = gt_scale;
  if (name == "tsukuba") {
    problem->reference = {{Algorithm::kExpansion, 370825},
                          {Algorithm::kSwap, 372233},
                          {Algorithm::kBeliefPropagation, 406896},
                          {Algorithm::kIcm, 2412321}};
    problem->lower_bound = 369217.6;
  } else {
    problem->reference = {{Algorithm::kExpansion, 3125962},
                          {Algorithm::kSwap, 3141772},
                          {Algorithm::kBeliefPropagation, 3099752},
                          {Algorithm::kIcm, 12347398}};
    problem->lower_bound = 3047928;
  }
  return true;
}

// The Aloe pair of Debian's opencv-doc, shrunk by `factor`. Its ground truth holds disparities in
// full-resolution pixels (scale 1, 0 = unknown). The energy is the Tsukuba one (BT absolute,
// linear lambda 20 Vmax 2, gradient g 8 penalty 2) with labels = 1.08 x (largest disparity + 1),
// the head-room covering disparities of pixels whose ground truth is unknown.
bool LoadAloe(int factor, Problem* problem) {
  const std::string dir = kAloeDir;
  const std::string name = factor == 1 ? "aloe" : "aloe/" + std::to_string(factor);
  for (const char* file : {"/aloeL.jpg", "/aloeR.jpg", "/aloeGT.png"})
    if (!Exists(dir + file)) {
      std::printf("# %s skipped: %s%s not found (Debian package opencv-doc)\n", name.c_str(), dir.c_str(), file);
      return false;
    }
  app::Progress("mrf-bench", "multilabel: building " + name);
  const Image left = ShrinkImage(LoadImage(dir + "/aloeL.jpg"), factor);
  const Image right = ShrinkImage(LoadImage(dir + "/aloeR.jpg"), factor);
  const Image gt = LoadGreyValues(dir + "/aloeGT.png");
  const int largest = *std::max_element(gt.pixels.begin(), gt.pixels.end());
  StereoParams params = StereoParams::Preset("tsukuba");
  params.preset = "aloe";
  params.num_labels = static_cast<Label>(std::ceil(1.08 * (largest + 1) / factor));
  problem->name = name;
  problem->model = BuildStereoModel(left, right, params);
  problem->width = left.width;
  problem->height = left.height;
  problem->ground_truth = ShrinkGroundTruth(gt, factor);
  problem->gt_scale = factor;
  return true;
}

Row SolveOne(const Problem& problem, const SolverEntry& entry, bool quick) {
  SolveOptions options;
  options.solver = entry.name;
  options.max_iterations = quick ? 3 : entry.algorithm == Algorithm::kBeliefPropagation ? 50 : 100;
  // BP-M from zero messages stalls about 3% above the reference on Tsukuba; started coarse to fine
  // it passes below it within a few iterations.
  options.bp.coarse_to_fine = entry.algorithm == Algorithm::kBeliefPropagation;
  options.label_order = LabelOrder::kSequential;  // as the reference: labels start at 0, sequential order
  options.truncate_nonsubmodular = true;          // as the reference: Venus' quadratic terms truncated
  // Swap makes L(L-1)/2 moves a cycle: on Aloe that is hours; every solve stops at the limit.
  options.time_limit_s = kTimeLimitSeconds;
  options.callback = [&](const IterationRecord& r) {
    app::Progress("mrf-bench", "multilabel: " + problem.name + ": " + entry.name + ": iteration " +
                                   std::to_string(r.iteration) + ", energy " + std::to_string(r.energy) + ", " +
                                   std::to_string(static_cast<long long>(r.time_ms)) + " ms");
    return true;
  };
  const Result result = Solve(problem.model, options);
  Row row;
  row.problem = problem.name;
  row.solver = entry.name;
  row.algorithm = ToString(entry.algorithm);
  row.device = ToString(entry.device);
  row.width = problem.width;
  row.height = problem.height;
  row.labels = problem.model.num_labels;
  row.ok = result.ok;
  row.message = result.message;
  if (!result.ok) return row;
  row.energy = result.energy;
  row.time_ms = result.timings.total_ms;
  row.solve_ms = result.timings.solve_ms;
  row.iterations = result.iterations;
  const auto ref = problem.reference.find(entry.algorithm);
  if (ref != problem.reference.end()) row.reference = ref->second;
  row.bad_percent = BadPixelPercent(result.labels, problem.ground_truth, problem.gt_scale);
  row.curve.emplace_back(0.0, EvaluateEnergy(problem.model, Labeling(problem.model.num_nodes(), 0)).total);
  for (const IterationRecord& r : result.log)
    if (r.energy >= 0) row.curve.emplace_back(r.time_ms, r.energy);
  if (row.curve.size() == 1 || row.curve.back().second != row.energy) row.curve.emplace_back(row.time_ms, row.energy);
  return row;
}

// ---- A small SVG writer: one panel per problem, log time against energy excess over the best ----

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

void WritePlot(const std::string& path, const std::vector<Row>& rows) {
  std::vector<std::string> problems;
  for (const Row& r : rows)
    if (r.ok && std::find(problems.begin(), problems.end(), r.problem) == problems.end()) problems.push_back(r.problem);
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  const double panel_w = 580, panel_h = 340, left = 80, top = 40, plot_w = 300, plot_h = 240;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << panel_w * std::max<std::size_t>(1, problems.size())
      << "\" height=\"" << panel_h << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (std::size_t k = 0; k < problems.size(); ++k) {
    std::vector<const Row*> panel;
    Energy best = -1;
    double t_min = 1e300, t_max = 0;
    for (const Row& r : rows)
      if (r.ok && r.problem == problems[k]) {
        panel.push_back(&r);
        for (const auto& [t, e] : r.curve) {
          if (best < 0 || e < best) best = e;
          if (t > 0) t_min = std::min(t_min, t), t_max = std::max(t_max, t);
        }
      }
    if (t_max <= 0) t_min = 1, t_max = 10;
    // Axes: x = log10 time (ms), y = log10 of the relative excess (E - best) / best, from 1e-5 to 10.
    const double lx0 = std::floor(std::log10(t_min)), lx1 = std::max(lx0 + 1, std::ceil(std::log10(t_max)));
    const double ly0 = -5, ly1 = 1;
    const double ox = panel_w * k + left;
    auto px = [&](double t) { return ox + plot_w * (std::log10(std::max(t, t_min)) - lx0) / (lx1 - lx0); };
    auto py = [&](Energy e) {
      const double excess = best > 0 ? static_cast<double>(e - best) / best : 0;
      const double l = std::clamp(std::log10(std::max(excess, 1e-5)), ly0, ly1);
      return top + plot_h * (ly1 - l) / (ly1 - ly0);
    };
    svg << "<text x=\"" << ox + plot_w / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">"
        << Escape(problems[k]) << " (best energy " << best << ")</text>\n";
    svg << "<rect x=\"" << ox << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
        << "\" fill=\"none\" stroke=\"black\"/>\n";
    for (double l = lx0; l <= lx1 + 1e-9; l += 1) {
      const double x = ox + plot_w * (l - lx0) / (lx1 - lx0);
      svg << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\"" << top + plot_h
          << "\" stroke=\"#ddd\"/><text x=\"" << x << "\" y=\"" << top + plot_h + 14 << "\" text-anchor=\"middle\">"
          << Cell(std::pow(10.0, l), l < 0 ? "%.2g" : "%.0f") << "</text>\n";
    }
    for (double l = ly0; l <= ly1 + 1e-9; l += 1) {
      const double y = top + plot_h * (ly1 - l) / (ly1 - ly0);
      svg << "<line x1=\"" << ox << "\" y1=\"" << y << "\" x2=\"" << ox + plot_w << "\" y2=\"" << y
          << "\" stroke=\"#ddd\"/><text x=\"" << ox - 4 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
          << (l == ly0 ? "&lt;=" : "") << Cell(std::pow(10.0, l + 2), "%g") << "%</text>\n";
    }
    svg << "<text x=\"" << ox + plot_w / 2 << "\" y=\"" << top + plot_h + 30
        << "\" text-anchor=\"middle\">time (ms, log scale)</text>\n";
    svg << "<text transform=\"translate(" << ox - 55 << "," << top + plot_h / 2
        << ") rotate(-90)\" text-anchor=\"middle\">energy above the best (log scale)</text>\n";
    for (std::size_t i = 0; i < panel.size(); ++i) {
      const char* colour = colours[i % (sizeof colours / sizeof *colours)];
      svg << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"";
      for (const auto& [t, e] : panel[i]->curve) svg << px(t) << "," << py(e) << " ";
      svg << "\"/>\n";
      for (const auto& [t, e] : panel[i]->curve)
        svg << "<circle cx=\"" << px(t) << "\" cy=\"" << py(e) << "\" r=\"2\" fill=\"" << colour << "\"/>\n";
      const double ly = top + 12 + 16 * i;
      svg << "<line x1=\"" << ox + plot_w + 12 << "\" y1=\"" << ly - 4 << "\" x2=\"" << ox + plot_w + 30 << "\" y2=\""
          << ly - 4 << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/><text x=\"" << ox + plot_w + 34 << "\" y=\""
          << ly << "\">" << Escape(panel[i]->solver) << " " << panel[i]->energy << "</text>\n";
    }
  }
  svg << "</svg>\n";
  mrf::WriteWholeFile(path, svg.str(), "--plot file");
}

void WriteJson(const std::string& path, const std::vector<Row>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& [t, e] : r.curve) curve.push_back({{"time_ms", t}, {"energy", e}});
    auto number_or_null = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    array.push_back({{"suite", "multilabel"},
                     {"problem", r.problem},
                     {"width", r.width},
                     {"height", r.height},
                     {"labels", r.labels},
                     {"solver", r.solver},
                     {"algorithm", r.algorithm},
                     {"device", r.device},
                     {"ok", r.ok},
                     {"message", r.message},
                     {"energy", r.ok ? nlohmann::json(r.energy) : nlohmann::json(nullptr)},
                     {"reference_energy", r.reference >= 0 ? nlohmann::json(r.reference) : nlohmann::json(nullptr)},
                     {"time_ms", number_or_null(r.time_ms)},
                     {"solve_ms", number_or_null(r.solve_ms)},
                     {"iterations", r.iterations},
                     {"bad_pixels_percent", number_or_null(r.bad_percent)},
                     {"curve", curve}});
  }
  WriteJsonFile(path, app::JsonText(array, 1) + "\n");
}

int RunMultilabel(const BenchOptions& options) {
  // Solvers: every available multilabel entry (or those named in --solvers).
  const Registry& registry = Registry::Global();
  const std::vector<std::string> wanted = SplitNames(options.solvers);
  auto multilabel = [](Algorithm a) {
    return a == Algorithm::kExpansion || a == Algorithm::kSwap || a == Algorithm::kIcm ||
           a == Algorithm::kBeliefPropagation;
  };
  for (const std::string& name : wanted) {
    const SolverEntry* e = registry.Find(name);
    if (!e || !multilabel(e->algorithm)) {
      std::string names;
      for (const SolverEntry& s : registry.entries())
        if (multilabel(s.algorithm)) names += (names.empty() ? "" : ", ") + s.name;
      throw Error("--solvers: '" + name + "' is not a multilabel solver (multilabel solvers: " +
                  (names.empty() ? "none in this build" : names) + ")");
    }
  }
  const std::vector<const SolverEntry*> solvers =
      AvailableSolvers(wanted, [&](const SolverEntry& e) { return multilabel(e.algorithm); });
  if (solvers.empty()) {
    std::printf("# multilabel skipped: no available expansion, swap, icm or bp solver in this build\n");
    return kNothingMeasured;
  }

  // Problems: Tsukuba always (quick included), Venus and Aloe unless --quick.
  std::vector<Problem> problems;
  Problem p;
  if (LoadMiddlebury(options.data_dir, "tsukuba", 16, &p)) problems.push_back(std::move(p));
  if (!options.quick) {
    if (Problem v; LoadMiddlebury(options.data_dir, "venus", 8, &v)) problems.push_back(std::move(v));
    // Aloe at half size (641x555, 115 labels): a CPU solve at full size takes many minutes; mrf-stereo
    // runs the full-size problem.
    if (Problem a; LoadAloe(2, &a)) problems.push_back(std::move(a));
  }
  if (problems.empty()) return kNothingMeasured;

  std::printf(
      "# energies: BENCHMARKS.md section 1 (aloe: the Tsukuba energy with labels from its ground truth);\n"
      "# ref_E: the reference implementation's energy (MRF 2.2; BP: BP-M); bad%%: error > 1 over pixels\n"
      "# with known ground truth; BP: BP-M schedule started coarse to fine, 50 iterations; every solve\n"
      "# stops after %.0f s; time: one run inside mrf::Solve; t/base: time over %s's%s\n",
      kTimeLimitSeconds, kBaseline, options.quick ? "; --quick: 3 iterations each" : "");
  std::printf("%-10s %-10s %-16s %6s %12s %12s %8s %11s %7s %7s\n", "problem", "size", "solver", "iters", "energy",
              "ref_E", "E/ref", "time_ms", "t/base", "bad%");
  std::vector<Row> rows;
  int status = 0;
  for (const Problem& problem : problems) {
    std::vector<Row> cells;
    for (const SolverEntry* solver : solvers) {
      app::Progress("mrf-bench", "multilabel: " + problem.name + ": " + solver->name);
      cells.push_back(SolveOne(problem, *solver, options.quick));
    }
    const Row* base = nullptr;
    for (const Row& r : cells)
      if (r.solver == kBaseline && r.ok) base = &r;
    for (const Row& r : cells) {
      const std::string size =
          std::to_string(r.width) + "x" + std::to_string(r.height) + "x" + std::to_string(r.labels);
      if (!r.ok) {
        std::printf("%-10s %-10s %-16s FAILED: %s\n", r.problem.c_str(), size.c_str(), r.solver.c_str(),
                    r.message.c_str());
        std::fprintf(stderr, "mrf-bench: error: %s on %s failed: %s\n", r.solver.c_str(), r.problem.c_str(),
                     r.message.c_str());
        status = 1;
        rows.push_back(r);
        continue;
      }
      std::printf("%-10s %-10s %-16s %6lld %12lld %12s %8s %11.1f %7s %7.2f\n", r.problem.c_str(), size.c_str(),
                  r.solver.c_str(), static_cast<long long>(r.iterations), static_cast<long long>(r.energy),
                  r.reference >= 0 ? std::to_string(r.reference).c_str() : "-",
                  r.reference > 0 ? Cell(static_cast<double>(r.energy) / r.reference, "%.4f").c_str() : "-", r.time_ms,
                  base ? Cell(r.time_ms / base->time_ms, "%.2f").c_str() : "-", r.bad_percent);
      rows.push_back(r);
    }
    if (problem.lower_bound > 0)
      std::printf("# %s: TRW-S lower bound %.1f (BENCHMARKS.md)\n", problem.name.c_str(), problem.lower_bound);
    std::fflush(stdout);
  }
  if (!options.json_path.empty()) WriteJson(options.json_path, rows);
  if (!options.plot_path.empty()) {
    WritePlot(options.plot_path, rows);
    std::printf("# plot: %s (energy above the best seen against time, per problem)\n",
                app::OneLine(options.plot_path).c_str());
  }
  return status;
}

const SuiteRegistration registration{
    {"multilabel",
     "Middlebury stereo (Tsukuba, Venus from --data-dir) and Aloe at half size (opencv-doc) "
     "for every expansion/swap/icm/bp solver: energy vs the reference, time, bad pixels, "
     "energy-vs-time plot (--plot); --quick: Tsukuba only, 3 iterations",
     &RunMultilabel}};

}  // namespace
}  // namespace mrf::bench
