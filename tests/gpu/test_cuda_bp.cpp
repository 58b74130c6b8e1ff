// CUDA belief propagation against the TBB engine: the same labels, border messages and energies, bit for
// bit, on random problems of several label counts, sizes that are not multiples of the tile, every
// pairwise family and per-edge weights, with both tile kernels and every launch mode; bad inputs,
// problems too large for the device and injected faults give a clear error (and `auto` falls back).
// Tests named *Small* are what compute-sanitizer runs.
#include <gtest/gtest.h>
#include <tbb/info.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

#include "backends/common/bp_engine.h"
#include "energies/stereo.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

using bp::Config;
using bp::Problem;
using bp::Schedule;

struct Family {
  const char* name;
  Pairwise pairwise;
};

std::vector<Family> Families(std::mt19937_64& rng, Label L, bool with_table = true) {
  std::vector<Family> all = {
      {"potts", {PairwiseKind::kPotts, 1, kMaxCost, {}}},
      {"linear-2", {PairwiseKind::kTruncatedLinear, 1, 2, {}}},
      {"linear-untruncated", {PairwiseKind::kTruncatedLinear, 1, kMaxCost, {}}},
      {"quadratic-window", {PairwiseKind::kTruncatedQuadratic, 1, 9, {}}},
      {"quadratic-envelope", {PairwiseKind::kTruncatedQuadratic, 1, 100000, {}}},
  };
  if (with_table) {
    Pairwise t{PairwiseKind::kTable, 1, kMaxCost, {}};
    std::uniform_int_distribution<Cost> entry(-5, 30);
    t.table.resize(static_cast<std::size_t>(L) * L);
    for (Cost& c : t.table) c = entry(rng);
    all.push_back({"table", t});
  }
  return all;
}

Model RandomGrid(std::mt19937_64& rng, int w, int h, Label L, const Pairwise& pw) {
  Model m = test::RandomModel(rng, Topology::Grid2D(w, h, 4), L, 80, pw, 4);
  m.pairwise.lambda = 3;
  return m;
}

Config Tiled(int iterations, int tile, int inner, bool c2f = false) {
  Config c;
  c.schedule = Schedule::kTiled;
  c.iterations = iterations;
  c.tile_size = tile;
  c.inner_iterations = inner;
  c.coarse_to_fine = c2f;
  return c;
}

using test::ScopedEnv;

void ExpectEqualRuns(const bp::RunOutput& gpu, const bp::RunOutput& cpu, const Config& config, const std::string& what) {
  EXPECT_EQ(gpu.iterations, cpu.iterations) << what;
  EXPECT_EQ(gpu.converged, cpu.converged) << what;
  EXPECT_EQ(gpu.labels, cpu.labels) << what;
  EXPECT_EQ(gpu.energies, cpu.energies) << what;
  EXPECT_EQ(gpu.best_labels, cpu.best_labels) << what;
  if (config.schedule == Schedule::kTiled) {
    EXPECT_TRUE(gpu.borders == cpu.borders) << what << " (border messages differ)";
  } else {
    EXPECT_TRUE(gpu.messages == cpu.messages) << what << " (messages differ)";
  }
}

// Runs both engines and expects identical labels, energies and messages: the tiled schedule with the
// general kernel and (when it takes the problem) the fast one.
void ExpectSameAsCpu(const Model& m, const Config& config, const std::string& what,
                     bp::CudaLaunch launch = bp::CudaLaunch::kAuto) {
  const Problem p = bp::PrepareProblem(m);
  const bp::RunOutput cpu = bp::RunCpu(p, config);
  for (bp::CudaKernel kernel : {bp::CudaKernel::kGeneral, bp::CudaKernel::kAuto}) {
    if (config.schedule != Schedule::kTiled && kernel == bp::CudaKernel::kGeneral) continue;
    bp::CudaTuning tuning;
    tuning.launch = launch;
    tuning.kernel = kernel;
    if (launch == bp::CudaLaunch::kPipeline && kernel == bp::CudaKernel::kGeneral) continue;
    bp::CudaRunner runner(p, config, tuning);
    if (launch == bp::CudaLaunch::kPipeline && !runner.uses_fast_kernel()) continue;
    // Twice on one runner: a second run must start from the same state as the first (each run clears
    // only what it reads before writing it).
    for (int run = 1; run <= 2; ++run) {
      const bp::RunOutput gpu = runner.Run({}, true, true);
      ExpectEqualRuns(gpu, cpu, config, what + " (" + runner.Describe() + ", run " + std::to_string(run) + ")");
    }
  }
}

// The fast kernel with one launch mode: expects that it runs and equals the CPU.
void ExpectFastSameAsCpu(const Model& m, const Config& config, bp::CudaLaunch launch, const std::string& what,
                         int pipeline_blocks = 0) {
  const Problem p = bp::PrepareProblem(m);
  const bp::RunOutput cpu = bp::RunCpu(p, config);
  bp::CudaTuning tuning;
  tuning.launch = launch;
  tuning.kernel = bp::CudaKernel::kFast;
  tuning.pipeline_blocks = pipeline_blocks;
  bp::CudaRunner runner(p, config, tuning);
  ASSERT_TRUE(runner.uses_fast_kernel()) << what;
  const bp::RunOutput gpu = runner.Run({}, true, true);
  ExpectEqualRuns(gpu, cpu, config, what + " (" + runner.Describe() + ")");
}

