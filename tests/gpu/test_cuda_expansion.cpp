// cuda-expansion against independent references: on random grid models (4-, 8- and 6-connected, odd
// sizes, 2-6 labels, Potts, truncated linear, weights, truncated quadratic with truncation) it reaches
// exactly the labels of its CPU twin (tests/support/expansion_twin.h: same steps, plain FIFO
// push-relabel, sink-minimal cuts) with the device loop and the host loop, with and without kept
// residual graphs, with wave and hop-by-hop relabels, on tiles of 32x16 and 32x8; energies never
// rise, the per-cycle energies agree with the reference evaluator, the end is a labelling no
// expansion move improves (cpu-expansion finds nothing more), and the energy is within 0.5% of
// cpu-expansion's; with max-flows stopped early (early_cycles) the same end on every solve path, and
// the automatic setting stops them only from label 0. Bad inputs give one-line messages; Middlebury
// energies when the images are present. Tests named *Small* are the ones compute-sanitizer runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "energies/stereo.h"
#include "inference/cuda_expansion.h"
#include "mrf/device.h"
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

Pairwise MakePairwise(std::mt19937_64& rng, int which) {
  Pairwise p;
  p.lambda = 1 + static_cast<Cost>(rng() % 60);
  switch (which % 4) {
    case 0: p.kind = PairwiseKind::kPotts; break;
    case 1:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = 1 + static_cast<Cost>(rng() % 4);
      break;
    case 2:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = kMaxCost;
      break;
    default:  // not a metric: expansion truncates
      p.kind = PairwiseKind::kTruncatedQuadratic;
      p.truncation = 3 + static_cast<Cost>(rng() % 8);
      break;
  }
  return p;
}

// Random grid models; `scale` 0 is tiny (for compute-sanitizer), 1 small, 2 medium.
std::vector<Case> RandomCases(std::uint64_t seed, int count, int scale) {
  auto pairwise = [](std::mt19937_64& rng, int which, Label) { return MakePairwise(rng, which); };
  return test::GpuMoveCases(seed, count, scale, pairwise, /*expansion=*/true);
}

SolveOptions Options(const Case& c, LabelOrder order = LabelOrder::kSequential) {
  SolveOptions o;
  o.solver = "cuda-expansion";
  o.truncate_nonsubmodular = c.truncate;
  o.label_order = order;
  o.seed = 5;
  return o;
}

GpuRun RunGpu(const Model& model, const SolveOptions& options, const CudaExpansionTuning& tuning) {
  return test::RunGpuMoves(RunCudaExpansion, model, options, tuning);
}

std::vector<std::pair<std::string, CudaExpansionTuning>> Tunings() {
  // From the environment, so that MRF_CUDA_EXPANSION_TUNING=solve_blocks=1 serialises the solve for
  // compute-sanitizer's racecheck.
  CudaExpansionTuning base = CudaExpansionTuning::FromEnvironment();
  base.early_cycles = 0;  // the twin's max-flows are exact
  CudaExpansionTuning device = base, host = base, fresh = base, always = base, pushing = base, few = base, hops = base,
                      short_tiles = base, wave_push = base, rounds = base, census = base, plain = base, global = base,
                      few_listed = base;
  host.device_loop = false;
  few.solve_blocks = 3;  // several tiles per block and per round
  fresh.reuse_flow = false;
  always.update_fraction = 1000;  // always re-solve from the kept graph (changes count with repeats)
  pushing.resolve_push_rounds = 2;           // pushes from the kept heights first
  pushing.push_relabel.incremental_relabel = 2;  // incremental relabels in fresh solves too
  pushing.push_relabel.local_iterations = 3;
  hops.push_relabel.wave_relabel = false;  // BFS and kill visits of 4-connected tiles hop by hop
  short_tiles.push_relabel.tile_y = 8;
  wave_push.push_relabel.wave_push = true;  // push visits of 4-connected tiles carry rows and columns by waves
  rounds.async_relabel = !base.async_relabel;  // relabels by rounds against asynchronous ones (either default)
  census.fused_census = !base.fused_census;  // the census apart and in the first push round (either default)
  plain.cooperative_launch = !base.cooperative_launch;  // cooperative and plain solve launches (either default)
  global.local_changes = 0;                  // every re-solve runs its max-flow
  few_listed.local_changes = 8;              // lists that overflow: those re-solves run their max-flow
  few_listed.update_fraction = 1000;
  return {{"device loop", device},
          {"host loop", host},
          {"no kept graphs", fresh},
          {"always re-solve", always},
          {"push first, incremental everywhere", pushing},
          {"three solve blocks", few},
          {"hop-by-hop relabels", hops},
          {"tiles of 32x8", short_tiles},
          {"wave pushes", wave_push},
          {base.async_relabel ? "relabels in rounds" : "asynchronous relabels", rounds},
          {base.fused_census ? "census apart" : "census in the first push round", census},
          {base.cooperative_launch ? "plain solve launches" : "cooperative solve launches", plain},
          {"no local repairs", global},
          {"local repairs of at most 8 changes, always re-solve", few_listed}};
}

