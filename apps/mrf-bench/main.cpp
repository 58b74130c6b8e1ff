// mrf-bench: times every available solver on the reference problems and prints tables of medians
// and ratios against a baseline measured in the same run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/app.h"
#include "mrf-bench/bench_common.h"
#include "mrf-bench/suite.h"
#include "mrf/device.h"
#include "mrf/types.h"

namespace mrf::bench {
std::vector<Suite>& Suites() {
  static std::vector<Suite> suites;
  return suites;
}

// "rows.json" -> "rows.binary.json" (an empty path stays empty).
std::string WithSuiteName(const std::string& path, const std::string& suite) {
  if (path.empty()) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "." + suite + p.extension().string())).string();
}
}  // namespace mrf::bench

int main(int argc, char** argv) {
  using namespace mrf::bench;
  std::sort(Suites().begin(), Suites().end(), [](const Suite& a, const Suite& b) { return a.name < b.name; });
  std::string names, descriptions;
  for (const Suite& s : Suites()) {
    names += (names.empty() ? "" : "|") + s.name;
    descriptions += "\n  " + s.name + ": " + s.summary;
  }
  CLI::App cli{"mrf-bench: benchmark suites for mrf's solvers." + descriptions};
  std::string suite = "all";
  BenchOptions options;
  options.data_dir = "../shared/data";
  cli.add_option("--suite", suite, "Which suite to run: " + names + "|all")->capture_default_str();
  CLI::Option* sizes_opt = cli.add_option(
      "--sizes", options.sizes, "binary and pushrelabel suites: square sides of the problems, e.g. 256 512 1024 2048");
  cli.add_option("--repeat", options.repeat, "Timed runs per cell; medians are reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cli.add_option("--json", options.json_path,
                 "Also write the rows as a JSON array to this file; when several suites run (--suite all), each "
                 "writes its own file, named with the suite before the extension (rows.json -> rows.binary.json)");
  CLI::Option* plot_opt = cli.add_option(
      "--plot", options.plot_path, "multilabel suite: write an SVG plot here (with --suite all, named like --json)");
  CLI::Option* model_opt =
      cli.add_option("--model", options.models, "models suite: a saved model file to replay (repeatable)");
  CLI::Option* models_opt =
      cli.add_option("--models", options.model_dirs, "models suite: replay every *.mrf file in this folder (repeatable)");
  CLI::Option* solvers_opt =
      cli.add_option("--solvers", options.solvers, "Comma-separated solver names (default: every available one)");
  cli.add_option("--data-dir", options.data_dir, "Folder holding middlebury/ benchmark images")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  cli.add_flag("--quick", options.quick, "Small problems and few repeats (a smoke test)");
  bool quiet = false;
  cli.add_flag("-q,--quiet", quiet, "No progress messages on stderr (tables, warnings and errors still print)");
  CLI::Option* tuning_opt = cli.add_option("--tuning", options.tunings,
                 "pushrelabel suite: also time cuda-pr with these tunings, e.g. --tuning local_iterations=4 "
                 "--tuning rounds_per_global_relabel=2,tile_y=32 (names: see MRF_PR_TUNING); gpuexpansion suite: "
                 "extra cuda-expansion rows, e.g. --tuning reuse_flow=0 (names: see MRF_CUDA_EXPANSION_TUNING)");
  CLI::Option* problems_opt = cli.add_option("--problems", options.problems,
                                             "gpuexpansion suite: comma-separated problems (tsukuba,venus,aloe)");
  CLI::Option* time_limit_opt =
      cli.add_option("--time-limit", options.time_limit_s,
                     "gpuexpansion suite: stop the cpu-expansion baseline on aloe after this many seconds (0: none)")
          ->check(mrf::app::FiniteNonNegative())
          ->capture_default_str();
  CLI::Option* cycles_opt =
      cli.add_option("--cycles", options.cycles,
                     "gpuexpansion suite: stop every expansion and swap after this many cycles, to time what a "
                     "short run reaches (0: until a cycle changes nothing, at most 500)")
          ->check(CLI::Range(0, 500))
          ->capture_default_str();
  return mrf::app::Run("mrf-bench", argc, argv, cli, [&] {
    mrf::app::SetQuiet(quiet);
    const std::string gpu = mrf::CudaDeviceDescription();
    std::printf("# mrf-bench; GPU: %s\n", gpu.empty() ? ("none (" + mrf::CudaUnavailableReason() + ")").c_str() : gpu.c_str());
    // Output files are checked before hours of benchmarking, not after: the files each suite will write
    // (with --suite all, one per suite), in folders that exist and can be written, never a model read.
    std::vector<mrf::app::NamedFile> inputs, outputs;
    for (const std::string& model : options.models) inputs.push_back({"--model", model});
    if (suite == "models" || suite == "all")
      for (const std::string& model : ModelFolderFiles(options.model_dirs)) inputs.push_back({"--models", model});
    for (const Suite& s : Suites()) {
      if (suite != "all" && suite != s.name) continue;
      for (const auto& [option, given] : {std::pair<const char*, std::string>{"--json", options.json_path},
                                          std::pair<const char*, std::string>{"--plot", options.plot_path}}) {
        const std::string path = suite == "all" ? WithSuiteName(given, s.name) : given;
        if (!path.empty()) outputs.push_back({option, path});
      }
    }
    mrf::app::CheckOutputs(inputs, outputs);
    if (solvers_opt->count() > 0 && SplitNames(options.solvers).empty())
      throw mrf::Error("--solvers '" + options.solvers + "' names no solver");
    if (suite == "models" && options.models.empty() && options.model_dirs.empty())
      throw mrf::Error("the models suite replays saved models: name them with --model FILE or --models DIR");
    // Options that only some suites read are refused with a suite that would ignore them.
    const std::vector<std::pair<const CLI::Option*, std::vector<std::string>>> owners = {
        {model_opt, {"models"}},
        {models_opt, {"models"}},
        {tuning_opt, {"pushrelabel", "gpuexpansion"}},
        {problems_opt, {"gpuexpansion"}},
        {time_limit_opt, {"gpuexpansion"}},
        {cycles_opt, {"gpuexpansion"}},
        {plot_opt, {"multilabel"}},
        {sizes_opt, {"binary", "pushrelabel"}}};
    const bool one_suite = std::any_of(Suites().begin(), Suites().end(), [&](const Suite& s) { return s.name == suite; });
    for (const auto& [option, suites] : owners) {
      if (!one_suite || option->count() == 0) continue;
      if (std::find(suites.begin(), suites.end(), suite) != suites.end()) continue;
      std::string list;
      for (const std::string& s : suites) list += (list.empty() ? "" : " or ") + s;
      throw mrf::Error(option->get_name() + " applies to the " + list + " suite, not " + suite);
    }
    int status = 0;
    bool found = false;
    for (const Suite& s : Suites()) {
      if (suite != "all" && suite != s.name) continue;
      found = true;
      std::printf("\n## suite %s\n", s.name.c_str());
      BenchOptions suite_options = options;
      if (suite == "all") {  // one file per suite, so that no suite overwrites another's rows
        suite_options.json_path = WithSuiteName(options.json_path, s.name);
        suite_options.plot_path = WithSuiteName(options.plot_path, s.name);
      }
      const int suite_status = s.run(suite_options);
      if (suite_status != kNothingMeasured) {
        status |= suite_status;
      } else if (suite != "all") {
        mrf::app::PrintError("mrf-bench", "the " + s.name + " suite measured nothing (its skipped lines say why)");
        status |= 1;
      }
    }
    if (!found) throw mrf::Error("unknown suite '" + suite + "' (expected " + names + " or all)");
    return status;
  });
}
