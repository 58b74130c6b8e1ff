// cuda-swap against independent references: on random grid models (4-, 8- and 6-connected, odd sizes,
// 2-6 labels, Potts, truncated linear, truncated quadratic, weights, and distance tables that need
// truncation) it reaches exactly the labels and per-cycle energies of its CPU twin
// (tests/support/expansion_twin.h making swap moves: same steps, plain FIFO push-relabel, sink-minimal
// cuts) and of cpu-swap (the twin matches cpu-swap, tests/backends/test_swap_steps.cpp), with the
// device loop and the host loop; energies never rise, the end is a labelling no swap move improves
// (cpu-swap finds nothing more), and the energy is within 0.5% of cpu-swap's. Bad inputs give
// one-line messages, `auto` falls back to cpu-swap; Middlebury energies when the images are present.
// Tests named *Small* are the ones compute-sanitizer runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "energies/stereo.h"
#include "inference/cuda_swap.h"
#include "mrf/io/image.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/expansion_twin.h"
#include "support/test_support.h"
#include "gpu/move_solver_checks.h"

namespace mrf {
namespace {

using Case = test::MoveCase;
using test::GpuRun;

Pairwise MakePairwise(std::mt19937_64& rng, int which, Label labels) {
  Pairwise p;
  p.lambda = 1 + static_cast<Cost>(rng() % 60);
  switch (which % 4) {
    case 0: p.kind = PairwiseKind::kPotts; break;
    case 1:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = 1 + static_cast<Cost>(rng() % 4);
      break;
    case 2:
      p.kind = PairwiseKind::kTruncatedQuadratic;
      p.truncation = 3 + static_cast<Cost>(rng() % 8);
      break;
    default:  // an asymmetric table with a non-zero diagonal: swap truncates
      p.kind = PairwiseKind::kTable;
      p.lambda = 1 + static_cast<Cost>(rng() % 5);
      p.table.resize(static_cast<std::size_t>(labels) * labels);
      for (Label a = 0; a < labels; ++a)
        for (Label b = 0; b < labels; ++b)
          p.table[static_cast<std::size_t>(a) * labels + b] = static_cast<Cost>(rng() % (a == b ? 25 : 20));
      break;
  }
  return p;
}

// Random grid models; `scale` 0 is tiny (for compute-sanitizer), 1 small, 2 medium.
std::vector<Case> RandomCases(std::uint64_t seed, int count, int scale) {
  return test::GpuMoveCases(seed, count, scale, MakePairwise, /*expansion=*/false);
}

SolveOptions Options(const Case& c, LabelOrder order = LabelOrder::kSequential) {
  SolveOptions o;
  o.solver = "cuda-swap";
  o.truncate_nonsubmodular = c.truncate;
  o.label_order = order;
  o.seed = 5;
  return o;
}

GpuRun RunGpu(const Model& model, const SolveOptions& options, const CudaExpansionTuning& tuning) {
  return test::RunGpuMoves(RunCudaSwap, model, options, tuning);
}

std::vector<std::pair<std::string, CudaExpansionTuning>> Tunings() {
  CudaExpansionTuning base = CudaExpansionTuning::FromEnvironment();
  // The loosest early-stop bound: were the automatic setting to stop cuda-swap's max-flows, every one
  // with active nodes after its first relabel would stop, and the labels would leave the twin's.
  base.early_fraction = 1.0;
  CudaExpansionTuning device = base, host = base, pushing = base, few = base;
  host.device_loop = false;
  few.solve_blocks = 3;
  pushing.push_relabel.incremental_relabel = 2;  // incremental relabels in fresh solves after the first
  pushing.push_relabel.local_iterations = 3;
  return {{"device loop", device}, {"host loop", host}, {"incremental relabels", pushing}, {"three solve blocks", few}};
}

void CheckAgainstTwin(const std::vector<Case>& cases, bool all_tunings,
                      std::vector<LabelOrder> orders = {LabelOrder::kSequential, LabelOrder::kRandom}) {
  std::mt19937_64 rng(77);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (LabelOrder order : orders) {
      SolveOptions options = Options(c, order);
      test::TwinOptions to;
      to.reuse = false;
      to.order = order;
      to.seed = options.seed;
      if (order == LabelOrder::kRandom) {  // and a random start
        to.initial.resize(static_cast<std::size_t>(c.model.num_nodes()));
        for (Label& l : to.initial) l = static_cast<Label>(rng() % static_cast<std::uint64_t>(c.model.num_labels));
        options.initial_labels = to.initial;
      }
      const test::TwinResult twin = test::RunSwapTwin(c.model, to);
      ASSERT_EQ(twin.failure, "");
      SolveOptions cpu_options = options;
      cpu_options.solver = "cpu-swap";
      const Result cpu = Solve(c.model, cpu_options);
      ASSERT_TRUE(cpu.ok) << cpu.message;
      for (const auto& [what, tuning] : Tunings()) {
        if (!all_tunings && what != "device loop" && what != "host loop") continue;
        SCOPED_TRACE(what);
        GpuRun g = RunGpu(c.model, options, tuning);
        if (what == "device loop" && tuning.device_loop)
          EXPECT_EQ(g.stats.loop, "device") << "the conditional CUDA graph did not run";
        EXPECT_EQ(g.stats.kept_graphs, 0);
        EXPECT_EQ(g.stats.stopped_early, 0) << "cuda-swap's max-flows are exact unless early_cycles asks otherwise";
        EXPECT_EQ(g.result.labels, cpu.labels) << "labels differ from cpu-swap's";
        test::ExpectTheTwinsCycles(g, twin);
      }
    }
  }
}

TEST(CudaSwap, SmallTinyModelsMatchTheCpuTwin) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckAgainstTwin(RandomCases(1, 4, 0), false);
}