void CheckAgainstTwin(const std::vector<Case>& cases, bool all_tunings,
                      std::vector<LabelOrder> orders = {LabelOrder::kSequential, LabelOrder::kRandom}) {
  int resolved = 0, certified = 0, certified_after_repairs = 0, few_listed_resolved = 0, few_listed_certified = 0,
      few_listed_overflowed = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (LabelOrder order : orders) {
      const SolveOptions options = Options(c, order);
      test::TwinOptions to;
      to.reuse = false;
      to.order = order;
      to.seed = options.seed;
      const test::TwinResult twin = test::RunExpansionTwin(c.model, to);
      ASSERT_EQ(twin.failure, "");
      for (const auto& [what, tuning] : Tunings()) {
        if (!all_tunings && what != "device loop" && what != "host loop") continue;
        SCOPED_TRACE(what);
        GpuRun g = RunGpu(c.model, options, tuning);
        if (what == "device loop" && tuning.device_loop)
          EXPECT_EQ(g.stats.loop, "device") << "the conditional CUDA graph did not run";
        resolved += static_cast<int>(g.stats.resolved);
        certified += static_cast<int>(g.stats.certified_locally);
        certified_after_repairs += static_cast<int>(g.stats.certified_after_repairs);
        if (tuning.local_changes == 0 || !tuning.reuse_flow) EXPECT_EQ(g.stats.certified_locally, 0);
        if (tuning.local_changes == 8) {
          few_listed_resolved += static_cast<int>(g.stats.resolved);
          few_listed_certified += static_cast<int>(g.stats.certified_locally);
          few_listed_overflowed += static_cast<int>(g.stats.lists_overflowed);
        }
        test::ExpectTheTwinsCycles(g, twin);
      }
    }
  }
  if (all_tunings) EXPECT_GT(resolved, 0) << "no move re-solved from a kept graph";
  if (all_tunings) EXPECT_GT(certified, 0) << "no re-solve certified after local repairs";
  // Some certified re-solves needed their repairs (a re-solve whose update left the certificate
  // holding passes without them): so the repairs, not only the check, are exercised.
  if (all_tunings) EXPECT_GT(certified_after_repairs, 0) << "no certified re-solve changed a node in its repairs";
  // Some updates changed more than the 8 nodes listed: those re-solves ran their max-flow (the runner
  // throws if one of them was certified).
  if (all_tunings) EXPECT_GT(few_listed_overflowed, 0) << "no list of 8 overflowed";
  if (all_tunings) EXPECT_LT(few_listed_certified, few_listed_resolved);
}

TEST(CudaExpansion, SmallTinyModelsMatchTheCpuTwin) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckAgainstTwin(RandomCases(1, 3, 0), false);
}

// Label order frequent: the same order on the device and in the twin (that the order is right is
// Expansion.FrequentOrderCountsEachNodesCheapestLabel's and ...RunsTheMovesOfARenamedSequentialRun's check).
TEST(CudaExpansion, SmallFrequentOrderMatchesTheCpuTwin) {
  MRF_SKIP_WITHOUT_CUDA();
  const std::vector<Case> cases = RandomCases(4, 4, 0);
  int not_sequential = 0;
  for (const Case& c : cases) {
    const std::vector<std::int64_t> order = FrequentLabelsFirst(c.model);
    not_sequential += !std::is_sorted(order.begin(), order.end());
  }
  EXPECT_GT(not_sequential, 0) << "every case's frequent order is the sequential one";
  CheckAgainstTwin(cases, false, {LabelOrder::kFrequent});
}

