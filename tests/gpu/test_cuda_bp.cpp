// CUDA belief propagation against the TBB engine: the same labels, border messages and energies, bit for
// bit, on random problems of several label counts, sizes that are not multiples of the tile, every
// pairwise family and per-edge weights; bad inputs give a clear error.
#include <gtest/gtest.h>

#include <random>

#include "apps/common/bp_stereo_fixture.h"
#include "backends/common/bp_engine.h"
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

// Runs both engines and expects identical labels, energies and messages.
void ExpectSameAsCpu(const Model& m, const Config& config, const std::string& what,
                     bp::CudaLaunch launch = bp::CudaLaunch::kAuto) {
  const Problem p = bp::PrepareProblem(m);
  const bp::RunOutput cpu = bp::RunCpu(p, config);
  bp::CudaTuning tuning;
  tuning.launch = launch;
  bp::CudaRunner runner(p, config, tuning);
  const bp::RunOutput gpu = runner.Run({}, true, true);
  EXPECT_EQ(gpu.iterations, cpu.iterations) << what;
  EXPECT_EQ(gpu.labels, cpu.labels) << what;
  EXPECT_EQ(gpu.energies, cpu.energies) << what;
  EXPECT_EQ(gpu.best_labels, cpu.best_labels) << what;
  if (config.schedule == Schedule::kTiled) {
    EXPECT_TRUE(gpu.borders == cpu.borders) << what << " (border messages differ)";
  } else {
    EXPECT_TRUE(gpu.messages == cpu.messages) << what << " (messages differ)";
  }
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

TEST(CudaBp, SolverMatchesTbbBpThroughTheRegistry) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(6);
  const Model m = RandomGrid(rng, 64, 48, 12, {PairwiseKind::kTruncatedLinear, 1, 2, {}});
  SolveOptions o;
  o.bp.schedule = "tiled";
  o.bp.inner_iterations = 2;
  o.max_iterations = 4;
  o.solver = "cuda-bp";
  const Result gpu = Solve(m, o);
  o.solver = "tbb-bp";
  const Result cpu = Solve(m, o);
  ASSERT_TRUE(gpu.ok) << gpu.message;
  ASSERT_TRUE(cpu.ok) << cpu.message;
  EXPECT_EQ(gpu.backend_used, "cuda-bp");
  EXPECT_EQ(gpu.labels, cpu.labels);
  EXPECT_EQ(gpu.energy, cpu.energy);
  EXPECT_EQ(gpu.energy, EvaluateEnergy(m, gpu.labels).total);
  ASSERT_EQ(gpu.log.size(), cpu.log.size());
  for (std::size_t i = 0; i < gpu.log.size(); ++i) EXPECT_EQ(gpu.log[i].energy, cpu.log[i].energy);
  EXPECT_GE(gpu.timings.transfer_ms, 0);
  EXPECT_GE(gpu.timings.solve_ms, 0);
  std::printf("cuda-bp: %s\n", gpu.message.c_str());
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
  // More labels than the kernel takes.
  const Model many = RandomGrid(rng, 5, 4, 300, {PairwiseKind::kPotts, 1, kMaxCost, {}});
  EXPECT_NE(message(many, Tiled(1, 2, 1)).find("at most 256 labels"), std::string::npos) << message(many, Tiled(1, 2, 1));
  // A tile that cannot fit shared memory: a clear error naming the largest tile that fits.
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
}

TEST(CudaBp, TsukubaMatchesCpuAndReachesTheReferenceBpmEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  const std::string left = test::SharedDataPath("middlebury/tsukuba-imL.png");
  const std::string right = test::SharedDataPath("middlebury/tsukuba-imR.png");
  if (left.empty() || right.empty()) GTEST_SKIP() << "Tsukuba images not found under the shared data folder";
  const Model m = fixture::BuildStereoModel(LoadImage(left, 3), LoadImage(right, 3), fixture::TsukubaSpec());
  ExpectSameAsCpu(m, Tiled(2, 0, 2, true), "Tsukuba, coarse-to-fine, 2 outer x 2 inner");
  const Problem p = bp::PrepareProblem(m);
  bp::CudaRunner runner(p, Tiled(2, 0, 2, true));
  const bp::RunOutput out = runner.Run();
  std::printf("Tsukuba cuda-bp: energy %lld (%s)\n", static_cast<long long>(out.best_energy), runner.Describe().c_str());
  EXPECT_LE(out.best_energy, 406896);
}

}  // namespace
}  // namespace mrf