TEST(CudaSwap, RandomModelsMatchTheCpuTwinAndCpuSwapOnEveryPath) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckAgainstTwin(RandomCases(2, 24, 0), true);
  CheckAgainstTwin(RandomCases(3, 12, 1), true);
}

TEST(CudaSwap, NeverRaisesTheEnergyAndEndsWhereNoSwapHelps) {
  MRF_SKIP_WITHOUT_CUDA();
  int cases = 0;
  double worst = 0;
  for (const Case& c : RandomCases(4, 12, 2)) {
    SCOPED_TRACE(c.name);
    const Result gpu = test::SolveWatchingTheEnergy(c, Options(c));
    if (!gpu.ok) continue;
    SolveOptions cpu_options = Options(c);
    cpu_options.solver = "cpu-swap";
    worst = std::max(worst, test::ExpectNoMoveHelpsAndNearTheCpu(c, cpu_options, gpu.labels, gpu.energy));
    ++cases;
  }
  std::printf("cuda-swap vs cpu-swap on %d models: largest energy difference %.4f%%\n", cases, 100 * worst);
}

TEST(CudaSwap, TruncatesOnlyWhenAskedWithCpuSwapsMessage) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  Pairwise table{PairwiseKind::kTable, 3, kMaxCost, {0, 7, 9, 9, 8, 6, 2, 5, 4}};  // V(1,1) + V(2,2) > V(1,2) + V(2,1)
  const Model model = test::RandomModel(rng, Topology::Grid2D(37, 23, 4), 3, 300, table, 3);
  SolveOptions options;
  options.solver = "cuda-swap";
  const Result refused = Solve(model, options);
  EXPECT_FALSE(refused.ok);
  options.solver = "cpu-swap";
  const Result cpu_refused = Solve(model, options);
  EXPECT_FALSE(cpu_refused.ok);
  EXPECT_EQ(refused.message, cpu_refused.message);
  EXPECT_NE(refused.message.find("semimetric"), std::string::npos) << refused.message;
  options.truncate_nonsubmodular = true;
  const Result cpu = Solve(model, options);
  options.solver = "cuda-swap";
  const Result r = Solve(model, options);
  ASSERT_TRUE(r.ok) << r.message;
  ASSERT_TRUE(cpu.ok) << cpu.message;
  EXPECT_NE(r.message.find("terms truncated"), std::string::npos) << r.message;
  EXPECT_EQ(r.labels, cpu.labels);
  for (std::size_t i = 1; i < r.log.size(); ++i) EXPECT_LE(r.log[i].energy, r.log[i - 1].energy);
  EXPECT_EQ(r.log.back().energy, r.energy);
}

