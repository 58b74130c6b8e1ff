// The models suite: replays saved models (mrf/io/model_file.h, written by mrf::SaveModel or the
// --save-model option of the programs) with every available solver whose algorithm applies to the
// model, and prints energies, bounds and times against a baseline solver measured in the same run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/app.h"
#include "inference/move_graph.h"
#include "mrf-bench/bench_common.h"
#include "mrf/io/model_file.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

namespace mrf::bench {

std::vector<std::string> ModelFolderFiles(const std::vector<std::string>& dirs) {
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> found;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".mrf") found.push_back(it->path().string());
    if (ec) throw Error("--models: cannot read the folder '" + dir + "': " + ec.message());
    if (found.empty()) throw Error("--models: the folder '" + dir + "' holds no .mrf file");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

namespace {

// The model files --model and --models stand for, in the order given.
std::vector<std::string> ModelFiles(const BenchOptions& options) {
  std::vector<std::string> files = options.models;
  for (const std::string& file : ModelFolderFiles(options.model_dirs)) files.push_back(file);
  return files;
}

// Empty when solvers of `algorithm` can take the model; otherwise why not.
std::string WhyNotApplicable(Algorithm algorithm, const Model& model) {
  switch (algorithm) {
    case Algorithm::kMaxFlow: {
      if (model.num_labels != 2) return "max-flow needs two labels (the model has " + std::to_string(model.num_labels) + ")";
      std::string why;
      if (!IsSubmodularBinary(model, &why)) return "not submodular: " + why;
      return {};
    }
    case Algorithm::kExpansion: {
      const std::string term = FindNonSubmodularMoveTerm(model, true);
      return term.empty() ? std::string() : "expansion moves are not submodular: " + term;
    }
    case Algorithm::kSwap: {
      const std::string term = FindNonSubmodularMoveTerm(model, false);
      return term.empty() ? std::string() : "swap moves are not submodular: " + term;
    }
    case Algorithm::kBeliefPropagation:
      if (model.topology.kind() != TopologyKind::kGrid4)
        return "belief propagation runs on 4-connected 2-D grids, not on a " + model.topology.Describe();
      return {};
    default:
      return {};
  }
}


struct Row {
  std::string model, solver, algorithm, message;
  bool ok = false;
  Energy energy = -1, lower_bound = -1;
  std::int64_t iterations = 0;
  int runs = 0;
  double time_ms = -1;
};

int RunModelsSuite(const BenchOptions& options) {
  const std::vector<std::string> files = ModelFiles(options);
  if (files.empty()) {
    std::printf("# no model given: the models suite replays files named by --model FILE or --models DIR\n");
    return 0;
  }
  const Registry& registry = Registry::Global();
  const std::vector<std::string> wanted = SplitNames(options.solvers);
  for (const std::string& name : wanted)
    if (!registry.Find(name))
      throw Error("--solvers: '" + name + "' is not a solver (known: " + registry.NameList() + ")");
  const int repeat = options.quick ? 1 : options.repeat;

  std::printf("# saved models (mrf/io/model_file.h); every available solver of an algorithm that applies, default\n"
              "# options (at most 100 iterations); time_ms: median of %d runs of mrf::Solve, validation included;\n"
              "# E-best: energy minus the lowest energy any solver reached on that model; t/base: time over the\n"
              "# baseline's (cpu-bk on submodular two-label models, else cpu-expansion, else cpu-icm)\n",
              repeat);
  std::printf("%-24s %-14s %-10s %14s %14s %10s %6s %11s %7s  %s\n", "model", "solver", "algorithm", "energy", "bound",
              "E-best", "iters", "time_ms", "t/base", "message");
  std::vector<Row> rows;
  int status = 0;
  for (const std::string& file : files) {
    app::Progress("mrf-bench", "models: reading " + file);
    const Model model = LoadModel(file);
    const std::string name = std::filesystem::path(file).filename().string();
    std::printf("# %s: %s, %d labels, %s pairwise\n", app::OneLine(name).c_str(), model.topology.Describe().c_str(),
                model.num_labels, ToString(model.pairwise.kind));
    std::vector<Row> cells;
    for (const SolverEntry& e : registry.entries()) {
      if (!IsWanted(wanted, e.name)) continue;
      std::string why;
      if (!registry.IsAvailable(e.name, &why) || !(why = WhyNotApplicable(e.algorithm, model)).empty()) {
        std::printf("# %s skipped: %s\n", e.name.c_str(), why.c_str());
        continue;
      }
      if (e.make_engine) {
        why = e.make_engine()->CannotSolve(model.topology);
        if (!why.empty()) {
          std::printf("# %s skipped: %s\n", e.name.c_str(), why.c_str());
          continue;
        }
      }
      SolveOptions solve_options;
      solve_options.solver = e.name;
      Row row;
      row.model = name;
      row.solver = e.name;
      row.algorithm = ToString(e.algorithm);
      std::vector<double> times;
      Result r;
      for (int k = 0; k < repeat; ++k) {
        app::Progress("mrf-bench", "models: " + name + ": " + e.name + " (run " + std::to_string(k + 1) + ")");
        r = Solve(model, solve_options);
        times.push_back(r.timings.total_ms);
        if (!r.ok) break;
      }
      row.ok = r.ok;
      row.message = r.message;
      row.energy = r.ok ? r.energy : -1;
      row.lower_bound = r.ok && r.has_lower_bound ? r.lower_bound : -1;
      row.iterations = r.iterations;
      row.runs = static_cast<int>(times.size());
      row.time_ms = Median(times);
      if (!r.ok) status = 1;
      cells.push_back(row);
    }
    Energy best = -1;
    for (const Row& c : cells)
      if (c.ok && (best < 0 || c.energy < best)) best = c.energy;
    double base_ms = -1;
    for (const char* base : {"cpu-bk", "cpu-expansion", "cpu-icm"}) {
      for (const Row& c : cells)
        if (c.ok && c.solver == base) base_ms = c.time_ms;
      if (base_ms > 0) break;
    }
    // Exact solvers (max-flow) must all reach the same, lowest energy.
    Energy exact = -1;
    for (const Row& c : cells) {
      if (!c.ok || c.algorithm != ToString(Algorithm::kMaxFlow)) continue;
      if (exact >= 0 && c.energy != exact) {
        std::printf("!!! ENERGY MISMATCH: %s reached %lld, another max-flow solver %lld\n", c.solver.c_str(),
                    static_cast<long long>(c.energy), static_cast<long long>(exact));
        app::PrintError("mrf-bench", "ENERGY MISMATCH on " + name + ": " + c.solver + " reached " +
                                         std::to_string(c.energy) + ", another max-flow solver " +
                                         std::to_string(exact));
        status = 1;
      }
      exact = c.energy;
    }
    for (const Row& c : cells) {
      char energy[32] = "-", bound[32] = "-", gap[32] = "-", ratio[32] = "-";
      if (c.ok) {
        std::snprintf(energy, sizeof energy, "%lld", static_cast<long long>(c.energy));
        std::snprintf(gap, sizeof gap, "%+lld", static_cast<long long>(c.energy - best));
      }
      if (c.lower_bound >= 0) std::snprintf(bound, sizeof bound, "%lld", static_cast<long long>(c.lower_bound));
      if (base_ms > 0 && c.time_ms >= 0) std::snprintf(ratio, sizeof ratio, "%.2f", c.time_ms / base_ms);
      std::printf("%-24s %-14s %-10s %14s %14s %10s %6lld %11.2f %7s  %s%s\n", app::OneLine(c.model).c_str(),
                  c.solver.c_str(), c.algorithm.c_str(), energy, bound, gap, static_cast<long long>(c.iterations),
                  c.time_ms, ratio, c.ok ? "" : "FAILED: ", c.message.c_str());
      rows.push_back(c);
    }
    std::fflush(stdout);
  }
  if (!options.json_path.empty()) {
    nlohmann::json array = nlohmann::json::array();
    auto number_or_null = [](Energy v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    for (const Row& r : rows)
      array.push_back({{"suite", "models"}, {"model", r.model}, {"solver", r.solver}, {"algorithm", r.algorithm},
                       {"ok", r.ok}, {"energy", number_or_null(r.energy)}, {"lower_bound", number_or_null(r.lower_bound)},
                       {"iterations", r.iterations}, {"runs", r.runs}, {"time_ms", r.time_ms}, {"message", r.message}});
    WriteJsonFile(options.json_path, app::JsonText(array, 2) + "\n");
  }
  return rows.empty() && status == 0 ? kNothingMeasured : status;
}

const SuiteRegistration registration{
    {"models",
     "replays saved models (--model FILE, --models DIR) with every available solver of the algorithms that apply",
     &RunModelsSuite}};

}  // namespace
}  // namespace mrf::bench
