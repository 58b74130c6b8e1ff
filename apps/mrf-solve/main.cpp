// mrf-solve: solves a saved model (mrf/io/model_file.h) with any registered solver.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/app.h"
#include "mrf/io/model_file.h"
#include "mrf/io/read_file.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

int main(int argc, char** argv) {
  CLI::App cli{"mrf-solve: minimise the energy of a saved mrf model (see docs/model_format.md)."};
  std::string model_path, solver = "auto", algorithm = "auto", device = "auto", maxflow = "auto", order = "sequential";
  std::string start = "zero";
  std::string labels_path;
  mrf::SolveOptions options;
  bool json = false, quiet = false, list = false;
  cli.add_option("MODEL", model_path, "Model file written by mrf::SaveModel (or --save-model of the apps)");
  cli.add_option("--solver", solver, "Solver name from the registry, or auto (see --list-solvers)")->capture_default_str();
  cli.add_option("--algorithm", algorithm, "With --solver auto: auto|maxflow|expansion|swap|icm|bp (auto: max-flow for submodular two-label models, expansion for metrics, else BP on 4-connected grids, swap or ICM elsewhere)")->capture_default_str();
  cli.add_option("--device", device, "With --solver auto: auto|cpu|cuda")->capture_default_str();
  cli.add_option("--maxflow-backend", maxflow, "Max-flow engine inside expansion/swap moves")->capture_default_str();
  cli.add_option("--iterations", options.max_iterations, "Iteration limit (cycles for expansion/swap)")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  cli.add_option("--label-order", order,
                 "Expansion/swap label order: sequential|random (a fresh permutation each cycle, from --seed)|"
                 "frequent (expansion only: the labels most nodes find cheapest in the data term first)")
      ->capture_default_str();
  cli.add_option("--start", start, "Expansion/swap start: zero (label 0 everywhere) or bp (tiled BP's labelling; 4-connected grids)")
      ->capture_default_str();
  cli.add_option("--seed", options.seed, "Seed for every random choice")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--time-limit", options.time_limit_s, "Stop after this many seconds (0 = none)")
      ->check(mrf::app::FiniteNonNegative())->capture_default_str();
  cli.add_flag("--truncate", options.truncate_nonsubmodular, "Truncate non-submodular move terms instead of failing");
  cli.add_option("--labels", labels_path, "Write the labelling here, one label per line");
  cli.add_flag("--json", json, "Print one JSON object instead of the report");
  cli.add_flag("-q,--quiet", quiet, "No progress messages");
  cli.add_flag("--list-solvers", list, "List the solvers of this build and exit (a JSON array with --json)");
  return mrf::app::Run("mrf-solve", argc, argv, cli, [&] {
    mrf::app::CheckOutputs({{"MODEL", model_path}}, {{"--labels", labels_path}});
    if (list && json) {
      std::printf("%s\n", mrf::app::RegistryJson(std::nullopt).c_str());
      return 0;
    }
    if (list) {
      for (const mrf::SolverEntry& e : mrf::Registry::Global().entries()) {
        std::string why;
        const bool ok = mrf::Registry::Global().IsAvailable(e.name, &why);
        std::printf("%-16s %-10s %-5s %s%s\n", e.name.c_str(), mrf::ToString(e.algorithm), mrf::ToString(e.device),
                    e.summary.c_str(), ok ? "" : (" [unavailable: " + why + "]").c_str());
      }
      return 0;
    }
    if (model_path.empty()) throw mrf::Error("no MODEL file given (see --help)");
    mrf::app::SetQuiet(quiet || json);
    mrf::app::Progress("mrf-solve", "reading " + model_path);
    const auto gpu_start = mrf::app::StartGpuIfUsed(solver, device);  // while the model loads
    const mrf::Model model = mrf::LoadModel(model_path);
    mrf::app::Progress("mrf-solve", model.topology.Describe() + ", " + std::to_string(model.num_labels) + " labels");
    options.solver = solver;
    options.algorithm = mrf::ParseAlgorithm(algorithm);
    options.device = mrf::ParseDevice(device);
    options.maxflow_backend = maxflow;
    options.label_order = mrf::ParseLabelOrder(order);
    options.start = mrf::ParseStartLabels(start);
    // Max-flow engines report progress without an energy, every few thousand augmentations: shown
    // at most twice a second. Iterative solvers report each iteration's energy.
    double last_shown_ms = -1e9;
    options.callback = [&last_shown_ms](const mrf::IterationRecord& r) {
      if (r.energy < 0 && r.time_ms - last_shown_ms < 500) return true;
      last_shown_ms = r.time_ms;
      mrf::app::Progress("mrf-solve", "iteration " + std::to_string(r.iteration) + ": " +
                                          (r.energy >= 0 ? "energy " + std::to_string(r.energy) : r.note));
      return true;
    };
    const mrf::Result result = mrf::Solve(model, options);
    if (result.ok && !labels_path.empty()) {
      std::string text;
      for (mrf::Label l : result.labels) text += std::to_string(l) + '\n';
      mrf::WriteWholeFile(labels_path, text, "labels to");
    }
    if (json) std::printf("%s\n", result.ToJson().c_str());
    else std::printf("%s", result.BriefReport().c_str());
    if (!result.ok) {
      mrf::app::PrintError("mrf-solve", result.message);  // with --json too (docs/errors.md)
      return 1;
    }
    return 0;
  });
}
