#pragma once
// Options and reports shared by the multilabel programs (mrf-stereo, mrf-restore): how to solve,
// checks that turn bad combinations into one-line errors, and the JSON report.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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
  std::string start = "zero";            ///< expansion/swap start: zero|bp
  int iterations = 100;
  std::uint64_t seed = 0;
  double time_limit_s = 0;
  bool truncate = false;
  std::string bp_schedule = "auto";
  int bp_tile_size = 0;
  int bp_inner_iterations = 1;
  bool coarse_to_fine = false;
};

/// Adds --algorithm, --device, --solver, --maxflow-backend, --iterations, --seed, --label-order, --start,
/// --time-limit, --truncate, --bp-schedule, --bp-tile-size, --bp-inner-iterations and --coarse-to-fine to `cli`,
/// writing into `s` (whose values are the defaults).
void AddSolveOptions(CLI::App& cli, SolveCli* s);

/// Parses the names into SolveOptions, with a progress callback that prints each iteration's energy
/// under `program`'s name. Throws mrf::Error naming a bad value.
SolveOptions MakeSolveOptions(const SolveCli& s, const std::string& program);

/// Throws mrf::Error when --algorithm maxflow is asked for `labels` other than two (programs check it as
/// soon as they know the label count, before reading their input).
void CheckMaxflowLabels(const SolveOptions& options, Label labels);

/// Throws mrf::Error when --algorithm maxflow meets more than two labels, or alpha-expansion would run
/// on a pairwise term that is not a metric and truncation of non-submodular terms is off (the one-line
/// message says what to do instead).
void CheckAlgorithmFitsModel(const Model& model, const SolveOptions& options);

/// Throws mrf::Error when --vmax was given for a smoothness kind that has no truncation (potts, table).
void CheckVmaxApplies(const CLI::App& cli, PairwiseKind kind);

/// Reads a labels x labels table of non-negative integers (whitespace separated), row a, column b,
/// for --smoothness table. Throws mrf::Error naming the file and the bad entry or count.
std::vector<Cost> ReadCostTable(const std::string& path, Label labels);

/// For --smoothness table: fills smoothness->table from `table_path` (labels x labels entries).
/// Throws mrf::Error when the kind is table without a file, or a file is given for another kind.
void LoadSmoothnessTable(const std::string& table_path, Label labels, Pairwise* smoothness);

/// Saves the model to `model_path` when it is set, checks CheckAlgorithmFitsModel, and solves
/// with progress lines under `program`'s name.
Result SaveCheckAndSolve(const std::string& program, const Model& model, const std::string& model_path,
                         const SolveOptions& options, const SolveCli& solve);

/// On a failed solve prints "program: error: message" to stderr (after the result's JSON on stdout
/// when `print_json` is set) and returns 1; returns 0 otherwise.
int ReportFailure(const std::string& program, const Result& result, bool print_json = false);

/// The --json report both programs start from: the result's JSON with the program, the problem,
/// the energy's definition, the size and the data / smoothness split.
nlohmann::json JsonReport(const std::string& program, const std::string& problem, const Result& result,
                          const std::string& energy_definition, int width, int height, Label labels,
                          const EnergyBreakdown& split);

/// The text report after the problem line: the energy's definition, the solver's report (full when
/// `verbose`), the data / smoothness split and, when not verbose, the iterations.
void PrintReport(const std::string& energy_definition, const Result& result, const EnergyBreakdown& split,
                 bool verbose);

/// The options of a generated input: --synthetic-size (width, 16..4096) and --noise (finite >= 0), their
/// help starting with `what` ("Synthetic pair", "Generated picture"). Returns both options, so that a
/// program can refuse them next to a real input.
std::pair<CLI::Option*, CLI::Option*> AddSyntheticInputOptions(CLI::App& cli, const std::string& what, int* width,
                                                               double* noise);

}  // namespace mrf::app
