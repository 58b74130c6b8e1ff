// mrf-bench --suite bp: belief propagation on Tsukuba (16 labels) and Aloe (1282 x 1110, 230 labels).
// GPU times are medians of CUDA-event timings after warm-up; the CPU engine (tbb-bp) runs the same
// configurations in the same run, and every ratio is taken against it or against one thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"
#include "energies/stereo.h"
#include "mrf-bench/suite.h"
#include "mrf/device.h"
#include "mrf/io/image.h"
#include "mrf/threads.h"

namespace mrf::bench {
namespace {

using bp::Config;
using bp::Schedule;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double TimeMs(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Config MakeConfig(Schedule s, int iterations, int inner, bool c2f, int tile = 0, int threads = 0) {
  Config c;
  c.schedule = s;
  c.iterations = iterations;
  c.inner_iterations = inner;
  c.coarse_to_fine = c2f;
  c.tile_size = tile;
  c.num_threads = threads;
  return c;
}

std::string Describe(const Config& c) {
  std::string s = bp::ToString(c.schedule);
  s += " " + std::to_string(c.iterations) + "x" + std::to_string(c.inner_iterations);
  if (c.coarse_to_fine) s += " c2f";
  if (c.tile_size) s += " tile " + std::to_string(c.tile_size);
  return s;
}

struct Dataset {
  std::string name;
  Model model;
  Image truth;
  double truth_scale = 1;
};

std::string FindFile(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates)
    if (std::filesystem::exists(c)) return c;
  return "";
}

bool LoadTsukuba(const BenchOptions& o, Dataset* d) {
  const std::string dir = o.data_dir + "/middlebury/";
  if (!std::filesystem::exists(dir + "tsukuba-imL.png")) return false;
  d->name = "Tsukuba";
  d->model = BuildStereoModel(LoadImage(dir + "tsukuba-imL.png", 3), LoadImage(dir + "tsukuba-imR.png", 3),
                              StereoParams::Preset("tsukuba"));
  d->truth = LoadGreyValues(dir + "tsukuba-truedispL.png");
  d->truth_scale = 16;
  return true;
}

// Aloe: BT absolute truncated at 16 per channel, lambda 20, linear truncated at 2, gradient weights
// (g 8, penalty 2), 230 labels (ground truth reaches 211).
bool LoadAloe(const BenchOptions& o, Dataset* d) {
  const std::string left = FindFile({o.data_dir + "/aloe/aloeL.jpg", "/usr/share/doc/opencv-doc/examples/data/aloeL.jpg"});
  if (left.empty()) return false;
  const std::string dir = std::filesystem::path(left).parent_path().string() + "/";
  d->name = "Aloe";
  StereoParams params = StereoParams::Preset("tsukuba");
  params.num_labels = 230;
  params.truncation = 16;
  d->model = BuildStereoModel(LoadImage(dir + "aloeL.jpg", 3), LoadImage(dir + "aloeR.jpg", 3), params);
  d->truth = LoadGreyValues(dir + "aloeGT.png");
  d->truth_scale = 1;
  return true;
}

// Bytes one outer iteration of the tiled schedule must move at least: every tile is visited twice and
// reads its unary costs (`unary_bytes` a pixel) and edge scales, border messages (`padded` 32-bit labels)
// cross once each way, labels are written once.
double TiledBytes(const bp::Problem& p, int tile, double unary_bytes, int padded) {
  const bp::TileGrid g = bp::TileGrid::Make(p.width, p.height, tile);
  const double n = p.num_nodes();
  const double borders = 2.0 * ((g.tiles_x - 1.0) * p.height + (g.tiles_y - 1.0) * p.width) * padded * 4;
  return 2 * (n * unary_bytes + 2 * n * 4) + 2 * borders + n * 4;
}

void Row(const char* a, const std::string& b, double ms, double energy, double bad_percent, const std::string& extra) {
  std::printf("| %-10s | %-34s | %10.3f | %10.0f | %6.2f%% | %s\n", a, b.c_str(), ms, energy, bad_percent, extra.c_str());
}

struct GpuVariant {
  bp::CudaKernel kernel;
  bp::CudaLaunch launch;
  int tile;  // 0: automatic
};

std::string Name(const GpuVariant& v) {
  return std::string(bp::ToString(v.kernel)) + " " + bp::ToString(v.launch);
}

int RunBp(const BenchOptions& o) {
  std::vector<Dataset> sets(2);
  if (!LoadTsukuba(o, &sets[0])) throw Error("bp suite: Tsukuba not found under " + o.data_dir + "/middlebury");
  const bool aloe = !o.quick && LoadAloe(o, &sets[1]);
  if (!aloe) sets.pop_back();
  const bool gpu = CudaDeviceCount() > 0;
  const int repeat = std::max(o.repeat, 3);
  // The threads this run may use: every core, or --threads.
  const unsigned cores = static_cast<unsigned>(ThreadsFor(0));
  std::printf("CPU threads available: %u; GPU: %s\n", cores, gpu ? CudaDeviceDescription().c_str() : "none");
  double copy_gbs = 0;
  if (gpu) {
    copy_gbs = bp::CudaDeviceCopyGBs();
    std::printf("device-to-device copy: %.0f GB/s (read + write, median of 9 copies of 256 MiB); SM clock %.0f MHz\n",
                copy_gbs, bp::CudaMeasureSmClockMHz());
  }

  for (const Dataset& d : sets) {
    const bp::Problem p = bp::PrepareProblem(d.model);
    const int tile = bp::AutoTileSize(p.num_labels, p.kind);
    const bool tsukuba = d.name == "Tsukuba";
    std::printf("\n### %s: %dx%d, %d labels, automatic tile %d\n", d.name.c_str(), p.width, p.height, p.num_labels, tile);
    std::printf("| device     | configuration                      | ms (median)| energy     | bad px  | notes\n");
    std::printf("|---|---|---|---|---|---|\n");
    auto bad_rate = [&](const Labeling& l) { return BadPixelPercent(l, d.truth, d.truth_scale); };
    // Median of `reps` timings of `iterations` iterations after `warm` warm-up runs; the labels of one more run.
    auto time_gpu = [&](bp::CudaRunner& runner, int iterations, int warm, int reps, std::vector<double>* all) {
      for (int w = 0; w < warm; ++w) runner.TimeIterations(iterations);
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) ms.push_back(runner.TimeIterations(iterations));
      if (all) *all = ms;
      return Median(ms);
    };

    // ---- GPU: tile kernels and launch modes on 1 outer x 1 inner -------------------------------------
    double gpu_ms_1x1 = 0;
    std::vector<Config> targets;
    if (tsukuba)
      targets = {MakeConfig(Schedule::kTiled, 1, 2, true),     MakeConfig(Schedule::kTiled, 2, 1, true),
                 MakeConfig(Schedule::kTiled, 2, 2, true),     MakeConfig(Schedule::kTiled, 2, 2, true, 16),
                 MakeConfig(Schedule::kTiled, 2, 2, true, 32), MakeConfig(Schedule::kTiled, 3, 2, true),
                 MakeConfig(Schedule::kTiled, 8, 4, false)};
    else
      targets = {MakeConfig(Schedule::kTiled, 2, 2, true)};
    if (gpu) {
      std::vector<GpuVariant> variants;
      for (bp::CudaLaunch l : {bp::CudaLaunch::kSplit, bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kCooperative,
                               bp::CudaLaunch::kGraph, bp::CudaLaunch::kPerDiagonal})
        variants.push_back({bp::CudaKernel::kFast, l, 0});
      for (bp::CudaLaunch l : {bp::CudaLaunch::kGraph, bp::CudaLaunch::kPerDiagonal, bp::CudaLaunch::kCooperative})
        variants.push_back({bp::CudaKernel::kGeneral, l, 0});
      if (tsukuba)  // other tile sides, every launch of the fast kernel
        for (int side : {16, 32})
          for (bp::CudaLaunch l : {bp::CudaLaunch::kSplit, bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kCooperative,
                                   bp::CudaLaunch::kGraph, bp::CudaLaunch::kPerDiagonal})
            variants.push_back({bp::CudaKernel::kFast, l, side});
      double best = 1e30;
      for (const GpuVariant& v : variants) {
        bp::CudaTuning t;
        t.launch = v.launch;
        t.kernel = v.kernel;
        const Config base = MakeConfig(Schedule::kTiled, 1, 1, false, v.tile);
        try {
          bp::CudaRunner runner(p, base, t);
          std::vector<double> ms;
          const double med = time_gpu(runner, 1, 3, std::max(repeat, 21), &ms);
          const bp::RunOutput out = runner.Run({}, false);
          const bool fast = runner.uses_fast_kernel();
          const int padded = fast ? 2 * bp::fast::FastSupport(p.num_labels, p.kind, p.truncation, p.max_unary_spread,
                                                              p.max_message, 0).words
                                  : bp::PaddedLabels(p.num_labels, bp::DefaultLabelsPerLane(p.num_labels));
          const double unary_bytes = fast ? 2.0 * padded : 4.0 * padded;
          const double gbs = TiledBytes(p, v.tile ? v.tile : tile, unary_bytes, padded) / (med * 1e-3) / 1e9;
          char note[400];
          std::snprintf(note, sizeof note, "%s; %.1f GB/s = %.2f%% of copy; min %.3f max %.3f", runner.Describe().c_str(),
                        gbs, 100 * gbs / copy_gbs, *std::min_element(ms.begin(), ms.end()),
                        *std::max_element(ms.begin(), ms.end()));
          Row("cuda-bp", Describe(base) + " " + Name(v), med, out.best_energy, bad_rate(out.best_labels), note);
          if (v.tile == 0) best = std::min(best, med);
        } catch (const Error& e) {
          std::printf("| cuda-bp    | %s %s | not run: %s\n", Describe(base).c_str(), Name(v).c_str(), e.what());
        }
      }
      gpu_ms_1x1 = best;
      // Small tile sides (automatic kernel and launch).
      if (tsukuba)
        for (int side : {8, 12}) {
          bp::CudaRunner runner(p, MakeConfig(Schedule::kTiled, 1, 1, false, side));
          const double med = time_gpu(runner, 1, 3, repeat, nullptr);
          const bp::RunOutput out = runner.Run({}, false);
          Row("cuda-bp", "tiled 1x1 tile " + std::to_string(side), med, out.best_energy, bad_rate(out.best_labels),
              runner.Describe());
        }
      // Configurations run longer, towards the reference BP-M energy (automatic kernel and launch, and the
      // general kernel on one of them for comparison).
      for (const Config& c : targets) {
        for (bp::CudaKernel kernel : {bp::CudaKernel::kAuto, bp::CudaKernel::kGeneral}) {
          if (kernel == bp::CudaKernel::kGeneral && !(c.iterations == 2 && c.inner_iterations == 2)) continue;
          bp::CudaTuning t;
          t.kernel = kernel;
          const std::string name = Describe(c) + (kernel == bp::CudaKernel::kGeneral ? " general" : "");
          try {
            bp::CudaRunner runner(p, c, t);
            const double med = time_gpu(runner, c.iterations, 2, repeat, nullptr);
            const bp::RunOutput out = runner.Run({}, false);
            std::string note = runner.uses_fast_kernel() ? "fast kernel" : "general kernel";
            if (tsukuba && out.best_energy <= 406896) note += "; <= 406,896 (reference BP-M)";
            Row("cuda-bp", name, med, out.best_energy, bad_rate(out.best_labels), note);
          } catch (const Error& e) {  // e.g. a tile the general kernel cannot hold
            std::printf("| cuda-bp    | %s | not run: %s\n", name.c_str(), e.what());
          }
        }
      }
      // The plain synchronous GPU BP, for comparison.
      for (int iterations : {1, 50}) {
        if (!tsukuba && iterations > 1) continue;
        const Config c = MakeConfig(Schedule::kSync, iterations, 1, false);
        bp::CudaRunner runner(p, c);
        const double med = time_gpu(runner, iterations, 1, repeat, nullptr);
        const bp::RunOutput out = runner.Run({}, false);
        Row("cuda-bp", Describe(c) + " (plain)", med, out.best_energy, bad_rate(out.best_labels),
            "one thread per message, global memory");
      }
    }

    // ---- CPU: the same configurations with tbb-bp ---------------------------------------------
    const int cpu_repeat = tsukuba ? std::min(repeat, 5) : 1;
    auto cpu_time = [&](const Config& c, bp::RunOutput* out) {
      std::vector<double> ms;
      for (int r = 0; r < cpu_repeat; ++r) ms.push_back(TimeMs([&] { *out = bp::RunCpu(p, c); }));
      return Median(ms);
    };
    {
      bp::RunOutput out;
      const double ms = cpu_time(MakeConfig(Schedule::kTiled, 1, 1, false, 0, static_cast<int>(cores)), &out);
      char note[120];
      std::snprintf(note, sizeof note, "%u threads%s", cores,
                    gpu ? (", GPU " + std::to_string(ms / gpu_ms_1x1) + "x faster").c_str() : "");
      Row("tbb-bp", "tiled 1x1", ms, out.best_energy, bad_rate(out.best_labels), note);
    }
    if (tsukuba) {
      for (const Config& t : targets) {
        Config c = t;
        c.num_threads = static_cast<int>(cores);
        bp::RunOutput out;
        const double ms = cpu_time(c, &out);
        Row("tbb-bp", Describe(c), ms, out.best_energy, bad_rate(out.best_labels), std::to_string(cores) + " threads");
      }
      // Thread scaling: 1 and 2 threads (and all), BP-M and tiled; never more than the run may use.
      for (const Config& t : {MakeConfig(Schedule::kBpm, 5, 1, false), MakeConfig(Schedule::kTiled, 2, 2, false)}) {
        double one = 0;
        std::vector<int> counts = {1};
        if (cores >= 2) counts.push_back(2);
        if (cores > 2) counts.push_back(static_cast<int>(cores));
        for (int threads : counts) {
          Config c = t;
          c.num_threads = threads;
          bp::RunOutput out;
          const double ms = cpu_time(c, &out);
          if (threads == 1) one = ms;
          char note[80];
          std::snprintf(note, sizeof note, "%d thread%s, %.2fx vs 1 thread", threads, threads > 1 ? "s" : "", one / ms);
          Row("tbb-bp", Describe(c), ms, out.best_energy, bad_rate(out.best_labels), note);
        }
      }
    }
  }
  return 0;
}

SuiteRegistration registration{{"bp", "belief propagation: cuda-bp vs tbb-bp on Tsukuba and Aloe", &RunBp}};

}  // namespace
}  // namespace mrf::bench