// Solves with cuda-bp and with tbb-bp through the registry, the same options otherwise, and expects the same
// labels, energy and per-iteration energies. Returns cuda-bp's result.
Result ExpectCudaBpEqualsTbbBp(const Model& m, SolveOptions o) {
  o.solver = "cuda-bp";
  const Result gpu = Solve(m, o);
  o.solver = "tbb-bp";
  const Result cpu = Solve(m, o);
  EXPECT_TRUE(gpu.ok) << gpu.message;
  EXPECT_TRUE(cpu.ok) << cpu.message;
  EXPECT_EQ(gpu.backend_used, "cuda-bp");
  EXPECT_EQ(gpu.labels, cpu.labels);
  EXPECT_EQ(gpu.energy, cpu.energy);
  EXPECT_EQ(gpu.log.size(), cpu.log.size());
  for (std::size_t i = 0; i < std::min(gpu.log.size(), cpu.log.size()); ++i)
    EXPECT_EQ(gpu.log[i].energy, cpu.log[i].energy) << "iteration " << i + 1;
  return gpu;
}

TEST(CudaBp, SmallEqualsCpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(1);
  for (Label L : {3, 16})
    for (const Family& f : Families(rng, L)) {
      const Model m = RandomGrid(rng, 11, 7, L, f.pairwise);
      ExpectSameAsCpu(m, Tiled(2, 4, 2), std::string(f.name) + " L=" + std::to_string(L));
    }
}

TEST(CudaBp, TiledEqualsCpuForManyLabelCountsAndSizes) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(2);
  struct Case { int w, h; Label L; int tile, inner, outer; };
  for (const Case& c : {Case{37, 23, 2, 8, 1, 2}, Case{29, 31, 3, 7, 2, 2}, Case{41, 19, 16, 0, 1, 3},
                        Case{50, 1, 16, 9, 2, 2}, Case{1, 45, 16, 6, 1, 2}, Case{23, 17, 64, 5, 2, 2},
                        Case{13, 9, 256, 4, 1, 2}, Case{3, 2, 5, 1, 3, 2}, Case{20, 14, 16, 24, 2, 2}}) {
    for (const Family& f : Families(rng, c.L, c.L <= 64)) {
      const Model m = RandomGrid(rng, c.w, c.h, c.L, f.pairwise);
      ExpectSameAsCpu(m, Tiled(c.outer, c.tile, c.inner),
                      std::string(f.name) + " " + std::to_string(c.w) + "x" + std::to_string(c.h) + " L=" +
                          std::to_string(c.L) + " tile " + std::to_string(c.tile));
    }
  }
}

TEST(CudaBp, EveryLaunchModeGivesTheSameResult) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(3);
  const Model m = RandomGrid(rng, 45, 33, 16, {PairwiseKind::kTruncatedLinear, 1, 3, {}});
  for (bp::CudaLaunch launch : {bp::CudaLaunch::kPerDiagonal, bp::CudaLaunch::kGraph, bp::CudaLaunch::kCooperative})
    ExpectSameAsCpu(m, Tiled(3, 6, 2), std::string("launch ") + bp::ToString(launch), launch);
}

TEST(CudaBp, LabelsPerLaneDoNotChangeTheResult) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(4);
  const Model m = RandomGrid(rng, 26, 19, 16, {PairwiseKind::kTruncatedLinear, 1, kMaxCost, {}});
  const Problem p = bp::PrepareProblem(m);
  const Config config = Tiled(2, 7, 2);
  const bp::RunOutput cpu = bp::RunCpu(p, config);
  for (int c : {2, 4, 8, 16}) {
    bp::CudaTuning tuning;
    tuning.labels_per_lane = c;
    tuning.kernel = bp::CudaKernel::kGeneral;
    bp::CudaRunner runner(p, config, tuning);
    const bp::RunOutput gpu = runner.Run({}, true, true);
    EXPECT_EQ(gpu.labels, cpu.labels) << c << " labels per lane";
    EXPECT_TRUE(gpu.borders == cpu.borders) << c << " labels per lane";
  }
}

TEST(CudaBp, SyncAndCoarseToFineEqualCpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(5);
  for (const Family& f : Families(rng, 6)) {
    const Model m = RandomGrid(rng, 40, 35, 6, f.pairwise);
    Config sync;
    sync.schedule = Schedule::kSync;
    sync.iterations = 5;
    ExpectSameAsCpu(m, sync, std::string("sync ") + f.name);
    sync.coarse_to_fine = true;
    ExpectSameAsCpu(m, sync, std::string("sync c2f ") + f.name);
    ExpectSameAsCpu(m, Tiled(2, 9, 2, true), std::string("tiled c2f ") + f.name);
  }
}

