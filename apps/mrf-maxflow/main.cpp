// mrf-maxflow: the maximum flow and minimum cut of a DIMACS max-flow file, with any of mrf's max-flow
// engines; reports the flow, the size of each side of the cut, the backend used and the times.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/app.h"
#include "mrf/io/dimacs.h"
#include "mrf/options.h"
#include "mrf/registry.h"

namespace {

const char* const kProgram = "mrf-maxflow";
// Files at least this large get progress messages on stderr.
constexpr long long kProgressBytes = 8LL << 20;

using Clock = std::chrono::steady_clock;

using mrf::app::MsSince;

std::string Ms(double ms) {
  if (ms < 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, ms < 10 ? "%.3f ms" : "%.1f ms", ms);
  return text;
}

// CLI11 validator for --backend: "auto" or a registered max-flow engine.
std::string CheckBackend(const std::string& name) {
  const mrf::Registry& registry = mrf::Registry::Global();
  const std::string known = "auto, " + registry.NameList(mrf::Algorithm::kMaxFlow);
  if (name == "auto") return {};
  const mrf::SolverEntry* entry = registry.Find(name);
  if (!entry) return "unknown backend '" + name + "' (max-flow backends: " + known + ")";
  if (entry->algorithm != mrf::Algorithm::kMaxFlow)
    return "backend '" + name + "' is not a max-flow engine (max-flow backends: " + known + ")";
  return {};
}

std::string CheckShape(const std::string& text) {
  try {
    mrf::ParseGridShape(text);
  } catch (const mrf::Error& e) {
    return e.what();
  }
  return {};
}

int ListBackends() {
  const mrf::Registry& registry = mrf::Registry::Global();
  std::printf("max-flow backends (auto takes the first available one that fits the graph: GPU engines first,\n"
              "then CPU engines by priority):\n");
  for (const mrf::SolverEntry& e : registry.entries()) {
    if (e.algorithm != mrf::Algorithm::kMaxFlow) continue;
    std::string why;
    const bool available = registry.IsAvailable(e.name, &why);
    const std::string status = !e.compiled_in ? "not compiled in" : available ? "available" : "unavailable: " + why;
    std::printf("  %-12s %-5s priority %-3d %-28s %s\n", e.name.c_str(), mrf::ToString(e.device), e.priority,
                status.c_str(), e.summary.c_str());
  }
  return 0;
}

// A random segmentation-like problem: a few balls lean towards the sink side, the rest towards the
// source side, with 10% noise; edge capacities are random. Integer arithmetic on mt19937_64 output
// only, so the same seed gives the same file on every platform.
mrf::StGraph ExampleGraph(const mrf::Topology& grid, std::uint64_t seed, mrf::Cost max_cap) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&rng](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  struct Ball {
    std::int64_t x, y, z, r;
  };
  std::vector<Ball> balls(static_cast<std::size_t>(2 + uniform(4)));
  const std::int64_t largest_side = std::max({grid.width(), grid.height(), grid.depth()});
  for (Ball& b : balls)
    b = {uniform(grid.width()), uniform(grid.height()), uniform(grid.depth()), 1 + uniform(largest_side / 3 + 1)};
  mrf::StGraph g(grid);
  const mrf::Cost half = max_cap / 2;
  for (mrf::NodeId v = 0; v < grid.num_nodes(); ++v) {
    const std::int64_t x = v % grid.width(), y = (v / grid.width()) % grid.height(),
                       z = v / (std::int64_t{grid.width()} * grid.height());
    bool inside = false;
    for (const Ball& b : balls)
      inside |= (x - b.x) * (x - b.x) + (y - b.y) * (y - b.y) + (z - b.z) * (z - b.z) <= b.r * b.r;
    if (uniform(10) == 0) inside = !inside;
    const mrf::Energy strong = half + uniform(max_cap - half + 1), weak = uniform(half + 1);
    // A node on the sink side pays its source capacity: inside nodes get a small one.
    g.add_tweights(v, inside ? weak : strong, inside ? strong : weak);
  }
  const mrf::Cost edge_max = std::max(1, max_cap / 3);
  grid.ForEachEdge([&](mrf::EdgeId e, mrf::NodeId, mrf::NodeId) {
    g.add_to_edge_slot(e, static_cast<mrf::Cost>(uniform(edge_max + 1)), static_cast<mrf::Cost>(uniform(edge_max + 1)));
  });
  return g;
}