// One small case for compute-sanitizer's racecheck (slow): both loops.
TEST(CudaExpansion, SmallRaceCase) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckAgainstTwin(RandomCases(7, 1, 0), false, {LabelOrder::kSequential});
}

TEST(CudaExpansion, RandomModelsMatchTheCpuTwinOnEveryPath) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckAgainstTwin(RandomCases(2, 24, 0), true);
  CheckAgainstTwin(RandomCases(3, 9, 1), true);
}

// Asynchronous relabels where blocks share many tiles and take turns at them (medium models, 2 and 5
// solve blocks), with the census apart and in the first push round (which then follows the
// asynchronous phase at once): the labels and every cycle's energy equal the CPU twin's.
TEST(CudaExpansion, AsynchronousRelabelsWithManyTilesPerBlockMatchTheTwin) {
  MRF_SKIP_WITHOUT_CUDA();
  for (const Case& c : RandomCases(5, 6, 2)) {
    SCOPED_TRACE(c.name);
    const SolveOptions options = Options(c);
    test::TwinOptions to;
    to.reuse = false;
    to.order = options.label_order;
    to.seed = options.seed;
    const test::TwinResult twin = test::RunExpansionTwin(c.model, to);
    ASSERT_EQ(twin.failure, "");
    for (int blocks : {2, 5})
      for (bool fused_census : {false, true}) {
        SCOPED_TRACE(std::to_string(blocks) + " solve blocks, fused_census " + std::to_string(fused_census));
        CudaExpansionTuning tuning = CudaExpansionTuning::FromEnvironment();
        tuning.early_cycles = 0;  // the twin's max-flows are exact
        tuning.async_relabel = true;
        tuning.fused_census = fused_census;
        tuning.solve_blocks = blocks;
        test::ExpectTheTwinsCycles(RunGpu(c.model, options, tuning), twin);
      }
  }
}

// The end is a labelling that no expansion move improves and within 0.5% of cpu-expansion's energy.
// Returns the relative difference.
double ExpectNoExpansionHelpsAndNearTheCpu(const Case& c, const Labeling& labels, Energy energy) {
  SolveOptions cpu_options = Options(c);
  cpu_options.solver = "cpu-expansion";
  return test::ExpectNoMoveHelpsAndNearTheCpu(c, cpu_options, labels, energy);
}

TEST(CudaExpansion, NeverRaisesTheEnergyAndEndsWhereNoExpansionHelps) {
  MRF_SKIP_WITHOUT_CUDA();
  int cases = 0;
  double worst = 0;
  for (const Case& c : RandomCases(4, 12, 2)) {
    SCOPED_TRACE(c.name);
    const Result gpu = test::SolveWatchingTheEnergy(c, Options(c));
    if (!gpu.ok) continue;
    worst = std::max(worst, ExpectNoExpansionHelpsAndNearTheCpu(c, gpu.labels, gpu.energy));
    ++cases;
  }
  std::printf("cuda-expansion vs cpu-expansion on %d models: largest energy difference %.4f%%\n", cases, 100 * worst);
}

// A run whose max-flows may stop early: the cycles' energies (each checked against the reference
// evaluator) never rise, and the run ends, after an exact cycle, where no expansion move helps and near
// cpu-expansion's energy (the largest relative difference so far in *worst).
GpuRun RunWithEarlyStops(const Case& c, const CudaExpansionTuning& tuning, double* worst) {
  GpuRun g = RunGpu(c.model, Options(c), tuning);
  EXPECT_FALSE(g.result.log.empty()) << g.result.message;
  if (g.result.log.empty()) return g;
  for (std::size_t i = 1; i < g.result.log.size(); ++i)
    EXPECT_LE(g.result.log[i].energy, g.result.log[i - 1].energy) << "cycle " << i + 1;
  EXPECT_EQ(g.result.log.back().energy, g.energy);
  EXPECT_NE(g.result.message.find("converged"), std::string::npos) << g.result.message;
  // Only an exact cycle can end the run.
  EXPECT_EQ(g.result.log.back().note.find("stopped early"), std::string::npos) << g.result.log.back().note;
  if (g.stats.stopped_early > 0)
    EXPECT_NE(g.result.message.find(std::to_string(g.stats.stopped_early) + " max-flows of the first"),
              std::string::npos)
        << g.result.message;
  *worst = std::max(*worst, ExpectNoExpansionHelpsAndNearTheCpu(c, g.result.labels, g.energy));
  return g;
}