// The coarse-to-fine levels' costs, summed on the device where CoarseShapes bounds them, equal the host's
// CoarseLevels cost for cost (padding aside), as do those the host builds where the bound gives up; the
// host setup (MRF_BP_CUDA_SETUP=host: one allocation per buffer) holds the same.
TEST(CudaBp, SmallCoarseLevelsSummedOnTheDeviceEqualTheHosts) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(21);
  auto expect_levels = [](const Problem& p, const std::string& what) {
    const std::vector<Problem> levels = bp::CoarseLevels(p);
    for (bool host : {false, true}) {
      bp::CudaTuning tuning;
      tuning.host_setup = host;  // MRF_BP_CUDA_SETUP=host or device
      bp::CudaRunner runner(p, Tiled(2, 0, 2, true), tuning);
      const std::string how = what + (host ? ", built on the host" : ", summed on the device");
      EXPECT_EQ(runner.LevelUnary(0), p.unary) << how;
      for (std::size_t i = 0; i < levels.size(); ++i)
        EXPECT_EQ(runner.LevelUnary(static_cast<int>(i) + 1), levels[i].unary) << how << ", level " << i + 1;
    }
  };
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{16, 16}, {37, 53}, {70, 33}, {131, 17}})
    for (Label L : {3, 6, 20})
      for (const Family& f : Families(rng, L)) {
        const Problem p = bp::PrepareProblem(RandomGrid(rng, w, h, L, f.pairwise));
        const std::string what =
            std::to_string(w) + "x" + std::to_string(h) + ", " + std::to_string(L) + " labels, " + f.name;
        ASSERT_EQ(bp::CoarseShapes(p).size(), bp::CoarseLevels(p).size()) << what;
        ASSERT_FALSE(bp::CoarseShapes(p).empty()) << what;
        expect_levels(p, what);
      }
  // Spreads the bound cannot rule out: the host's levels, and the run still equals the CPU's.
  Model wide = RandomGrid(rng, 30, 30, 3, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  for (int y = 0; y < 30; y += 2)
    for (int x = 0; x < 30; x += 2) wide.unary[static_cast<std::size_t>(y * 30 + x) * 3] = 1 << 29;
  const Problem p = bp::PrepareProblem(wide);
  ASSERT_TRUE(bp::CoarseShapes(p).empty());
  expect_levels(p, "costs near the 32-bit bound");
  bp::CudaRunner from_model(wide, Tiled(2, 0, 2, true));  // falls back to the host's shifted costs and levels
  const std::vector<Problem> levels = bp::CoarseLevels(p);
  EXPECT_EQ(from_model.LevelUnary(0), p.unary);
  for (std::size_t i = 0; i < levels.size(); ++i)
    EXPECT_EQ(from_model.LevelUnary(static_cast<int>(i) + 1), levels[i].unary) << "from the model, level " << i + 1;
  Config sync;
  sync.schedule = Schedule::kSync;
  sync.iterations = 3;
  sync.coarse_to_fine = true;
  ExpectSameAsCpu(wide, sync, "costs near the 32-bit bound");
}

// A runner built from the model (its costs shifted on the device) holds the same costs on every level
// and runs exactly as one built from PrepareProblem (its padded costs uploaded in small pieces), with and
// without coarse-to-fine, with negative costs.
TEST(CudaBp, SmallRunnerFromTheModelEqualsTheRunnerFromItsProblem) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(22);
  std::uniform_int_distribution<Cost> offset(-1000, 1000);
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{37, 53}, {70, 33}})
    for (Label L : {3, 16, 20})
      for (const Family& f : Families(rng, L)) {
        Model m = RandomGrid(rng, w, h, L, f.pairwise);
        for (NodeId node = 0; node < m.num_nodes(); ++node) {  // each node's costs moved by its own offset
          const Cost o = offset(rng);
          for (Label l = 0; l < L; ++l) m.unary[static_cast<std::size_t>(node) * L + l] += o;
        }
        const Problem p = bp::PrepareProblem(m);
        for (bool c2f : {false, true}) {
          const Config config = Tiled(2, 0, 2, c2f);
          const std::string what = std::to_string(w) + "x" + std::to_string(h) + ", " + std::to_string(L) +
                                   " labels, " + f.name + (c2f ? ", coarse-to-fine" : "");
          bp::CudaRunner from_model(m, config);
          bp::CudaTuning pieces;  // padded uploads in many pieces of about 1000 costs
          pieces.upload_piece_costs = 1000;
          bp::CudaRunner from_problem(p, config, pieces);
          const int levels = c2f ? 1 + static_cast<int>(bp::CoarseLevels(p).size()) : 1;
          for (int level = 0; level < levels; ++level)
            EXPECT_EQ(from_model.LevelUnary(level), from_problem.LevelUnary(level)) << what << ", level " << level;
          const bp::RunOutput cpu = bp::RunCpu(p, config);
          ExpectEqualRuns(from_model.Run({}, true, true), cpu, config, what + " (from the model)");
          ExpectEqualRuns(from_problem.Run({}, true, true), cpu, config, what + " (from the problem)");
        }
      }
  // A problem without its costs is for the model's constructor: given on its own, an error, not a crash.
  const Model m = RandomGrid(rng, 20, 20, 4, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  try {
    bp::CudaRunner bare(bp::PrepareProblemWithoutCosts(m), Tiled(1, 0, 1));
    ADD_FAILURE() << "a problem without unary costs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no unary costs"), std::string::npos) << e.what();
  }
}

TEST(CudaBp, SolverMatchesTbbBpThroughTheRegistry) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(6);
  const Model m = RandomGrid(rng, 64, 48, 12, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  SolveOptions o;
  o.bp.schedule = "tiled";
  o.bp.inner_iterations = 2;
  o.max_iterations = 4;
  const Result gpu = ExpectCudaBpEqualsTbbBp(m, o);
  EXPECT_EQ(gpu.energy, EvaluateEnergy(m, gpu.labels).total);
  EXPECT_GE(gpu.timings.transfer_ms, 0);
  EXPECT_GE(gpu.timings.solve_ms, 0);
  std::printf("cuda-bp: %s\n", gpu.message.c_str());
}

