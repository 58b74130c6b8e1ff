#include "common/multilabel_cli.h"

#include <charconv>
#include <cstdio>
#include <sstream>
#include <system_error>

#include "common/app.h"
#include "mrf/io/model_file.h"
#include "mrf/io/read_file.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

namespace mrf::app {

void AddSolveOptions(CLI::App& cli, SolveCli* s) {
  cli.add_option("--algorithm", s->algorithm,
                 "Inference algorithm: auto|expansion|swap|icm|bp, or maxflow for two labels (ignored with --solver NAME)")
      ->capture_default_str();
  cli.add_option("--device", s->device, "Where to run: auto (GPU when one is usable)|cpu|cuda")->capture_default_str();
  cli.add_option(
         "--solver", s->solver,
         "Force a solver by registry name (" + Registry::Global().NameList() + "), or auto; it fixes the algorithm")
      ->capture_default_str();
  cli.add_option("--maxflow-backend", s->maxflow_backend, "Max-flow engine inside expansion/swap moves, or auto")
      ->check(CLI::Validator(
          [](const std::string& name) -> std::string {
            const SolverEntry* e = Registry::Global().Find(name);
            if (name == "auto" || (e && e->algorithm == Algorithm::kMaxFlow)) return {};
            return "unknown max-flow backend '" + name + "' (known: auto, " + Registry::Global().NameList(Algorithm::kMaxFlow) + ")";
          },
          ""))
      ->capture_default_str();
  cli.add_option("--iterations", s->iterations, "Iteration limit: cycles (expansion, swap) or sweeps (icm, bp)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cli.add_option("--seed", s->seed, "Seed for every random choice (random label order)")
      ->check(FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--label-order", s->label_order,
                 "Expansion/swap label order: sequential|random (a fresh permutation each cycle, from --seed)|"
                 "frequent (expansion only: the labels most nodes find cheapest in the data term first)")
      ->capture_default_str();
  cli.add_option("--start", s->start,
                 "Expansion/swap start: zero (every pixel label 0) or bp (tiled BP's labelling, 2 x 2 iterations "
                 "coarse-to-fine, on the moves' device; 4-connected grids)")
      ->capture_default_str();
  cli.add_option("--time-limit", s->time_limit_s, "Stop after this many seconds (0 = no limit)")
      ->check(FiniteNonNegative())
      ->capture_default_str();
  cli.add_flag("--truncate,!--no-truncate", s->truncate,
               std::string("Expansion/swap: truncate non-submodular move terms (needed for non-metric smoothness); "
                           "default ") +
                   (s->truncate ? "on" : "off"));
  cli.add_option("--bp-schedule", s->bp_schedule,
                 "Belief propagation schedule: auto|bpm|sync|tiled (auto: bpm on the CPU, tiled on the GPU)")
      ->capture_default_str();
  cli.add_option("--bp-tile-size", s->bp_tile_size, "Tiled BP: tile side in pixels (0 = chosen by the solver)")
      ->check(FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--bp-inner-iterations", s->bp_inner_iterations, "Tiled BP: iterations inside a tile per visit")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cli.add_flag("--coarse-to-fine", s->coarse_to_fine, "BP: start from messages computed on a coarser grid");
}

SolveOptions MakeSolveOptions(const SolveCli& s, const std::string& program) {
  SolveOptions options;
  options.solver = s.solver;
  options.algorithm = ParseAlgorithm(s.algorithm);
  // A named solver fixes the algorithm: --algorithm only chooses among solvers under --solver auto.
  if (s.solver != "auto") options.algorithm = Algorithm::kAuto;
  options.device = ParseDevice(s.device);
  options.maxflow_backend = s.maxflow_backend;
  options.label_order = ParseLabelOrder(s.label_order);
  options.start = ParseStartLabels(s.start);
  options.max_iterations = s.iterations;
  options.seed = s.seed;
  options.time_limit_s = s.time_limit_s;
  options.truncate_nonsubmodular = s.truncate;
  options.bp.schedule = s.bp_schedule;
  options.bp.tile_size = s.bp_tile_size;
  options.bp.inner_iterations = s.bp_inner_iterations;
  options.bp.coarse_to_fine = s.coarse_to_fine;
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  options.callback = [program](const IterationRecord& r) {
    std::string line = "iteration " + std::to_string(r.iteration);
    if (r.energy >= 0) line += ": energy " + std::to_string(r.energy);
    line += " (" + std::to_string(static_cast<long long>(r.time_ms)) + " ms)";
    if (!r.note.empty()) line += ", " + r.note;
    Progress(program, line);
    return true;
  };
  return options;
}

void CheckMaxflowLabels(const SolveOptions& options, Label labels) {
  if (options.solver == "auto" && options.algorithm == Algorithm::kMaxFlow && labels != 2)
    throw Error("--algorithm maxflow solves two-label problems only (this one has " + std::to_string(labels) +
                " labels: use expansion, swap, icm, bp or auto)");
}

void CheckAlgorithmFitsModel(const Model& model, const SolveOptions& options) {
  CheckMaxflowLabels(options, model.num_labels);
  bool expansion = options.algorithm == Algorithm::kExpansion;
  if (options.solver != "auto") {
    const SolverEntry* entry = Registry::Global().Find(options.solver);
    expansion = entry && entry->algorithm == Algorithm::kExpansion;
  }
  if (!expansion || options.truncate_nonsubmodular) return;
  std::string why;
  if (model.pairwise.IsMetric(model.num_labels, &why)) return;
  throw Error(std::string("smoothness '") + ToString(model.pairwise.kind) + "' is not a metric (" + why +
              "): alpha-expansion needs one; add --truncate to truncate non-submodular terms, or use --algorithm "
              "swap, bp or icm");
}

void CheckVmaxApplies(const CLI::App& cli, PairwiseKind kind) {
  if (cli.count("--vmax") > 0 && kind != PairwiseKind::kTruncatedLinear && kind != PairwiseKind::kTruncatedQuadratic)
    throw Error(std::string("--vmax applies to linear and quadratic smoothness, not ") + ToString(kind));
}

std::vector<Cost> ReadCostTable(const std::string& path, Label labels) {
  const std::string text = ReadWholeFile(path, "smoothness table");  // a folder or a missing file: one line
  const std::string where = "smoothness table '" + path + "'";
  const long long expected = static_cast<long long>(labels) * labels;
  std::vector<Cost> table;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    // Entries count from 1 in messages, with the label pair (row, column) while inside the table.
    const long long k = static_cast<long long>(table.size());
    std::string entry = "entry " + std::to_string(k + 1);
    if (k < expected) entry += " (V(" + std::to_string(k / labels) + "," + std::to_string(k % labels) + "))";
    const std::string shown = PrintableText(token, 32);  // the entry as the message quotes it
    long long value = 0;
    const char* first = token.data() + (token.size() > 1 && token[0] == '+');  // "+5", as streams read it
    const char* last = token.data() + token.size();
    const std::from_chars_result parsed = std::from_chars(first, last, value);
    const bool out_of_range = parsed.ec == std::errc::result_out_of_range && parsed.ptr == last;
    if (!out_of_range && (parsed.ec != std::errc() || parsed.ptr != last))
      throw Error(where + ": " + entry + " '" + shown + "' is not an integer");
    if (out_of_range || value < 0 || value > kMaxCost)
      throw Error(where + ": " + entry + " = " + shown + " is outside 0.." + std::to_string(kMaxCost));
    table.push_back(static_cast<Cost>(value));
  }
  if (static_cast<long long>(table.size()) != expected)
    throw Error(where + " has " + std::to_string(table.size()) + " entries, expected " + std::to_string(labels) +
                " x " + std::to_string(labels));
  return table;
}

void LoadSmoothnessTable(const std::string& table_path, Label labels, Pairwise* smoothness) {
  if (smoothness->kind == PairwiseKind::kTable) {
    if (table_path.empty()) throw Error("--smoothness table needs --table FILE");
    smoothness->table = ReadCostTable(table_path, labels);
  } else if (!table_path.empty()) {
    throw Error("--table is only used with --smoothness table");
  }
}

Result SaveCheckAndSolve(const std::string& program, const Model& model, const std::string& model_path,
                         const SolveOptions& options, const SolveCli& solve) {
  if (!model_path.empty()) {
    SaveModel(model, model_path);
    Progress(program, "saved the model to " + model_path);
  }
  CheckAlgorithmFitsModel(model, options);
  // A solver named with --solver fixes the algorithm and device: say so rather than the ignored flags.
  Progress(program, options.solver != "auto" ? "solving with " + options.solver
                                             : "solving (" + solve.algorithm + ", device " + solve.device + ")");
  return Solve(model, options);
}

int ReportFailure(const std::string& program, const Result& result, bool print_json) {
  if (result.ok) return 0;
  if (print_json) std::printf("%s\n", result.ToJson().c_str());
  PrintError(program, result.message);
  return 1;
}

nlohmann::json JsonReport(const std::string& program, const std::string& problem, const Result& result,
                          const std::string& energy_definition, int width, int height, Label labels,
                          const EnergyBreakdown& split) {
  nlohmann::json j = nlohmann::json::parse(result.ToJson());
  j["program"] = program;
  j["problem"] = problem;
  j["energy_definition"] = energy_definition;
  j["width"] = width;
  j["height"] = height;
  j["labels"] = labels;
  j["data_energy"] = split.data;
  j["smoothness_energy"] = split.smoothness;
  return j;
}

void PrintReport(const std::string& energy_definition, const Result& result, const EnergyBreakdown& split,
                 bool verbose) {
  std::printf("energy of: %s\n", energy_definition.c_str());
  std::printf("%s", verbose ? result.FullReport().c_str() : result.BriefReport().c_str());
  std::printf("split:     data %lld + smoothness %lld\n", static_cast<long long>(split.data),
              static_cast<long long>(split.smoothness));
  if (!verbose) std::printf("iterations: %lld\n", static_cast<long long>(result.iterations));
}

std::pair<CLI::Option*, CLI::Option*> AddSyntheticInputOptions(CLI::App& cli, const std::string& what, int* width,
                                                               double* noise) {
  CLI::Option* size = cli.add_option("--synthetic-size", *width, what + ": width (height = 3/4 of it)")
                          ->check(CLI::Range(16, 4096))
                          ->capture_default_str();
  CLI::Option* sigma = cli.add_option("--noise", *noise, what + ": Gaussian noise standard deviation")
                           ->check(FiniteNonNegative())
                           ->capture_default_str();
  return {size, sigma};
}

}  // namespace mrf::app
