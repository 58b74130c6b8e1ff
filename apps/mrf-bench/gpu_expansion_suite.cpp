// The gpuexpansion suite: cuda-expansion end to end (model upload, every move on the device, labels
// back, energy evaluated) on Tsukuba and Venus (BENCHMARKS.md section 1) and the full Aloe pair
// (section 4, all its labels), against cpu-expansion measured in the same run on the same model:
// energy, cycles, moves, time per move, and where the device time goes (graph build or update,
// max-flow, scoring and label update), plus the host's upload, graph capture and download. On
// Tsukuba and Venus also cuda-swap against cpu-swap (its baseline, measured in the same run).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/app.h"
#include "energies/stereo.h"
#include "inference/cuda_expansion.h"
#include "inference/cuda_swap.h"
#include "mrf-bench/bench_common.h"
#include "mrf-bench/suite.h"
#include "mrf/device.h"
#include "mrf/io/image.h"
#include "mrf/solve.h"

namespace mrf::bench {
namespace {

using Clock = std::chrono::steady_clock;

using app::MsSince;

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

struct Problem {
  std::string name, what;
  Model model;
  bool truncate = false;
  Energy reference = -1;          // the reference implementation's expansion energy (-1: none)
  Energy swap_reference = -1;     // ... and swap energy (-1: none)
  double target_ms = -1;          // the end-to-end target (-1: none)
  const char* reference_time = "";
};

bool LoadMiddlebury(const std::string& dir, const std::string& name, Problem* p) {
  const std::string base = dir + "/middlebury/" + name;
  if (!Exists(base + "-imL.png") || !Exists(base + "-imR.png")) {
    std::printf("# %s skipped: %s-imL.png not found (--data-dir)\n", name.c_str(), app::OneLine(base).c_str());
    return false;
  }
  app::Progress("mrf-bench", "gpuexpansion: building " + name);
  const Image left = LoadImage(base + "-imL.png", 3), right = LoadImage(base + "-imR.png", 3);
  p->name = name;
  p->model = BuildStereoModel(left, right, StereoParams::Preset(name));
  p->truncate = name == "venus";  // quadratic smoothness: truncated as the reference does
  p->reference = name == "tsukuba" ? 370825 : 3125962;
  p->swap_reference = name == "tsukuba" ? 372233 : 3141772;
  p->target_ms = name == "tsukuba" ? 10 : 30;
  p->reference_time = name == "tsukuba" ? "1.3-1.7 s" : "6.1 s";
  p->what = std::to_string(left.width) + "x" + std::to_string(left.height) + ", " +
            std::to_string(p->model.num_labels) + " labels, preset " + name;
  return true;
}

// The full Aloe pair with the energy of the multilabel suite: the Tsukuba preset with
// ceil(1.08 x (largest ground-truth disparity + 1)) labels.
bool LoadAloe(const std::string& dir, Problem* p) {
  std::string folder;
  for (const std::string& d : {dir + "/aloe", std::string("/usr/share/doc/opencv-doc/examples/data")})
    if (Exists(d + "/aloeL.jpg") && Exists(d + "/aloeR.jpg") && Exists(d + "/aloeGT.png")) {
      folder = d;
      break;
    }
  if (folder.empty()) {
    std::printf("# aloe skipped: aloeL.jpg, aloeR.jpg, aloeGT.png not found (--data-dir/aloe or Debian opencv-doc)\n");
    return false;
  }
  app::Progress("mrf-bench", "gpuexpansion: building aloe");
  const Image left = LoadImage(folder + "/aloeL.jpg", 3), right = LoadImage(folder + "/aloeR.jpg", 3);
  const Image gt = LoadGreyValues(folder + "/aloeGT.png");
  const int largest = *std::max_element(gt.pixels.begin(), gt.pixels.end());
  StereoParams params = StereoParams::Preset("tsukuba");
  params.preset = "aloe";
  params.num_labels = static_cast<Label>(std::ceil(1.08 * (largest + 1)));
  p->name = "aloe";
  p->model = BuildStereoModel(left, right, params);
  p->what = std::to_string(left.width) + "x" + std::to_string(left.height) + ", " + std::to_string(params.num_labels) +
            " labels, the Tsukuba energy";
  return true;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Row {
  std::string problem, method, note;
  Energy energy = -1, reference = -1;
  std::int64_t cycles = 0, moves = 0, resolved = 0, skipped = 0, relabels = 0, pushes = 0, kept = 0;
  double ms = -1, build = -1, solve = -1, update = -1, upload = -1, graph = -1, download = -1, cycles_ms = -1;
  double base_ms = -1;
  bool base_complete = true;   // the baseline was not stopped by the time limit (else the ratio is a lower bound)
  bool base_converged = true;  // the baseline ended at a cycle that changed nothing (not at --cycles, say)
  int runs = 0;

  // Takes the baseline's time and how its run ended: the ratio column and the JSON compare against it.
  void CompareWith(const Row& baseline) {
    base_ms = baseline.ms;
    base_complete = baseline.base_complete;
    base_converged = baseline.base_converged;
  }
};

void PrintRow(const Row& r) {
  char ratio[32] = "-", per_move[32] = "-", device[96] = "-", host[64] = "-", vs_ref[32] = "-";
  if (r.base_ms > 0 && r.ms > 0) std::snprintf(ratio, sizeof ratio, r.base_complete ? "%.1f" : ">%.1f", r.base_ms / r.ms);
  if (r.moves > 0) std::snprintf(per_move, sizeof per_move, "%.4f", r.ms / static_cast<double>(r.moves));
  if (r.build >= 0)
    std::snprintf(device, sizeof device, "%.2f / %.2f / %.2f", r.build, r.solve, r.update);
  if (r.upload >= 0) std::snprintf(host, sizeof host, "%.2f / %.2f / %.2f", r.upload, r.graph, r.download);
  if (r.reference > 0)
    std::snprintf(vs_ref, sizeof vs_ref, "%+.3f%%", 100.0 * static_cast<double>(r.energy - r.reference) / r.reference);
  std::printf("| %-8s | %-32s | %11lld | %9s | %4lld | %5lld | %5lld | %9.2f | %8s | %22s | %18s | %6lld | %6lld | %7s |\n",
              r.problem.c_str(), r.method.c_str(), static_cast<long long>(r.energy), vs_ref,
              static_cast<long long>(r.cycles), static_cast<long long>(r.moves), static_cast<long long>(r.resolved),
              r.ms, per_move, device, host, static_cast<long long>(r.relabels), static_cast<long long>(r.pushes), ratio);
  std::fflush(stdout);
}

// Times one GPU move solver (`run`: RunCudaExpansion or RunCudaSwap) `repeat` times after a warm-up, checks each
// run's last logged energy against the reference evaluator, and fills `row` with the median time and the split
// of the run whose time is the median (returned).
template <class RunMoves>
CudaExpansionStats TimeGpuMoves(const Problem& problem, const std::string& name, const std::string& label,
                                const std::string& solver, const SolveOptions& o, int repeat, RunMoves run, Row* row) {
  std::vector<double> times;
  std::vector<CudaExpansionStats> stats;
  for (int i = 0; i <= repeat; ++i) {  // run 0 warms up (context, allocation, code)
    app::Progress("mrf-bench", "gpuexpansion: " + name + ": " + label + " run " + std::to_string(i));
    Result r;
    CudaExpansionStats s;
    const auto t0 = Clock::now();
    run(problem.model, o, &r, &s);
    const Energy e = EvaluateEnergy(problem.model, r.labels).total;
    const double ms = MsSince(t0);
    if (r.log.empty() || r.log.back().energy != e)
      throw Error(solver + " on " + name + ": the last cycle's energy differs from the reference evaluator's");
    if (i == 0) continue;
    times.push_back(ms);
    stats.push_back(s);
    row->energy = e;
    row->note = r.message;
  }
  const double median = Median(times);
  std::size_t pick = 0;
  for (std::size_t i = 0; i < times.size(); ++i)
    if (std::abs(times[i] - median) < std::abs(times[pick] - median)) pick = i;
  const CudaExpansionStats& s = stats[pick];
  row->ms = median;
  row->runs = static_cast<int>(times.size());
  row->cycles = s.cycles;
  row->moves = s.moves;
  row->resolved = s.resolved;
  row->skipped = s.skipped;
  row->relabels = s.relabels;
  row->pushes = s.push_rounds;
  row->kept = s.kept_graphs;
  row->build = s.build_ms;
  row->solve = s.solve_ms;
  row->update = s.update_ms;
  row->upload = s.upload_ms;
  row->graph = s.graph_ms;
  row->download = s.download_ms;
  row->cycles_ms = s.cycles_ms;
  return s;
}

// A CPU move solver (o.solver, in o.label_order) through mrf::Solve, `runs` times: the median time, the last
// run's energy, cycles and message (a stop at the time limit is printed, and makes the row no baseline).
Row TimeCpuMoves(const Problem& problem, const SolveOptions& o, int runs, const std::string& method, Energy reference) {
  std::vector<double> times;
  Result r;
  for (int i = 0; i < runs; ++i) {
    app::Progress("mrf-bench", "gpuexpansion: " + problem.name + ": " + method + " run " + std::to_string(i + 1));
    const auto t0 = Clock::now();
    r = Solve(problem.model, o);
    times.push_back(MsSince(t0));
    if (!r.ok) throw Error(method + " failed on " + problem.name + ": " + r.message);
  }
  Row row;
  row.problem = problem.name;
  row.method = method;
  row.reference = reference;
  row.energy = r.energy;
  row.cycles = r.iterations;
  row.ms = Median(times);
  row.runs = static_cast<int>(times.size());
  row.note = r.message;
  row.base_complete = r.message.find("time limit") == std::string::npos;
  row.base_converged = r.message.find("converged") != std::string::npos;
  if (!row.base_complete) std::printf("# %s on %s: %s\n", method.c_str(), problem.name.c_str(), r.message.c_str());
  return row;
}

// cuda-swap against cpu-swap on one problem: the baseline first, then cuda-swap end to end (as the
// cuda-expansion rows: a warm-up, then the median of `repeat` runs, with the split of the median run).
template <class Selected>
void SwapRows(const Problem& problem, SolveOptions base, int repeat, bool gpu, const Selected& selected,
              std::vector<Row>* rows) {
  const std::string& name = problem.name;
  base.truncate_nonsubmodular = false;  // every smoothness term here is a semimetric
  std::printf("\n### %s, alpha-beta swap (reference swap energy %lld)\n", name.c_str(),
              static_cast<long long>(problem.swap_reference));
  std::printf("| problem  | method                           |      energy |    vs ref | cyc. | moves | re-s. |    e2e ms |  ms/move | device build/flow/update | host up/graph/down | relab. | pushes | cpu/gpu |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  Row cpu;
  cpu.problem = name;
  cpu.method = "cpu-swap";
  cpu.reference = problem.swap_reference;
  if (selected("cpu-swap")) {
    SolveOptions o = base;
    o.solver = "cpu-swap";
    cpu = TimeCpuMoves(problem, o, repeat, "cpu-swap", problem.swap_reference);
    cpu.base_ms = cpu.ms;
    PrintRow(cpu);
    rows->push_back(cpu);
  }
  if (!gpu || !selected("cuda-swap")) return;
  SolveOptions o = base;
  o.solver = "cuda-swap";
  const CudaExpansionTuning tuning = CudaExpansionTuning::FromEnvironment();
  Row row;
  row.problem = name;
  row.method = "cuda-swap";
  row.reference = problem.swap_reference;
  row.CompareWith(cpu);
  const CudaExpansionStats s = TimeGpuMoves(
      problem, name, "cuda-swap", "cuda-swap", o, repeat,
      [&](const Model& m, const SolveOptions& so, Result* r, CudaExpansionStats* st) { RunCudaSwap(m, so, r, tuning, st); },
      &row);
  PrintRow(row);
  rows->push_back(row);
  std::printf("#   cuda-swap: %lld moves skipped (nothing changed since, or no node has either label), %lld BFS/kill rounds, "
              "%d solve blocks, cycles %.2f ms on the host clock, %.1f MiB on the GPU, loop on the %s\n",
              static_cast<long long>(s.skipped), static_cast<long long>(s.bfs_rounds), s.solve_blocks, s.cycles_ms,
              static_cast<double>(s.device_bytes) / (1 << 20), s.loop.c_str());
  std::printf("# %s\n", row.note.c_str());
}

int RunGpuExpansion(const BenchOptions& options) {
  const std::vector<std::string> wanted = Split(options.solvers);
  auto selected = [&](const std::string& name) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
  };
  std::vector<std::string> problems = Split(options.problems);
  if (problems.empty()) problems = options.quick ? std::vector<std::string>{"tsukuba"}
                                                 : std::vector<std::string>{"tsukuba", "venus", "aloe"};
  for (const std::string& p : problems)
    if (p != "tsukuba" && p != "venus" && p != "aloe")
      throw Error("--problems: '" + p + "' is not a problem of the gpuexpansion suite (tsukuba, venus, aloe)");
  const bool gpu = CudaUnavailableReason().empty();
  if (!gpu) std::printf("# cuda-expansion rows skipped: %s\n", CudaUnavailableReason().c_str());
  const int repeat = options.quick ? std::min(options.repeat, 2) : options.repeat;
  const int max_cycles = options.cycles > 0 ? options.cycles : 500;
  // cuda-expansion rows: the default, then one per --tuning.
  std::vector<std::pair<std::string, CudaExpansionTuning>> tunings;
  tunings.push_back({"cuda-expansion", CudaExpansionTuning::FromEnvironment()});
  for (const std::string& t : options.tunings) {
    CudaExpansionTuning tuning = CudaExpansionTuning::FromEnvironment();
    tuning.Parse(t);
    tunings.push_back({"cuda-expansion " + t, tuning});
  }
  std::printf("# labels start at 0, sequential label order (rows 'same, --label-order frequent': the labels most nodes\n"
              "#   find cheapest first; 'same, --start bp': from tiled BP's labels), at most %d cycle%s%s; Venus\n"
              "#   truncates non-submodular terms.\n"
              "# ms: end to end, median of %d runs after a warm-up (cuda: RunCudaExpansion, model upload, labels back and\n"
              "#   EvaluateEnergy included; 'via mrf::Solve': the whole Solve call); cpu-expansion: mrf::Solve, median of\n"
              "#   %d runs (one run on aloe%s).\n"
              "# device ms build / max-flow / update: summed over the moves, from the device clock; host ms: upload /\n"
              "#   graph capture and instantiation / download; relab., pushes: global relabels and push rounds of\n"
              "#   all moves; cpu/gpu: cpu-expansion's ms over the row's ('>': the baseline was stopped early).\n"
              "# cuda-expansion tuning: %s\n",
              max_cycles, max_cycles == 1 ? "" : "s",
              options.cycles > 0 ? " (--cycles: a run may stop before a cycle that changes nothing)" : "", repeat, repeat,
              options.time_limit_s > 0 ? (", stopped after " + mrf::NumberText(options.time_limit_s) + " s").c_str() : "",
              tunings.front().second.Describe().c_str());
  std::vector<Row> rows;
  for (const std::string& name : problems) {
    Problem problem;
    if (name == "aloe" ? !LoadAloe(options.data_dir, &problem) : !LoadMiddlebury(options.data_dir, name, &problem))
      continue;
    if (selected("cpu-expansion") || selected("cuda-expansion")) {  // (not when only the swap rows run)
      std::printf("\n### %s: %s%s\n", name.c_str(), problem.what.c_str(),
                  problem.reference > 0 ? ("; reference expansion energy " + std::to_string(problem.reference) + " (" +
                                           problem.reference_time + " on one core)")
                                              .c_str()
                                        : "");
      std::printf("| problem  | method                           |      energy |    vs ref | cyc. | moves | re-s. |    e2e ms |  ms/move | device build/flow/update | host up/graph/down | relab. | pushes | cpu/gpu |\n");
      std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    SolveOptions base;
    base.max_iterations = max_cycles;
    base.label_order = LabelOrder::kSequential;
    base.truncate_nonsubmodular = problem.truncate;
    // The baseline first (its time is every row's ratio).
    Row cpu;
    cpu.problem = name;
    cpu.method = "cpu-expansion";
    cpu.reference = problem.reference;
    if (selected("cpu-expansion")) {
      SolveOptions o = base;
      o.solver = "cpu-expansion";
      const bool slow = name == "aloe";
      if (slow && options.time_limit_s > 0) o.time_limit_s = options.time_limit_s;
      cpu = TimeCpuMoves(problem, o, slow ? 1 : repeat, "cpu-expansion", problem.reference);
      cpu.base_ms = cpu.ms;
      PrintRow(cpu);
      rows.push_back(cpu);
      if (!slow) {  // (Aloe's baseline stops at the time limit: no order would compare there)
        o.label_order = LabelOrder::kFrequent;
        Row frequent = TimeCpuMoves(problem, o, repeat, "same, --label-order frequent", problem.reference);
        frequent.CompareWith(cpu);
        PrintRow(frequent);
        rows.push_back(frequent);
      }
    }
    if (!gpu) {
      if (problem.swap_reference > 0) SwapRows(problem, base, repeat, gpu, selected, &rows);
      continue;
    }
    for (const auto& [label, tuning] : tunings) {
      if (!selected("cuda-expansion")) break;
      SolveOptions o = base;
      o.solver = "cuda-expansion";
      Row row;
      row.problem = name;
      row.method = label;
      row.reference = problem.reference;
      row.CompareWith(cpu);
      const CudaExpansionStats s = TimeGpuMoves(
          problem, name, label, "cuda-expansion", o, repeat,
          [&](const Model& m, const SolveOptions& so, Result* r, CudaExpansionStats* st) {
            RunCudaExpansion(m, so, r, tuning, st);
          },
          &row);
      PrintRow(row);
      rows.push_back(row);
      std::printf("#   %s: %lld moves skipped, %lld max-flows stopped early, %lld of %d labels keep a graph, %lld "
                  "BFS/kill rounds, %d solve blocks, cycles %.2f ms on the host clock, %.1f MiB on the GPU, loop on the %s\n",
                  label.c_str(), static_cast<long long>(s.skipped), static_cast<long long>(s.stopped_early),
                  static_cast<long long>(s.kept_graphs),
                  problem.model.num_labels, static_cast<long long>(s.bfs_rounds), s.solve_blocks, s.cycles_ms,
                  static_cast<double>(s.device_bytes) / (1 << 20), s.loop.c_str());
    }
    struct Variant {
      StartLabels start;
      LabelOrder order;
      const char* method;
    };
    const Variant variants[] = {{StartLabels::kZero, LabelOrder::kSequential, "cuda-expansion via mrf::Solve"},
                                {StartLabels::kBeliefPropagation, LabelOrder::kSequential, "same, --start bp"},
                                {StartLabels::kZero, LabelOrder::kFrequent, "same, --label-order frequent"},
                                {StartLabels::kBeliefPropagation, LabelOrder::kFrequent,
                                 "same, --start bp --label-order frequent"}};
    for (const Variant& variant : variants) {
      if (!selected("cuda-expansion")) break;
      // The registered solver through mrf::Solve (validation and the result's energy included), from label 0,
      // from tiled BP's labelling (--start bp), with the most frequent cheapest labels first, and with both.
      SolveOptions o = base;
      o.solver = "cuda-expansion";
      o.start = variant.start;
      o.label_order = variant.order;
      std::vector<double> times;
      Result r;
      for (int i = 0; i <= repeat; ++i) {
        const auto t0 = Clock::now();
        r = Solve(problem.model, o);
        if (i > 0) times.push_back(MsSince(t0));
        if (!r.ok) throw Error("cuda-expansion via mrf::Solve failed on " + name + ": " + r.message);
      }
      Row row;
      row.problem = name;
      row.method = variant.method;
      row.reference = problem.reference;
      row.energy = r.energy;
      row.cycles = r.iterations;
      row.ms = Median(times);
      row.runs = static_cast<int>(times.size());
      row.CompareWith(cpu);
      row.note = r.message;
      PrintRow(row);
      rows.push_back(row);
      if (problem.target_ms > 0) {
        const double target = 1.005 * static_cast<double>(problem.reference);
        // When the log first reached the target energy, in the last run: its end-to-end time less the log's
        // time from that record to the last one (the log's clock skips the solver's setup, so this is an
        // upper bound: it counts the work after the last cycle too).
        std::string reached = "never";
        for (const IterationRecord& record : r.log)
          if (record.energy >= 0 && static_cast<double>(record.energy) <= target) {
            char ms[32];
            std::snprintf(ms, sizeof ms, "%.2f", times.back() - (r.log.back().time_ms - record.time_ms));
            reached = "at most " + std::string(ms) + " ms into the run (" +
                      (record.iteration == 0 ? std::string("its start") : "cycle " + std::to_string(record.iteration)) +
                      ")";
            break;
          }
        std::printf("# %s target: energy <= %.0f (reference x 1.005) in <= %.0f ms end to end: %s (%lld, %.2f ms); "
                    "the energy first met the target %s\n",
                    name.c_str(), target, problem.target_ms,
                    static_cast<double>(r.energy) <= target && row.ms <= problem.target_ms ? "met" : "missed",
                    static_cast<long long>(r.energy), row.ms, reached.c_str());
      }
      std::printf("# %s\n", r.message.c_str());
      if (variant.start == StartLabels::kBeliefPropagation && !r.log.empty())
        std::printf("# the moves' setup %.2f ms, transfers %.2f ms, solve %.2f ms; %s\n", r.timings.setup_ms,
                    r.timings.transfer_ms, r.timings.solve_ms, r.log.front().note.c_str());
    }
    if (problem.swap_reference > 0) SwapRows(problem, base, repeat, gpu, selected, &rows);
  }
  if (!options.json_path.empty()) {
    std::ostringstream out;
    out << "[\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << "  {\"suite\": \"gpuexpansion\", \"problem\": \"" << r.problem << "\", \"method\": \"" << r.method
          << "\", \"energy\": " << r.energy << ", \"reference_energy\": " << r.reference << ", \"cycles\": " << r.cycles
          << ", \"moves\": " << r.moves << ", \"resolved\": " << r.resolved << ", \"skipped\": " << r.skipped
          << ", \"relabels\": " << r.relabels << ", \"push_rounds\": " << r.pushes << ", \"runs\": " << r.runs << ", \"ms\": " << r.ms
          << ", \"device_build_ms\": " << r.build << ", \"device_maxflow_ms\": " << r.solve
          << ", \"device_update_ms\": " << r.update << ", \"upload_ms\": " << r.upload << ", \"graph_ms\": " << r.graph
          << ", \"download_ms\": " << r.download << ", \"cycles_ms\": " << r.cycles_ms << ", \"baseline_ms\": " << r.base_ms
          << ", \"baseline_converged\": " << (r.base_converged ? "true" : "false")
          << ", \"max_cycles\": " << max_cycles
          << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "]\n";
    WriteJsonFile(options.json_path, out.str());
  }
  return rows.empty() ? kNothingMeasured : 0;
}

const SuiteRegistration registration{
    {"gpuexpansion",
     "cuda-expansion end to end on Tsukuba, Venus and the full Aloe pair against cpu-expansion in the same run "
     "(energy, cycles, moves, ms per move, device time split), and cuda-swap against cpu-swap on Tsukuba and Venus; "
     "--tuning adds cuda-expansion rows "
     "(names: see MRF_CUDA_EXPANSION_TUNING), --problems picks problems, --time-limit stops the Aloe baseline",
     &RunGpuExpansion}};

}  // namespace
}  // namespace mrf::bench