// The GPU paths keep the thread limit of their host work too: cuda-bp's setup (the coarse levels, the
// problem's preparation) and cuda-expansion's BP start run in mrf::Solve's arena, so a limit given as
// num_threads or as the caller's own arena holds in every callback (a request above the cores gets the
// cores), and the result reports it. The labels do not depend on the thread count.
TEST(CudaBp, GpuSolversKeepTheThreadLimit) {
  MRF_SKIP_WITHOUT_CUDA();
  const int cores = tbb::info::default_concurrency();
  if (cores < 2) GTEST_SKIP() << "one core: a limit of one thread cannot be told from the default";
  std::mt19937_64 rng(61);
  const Model m = RandomGrid(rng, 96, 72, 10, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  for (const char* solver : {"cuda-bp", "cuda-expansion"}) {
    SolveOptions o;
    o.solver = solver;
    if (std::string(solver) == "cuda-expansion") o.start = StartLabels::kBeliefPropagation;
    const Result unlimited = Solve(m, o);
    ASSERT_TRUE(unlimited.ok) << solver << ": " << unlimited.message;
    EXPECT_EQ(unlimited.backend_used, solver);
    EXPECT_EQ(unlimited.threads, cores) << solver;
    for (const test::ThreadLimit limit :
         {test::ThreadLimit::kNumThreads, test::ThreadLimit::kCallersArena, test::ThreadLimit::kAboveTheCores}) {
      const char* how = test::ToString(limit);
      int most = 0;
      const Result r = test::SolveUnderThreadLimit(m, o, limit, &most);
      ASSERT_TRUE(r.ok) << solver << ", " << how << ": " << r.message;
      EXPECT_EQ(r.backend_used, solver) << how;
      EXPECT_EQ(most, test::ThreadsAllowed(limit)) << solver << ", " << how;
      EXPECT_EQ(r.threads, test::ThreadsAllowed(limit)) << solver << ", " << how;
      EXPECT_EQ(r.labels, unlimited.labels) << solver << ", " << how;
      EXPECT_EQ(r.energy, unlimited.energy) << solver << ", " << how;
    }
  }
}

TEST(CudaBp, BadInputsGiveClearErrors) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(7);
  auto message = [](const Model& m, const Config& c) -> std::string {
    try {
      bp::CudaRunner runner(bp::PrepareProblem(m), c);
      runner.Run();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // More labels than the general kernel takes.
  const Model many = RandomGrid(rng, 5, 4, 300, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  EXPECT_NE(message(many, Tiled(1, 2, 1)).find("at most 256 labels"), std::string::npos) << message(many, Tiled(1, 2, 1));
  // A tile that cannot fit shared memory: a clear error naming the largest tile that fits (64 labels:
  // the general kernel).
  const Model wide = RandomGrid(rng, 40, 40, 64, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  const std::string too_big = message(wide, Tiled(1, 40, 1));
  EXPECT_NE(too_big.find("shared memory"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("at most"), std::string::npos) << too_big;
  // The automatic tile always fits, up to 256 labels, and equals the CPU's.
  const Model max_labels = RandomGrid(rng, 15, 11, 256, {PairwiseKind::kTruncatedLinear, 1, 4, {}});
  ExpectSameAsCpu(max_labels, Tiled(1, 0, 1), "256 labels, automatic tile");
  // BP-M is a CPU schedule.
  Config bpm;
  EXPECT_NE(message(wide, bpm).find("tbb-bp"), std::string::npos);
  // Through Solve: a failed device-specific solve is an error, never a wrong answer.
  SolveOptions o;
  o.solver = "cuda-bp";
  o.bp.schedule = "tiled";
  o.bp.tile_size = 40;
  const Result r = Solve(wide, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("shared memory"), std::string::npos) << r.message;
  // A bad tuning value in the environment is a one-line error naming the variable, not a silent default.
  {
    const ScopedEnv mail("MRF_BP_CUDA_MAIL", "yes");
    o.bp.tile_size = 0;
    const Result bad = Solve(wide, o);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.message.find("MRF_BP_CUDA_MAIL must be 0 or 1"), std::string::npos) << bad.message;
  }
  {
    const ScopedEnv setup("MRF_BP_CUDA_SETUP", "gpu");
    const Result bad = Solve(wide, o);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.message.find("MRF_BP_CUDA_SETUP must be host or device"), std::string::npos) << bad.message;
  }
  {
    const ScopedEnv poison("MRF_CUDA_KEPT_POISON", "yes");
    const Result bad = Solve(wide, o);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.message.find("cuda-bp: MRF_CUDA_KEPT_POISON must be 0 or 1 (got 'yes')"), std::string::npos)
        << bad.message;
  }
}

// ---- The fast kernel -----------------------------------------------------------------------------

std::vector<Pairwise> FastFamilies() {
  return {{PairwiseKind::kPotts, 1, kMaxCost, {}},           {PairwiseKind::kTruncatedLinear, 1, 2, {}},
          {PairwiseKind::kTruncatedLinear, 1, 1, {}},        {PairwiseKind::kTruncatedLinear, 1, kMaxCost, {}},
          {PairwiseKind::kTruncatedLinear, 1, 6, {}},        {PairwiseKind::kTruncatedQuadratic, 1, 9, {}},
          {PairwiseKind::kTruncatedQuadratic, 1, 1, {}}};
}

// Auto on a GPU machine, with a model whose costs pass BP's 32-bit messages and the GPU engines' 32-bit
// capacities: cuda-bp and tbb-bp refuse it, auto turns to swap, cuda-swap refuses it too and cpu-swap
// runs; the result names every step. (On the CPU alone the same chain is tested in test_expansion.)
TEST(CudaBp, AutoWalksFromRefusingSolversToOneThatRuns) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const Pairwise quadratic{PairwiseKind::kTruncatedQuadratic, 200000000, 9, {}};  // 2 x 1.8e9 > 2^31 - 1
  const Model m = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 4, 20, quadratic);
  const Result r = Solve(m, SolveOptions{});
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.backend_used, "cpu-swap") << r.fallback_reason;
  for (const char* step : {"cuda-bp failed: ", "tbb-bp cannot solve this model: ", "cuda-swap failed: ",
                           "ran cpu-swap instead"})
    EXPECT_NE(r.fallback_reason.find(step), std::string::npos) << step << " missing in " << r.fallback_reason;
  SolveOptions swap;
  swap.solver = "cpu-swap";
  const Result reference = Solve(m, swap);
  ASSERT_TRUE(reference.ok) << reference.message;
  EXPECT_EQ(r.labels, reference.labels);
}