// Max-flows stopped early (early_cycles, at 20% of the nodes active) on medium models, on each solve
// path that can stop: every variant must stop some, and every run must end as RunWithEarlyStops checks.
TEST(CudaExpansion, EarlyStoppedMaxFlowsStillEndWhereNoExpansionHelps) {
  MRF_SKIP_WITHOUT_CUDA();
  // Early stops in 1 and 3 cycles, and in cycle 1 on the solve paths that stop elsewhere in the
  // kernel or the host loop: the census apart from the push rounds, the host's cycle loop, blocks
  // that visit several tiles each.
  const std::vector<std::string> variants = {"3 cycles", "1 cycle", "census apart", "host loop", "three solve blocks"};
  std::map<std::string, std::int64_t> stopped;
  std::int64_t moves = 0;
  double worst = 0;
  for (const Case& c : RandomCases(6, 9, 2)) {
    SCOPED_TRACE(c.name);
    for (const std::string& variant : variants) {
      SCOPED_TRACE(variant);
      CudaExpansionTuning tuning = CudaExpansionTuning::FromEnvironment();
      tuning.early_cycles = variant == "3 cycles" ? 3 : 1;
      tuning.early_fraction = 0.2;
      if (variant == "census apart") tuning.fused_census = false;
      if (variant == "host loop") tuning.device_loop = false;
      if (variant == "three solve blocks") tuning.solve_blocks = 3;
      const GpuRun g = RunWithEarlyStops(c, tuning, &worst);
      stopped[variant] += g.stats.stopped_early;
      moves += g.stats.moves;
    }
  }
  std::int64_t total = 0;
  for (const std::string& variant : variants) {
    EXPECT_GT(stopped[variant], 0) << variant << ": no max-flow stopped early, so the variant checks nothing";
    total += stopped[variant];
  }
  std::printf("early stops: %lld of %lld max-flows; largest energy difference to cpu-expansion %.4f%%\n",
              static_cast<long long>(total), static_cast<long long>(moves), 100 * worst);
}

// The extreme bound (every node may stay active): each max-flow of the first two cycles that still has
// active nodes after its first global relabel stops there, taking the cut of that relabel; small models,
// for compute-sanitizer.
TEST(CudaExpansion, SmallEarlyStopsAtTheFirstRelabel) {
  MRF_SKIP_WITHOUT_CUDA();
  std::int64_t stopped = 0;
  double worst = 0;
  for (const Case& c : RandomCases(12, 6, 1)) {
    SCOPED_TRACE(c.name);
    CudaExpansionTuning tuning = CudaExpansionTuning::FromEnvironment();
    tuning.early_cycles = 2;
    tuning.early_fraction = 1.0;
    stopped += RunWithEarlyStops(c, tuning, &worst).stats.stopped_early;
  }
  EXPECT_GT(stopped, 0) << "no max-flow stopped early: the test checks nothing";
}

// The automatic setting (early_cycles=auto) stops max-flows early only in an expansion from label 0:
// from given labels every max-flow is exact, so the run equals the one with early_cycles=0.
TEST(CudaExpansion, AutomaticEarlyStopsOnlyFromLabelZero) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(21);
  std::int64_t stopped_from_zero = 0;
  for (const Case& c : RandomCases(8, 6, 2)) {
    SCOPED_TRACE(c.name);
    CudaExpansionTuning automatic = CudaExpansionTuning::FromEnvironment();
    automatic.early_cycles = -1;
    automatic.early_fraction = 1.0;  // any max-flow allowed to stop does, at its first relabel
    stopped_from_zero += RunGpu(c.model, Options(c), automatic).stats.stopped_early;

    SolveOptions given = Options(c);
    given.initial_labels.resize(static_cast<std::size_t>(c.model.num_nodes()));
    for (Label& l : given.initial_labels) l = static_cast<Label>(rng() % static_cast<std::uint64_t>(c.model.num_labels));
    const GpuRun from_given = RunGpu(c.model, given, automatic);
    EXPECT_EQ(from_given.stats.stopped_early, 0) << "a run from given labels stopped max-flows early";
    CudaExpansionTuning exact = automatic;
    exact.early_cycles = 0;
    EXPECT_EQ(from_given.result.labels, RunGpu(c.model, given, exact).result.labels);
  }
  EXPECT_GT(stopped_from_zero, 0) << "no max-flow from label 0 stopped early";
}

