#pragma once
// Options and reports shared by the multilabel programs (mrf-stereo, mrf-restore): how to solve,
// checks that turn bad combinations into one-line errors, and the JSON report.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf::app {

/// The solve options as typed on the command line.
struct SolveCli {
  std::string algorithm = "expansion";   ///< auto|expansion|swap|icm|bp
  std::string device = "auto";           ///< auto|cpu|cuda
  std::string solver = "auto";           ///< a registry name, or auto
  std::string maxflow_backend = "auto";  ///< engine inside expansion/swap moves
  std::string label_order = "sequential";
  int iterations = 100;
  std::uint64_t seed = 0;
  double time_limit_s = 0;
  bool truncate = false;
  std::string bp_schedule = "bpm";
  int bp_tile_size = 0;
  int bp_inner_iterations = 1;
  bool coarse_to_fine = false;
};

/// Adds --algorithm, --device, --solver, --maxflow-backend, --iterations, --seed, --label-order,
/// --time-limit, --truncate, --bp-schedule, --bp-tile-size, --bp-inner-iterations and --coarse-to-fine to `cli`,
/// writing into `s` (whose values are the defaults).
void AddSolveOptions(CLI::App& cli, SolveCli* s);

/// Parses the names into SolveOptions, with a progress callback that prints each iteration's energy
/// under `program`'s name. Throws mrf::Error naming a bad value.
SolveOptions MakeSolveOptions(const SolveCli& s, const std::string& program);

/// Throws mrf::Error when alpha-expansion would run on a pairwise term that is not a metric and
/// truncation of non-submodular terms is off (the one-line message says what to do instead).
void CheckExpansionNeedsMetric(const Model& model, const SolveOptions& options);

/// Reads a labels x labels table of non-negative integers (whitespace separated), row a, column b,
/// for --smoothness table. Throws mrf::Error naming the file and the bad entry or count.
std::vector<Cost> ReadCostTable(const std::string& path, Label labels);

/// On a failed solve prints "program: error: message" to stderr and returns 1; returns 0 otherwise.
int ReportFailure(const std::string& program, const Result& result);

}  // namespace mrf::app