TEST(CudaBp, FastKernelEqualsCpuInEveryLaunchMode) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(11);
  struct Case { int w, h; Label L; int tile, inner, outer; };
  for (const Case& c : {Case{23, 17, 16, 6, 1, 2}, Case{29, 13, 3, 7, 2, 2}, Case{19, 21, 32, 5, 2, 2},
                        Case{9, 7, 2, 1, 1, 3}, Case{30, 1, 5, 4, 2, 2}, Case{1, 30, 9, 4, 3, 2},
                        // one inner iteration (the split launch) on 32 labels, one tile row, one tile column
                        Case{19, 21, 32, 5, 1, 2}, Case{30, 1, 5, 4, 1, 2}, Case{1, 30, 9, 4, 1, 2}})
    for (const Pairwise& pw : FastFamilies())
      for (bp::CudaLaunch launch : {bp::CudaLaunch::kPerDiagonal, bp::CudaLaunch::kGraph, bp::CudaLaunch::kCooperative,
                                    bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kSplit}) {
        if (launch == bp::CudaLaunch::kSplit && c.inner != 1) continue;  // one inner iteration only
        const Model m = RandomGrid(rng, c.w, c.h, c.L, pw);
        ExpectFastSameAsCpu(m, Tiled(c.outer, c.tile, c.inner), launch,
                            std::string(ToString(pw.kind)) + " t=" + std::to_string(pw.truncation) + " " +
                                std::to_string(c.w) + "x" + std::to_string(c.h) + " L=" + std::to_string(c.L) + " " +
                                bp::ToString(launch));
      }
}

// A few tiny runs of the fast kernel in every launch mode: what compute-sanitizer's racecheck runs
// (--gtest_filter='*SmallSanitizer*'); memcheck runs every *Small* test.
TEST(CudaBp, SmallSanitizerFastKernel) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(19);
  const Model m = RandomGrid(rng, 23, 17, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  for (bp::CudaLaunch launch : {bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kCooperative,
                                bp::CudaLaunch::kPerDiagonal})
    ExpectFastSameAsCpu(m, Tiled(2, 6, 2), launch, std::string("sanitizer ") + bp::ToString(launch), 2);
  ExpectFastSameAsCpu(m, Tiled(2, 6, 1), bp::CudaLaunch::kSplit, "sanitizer split", 2);
  const Model small = RandomGrid(rng, 11, 9, 5, {PairwiseKind::kTruncatedQuadratic, 1, 9, {}});
  for (bp::CudaLaunch launch : {bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kSplit})
    ExpectFastSameAsCpu(small, Tiled(2, 4, 1), launch, std::string("sanitizer quadratic ") + bp::ToString(launch));
}