void WriteCut(const std::string& path, const mrf::Result& result, const mrf::DimacsInfo& info) {
  std::vector<mrf::NodeId> ids{info.sink};
  if (!info.extra_node)
    for (mrf::NodeId v = 0; v < static_cast<mrf::NodeId>(result.labels.size()); ++v)
      if (result.labels[v]) ids.push_back(info.DimacsId(v));
  std::sort(ids.begin(), ids.end());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!file) throw mrf::Error("cannot write cut file '" + path + "': " + std::strerror(errno));
  for (mrf::NodeId id : ids) std::fprintf(file.get(), "%d\n", id);
  if (std::ferror(file.get()) || std::fclose(file.release()) != 0)
    throw mrf::Error("cannot write cut file '" + path + "': " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "mrf-maxflow: maximum flow and minimum cut of a DIMACS max-flow file ('p max', see docs/dimacs.md).\n"
      "Prints the flow, the size of each side of the cut (source and sink included), the backend used and\n"
      "the times. Exit status: 0 solved, 1 bad input or failed solve, 2 bad command line."};
  std::string file, backend = "auto", cut_path, grid_text, example_path, size_text = "64x64";
  bool json = false, quiet = false, list = false;
  std::uint64_t seed = 1;
  int max_capacity = 100;
  double time_limit = 0;
  auto* file_opt = cli.add_option("FILE", file, "DIMACS max-flow file to solve");
  auto* backend_opt = cli.add_option("--backend,--solver", backend,
                 "Max-flow engine: auto or one of " + mrf::Registry::Global().NameList(mrf::Algorithm::kMaxFlow) +
                     " (see --list-backends; --solver is the other programs' name for it; messages call it --backend)")
      ->check(CLI::Validator(CheckBackend, "NAME"))
      ->capture_default_str();
  auto* json_opt = cli.add_flag("--json", json,
               "Print one JSON object instead of the text report: ok, file, nodes, arcs, shape, flow, complete, "
               "cut_capacity, source_side, sink_side, backend, backend_requested, fallback_reason, read_ms, "
               "setup_ms, transfer_ms, solve_ms, total_ms (-1: phase did not run), threads, ignored_arcs, message; "
               "when the solve fails, ok false with file, nodes, arcs, backend, backend_requested, fallback_reason, "
               "read_ms, threads and message "
               "(then the error line)");
  auto* cut_opt = cli.add_option("--cut", cut_path,
                 "Write the DIMACS ids of the sink side of the minimum cut (sink included), one per line, to this file");
  auto* grid_opt = cli.add_option("--grid", grid_text,
                 "Read the file as a grid of this shape (WxH, WxH:8, WxHxD): its non-terminal nodes, in id order, "
                 "are the grid's nodes in raster order and every arc must join grid neighbours. Files written by mrf "
                 "carry their shape in a 'c mrf-grid' comment; grid engines (cuda-pr) need one of the two")
      ->check(CLI::Validator(CheckShape, "SHAPE"));
  auto* list_opt = cli.add_flag("--list-backends", list, "List the max-flow engines with their compiled-in and available status, then exit (a JSON array with --json)");
  auto* example_opt = cli.add_option(
      "--write-example", example_path,
      "Write a random grid-shaped DIMACS file (a segmentation-like problem; shape --size, seed --seed) and exit");
  cli.add_option("--size", size_text, "Grid shape for --write-example: WxH, WxH:8, WxHxD")
      ->check(CLI::Validator(CheckShape, "SHAPE"))
      ->needs(example_opt)
      ->capture_default_str();
  cli.add_option("--seed", seed, "Random seed for --write-example: the same seed writes the same file")
      ->check(mrf::app::FiniteNonNegative())
      ->needs(example_opt)
      ->capture_default_str();
  cli.add_option("--max-capacity", max_capacity, "Largest terminal capacity in --write-example files")
      ->check(CLI::Range(1, INT_MAX))
      ->needs(example_opt)
      ->capture_default_str();
  auto* time_limit_opt = cli.add_option("--time-limit", time_limit,
                 "Stop the max-flow after this many seconds (0 = no limit) and report the cut found so far: a valid "
                 "cut but not a minimum one (the report says 'stopped early'; boost-bk checks only before it starts)")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  cli.add_flag("-q,--quiet", quiet, "No progress messages on stderr (big files print some)");
  // Options of a solve are refused where no solve runs, rather than ignored.
  for (CLI::Option* solve_opt : {file_opt, backend_opt, cut_opt, grid_opt, time_limit_opt}) {
    example_opt->excludes(solve_opt);
    list_opt->excludes(solve_opt);
  }
  example_opt->excludes(json_opt);
  example_opt->excludes(list_opt);

  return mrf::app::Run(kProgram, argc, argv, cli, [&]() -> int {
    mrf::app::SetQuiet(quiet || json);
    mrf::app::CheckOutputs({{"FILE", file}}, {{"--cut", cut_path}, {"--write-example", example_path}});
    if (list && json) {
      std::printf("%s\n", mrf::app::RegistryJson(mrf::Algorithm::kMaxFlow).c_str());
      return 0;
    }
    if (list) return ListBackends();
    if (!example_path.empty()) {
      const mrf::Topology grid = mrf::ParseGridShape(size_text);
      const mrf::StGraph g = ExampleGraph(grid, seed, max_capacity);
      mrf::WriteDimacs(g, example_path);
      std::printf("wrote %s: %s, seed %llu\n", mrf::app::OneLine(example_path).c_str(), grid.Describe().c_str(),
                  static_cast<unsigned long long>(seed));
      return 0;
    }
    if (file.empty()) {
      std::fprintf(stderr, "%s: error: no input file (give FILE.max, --write-example or --list-backends; see --help)\n",
                   kProgram);
      return 2;
    }

    const auto start = Clock::now();
    // While the file is read; not for auto, which takes the CPU for graphs that are not grids.
    const auto gpu_start = backend == "auto" ? nullptr : mrf::app::StartGpuIfUsed(backend);
    struct stat file_status {};
    const bool big = ::stat(file.c_str(), &file_status) == 0 && file_status.st_size >= kProgressBytes;
    if (big) mrf::app::Progress(kProgram, "reading " + file + " (" + std::to_string(file_status.st_size >> 20) + " MiB)");
    mrf::DimacsReadOptions read_options;
    if (!grid_text.empty()) read_options.grid = mrf::ParseGridShape(grid_text);
    mrf::DimacsInfo info;
    mrf::StGraph graph = mrf::ReadDimacs(file, &info, read_options);
    const double read_ms = MsSince(start);
    if (big)
      mrf::app::Progress(kProgram, "read " + std::to_string(info.num_nodes) + " nodes and " +
                                       std::to_string(info.num_arcs) + " arcs in " + Ms(read_ms) + "; solving with " +
                                       backend);
    graph.set_limits(time_limit);
    const mrf::Result result = graph.maxflow(backend);
    // The --json object: on a failed solve only what is known without a cut (ok false), then the error line.
    struct Cut {
      bool stopped;
      long long source_side, sink_side;
      double total_ms;
    };
    auto print_json = [&](const Cut* cut) {
      nlohmann::ordered_json j;
      j["ok"] = cut != nullptr;
      j["file"] = file;
      j["nodes"] = info.num_nodes;
      j["arcs"] = info.num_arcs;
      if (cut) {
        j["shape"] = graph.topology().is_grid() ? mrf::FormatGridShape(graph.topology()) : std::string("general");
        j["flow"] = result.flow;
        j["complete"] = !cut->stopped;  // false: stopped by --time-limit, flow so far and a cut that is not minimal
        j["cut_capacity"] = result.energy;
        j["source_side"] = cut->source_side;
        j["sink_side"] = cut->sink_side;
      }
      j["backend"] = result.backend_used;
      j["backend_requested"] = backend;
      j["fallback_reason"] = result.fallback_reason;
      j["read_ms"] = read_ms;
      if (cut) {
        j["setup_ms"] = result.timings.setup_ms;
        j["transfer_ms"] = result.timings.transfer_ms;
        j["solve_ms"] = result.timings.solve_ms;
        j["total_ms"] = cut->total_ms;
      }
      j["threads"] = result.threads;
      if (cut) j["ignored_arcs"] = info.ignored_arcs;
      j["message"] = result.message;
      std::printf("%s\n", mrf::app::JsonText(j).c_str());
    };
    if (!result.ok) {
      if (json) print_json(nullptr);
      throw mrf::Error(file + ": max-flow failed: " + result.message);
    }
    const bool stopped = !result.has_lower_bound;  // a completed max-flow always has its bound
    const double total_ms = MsSince(start);

    // Cut sizes count DIMACS nodes: the source is on the source side, the sink on the sink side.
    long long sink_side = 1, source_side = 1;
    if (!info.extra_node)
      for (mrf::Label side : result.labels) (side ? sink_side : source_side) += 1;
    if (!cut_path.empty()) WriteCut(cut_path, result, info);

    const std::string shape = graph.topology().is_grid()
                                  ? graph.topology().Describe() +
                                        (info.grid_from_comment ? ", from its mrf-grid comment" : ", imposed by --grid")
                                  : std::string("general graph");
    if (json) {
      const Cut cut{stopped, source_side, sink_side, total_ms};
      print_json(&cut);
      return 0;
    }
    std::printf("file:      %s (%d nodes, %lld arcs; %s)\n", mrf::app::OneLine(file).c_str(), info.num_nodes,
                static_cast<long long>(info.num_arcs), shape.c_str());
    if (info.ignored_arcs > 0)
      std::printf("note:      %lld arcs cannot carry flow (into the source, out of the sink, loops) and were ignored\n",
                  static_cast<long long>(info.ignored_arcs));
    if (stopped) {
      std::printf("note:      %s\n", result.message.c_str());
      std::printf("flow:      %lld so far; the cut below has capacity %lld\n", static_cast<long long>(result.flow),
                  static_cast<long long>(result.energy));
    } else {
      std::printf("flow:      %lld\n", static_cast<long long>(result.flow));
    }
    std::printf("cut:       source side %lld nodes, sink side %lld nodes (source and sink included)\n", source_side,
                sink_side);
    std::printf("backend:   %s", result.backend_used.c_str());
    if (backend == "auto")
      std::printf(" (chosen by auto%s)", result.fallback_reason.empty() ? "" : ("; " + result.fallback_reason).c_str());
    std::printf("\ntimes:     read %s, setup %s, transfer %s, solve %s, total %s\n", Ms(read_ms).c_str(),
                Ms(result.timings.setup_ms).c_str(), Ms(result.timings.transfer_ms).c_str(),
                Ms(result.timings.solve_ms).c_str(), Ms(total_ms).c_str());
    if (!cut_path.empty()) std::printf("cut file:  %s (sink-side DIMACS ids)\n", mrf::app::OneLine(cut_path).c_str());
    return 0;
  });
}
