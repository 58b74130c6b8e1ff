// The pushrelabel suite: the grid push-relabel engines (cuda-pr, and tbb-pr when asked for) against
// cpu-bk on the synthetic segmentation scene (BENCHMARKS.md section 2), in one run on one machine:
// - one exact max-flow per size, GPU time split into upload, solve and download (CUDA events, after a
//   warm-up, medians), with the work counters behind it (cycles, BFS rounds, tile visits, launches,
//   host waits) and the device-memory traffic they imply against the measured copy bandwidth;
// - re-solving after 1% of the terminal weights change, against solving the edited graph afresh;
// - extra cuda-pr tunings (--tuning), so that every choice of the schedule is a measurement.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/tbb_push_relabel.h"
#include "common/app.h"
#include "energies/synthetic_scene.h"
#include "mrf-bench/bench_common.h"
#include "mrf/config.h"
#include "mrf/device.h"
#include "mrf/registry.h"
#include "mrf/st_graph.h"
#if MRF_HAVE_CUDA
#include "backends/cuda/cuda_push_relabel.h"
#endif

namespace mrf::bench {
namespace {

// Bytes of device memory one unit of work moves (each value read or written once; halo heights
// included): the model behind the "GB/s" column.
struct TrafficModel {
  double push_visit = 0;  // per tile visit
  double bfs_visit = 0;   // per BFS tile visit
  double relabel = 0;     // per global relabel: BFS start pass and census over all nodes
};

TrafficModel Traffic(const Topology& t, const PushRelabelTuning& tuning) {
  const bool cube = t.kind() == TopologyKind::kGrid3D6;
  const int dirs = t.kind() == TopologyKind::kGrid4 ? 4 : t.kind() == TopologyKind::kGrid8 ? 8 : 6;
  const double tx = cube ? tuning.tile3d_x : tuning.tile_x, ty = cube ? tuning.tile3d_y : tuning.tile_y,
               tz = cube ? tuning.tile3d_z : 1;
  const double nodes = tx * ty * tz;
  const double ring = cube ? (tx + 2) * (ty + 2) * (tz + 2) - nodes : (tx + 2) * (ty + 2) - nodes;
  TrafficModel m;
  m.push_visit = nodes * (2 * (8 + 4 + 4.0 * dirs)) + ring * 4;  // x, h, residuals in and out; halo heights
  m.bfs_visit = nodes * (4 + 1 + 4) + ring * 4;                    // heights, bitmask, heights out; halo
  m.relabel = static_cast<double>(t.num_nodes()) * ((8 + 4.0 * dirs + 4 + 1) + (8 + 4 + 1));
  return m;
}

// One timed configuration of a push-relabel engine on one instance (medians over the runs).
struct PrRow {
  int size = 0;
  std::string solver, tuning;
  double setup_ms = -1, upload_ms = -1, solve_ms = -1, download_ms = -1;
  double relabel_ms = -1, push_ms = -1;
  PushRelabelStats stats;  // of the last run (the schedule is deterministic)
  double traffic_gb = 0;
  Energy flow = -1;
};

PrRow TimeEngine(PushRelabelEngine& engine, const std::string& solver, const StGraph& graph, int size, int repeat,
                 Energy expected_flow) {
  PrRow row;
  row.size = size;
  row.solver = solver;
  row.tuning = engine.tuning().Describe();
  std::vector<double> setup, upload, solve, download, relabel, push;
  for (int k = -1; k < repeat; ++k) {  // k = -1: warm-up (module load, graph capture, workspace)
    Result r;
    engine.Solve(graph, &r);
    if (r.flow + graph.constant() != expected_flow)
      throw Error("FLOW MISMATCH: " + solver + " found " + std::to_string(r.flow + graph.constant()) + " but cpu-bk " +
                  std::to_string(expected_flow) + " at " + std::to_string(size));
    if (graph.CutCapacity(r.labels) != expected_flow)
      throw Error(solver + ": cut capacity " + std::to_string(graph.CutCapacity(r.labels)) + " differs from the flow");
    if (k < 0) continue;
    const auto times = engine.LastPhaseTimes();
    setup.push_back(r.timings.setup_ms);
    upload.push_back(times.upload_ms);
    solve.push_back(times.solve_ms);
    download.push_back(times.download_ms);
    relabel.push_back(engine.stats().relabel_ms);
    push.push_back(engine.stats().push_ms);
    row.flow = r.flow + graph.constant();
  }
  row.setup_ms = Median(setup);
  row.upload_ms = Median(upload);
  row.solve_ms = Median(solve);
  row.download_ms = Median(download);
  row.relabel_ms = Median(relabel);
  row.push_ms = Median(push);
  row.stats = engine.stats();
  const TrafficModel m = Traffic(graph.topology(), engine.tuning());
  row.traffic_gb = (m.push_visit * static_cast<double>(row.stats.tile_visits) +
                    m.bfs_visit * static_cast<double>(row.stats.bfs_tile_visits) +
                    m.relabel * static_cast<double>(row.stats.global_relabels)) / 1e9;
  return row;
}

// Re-solve after an edit of the terminal weights, edits accumulating: "1%" gives 1% of the pixels,
// anywhere, the weights of another random pixel (realistic values); "stroke" forces a disc of
// side/32 pixels radius to one label (a brush stroke, as in the binary suite).
struct ResolveRow {
  int size = 0;
  std::string solver, edit;
  std::int64_t changed = 0;
  double resolve_ms = -1, resolve_transfer_ms = -1, fresh_ms = -1;
  double host_ms = -1;  // the engine's host work before the device starts (reading the edit, ordering repairs)
  // The engine's phases added up (host work + transfers + solve), for the re-solve and the fresh solve.
  double resolve_total_ms = -1, fresh_total_ms = -1;
  // What a caller waits for (wall clock): the re-solve's whole StGraph::maxflow() call (the engine, the
  // cut's labelling, its capacity check, the graph's copy of it), and the fresh engine's Solve() call.
  double resolve_call_ms = -1, fresh_call_ms = -1;
  Energy flow = -1;
  int runs = 0, local_runs = 0;  // timed re-solves, and those the certificate closed without a global relabel
  std::string last_message;      // the engine's message of the last re-solve
};

ResolveRow TimeResolve(const std::string& solver, const std::string& edit, const StGraph& original, int size,
                       int repeat, const std::function<std::unique_ptr<MaxFlowEngine>()>& make_fresh) {
  ResolveRow row;
  row.size = size;
  row.solver = solver;
  row.edit = edit;
  StGraph graph(original.topology());
  for (NodeId v = 0; v < original.num_nodes(); ++v) graph.add_tweights(v, original.source_cap(v), original.sink_cap(v));
  original.topology().ForEachEdge(
      [&](EdgeId e, NodeId, NodeId) { graph.add_to_edge_slot(e, original.edge_cap(e), original.edge_rev_cap(e)); });
  const Result first = graph.maxflow(solver);
  if (!first.ok) throw Error(solver + ": " + first.message);
  std::unique_ptr<MaxFlowEngine> fresh_engine = make_fresh();
  EditStream stream(0x2545F4914F6CDD1Dull * static_cast<std::uint64_t>(size));
  const NodeId n = graph.num_nodes();
  const int side = graph.topology().width(), radius = std::max(1, side / 32);
  std::vector<double> resolve, transfer, fresh, host, resolve_total, fresh_total, resolve_call, fresh_call;
  for (int k = -1; k < repeat; ++k) {
    row.changed = 0;
    if (edit == "1%") {
      row.changed = std::max<std::int64_t>(1, n / 100);
      for (std::int64_t i = 0; i < row.changed; ++i) {
        const auto v = static_cast<NodeId>(stream.Next(n)), donor = static_cast<NodeId>(stream.Next(n));
        graph.set_tweights(v, original.source_cap(donor), original.sink_cap(donor));
      }
    } else {
      const int cx = static_cast<int>(stream.Next(side)), cy = static_cast<int>(stream.Next(graph.topology().height()));
      row.changed = PaintStroke(&graph, cx, cy, radius, k % 2 == 0);
    }
    auto call_start = std::chrono::steady_clock::now();
    const Result again = graph.maxflow(solver);  // from the residual graph
    const double again_call_ms = app::MsSince(call_start);
    if (!again.ok) throw Error(solver + " re-solve: " + again.message);
    Result scratch;
    call_start = std::chrono::steady_clock::now();
    fresh_engine->Solve(graph, &scratch);
    const double scratch_call_ms = app::MsSince(call_start);
    CheckResolvedFlow(solver, again.flow, scratch, graph);
    row.flow = again.flow;
    if (k < 0) continue;  // warm-up
    ++row.runs;
    row.last_message = again.message;
    if (again.message.rfind("maximum flow found by local repairs", 0) == 0) ++row.local_runs;
    resolve.push_back(again.timings.solve_ms);
    transfer.push_back(std::max(0.0, again.timings.transfer_ms));
    host.push_back(std::max(0.0, again.timings.setup_ms));
    fresh.push_back(scratch.timings.solve_ms);
    resolve_total.push_back(resolve.back() + transfer.back() + host.back());
    resolve_call.push_back(again_call_ms);
    fresh_call.push_back(scratch_call_ms);
    fresh_total.push_back(scratch.timings.solve_ms + std::max(0.0, scratch.timings.transfer_ms) +
                         std::max(0.0, scratch.timings.setup_ms));
  }
  row.resolve_ms = Median(resolve);
  row.resolve_transfer_ms = Median(transfer);
  row.host_ms = Median(host);
  row.fresh_ms = Median(fresh);
  row.resolve_total_ms = Median(resolve_total);
  row.fresh_total_ms = Median(fresh_total);
  row.resolve_call_ms = Median(resolve_call);
  row.fresh_call_ms = Median(fresh_call);
  return row;
}

int RunPushRelabel(const BenchOptions& options) {
  const std::vector<int> sizes = SceneSides(options, {128, 256}, {1024, 4096});
  const int repeat = Repeats(options);
  std::vector<std::string> wanted = SplitNames(options.solvers);
  if (wanted.empty()) wanted = {"cpu-bk", "cuda-pr"};
  for (const std::string& name : wanted)
    if (name != "cpu-bk" && name != "cuda-pr" && name != "tbb-pr")
      throw Error("--solvers: the pushrelabel suite runs cpu-bk, cuda-pr and tbb-pr (got '" + name + "')");
  auto want = [&](const char* name) { return std::find(wanted.begin(), wanted.end(), name) != wanted.end(); };
  std::vector<PushRelabelTuning> tunings;
  for (const std::string& t : options.tunings) {
    PushRelabelTuning tuning;
    tuning.Parse(t);
    tunings.push_back(tuning);
  }

  std::string why_no_gpu;
  const bool gpu = want("cuda-pr") && Registry::Global().IsAvailable("cuda-pr", &why_no_gpu);
  if (want("cuda-pr") && !gpu) std::printf("# cuda-pr skipped: %s\n", why_no_gpu.c_str());
  double bandwidth_gbs = -1;
#if MRF_HAVE_CUDA
  if (gpu) {
    bandwidth_gbs = MeasureCudaCopyBandwidth(std::size_t{1} << 30, 9);
    std::printf("# device: %s; device-to-device copy of 1 GiB: %.0f GB/s (bytes read + written, median of 9)\n",
                CudaDeviceDescription().c_str(), bandwidth_gbs);
  }
#endif
  const PushRelabelTuning defaults = PushRelabelTuning::FromEnvironment();
  std::printf("# scene: MakeSyntheticScene(side, side, 1), 4-connected, costs x100 (as the binary suite)\n"
              "# default tuning: %s\n"
              "# times in ms, medians of %d runs after one warm-up; GPU phases from CUDA events; x_bk = cpu-bk solve /\n"
              "# this solve; cyc = global relabels (cycles), bfs = BFS rounds, sweeps = push tile visits / tiles,\n"
              "# it/v = local iterations per visit, launch/sync = kernel launches and host waits per solve,\n"
              "# GB = device bytes the work moves (model: each value once per visit), GB/s = GB / solve_ms\n",
              defaults.Describe().c_str(), repeat);
  std::printf("%5s %-8s %-3s %8s %8s %8s %8s %7s %7s %7s %4s %5s %7s %5s %6s %5s %7s %7s %6s %14s\n", "size",
              "solver", "cfg", "setup", "upload", "solve", "download", "relabel", "push", "x_bk", "cyc", "bfs",
              "sweeps", "it/v", "launch", "sync", "GB", "GB/s", "%bw", "flow");
  std::vector<PrRow> rows;
  std::vector<ResolveRow> resolves;
  for (int side : sizes) {
    app::Progress("mrf-bench", "pushrelabel: building the " + std::to_string(side) + "x" + std::to_string(side) + " scene");
    const SyntheticScene scene = MakeSyntheticScene(side, side, 1);
    const StGraph graph = SceneGraph(scene.model);
    // cpu-bk: the baseline, fresh engine per run (as the binary suite).
    std::vector<double> bk_times;
    Energy flow = -1;
    const SolverEntry* bk = Registry::Global().Find("cpu-bk");
    for (int k = 0; k < repeat; ++k) {
      app::Progress("mrf-bench", "pushrelabel: " + std::to_string(side) + ": cpu-bk run " + std::to_string(k + 1));
      Result r;
      bk->make_engine()->Solve(graph, &r);
      bk_times.push_back(r.timings.solve_ms);
      flow = r.flow + graph.constant();
    }
    const double bk_ms = Median(bk_times);
    if (want("cpu-bk"))
      std::printf("%5d %-8s %-3s %8s %8s %8.2f %8s %7s %7s %7.2f %4s %5s %7s %5s %6s %5s %7s %7s %6s %14lld\n", side,
                  "cpu-bk", "", "-", "-", bk_ms, "-", "-", "-", 1.0, "-", "-", "-", "-", "-", "-", "-", "-", "-",
                  static_cast<long long>(flow));
    std::vector<std::pair<std::string, std::unique_ptr<PushRelabelEngine>>> engines;
#if MRF_HAVE_CUDA
    if (gpu) {
      engines.emplace_back("cuda-pr", MakeCudaPushRelabelEngine(defaults));
      for (const PushRelabelTuning& t : tunings) engines.emplace_back("cuda-pr", MakeCudaPushRelabelEngine(t));
    }
#endif
    if (want("tbb-pr")) engines.emplace_back("tbb-pr", MakeTbbPushRelabelEngine(defaults));
    int config = 0;
    for (auto& [name, engine] : engines) {
      app::Progress("mrf-bench", "pushrelabel: " + std::to_string(side) + ": " + name + " (" +
                                     engine->tuning().Describe() + ")");
      const int runs = name == "tbb-pr" ? std::min(repeat, 3) : repeat;
      PrRow row = TimeEngine(*engine, name, graph, side, runs, flow);
      const double tiles = std::ceil(side / 32.0) * std::ceil(side / static_cast<double>(engine->tuning().tile_y));
      const PushRelabelStats& st = row.stats;
      const double gbs = row.traffic_gb / (row.solve_ms * 1e-3);
      const std::string cfg = name == "cuda-pr" ? std::to_string(config++) : "";
      std::printf("%5d %-8s %-3s %8.2f %8.2f %8.3f %8.2f %7.3f %7.3f %7.1f %4lld %5lld %7.2f %5.1f %6lld %5lld %7.3f %7s %6s %14lld\n",
                  side, name.c_str(), cfg.c_str(), row.setup_ms, row.upload_ms, row.solve_ms, row.download_ms,
                  row.relabel_ms, row.push_ms, bk_ms / row.solve_ms, static_cast<long long>(st.global_relabels),
                  static_cast<long long>(st.bfs_rounds), st.tile_visits / tiles,
                  st.tile_visits ? static_cast<double>(st.tile_iterations) / st.tile_visits : 0.0,
                  static_cast<long long>(st.launches), static_cast<long long>(st.host_syncs), row.traffic_gb,
                  Cell(gbs, "%.0f").c_str(),
                  name == "cuda-pr" && bandwidth_gbs > 0 ? Cell(100.0 * gbs / bandwidth_gbs, "%.1f").c_str() : "-",
                  static_cast<long long>(row.flow));
      std::fflush(stdout);
      rows.push_back(row);
    }
    // Re-solve after 1% of the terminal weights change.
    std::vector<std::string> dynamic;
    if (gpu) dynamic.push_back("cuda-pr");
    if (want("tbb-pr")) dynamic.push_back("tbb-pr");
    if (want("cpu-bk")) dynamic.push_back("cpu-bk");
    for (const std::string& name : dynamic) {
      app::Progress("mrf-bench", "pushrelabel: " + std::to_string(side) + ": " + name + " re-solves");
      const SolverEntry* entry = Registry::Global().Find(name);
      for (const char* edit : {"1%", "stroke"}) {
        resolves.push_back(TimeResolve(name, edit, graph, side, name == "tbb-pr" ? std::min(repeat, 3) : repeat,
                                       [entry] { return entry->make_engine(); }));
        const ResolveRow& r = resolves.back();
        std::printf("%5d %-8s re-solve after a %s edit (%lld pixels): %.3f ms (+%.3f ms transfer, %.3f ms host), "
                    "fresh %.3f ms, %.1fx, %d of %d certified locally\n#   last: %s\n",
                    r.size, r.solver.c_str(), edit, static_cast<long long>(r.changed), r.resolve_ms,
                    r.resolve_transfer_ms, r.host_ms, r.fresh_ms, r.fresh_ms / r.resolve_ms, r.local_runs, r.runs,
                    r.last_message.c_str());
        std::fflush(stdout);
      }
    }
  }
  if (!tunings.empty()) {
    std::printf("\n# cuda-pr configurations (cfg column):\n#   0: %s\n", defaults.Describe().c_str());
    for (std::size_t i = 0; i < tunings.size(); ++i)
      std::printf("#   %zu: %s  [--tuning %s]\n", i + 1, tunings[i].Describe().c_str(), options.tunings[i].c_str());
  }
  if (!resolves.empty()) {
    std::printf("\n# re-solve after an edit of terminal weights, edits accumulating: '1%%' = 1%% of the pixels,\n"
                "# anywhere, get the weights of another random pixel; 'stroke' = a disc of side/32 radius forced to\n"
                "# one label; fresh = solving the edited graph from scratch (same engine kind, workspace warm);\n"
                "# solve times only (GPU: device time; transfer shown apart); host_ms = the engine's work on the\n"
                "# host before that (reading the edit, ordering repairs); local = timed re-solves that the\n"
                "# optimality certificate closed without a global relabel, after local repairs or after fills,\n"
                "# push rounds and settling (the others went on with relabels; cpu-bk: no local path);\n"
                "# total = the engine's phases added up: host work + transfers + solve (fresh: its setup, upload,\n"
                "# solve and download; what surrounds them, such as the cut's capacity, is left out), medians;\n"
                "# total_x = fresh total / re-solve total; call = wall clock of the whole call a user waits for: the\n"
                "# re-solve's StGraph::maxflow() (with the labelling, its capacity check and the graph's copy of it)\n"
                "# and the fresh engine's Solve() (with its labelling); call_x = fresh call / re-solve call\n");
    std::printf("%5s %-8s %-7s %9s %11s %9s %8s %10s %8s %9s %10s %7s %8s %9s %6s %7s %14s\n", "size", "solver", "edit",
                "changed", "resolve_ms", "xfer_ms", "host_ms", "fresh_ms", "speedup", "total_ms", "fresh_tot", "total_x",
                "call_ms", "fresh_call", "call_x", "local", "flow");
    for (const ResolveRow& r : resolves)
      std::printf("%5d %-8s %-7s %9lld %11.3f %9.3f %8.3f %10.3f %8.1f %9.3f %10.3f %7.1f %8.2f %9.2f %6.1f %7s %14lld\n",
                  r.size, r.solver.c_str(), r.edit.c_str(), static_cast<long long>(r.changed), r.resolve_ms,
                  r.resolve_transfer_ms, r.host_ms, r.fresh_ms, r.fresh_ms / r.resolve_ms, r.resolve_total_ms,
                  r.fresh_total_ms, r.fresh_total_ms / r.resolve_total_ms, r.resolve_call_ms, r.fresh_call_ms,
                  r.fresh_call_ms / r.resolve_call_ms,
                  (std::to_string(r.local_runs) + "/" + std::to_string(r.runs)).c_str(), static_cast<long long>(r.flow));
  }
  if (!options.json_path.empty()) {
    std::vector<std::string> objects;
    for (const PrRow& r : rows) {
      std::ostringstream out;
      out << "{\"suite\": \"pushrelabel\", \"size\": " << r.size << ", \"solver\": \"" << r.solver
          << "\", \"tuning\": \"" << r.tuning << "\", \"setup_ms\": " << r.setup_ms
          << ", \"upload_ms\": " << r.upload_ms << ", \"solve_ms\": " << r.solve_ms
          << ", \"download_ms\": " << r.download_ms << ", \"relabel_ms\": " << r.relabel_ms
          << ", \"push_ms\": " << r.push_ms << ", \"global_relabels\": " << r.stats.global_relabels
          << ", \"bfs_rounds\": " << r.stats.bfs_rounds << ", \"push_rounds\": " << r.stats.push_rounds
          << ", \"tile_visits\": " << r.stats.tile_visits << ", \"tile_iterations\": " << r.stats.tile_iterations
          << ", \"bfs_tile_visits\": " << r.stats.bfs_tile_visits << ", \"launches\": " << r.stats.launches
          << ", \"host_syncs\": " << r.stats.host_syncs << ", \"traffic_gb\": " << r.traffic_gb
          << ", \"device_copy_gbs\": " << bandwidth_gbs << ", \"flow\": " << r.flow << "}";
      objects.push_back(out.str());
    }
    for (const ResolveRow& r : resolves) {
      std::ostringstream out;
      out << "{\"suite\": \"pushrelabel-resolve\", \"size\": " << r.size << ", \"solver\": \"" << r.solver
          << "\", \"edit\": \"" << r.edit << "\", \"changed\": " << r.changed << ", \"resolve_ms\": " << r.resolve_ms
          << ", \"resolve_transfer_ms\": " << r.resolve_transfer_ms << ", \"host_ms\": " << r.host_ms
          << ", \"fresh_ms\": " << r.fresh_ms << ", \"resolve_total_ms\": " << r.resolve_total_ms
          << ", \"fresh_total_ms\": " << r.fresh_total_ms << ", \"resolve_call_ms\": " << r.resolve_call_ms
          << ", \"fresh_call_ms\": " << r.fresh_call_ms
          << ", \"local_runs\": " << r.local_runs << ", \"runs\": " << r.runs
          << ", \"flow\": " << r.flow << "}";
      objects.push_back(out.str());
    }
    WriteJsonRows(options.json_path, objects);
  }
  return rows.empty() && resolves.empty() ? kNothingMeasured : 0;
}

const SuiteRegistration registration{
    {"pushrelabel",
     "cuda-pr (and tbb-pr with --solvers) against cpu-bk on the synthetic scene (default 1024 and 4096): upload / "
     "solve / download split, work counters and memory traffic, re-solve after 1% terminal changes, --tuning sweeps",
     &RunPushRelabel}};

}  // namespace
}  // namespace mrf::bench