TEST(CudaBp, FastPipelineWithBlocksTakingSeveralRowsEqualsCpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(12);
  const Model m = RandomGrid(rng, 37, 41, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  for (int blocks : {1, 2, 3, 5}) {
    for (bp::CudaLaunch launch : {bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows})
      for (int inner : {1, 2})
        ExpectFastSameAsCpu(m, Tiled(3, 4, inner), launch,
                            std::string(bp::ToString(launch)) + " blocks " + std::to_string(blocks) + " inner " +
                                std::to_string(inner),
                            blocks);
    ExpectFastSameAsCpu(m, Tiled(3, 4, 1), bp::CudaLaunch::kSplit, "split blocks " + std::to_string(blocks), blocks);
  }
  // Many tile rows or columns: one block each.
  const Model tall = RandomGrid(rng, 9, 300, 4, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  const Model wide = RandomGrid(rng, 300, 9, 4, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  for (bp::CudaLaunch launch : {bp::CudaLaunch::kPipeline, bp::CudaLaunch::kPipelineRows, bp::CudaLaunch::kSplit}) {
    ExpectFastSameAsCpu(tall, Tiled(2, 2, 1), launch, std::string("150 tile rows, ") + bp::ToString(launch));
    ExpectFastSameAsCpu(wide, Tiled(2, 2, 1), launch, std::string("150 tile columns, ") + bp::ToString(launch));
  }
}

// By tile columns the pipeline hands messages between blocks through the mailbox (stamped slots, no fence),
// or without it through the tile counters: both equal the CPU, over several outer iterations (so several
// launches' stamps) and twice on one runner (stamps keep growing across runs); the estimate counts the
// mailbox only when there is one. Then MRF_BP_CUDA_MAIL=0 through mrf::Solve.
TEST(CudaBp, FastPipelineByColumnsEqualsCpuWithAndWithoutTheMailbox) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(14);
  const Model m = RandomGrid(rng, 53, 29, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  const Problem p = bp::PrepareProblem(m);
  for (bool mailbox : {true, false})
    for (int blocks : {0, 2, 5})
      for (int inner : {1, 2}) {
        const Config config = Tiled(3, 5, inner);
        const bp::RunOutput cpu = bp::RunCpu(p, config);
        bp::CudaTuning tuning;
        tuning.launch = bp::CudaLaunch::kPipeline;
        tuning.kernel = bp::CudaKernel::kFast;
        tuning.pipeline_blocks = blocks;
        tuning.mailbox = mailbox;
        bp::CudaRunner runner(p, config, tuning);
        const std::string what = std::string("mailbox ") + (mailbox ? "on" : "off") + ", blocks " +
                                 std::to_string(blocks) + ", inner " + std::to_string(inner) + " (" +
                                 runner.Describe() + ")";
        EXPECT_EQ(runner.Describe().find("mailbox handoff") != std::string::npos, mailbox) << what;
        EXPECT_EQ(runner.allocated_bytes(), runner.estimated_bytes()) << what;
        for (int run = 1; run <= 2; ++run)
          ExpectEqualRuns(runner.Run({}, true, true), cpu, config, what + ", run " + std::to_string(run));
      }
  SolveOptions o;
  o.solver = "cuda-bp";
  o.bp.schedule = "tiled";
  o.bp.tile_size = 5;
  o.max_iterations = 3;
  Result on, counters;
  {
    const ScopedEnv mail("MRF_BP_CUDA_MAIL", "1");
    on = Solve(m, o);
  }
  {
    const ScopedEnv mail("MRF_BP_CUDA_MAIL", "0");
    counters = Solve(m, o);
  }
  ASSERT_TRUE(on.ok && counters.ok) << on.message << " / " << counters.message;
  EXPECT_NE(on.message.find("mailbox handoff"), std::string::npos) << on.message;
  EXPECT_EQ(counters.message.find("mailbox handoff"), std::string::npos) << counters.message;
  EXPECT_EQ(on.labels, counters.labels);
  EXPECT_EQ(on.energy, counters.energy);
}

// The split launch runs one inner iteration; the automatic launch is the pipeline (measured faster);
// asking for the split with more inner iterations, or for the general kernel, is refused in one line.
TEST(CudaBp, SplitLaunchOnlyWithOneInnerIteration) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(16);
  const Problem p = bp::PrepareProblem(RandomGrid(rng, 40, 30, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}}));
  auto describe = [&](const Problem& problem, const Config& c, bp::CudaLaunch launch) {
    bp::CudaTuning tuning;
    tuning.launch = launch;
    return bp::CudaRunner(problem, c, tuning).Describe();
  };
  // Asking for the split launch is refused with a message that contains `expected`.
  auto expect_refused = [&](const Problem& problem, const Config& c, const std::string& expected) {
    try {
      describe(problem, c, bp::CudaLaunch::kSplit);
      ADD_FAILURE() << "the split launch ran where it should be refused (" << expected << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  EXPECT_NE(describe(p, Tiled(1, 0, 1), bp::CudaLaunch::kAuto).find("pipeline launch"), std::string::npos);
  EXPECT_NE(describe(p, Tiled(1, 0, 1), bp::CudaLaunch::kSplit).find("split launch"), std::string::npos);
  EXPECT_NE(describe(p, Tiled(1, 0, 2), bp::CudaLaunch::kAuto).find("pipeline launch"), std::string::npos);
  expect_refused(p, Tiled(1, 0, 2), "one inner iteration");
  // A tile whose split buffers do not fit: the split is refused.
  EXPECT_NE(describe(p, Tiled(1, 32, 1), bp::CudaLaunch::kAuto).find("pipeline launch"), std::string::npos);
  expect_refused(p, Tiled(1, 32, 1), "bytes of shared memory");
  // Too many labels for the fast kernel.
  const Problem general = bp::PrepareProblem(RandomGrid(rng, 20, 20, 40, {PairwiseKind::kPotts, 1, kMaxCost, {}}));
  expect_refused(general, Tiled(1, 0, 1), "needs the fast kernel");
}

TEST(CudaBp, FastKernelWithCoarseToFineAndTheAutomaticTileEqualsCpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(13);
  for (const Pairwise& pw : FastFamilies()) {
    const Model m = RandomGrid(rng, 70, 53, 16, pw);
    ExpectFastSameAsCpu(m, Tiled(2, 0, 2, true), bp::CudaLaunch::kPipeline, std::string("c2f ") + ToString(pw.kind));
    ExpectFastSameAsCpu(m, Tiled(2, 0, 1, true), bp::CudaLaunch::kSplit, std::string("c2f split ") + ToString(pw.kind));
    ExpectFastSameAsCpu(m, Tiled(2, 0, 1), bp::CudaLaunch::kGraph, std::string("auto tile ") + ToString(pw.kind));
  }
}

// Runners keep their device block, stream and pinned words for the next one (kept_context.h). With every
// kept block handed out poisoned (each byte 0xff), runs of several shapes in a row, the largest first so
// that the others reuse its block, still equal the CPU bit for bit: no runner reads memory it did not write.
TEST(CudaBp, KeptMemoryLeftByEarlierRunsChangesNothing) {
  MRF_SKIP_WITHOUT_CUDA();
  const ScopedEnv poison("MRF_CUDA_KEPT_POISON", "1");
  std::mt19937_64 rng(31);
  const Pairwise potts{PairwiseKind::kPotts, 1, kMaxCost, {}};
  const Pairwise linear{PairwiseKind::kTruncatedLinear, 1, 2, {}};
  ExpectSameAsCpu(RandomGrid(rng, 90, 70, 24, linear), Tiled(2, 0, 2, true), "largest first, coarse-to-fine");
  ExpectSameAsCpu(RandomGrid(rng, 37, 29, 5, potts), Tiled(3, 8, 1), "smaller, tile 8");
  Config sync;
  sync.schedule = Schedule::kSync;
  sync.iterations = 3;
  ExpectSameAsCpu(RandomGrid(rng, 41, 33, 7, linear), sync, "sync");
  ExpectFastSameAsCpu(RandomGrid(rng, 70, 53, 16, linear), Tiled(2, 0, 2, true), bp::CudaLaunch::kPipeline,
                      "fast kernel, coarse-to-fine");
  // Through the registry: the runner built from the model shifts the costs and sums the coarse levels on the
  // device, in memory the runs above wrote.
  const Model m = RandomGrid(rng, 64, 48, 12, linear);
  SolveOptions o;
  o.bp.schedule = "tiled";
  o.bp.inner_iterations = 2;
  o.bp.coarse_to_fine = true;
  o.max_iterations = 3;
  ExpectCudaBpEqualsTbbBp(m, o);
}

TEST(CudaBp, FastKernelRunsUntilConvergedLikeTheCpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(14);
  const Model m = RandomGrid(rng, 31, 27, 4, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  const Problem p = bp::PrepareProblem(m);
  const bp::RunOutput cpu = bp::RunCpu(p, Tiled(60, 8, 2));
  EXPECT_TRUE(cpu.converged);  // so that the comparison covers the change detection
  ExpectFastSameAsCpu(m, Tiled(60, 8, 2), bp::CudaLaunch::kPipeline, "until converged");
  ExpectFastSameAsCpu(m, Tiled(60, 8, 1), bp::CudaLaunch::kSplit, "until converged, split");
}

TEST(CudaBp, AutomaticKernelPicksTheFastOneOnlyWhenItApplies) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(15);
  auto fast = [](const Model& m, const Config& c) { return bp::CudaRunner(bp::PrepareProblem(m), c).uses_fast_kernel(); };
  EXPECT_TRUE(fast(RandomGrid(rng, 20, 20, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}}), Tiled(1, 0, 1)));
  EXPECT_FALSE(fast(RandomGrid(rng, 20, 20, 40, {PairwiseKind::kPotts, 1, kMaxCost, {}}), Tiled(1, 0, 1)));
  // 16 labels, quadratic truncated far away: the window would span 31 labels (the lower envelope).
  EXPECT_FALSE(fast(RandomGrid(rng, 20, 20, 16, {PairwiseKind::kTruncatedQuadratic, 1, 100000, {}}), Tiled(1, 0, 1)));
  Model big = RandomGrid(rng, 20, 20, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  big.pairwise.lambda = 5000;  // sums beyond 16 bits: the general kernel, with the same result
  EXPECT_FALSE(fast(big, Tiled(1, 0, 1)));
  ExpectSameAsCpu(big, Tiled(2, 5, 1), "costs beyond 16 bits");
  // Coarse-to-fine: only the level just above the fine one sends it messages, so the coarser levels'
  // larger spreads (edge scales double per level) must not keep the fast kernel away.
  Model steep = RandomGrid(rng, 64, 64, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  steep.pairwise.lambda = 200;
  const Problem fine = bp::PrepareProblem(steep);
  const std::vector<Problem> levels = bp::CoarseLevels(fine);
  ASSERT_EQ(levels.size(), 3u);
  Cost steepest = fine.max_message;
  for (const Problem& level : levels) steepest = std::max(steepest, level.max_message);
  const Cost entering = std::max(fine.max_message, levels.front().max_message);
  ASSERT_LE(fine.max_unary_spread + 8 * entering + 1, 32767) << "the fast kernel must take this one";
  ASSERT_GT(fine.max_unary_spread + 8 * steepest + 1, 32767) << "not the case this checks";
  EXPECT_TRUE(fast(steep, Tiled(2, 0, 2, true)));
  ExpectSameAsCpu(steep, Tiled(2, 0, 2, true), "coarse levels with large spreads");
  // Asking for the fast kernel where it cannot run is an error that says why.
  bp::CudaTuning tuning;
  tuning.kernel = bp::CudaKernel::kFast;
  try {
    bp::CudaRunner runner(bp::PrepareProblem(big), Tiled(1, 0, 1), tuning);
    ADD_FAILURE() << "the fast kernel accepted sums beyond 16 bits";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("32767"), std::string::npos) << e.what();
  }
}

// ---- Memory, faults, the automatic choice -----------------------------------------------------------

TEST(CudaBp, SmallEstimatesItsMemoryAndRefusesWhatDoesNotFit) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(16);
  const Model m = RandomGrid(rng, 60, 45, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  // 16 labels need no padding; 20 are padded, so their costs go up through the staging buffer (or, in the
  // host setup, by a pitched copy).
  const Problem padded = bp::PrepareProblem(RandomGrid(rng, 60, 45, 20, {PairwiseKind::kTruncatedLinear, 1, 2, {}}));
  Config sync;
  sync.schedule = Schedule::kSync;
  sync.coarse_to_fine = true;
  for (const Problem& p : {bp::PrepareProblem(m), padded})
    for (bool host_setup : {false, true})
      for (const Config& c : {Tiled(1, 0, 1), Tiled(2, 8, 2, true), sync}) {
        for (bp::CudaKernel kernel : {bp::CudaKernel::kAuto, bp::CudaKernel::kGeneral}) {
          bp::CudaTuning tuning;
          tuning.kernel = kernel;
          tuning.host_setup = host_setup;
          bp::CudaRunner runner(p, c, tuning);
          const std::string what = std::string(bp::ToString(c.schedule)) + ", " + std::to_string(p.num_labels) +
                                   " labels, " + runner.Describe() + (host_setup ? ", host setup" : "");
          EXPECT_GT(runner.allocated_bytes(), 0u);
          EXPECT_EQ(runner.allocated_bytes(), runner.estimated_bytes()) << what;
          // One byte less free than the estimate: refused before allocating, with both numbers.
          tuning.free_bytes_override = runner.estimated_bytes() - 1;
          try {
            bp::CudaRunner refused(p, c, tuning);
            ADD_FAILURE() << "a problem larger than the free memory was accepted";
          } catch (const Error& e) {
            const std::string text = e.what();
            EXPECT_NE(text.find("out of GPU memory"), std::string::npos) << text;
            EXPECT_NE(text.find("needs"), std::string::npos) << text;
            EXPECT_NE(text.find("free"), std::string::npos) << text;
          }
        }
      }
  // Through Solve: an error that says so (the device was named), nothing allocated.
  SolveOptions o;
  o.solver = "cuda-bp";
  o.bp.schedule = "tiled";
  const Result ok = Solve(m, o);
  EXPECT_TRUE(ok.ok) << ok.message;
}

TEST(CudaBp, SmallInjectedFaultsGiveClearMessagesAndAutoFallsBack) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(17);
  const Model m = RandomGrid(rng, 30, 20, 8, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  SolveOptions cpu_options;
  cpu_options.solver = "tbb-bp";
  cpu_options.bp.schedule = "tiled";
  cpu_options.max_iterations = 3;
  const Result cpu = Solve(m, cpu_options);
  ASSERT_TRUE(cpu.ok) << cpu.message;
  const std::pair<const char*, const char*> faults[] = {
      {"nodevice", "no CUDA device"}, {"oom", "out of GPU memory"}, {"launch", "kernel launch failed"}};
  for (const auto& [fault, expected] : faults) {
    ScopedEnv inject("MRF_INJECT_CUDA_FAULT", fault);
    for (const char* schedule : {"tiled", "sync"}) {
      SolveOptions named;
      named.solver = "cuda-bp";
      named.bp.schedule = schedule;
      named.max_iterations = 3;
      const Result failed = Solve(m, named);
      EXPECT_FALSE(failed.ok) << fault;
      EXPECT_NE(failed.message.find("cuda-bp"), std::string::npos) << failed.message;
      EXPECT_NE(failed.message.find(expected), std::string::npos) << failed.message;
    }
    // auto: the CPU runs instead and the result says why.
    SolveOptions automatic;
    automatic.algorithm = Algorithm::kBeliefPropagation;
    automatic.bp.schedule = "tiled";
    automatic.max_iterations = 3;
    const Result fallback = Solve(m, automatic);
    ASSERT_TRUE(fallback.ok) << fallback.message;
    EXPECT_EQ(fallback.backend_used, "tbb-bp") << fault;
    EXPECT_NE(fallback.fallback_reason.find("cuda-bp"), std::string::npos) << fallback.fallback_reason;
    EXPECT_NE(fallback.fallback_reason.find(expected), std::string::npos) << fallback.fallback_reason;
    EXPECT_EQ(fallback.labels, cpu.labels) << fault;
  }
  {  // A debugging switch with a value it does not know is refused, not silently ignored.
    ScopedEnv debug("MRF_CUDA_DEBUG_SYNC", "yes");
    SolveOptions named;
    named.solver = "cuda-bp";
    named.bp.schedule = "tiled";
    const Result refused = Solve(m, named);
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.message.find("cuda-bp: MRF_CUDA_DEBUG_SYNC must be 0 or 1 (got 'yes')"), std::string::npos)
        << refused.message;
  }
  // Afterwards the GPU works again.
  ExpectSameAsCpu(m, Tiled(2, 6, 2), "after the injected faults");
}