// --start bp on the GPU: the start is cuda-bp's labelling, which equals tbb-bp's bit for bit (so the start
// record's energy is the CPU's), and the moves from it are exactly cuda-expansion's from those labels.
TEST(CudaExpansion, StartsFromTheBpLabellingOnTheDevice) {
  MRF_SKIP_WITHOUT_CUDA();
  // cuda-bp hands its kept context (kept_context.h) to the moves: poisoned, so that neither may read
  // memory it did not write, whatever the other left in it.
  const test::ScopedEnv poison("MRF_CUDA_KEPT_POISON", "1");
  int checked = 0;
  for (const Case& c : RandomCases(11, 9, 2)) {
    if (c.model.topology.kind() != TopologyKind::kGrid4) continue;
    SCOPED_TRACE(c.name);
    const Result cpu_start = test::BpStartByHand(c.model);
    ASSERT_TRUE(cpu_start.ok) << cpu_start.message;
    SolveOptions options = Options(c);
    options.start = StartLabels::kBeliefPropagation;
    const Result r = Solve(c.model, options);
    ASSERT_TRUE(r.ok) << r.message;
    ASSERT_GE(r.log.size(), 2u);
    EXPECT_EQ(r.log[0].iteration, 0);
    EXPECT_EQ(r.log[0].energy, cpu_start.energy) << "the start is not the BP labelling";
    EXPECT_NE(r.log[0].note.find("start: cuda-bp"), std::string::npos) << r.log[0].note;
    EXPECT_LE(r.energy, cpu_start.energy);
    for (std::size_t i = 2; i < r.log.size(); ++i) EXPECT_LE(r.log[i].energy, r.log[i - 1].energy) << "cycle " << i;
    SolveOptions by_hand = Options(c);
    by_hand.initial_labels = cpu_start.labels;
    const Result same = Solve(c.model, by_hand);
    ASSERT_TRUE(same.ok) << same.message;
    EXPECT_EQ(same.labels, r.labels) << "not cuda-expansion's moves from the BP labelling";
    // Both runs read the same poisoned bytes, so the comparison above cannot see a read of memory not
    // written first; this can: the moves must end where no expansion move lowers the energy.
    if (!c.truncate) {
      SolveOptions check = Options(c);
      check.solver = "cpu-expansion";
      check.initial_labels = r.labels;
      check.max_iterations = 1;
      const Result again = Solve(c.model, check);
      ASSERT_TRUE(again.ok) << again.message;
      EXPECT_EQ(again.energy, r.energy) << "a move of cpu-expansion still lowers the energy";
    }
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(CudaExpansion, TruncatesOnlyWhenAskedAndStaysHonest) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  Pairwise quadratic{PairwiseKind::kTruncatedQuadratic, 30, 9, {}};
  const Model model = test::RandomModel(rng, Topology::Grid2D(37, 23, 4), 6, 3000, quadratic, 3);
  SolveOptions options;
  options.solver = "cuda-expansion";
  const Result refused = Solve(model, options);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("triangle inequality"), std::string::npos) << refused.message;
  options.truncate_nonsubmodular = true;
  const Result r = Solve(model, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_NE(r.message.find("terms truncated"), std::string::npos) << r.message;
  test::TwinOptions to;
  to.reuse = false;
  const test::TwinResult twin = test::RunExpansionTwin(model, to);
  ASSERT_EQ(twin.failure, "");
  EXPECT_GT(twin.truncations, 0);
  CudaExpansionTuning exact = CudaExpansionTuning::FromEnvironment();
  exact.early_cycles = 0;  // the twin's max-flows are exact
  Result same;
  RunCudaExpansion(model, options, &same, exact);
  EXPECT_EQ(same.labels, twin.labels);
  for (std::size_t i = 1; i < r.log.size(); ++i) EXPECT_LE(r.log[i].energy, r.log[i - 1].energy);
  EXPECT_EQ(r.log.back().energy, r.energy);
}

TEST(CudaExpansion, SmallBadInputsGiveClearMessages) {
  MRF_SKIP_WITHOUT_CUDA();
  test::ExpectEdgeListRefusedAndAutoFallsBack("cuda-expansion", Algorithm::kExpansion, "cpu-expansion");
  // Too little GPU memory (an injected limit): both figures in the message.
  std::mt19937_64 rng(9);
  const Model grid = test::RandomModel(rng, Topology::Grid2D(64, 48, 4), 5, 100, Pairwise{PairwiseKind::kPotts, 10, kMaxCost, {}});
  const CudaExpansionMemory need = EstimateCudaExpansionMemory(grid, CudaExpansionTuning{});
  SolveOptions named;
  named.solver = "cuda-expansion";
  // The refusal comes only after the stack raised for the local repairs was given back (it may be what
  // tipped a model that only just fits), so the limit is back where it was.
  SetCudaStackLimitBytes(1024);
  test::ExpectRefusedBelowItsMemory("cuda-expansion", need.base_bytes, [&](const CudaExpansionTuning& tuning) {
    Result out;
    RunCudaExpansion(grid, named, &out, tuning);
  });
  EXPECT_EQ(CudaStackLimitBytes(), std::size_t{1024});
  // Just enough for the base and one kept graph: runs, keeping one label's graph.
  CudaExpansionTuning one;
  one.early_cycles = 0;  // the twin's max-flows are exact
  one.stack_bytes = CudaExpansionTuning::FromEnvironment().stack_bytes;  // (for compute-sanitizer)
  one.memory_limit = need.base_bytes + need.per_kept_graph_bytes + need.per_kept_graph_bytes / 2;
  CudaExpansionStats stats;
  Result ok;
  RunCudaExpansion(grid, named, &ok, one, &stats);
  EXPECT_EQ(stats.kept_graphs, 1);
  EXPECT_LE(stats.device_bytes, one.memory_limit);
  test::TwinOptions to;
  to.reuse = false;
  const Labeling twin = test::RunExpansionTwin(grid, to).labels;
  EXPECT_EQ(ok.labels, twin);
  // Room for no kept graph: every move solves afresh, none takes the local path, and the stack raised
  // for its repairs is lowered again (to the tuning's stack_bytes, which compute-sanitizer's runs set).
  CudaExpansionTuning none = one;
  none.memory_limit = need.base_bytes + need.per_kept_graph_bytes / 2;
  CudaExpansionStats none_stats;
  Result fresh;
  SetCudaStackLimitBytes(1024);
  RunCudaExpansion(grid, named, &fresh, none, &none_stats);
  EXPECT_EQ(CudaStackLimitBytes(), std::max<std::size_t>(1024, static_cast<std::size_t>(none.stack_bytes)));
  EXPECT_EQ(none_stats.kept_graphs, 0);
  EXPECT_EQ(none_stats.resolved, 0);
  EXPECT_EQ(none_stats.certified_locally, 0);
  EXPECT_LE(none_stats.device_bytes, none.memory_limit);
  EXPECT_EQ(fresh.labels, twin);
}

// The local repairs' stack frame (about 2 KiB a thread) is above the driver's default stack (1 KiB):
// the runner raises the limit before it sizes the kept graphs from the free memory, not at the first
// local re-solve. So a run of one cycle (fresh solves only, no repair launched) raises it already;
// without the local path nothing needs it, and the limit stays.
TEST(CudaExpansion, StackIsRaisedBeforeTheKeptGraphsAreSized) {
  MRF_SKIP_WITHOUT_CUDA();
  const std::size_t driver_default = 1024;
  std::mt19937_64 rng(21);
  const Model grid =
      test::RandomModel(rng, Topology::Grid2D(96, 64, 4), 6, 100, Pairwise{PairwiseKind::kTruncatedLinear, 12, 3, {}});
  SolveOptions one_cycle;
  one_cycle.solver = "cuda-expansion";
  one_cycle.max_iterations = 1;  // fresh solves only: no re-solve, so no repair launch
  SolveOptions whole = one_cycle;
  whole.max_iterations = 100;
  Result out;
  CudaExpansionStats first, rest, off;
  SetCudaStackLimitBytes(driver_default);
  RunCudaExpansion(grid, one_cycle, &out, CudaExpansionTuning{}, &first);  // (RunCudaExpansion leaves ok to Solve)
  ASSERT_EQ(out.labels.size(), static_cast<std::size_t>(grid.topology.num_nodes())) << out.message;
  EXPECT_EQ(first.resolved, 0);
  const std::size_t raised = CudaStackLimitBytes();
  EXPECT_GT(raised, driver_default);
  // A whole run: its repairs find the stack they need.
  RunCudaExpansion(grid, whole, &out, CudaExpansionTuning{}, &rest);
  ASSERT_EQ(out.labels.size(), static_cast<std::size_t>(grid.topology.num_nodes())) << out.message;
  EXPECT_GT(rest.resolved, 0);
  EXPECT_EQ(CudaStackLimitBytes(), raised) << "the repairs needed more stack than was reserved";
  // Without the local path nothing raises it.
  CudaExpansionTuning no_local;
  no_local.local_changes = 0;
  SetCudaStackLimitBytes(driver_default);
  RunCudaExpansion(grid, whole, &out, no_local, &off);
  ASSERT_EQ(out.labels.size(), static_cast<std::size_t>(grid.topology.num_nodes())) << out.message;
  EXPECT_GT(off.resolved, 0);  // re-solves ran, and none raised the limit
  EXPECT_EQ(CudaStackLimitBytes(), driver_default);
}

TEST(CudaExpansion, RegisteredForExpansionOnTheGpu) {
  MRF_SKIP_WITHOUT_CUDA();
  test::ExpectChosenForTheGpu("cuda-expansion", Algorithm::kExpansion);
}

// The Middlebury problems of BENCHMARKS.md section 1, when the images are present.
void Middlebury(const std::string& name, Energy reference, bool truncate) {
  Model model;
  if (!test::LoadMiddlebury(name, &model)) GTEST_SKIP() << "Middlebury " << name << " images not found";
  SolveOptions o;
  o.solver = "cuda-expansion";
  o.max_iterations = 500;
  o.truncate_nonsubmodular = truncate;
  CudaExpansionTuning tuning;
  tuning.check_energy = true;
  Result r;
  CudaExpansionStats stats;
  RunCudaExpansion(model, o, &r, tuning, &stats);
  const Energy e = EvaluateEnergy(model, r.labels).total;
  EXPECT_EQ(r.log.back().energy, e);
  EXPECT_LE(static_cast<double>(e), 1.005 * static_cast<double>(reference)) << name;
  SolveOptions cpu = o;
  cpu.solver = "cpu-expansion";
  const Result c = Solve(model, cpu);
  ASSERT_TRUE(c.ok) << c.message;
  EXPECT_LE(std::abs(static_cast<double>(e - c.energy)), 0.005 * static_cast<double>(c.energy));
  EXPECT_GT(stats.stopped_early, 0) << "the default run from label 0 stopped no max-flow early";
  std::printf("%s: cuda-expansion %lld in %lld cycles (%lld moves, %lld re-solved), cpu-expansion %lld; %s\n",
              name.c_str(), static_cast<long long>(e), static_cast<long long>(stats.cycles),
              static_cast<long long>(stats.moves), static_cast<long long>(stats.resolved),
              static_cast<long long>(c.energy), r.message.c_str());
}

TEST(CudaExpansion, TsukubaReachesTheBenchmarkEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  Middlebury("tsukuba", 370825, false);
}

TEST(CudaExpansion, VenusReachesTheBenchmarkEnergy) {
  MRF_SKIP_WITHOUT_CUDA();
  Middlebury("venus", 3125962, true);
}

}  // namespace
}  // namespace mrf
