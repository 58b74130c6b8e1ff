#pragma once
// mrf-bench runs benchmark suites; each suite lives in its own file and registers itself here.

#include <functional>
#include <string>
#include <vector>

namespace mrf::bench {

/// Options every suite sees (parsed by main.cpp).
struct BenchOptions {
  std::vector<int> sizes;      ///< Problem sizes (binary suite: square side in pixels); empty = suite default.
  int repeat = 5;              ///< Timed runs per cell; medians are reported.
  std::string json_path;       ///< When set, rows are also written here as a JSON array.
  std::string plot_path;       ///< When set, suites that draw plots write an SVG here.
  std::string solvers;         ///< Comma-separated solver names to run (empty = every available one).
  std::string data_dir;        ///< Where the Middlebury images are (multilabel suite).
  bool quick = false;          ///< Smaller problems and fewer repeats, for smoke tests.
  /// Extra tunings to time ("name=value,..." each): push-relabel engines (pushrelabel suite) or
  /// cuda-expansion (gpuexpansion suite).
  std::vector<std::string> tunings;
  std::vector<std::string> models;      ///< Saved model files to replay (models suite).
  std::vector<std::string> model_dirs;  ///< Folders whose *.mrf files are replayed too (models suite).
  std::string problems;        ///< Comma-separated problem names (gpuexpansion suite); empty = suite default.
  double time_limit_s = 0;     ///< Time limit of slow baseline solves in seconds (gpuexpansion: Aloe); 0 = none.
  int cycles = 0;              ///< Most cycles of every expansion and swap (gpuexpansion suite); 0 = to convergence.
};

/// The *.mrf files of the --models folders, in the order given (a folder's files sorted by name). Throws
/// mrf::Error for a folder that cannot be read or holds no .mrf file.
std::vector<std::string> ModelFolderFiles(const std::vector<std::string>& dirs);

/// What a suite returns when it measured nothing (every problem or solver skipped, each with its reason
/// printed): an error when the suite was asked for alone, not with --suite all.
constexpr int kNothingMeasured = 3;

/// One suite: a name for --suite, a line for --help, and the function that runs it (returns an exit code).
struct Suite {
  std::string name;
  std::string summary;
  std::function<int(const BenchOptions&)> run;
};

/// All suites linked into mrf-bench.
std::vector<Suite>& Suites();

/// Adds a suite at start-up: `static SuiteRegistration r{{"binary", "...", &RunBinary}};`
struct SuiteRegistration {
  explicit SuiteRegistration(Suite suite) { Suites().push_back(std::move(suite)); }
};

}  // namespace mrf::bench