TEST(CudaBp, AutomaticScheduleRunsTiledOnTheGpu) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(18);
  const Model m = RandomGrid(rng, 50, 40, 16, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  SolveOptions o;
  o.algorithm = Algorithm::kBeliefPropagation;
  o.max_iterations = 3;
  ASSERT_EQ(o.bp.schedule, "auto");
  const Result gpu = Solve(m, o);
  ASSERT_TRUE(gpu.ok) << gpu.message;
  EXPECT_EQ(gpu.backend_used, "cuda-bp");
  EXPECT_NE(gpu.message.find("tiled BP (the automatic schedule)"), std::string::npos) << gpu.message;
  o.solver = "tbb-bp";
  o.bp.schedule = "tiled";
  const Result cpu = Solve(m, o);
  ASSERT_TRUE(cpu.ok) << cpu.message;
  EXPECT_EQ(gpu.labels, cpu.labels);
}

TEST(CudaBp, TsukubaMatchesCpuAndReachesTheReferenceBpmEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  const std::string left = test::SharedDataPath("middlebury/tsukuba-imL.png");
  const std::string right = test::SharedDataPath("middlebury/tsukuba-imR.png");
  if (left.empty() || right.empty()) GTEST_SKIP() << "Tsukuba images not found under the shared data folder";
  const Model m = BuildStereoModel(LoadImage(left, 3), LoadImage(right, 3), StereoParams::Preset("tsukuba"));
  ExpectSameAsCpu(m, Tiled(2, 0, 2, true), "Tsukuba, coarse-to-fine, 2 outer x 2 inner");
  const Problem p = bp::PrepareProblem(m);
  bp::CudaRunner runner(p, Tiled(2, 0, 2, true));
  const bp::RunOutput out = runner.Run();
  std::printf("Tsukuba cuda-bp: energy %lld (%s)\n", static_cast<long long>(out.best_energy), runner.Describe().c_str());
  EXPECT_LE(out.best_energy, 406896);
}

}  // namespace
}  // namespace mrf