TEST(CudaSwap, SmallBadInputsGiveClearMessagesAndAutoFallsBack) {
  MRF_SKIP_WITHOUT_CUDA();
  test::ExpectEdgeListRefusedAndAutoFallsBack("cuda-swap", Algorithm::kSwap, "cpu-swap");
  // Too little GPU memory (an injected limit): both figures in the message.
  std::mt19937_64 rng(9);
  const Model grid = test::RandomModel(rng, Topology::Grid2D(64, 48, 4), 5, 100, Pairwise{PairwiseKind::kPotts, 10, kMaxCost, {}});
  const CudaExpansionMemory need = EstimateCudaSwapMemory(grid, CudaExpansionTuning{});
  SolveOptions named;
  named.solver = "cuda-swap";
  test::ExpectRefusedBelowItsMemory("cuda-swap", need.base_bytes, [&](const CudaExpansionTuning& tuning) {
    Result out;
    RunCudaSwap(grid, named, &out, tuning);
  });
  test::ExpectSwapRefusesFrequentOrder(grid, named);
  // Just the estimate: runs, within it.
  CudaExpansionTuning enough;
  enough.memory_limit = need.base_bytes;
  CudaExpansionStats stats;
  Result ok;
  RunCudaSwap(grid, named, &ok, enough, &stats);
  EXPECT_LE(stats.device_bytes, need.base_bytes);
  EXPECT_EQ(stats.kept_graphs, 0);
  test::TwinOptions to;
  to.reuse = false;
  EXPECT_EQ(ok.labels, test::RunSwapTwin(grid, to).labels);
  // cuda-expansion after cuda-swap in one process (the cached context serves both).
  SolveOptions expansion;
  expansion.solver = "cuda-expansion";
  CudaExpansionTuning exact;
  exact.early_cycles = 0;  // the twin's max-flows are exact
  Result e;
  RunCudaExpansion(grid, expansion, &e, exact);
  EXPECT_EQ(e.labels, test::RunExpansionTwin(grid, to).labels);
}

TEST(CudaSwap, RegisteredForSwapOnTheGpu) {
  MRF_SKIP_WITHOUT_CUDA();
  const Result r = test::ExpectChosenForTheGpu("cuda-swap", Algorithm::kSwap);
  EXPECT_NE(r.message.find("no swap move lowers the energy"), std::string::npos) << r.message;
}

// The Middlebury problems of BENCHMARKS.md section 1, when the images are present: cpu-swap
// reproduces the reference swap energies exactly, and so must cuda-swap (the same moves and cuts).
void Middlebury(const std::string& name, Energy reference) {
  Model model;
  if (!test::LoadMiddlebury(name, &model)) GTEST_SKIP() << "Middlebury " << name << " images not found";
  SolveOptions o;
  o.solver = "cuda-swap";
  o.max_iterations = 500;
  CudaExpansionTuning tuning;
  tuning.check_energy = true;
  Result r;
  CudaExpansionStats stats;
  RunCudaSwap(model, o, &r, tuning, &stats);
  const Energy e = EvaluateEnergy(model, r.labels).total;
  EXPECT_EQ(r.log.back().energy, e);
  EXPECT_LE(std::abs(static_cast<double>(e - reference)), 0.005 * static_cast<double>(reference)) << name;
  EXPECT_EQ(e, reference) << name << ": not the reference swap energy";
  std::printf("%s: cuda-swap %lld (reference %lld) in %lld cycles, %lld moves, %lld skipped; %s\n", name.c_str(),
              static_cast<long long>(e), static_cast<long long>(reference), static_cast<long long>(stats.cycles),
              static_cast<long long>(stats.moves), static_cast<long long>(stats.skipped), r.message.c_str());
}

TEST(CudaSwap, TsukubaReachesTheBenchmarkEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  Middlebury("tsukuba", 372233);
}

TEST(CudaSwap, VenusReachesTheBenchmarkEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  Middlebury("venus", 3141772);
}

}  // namespace
}  // namespace mrf
