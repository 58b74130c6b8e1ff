// Alpha-expansion ("cpu-expansion") on tiny random models against brute force: monotone, exact with
// two labels, within twice the optimum on Potts, a local optimum of expansion moves; and its options.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "inference/alpha_expansion.h"
#include "inference/move_graph.h"
#include "move_test_support.h"
#include "mrf/registry.h"

namespace mrf {
namespace {

using test::ExpectMonotoneRun;
using test::OptionsFor;

TEST(Expansion, NeverRaisesTheEnergyAndEndsInAnExpansionLocalOptimum) {
  for (const test::TinyCase& c : test::TinyMetricModels(101)) {
    const Result r = test::SolveConvergedRun(c, "cpu-expansion");
    for (Label alpha = 0; alpha < c.model.num_labels; ++alpha)
      EXPECT_EQ(test::BestExpansion(c.model, r.labels, alpha), r.energy)
          << c.name << ": an expansion on label " << alpha << " still lowers the energy";
  }
}

TEST(Expansion, EveryGraphPathEndsInAnExpansionLocalOptimum) {
  // Per-label graphs with flow reuse, updated incrementally (always, or never), or one graph solved
  // from scratch: each path must keep the energy honest and end where no expansion helps.
  MoveTuning always_update, rebuild, scratch;
  always_update.update_limit = 1e9;
  rebuild.incremental = false;
  scratch.reuse_flow = false;
  for (const MoveTuning& tuning : {always_update, rebuild, scratch})
    for (const test::TinyCase& c : test::TinyMetricModels(606, 1, 3, 5)) {
      std::vector<Energy> energies;
      SolveOptions options = OptionsFor("cpu-expansion", &energies);
      options.label_order = LabelOrder::kRandom;
      options.seed = 17;
      Result r;
      RunAlphaExpansion(c.model, options, &r, tuning);
      test::ExpectMonotoneDirectRun(c.model, options, &r, energies, c.name);
      for (Label alpha = 0; alpha < c.model.num_labels; ++alpha)
        EXPECT_EQ(test::BestExpansion(c.model, r.labels, alpha), r.energy) << c.name << ", label " << alpha;
    }
}

TEST(Expansion, TwoLabelsGiveTheExactOptimum) {
  test::ExpectExactWithTwoLabels("cpu-expansion", 202);
}

TEST(Expansion, PottsIsWithinTwiceTheOptimum) {
  int strictly_above = 0;
  for (const test::TinyCase& c : test::TinyMetricModels(303, 3, 3, 5)) {
    if (c.model.pairwise.kind != PairwiseKind::kPotts) continue;
    const Result r = Solve(c.model, OptionsFor("cpu-expansion"));
    ASSERT_TRUE(r.ok) << c.name << ": " << r.message;
    const Energy optimum = test::BruteForceMinEnergy(c.model);
    EXPECT_LE(r.energy, 2 * optimum) << c.name;
    EXPECT_GE(r.energy, optimum) << c.name;
    strictly_above += r.energy > optimum;
  }
  // Not a requirement, but all-optimal answers would mean these models are too easy to test much.
  RecordProperty("potts_runs_above_optimum", strictly_above);
}

TEST(Expansion, MatchesTheMovesOfEveryEngineAndTheDefaultChoice) {
  // The same run through the explicit reference engine and through "auto" gives the same energy
  // sequence (every move is exact, so ties aside both reach the same energies).
  for (const test::TinyCase& c : test::TinyMetricModels(404, 1, 3, 3)) {
    SolveOptions a = OptionsFor("cpu-expansion");
    SolveOptions b = a;
    b.maxflow_backend = "boost-bk";
    const Result ra = Solve(c.model, a), rb = Solve(c.model, b);
    ASSERT_TRUE(ra.ok && rb.ok) << c.name << ": " << ra.message << " / " << rb.message;
    EXPECT_NE(rb.message.find("max-flow engine boost-bk"), std::string::npos) << rb.message;
    EXPECT_EQ(ra.energy, rb.energy) << c.name;
  }
}

TEST(Expansion, AutoPicksExpansionForMetricMultilabelModels) {
  std::mt19937_64 rng(5);
  Pairwise v;
  v.kind = PairwiseKind::kTruncatedLinear;
  v.lambda = 3;
  v.truncation = 2;
  const Model m = test::RandomModel(rng, Topology::Grid2D(4, 4, 4), 4, 20, v);
  SolveOptions options;
  options.device = Device::kCpu;
  const Result r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.backend_used, "cpu-expansion");
}

// Without a metric, auto takes BP where BP runs (4-connected 2-D grids) and elsewhere the move solver that
// can take the terms: swap for a semimetric, ICM for any other table. It once picked BP everywhere, which
// then refused 3-D grids, 8-connected grids and edge lists.
TEST(Expansion, AutoPicksASolverThatRunsForNonMetricTerms) {
  std::mt19937_64 rng(6);
  const Pairwise quadratic{PairwiseKind::kTruncatedQuadratic, 2, 9, {}};  // a semimetric, not a metric
  Pairwise asymmetric{PairwiseKind::kTable, 1, kMaxCost, {0, 5, 2, 1, 0, 3, 4, 2, 0}};  // V(a,b) != V(b,a)
  Pairwise negative{PairwiseKind::kTable, 1, kMaxCost, {0, -4, -4, 0}};   // swap's moves are not graph cuts
  struct Case {
    Topology topology;
    Pairwise pairwise;
    Label labels;
    const char* backend;
  };
  for (const Case& c : {Case{Topology::Grid2D(5, 4, 4), quadratic, 4, "tbb-bp"},
                        Case{Topology::Grid2D(5, 4, 8), quadratic, 4, "cpu-swap"},
                        Case{Topology::Grid3D(3, 3, 2), quadratic, 4, "cpu-swap"},
                        Case{Topology::EdgeList(4, {0, 1, 2}, {1, 2, 3}), asymmetric, 3, "cpu-swap"},
                        Case{Topology::Grid3D(3, 3, 2), negative, 2, "cpu-icm"},
                        // more label pairs than a swap cycle takes (6000 x 5999 / 2 > 2^24)
                        Case{Topology::Grid3D(3, 2, 2), quadratic, 6000, "cpu-icm"}}) {
    const Model m = test::RandomModel(rng, c.topology, c.labels, 20, c.pairwise);
    ASSERT_FALSE(m.pairwise.IsMetric(m.num_labels)) << c.backend;
    SolveOptions options;
    options.device = Device::kCpu;
    const Result r = Solve(m, options);
    ASSERT_TRUE(r.ok) << c.backend << ": " << r.message;
    EXPECT_EQ(r.backend_used, c.backend) << m.topology.Describe();
    EXPECT_EQ(r.energy, EvaluateEnergy(m, r.labels).total) << c.backend;
  }
}

// A model auto sends to BP but whose costs pass BP's 32-bit messages (5 x pairwise spread > 2^31 - 1):
// auto gives way to swap and says why; a solver or an algorithm the user named keeps its refusal, and so
// does a failed --start bp, which is not the moves refusing the model.
TEST(Expansion, AutoTurnsToTheNextAlgorithmWhenItsChoiceRefusesTheModel) {
  std::mt19937_64 rng(8);
  const Pairwise quadratic{PairwiseKind::kTruncatedQuadratic, 100000000, 9, {}};  // spread 9e8
  const Model m = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 4, 20, quadratic);
  SolveOptions automatic;
  automatic.device = Device::kCpu;
  const Result r = Solve(m, automatic);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.backend_used, "cpu-swap");
  EXPECT_NE(r.fallback_reason.find("tbb-bp cannot solve this model: belief propagation needs"), std::string::npos)
      << r.fallback_reason;
  const Result swap = Solve(m, OptionsFor("cpu-swap"));
  ASSERT_TRUE(swap.ok) << swap.message;
  EXPECT_EQ(r.energy, swap.energy);
  EXPECT_EQ(r.labels, swap.labels);

  // A mistake in the options is not the model refused: swap's refusal of the label order stands, rather
  // than auto running ICM.
  SolveOptions frequent = automatic;
  frequent.label_order = LabelOrder::kFrequent;
  const Result mistaken = Solve(m, frequent);
  EXPECT_FALSE(mistaken.ok) << mistaken.backend_used << ": " << mistaken.fallback_reason;
  EXPECT_NE(mistaken.message.find("label order frequent orders labels"), std::string::npos) << mistaken.message;

  SolveOptions named_solver = OptionsFor("tbb-bp"), named_algorithm = automatic;
  named_algorithm.algorithm = Algorithm::kBeliefPropagation;
  for (const SolveOptions& o : {named_solver, named_algorithm}) {
    const Result refused = Solve(m, o);
    EXPECT_FALSE(refused.ok) << refused.backend_used;
    EXPECT_NE(refused.message.find("belief propagation needs"), std::string::npos) << refused.message;
  }

  const Pairwise linear{PairwiseKind::kTruncatedLinear, 500000000, 9, {}};  // a metric (spread 1.5e9): expansion
  const Model metric = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 4, 20, linear);
  SolveOptions start_bp = automatic;
  start_bp.start = StartLabels::kBeliefPropagation;
  const Result started = Solve(metric, start_bp);
  EXPECT_FALSE(started.ok) << started.backend_used;
  EXPECT_EQ(started.message.rfind("start bp: ", 0), 0u) << started.message;
  automatic.start = StartLabels::kZero;
  const Result plain = Solve(metric, automatic);
  ASSERT_TRUE(plain.ok) << plain.message;
  EXPECT_EQ(plain.backend_used, "cpu-expansion");
  EXPECT_TRUE(plain.fallback_reason.empty()) << plain.fallback_reason;
}

TEST(Expansion, SameSeedSameRunAndRandomOrderDiffersFromSequential) {
  std::mt19937_64 rng(9);
  Pairwise v;
  v.kind = PairwiseKind::kPotts;
  v.lambda = 9;
  bool differs = false;
  for (int trial = 0; trial < 10 && !differs; ++trial) {
    const Model m = test::RandomModel(rng, Topology::Grid2D(12, 10, 8), 5, 30, v, 3);
    SolveOptions sequential = OptionsFor("cpu-expansion");
    SolveOptions random = sequential;
    random.label_order = LabelOrder::kRandom;
    random.seed = 1000 + trial;
    const Result s = Solve(m, sequential), r1 = Solve(m, random), r2 = Solve(m, random);
    ASSERT_TRUE(s.ok && r1.ok && r2.ok) << s.message << r1.message << r2.message;
    EXPECT_EQ(r1.labels, r2.labels);
    ASSERT_EQ(r1.log.size(), r2.log.size());
    for (std::size_t i = 0; i < r1.log.size(); ++i) EXPECT_EQ(r1.log[i].energy, r2.log[i].energy);
    differs = r1.labels != s.labels || r1.log.front().energy != s.log.front().energy;
  }
  EXPECT_TRUE(differs) << "random label order never changed the run on 10 models";
}

// The orders a cycle takes: sequential every cycle; random permutations pinned for seed 77 (SolveOptions
// promises the same run from the same seed on every platform and build, so a changed shuffle must show
// here); frequent on one label; swap's pairs refuse frequent.
TEST(Expansion, MoveOrdersGiveTheDocumentedCycles) {
  Model m;
  m.topology = Topology::Grid2D(2, 1, 4);
  m.num_labels = 5;
  m.unary.assign(10, 0);
  std::vector<std::int64_t> cycle;
  MoveOrder sequential(LabelOrder::kSequential, 77, m, 5, false);
  for (int i = 0; i < 2; ++i) {
    sequential.Next(&cycle);
    EXPECT_EQ(cycle, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  }
  MoveOrder random(LabelOrder::kRandom, 77, m, 5, false);
  const std::vector<std::vector<std::int64_t>> pinned = {{4, 1, 3, 0, 2}, {3, 1, 0, 4, 2}, {4, 2, 0, 1, 3}};
  for (const auto& expected : pinned) {
    random.Next(&cycle);
    EXPECT_EQ(cycle, expected);
  }
  Model one = m;
  one.num_labels = 1;
  one.unary.assign(2, 3);
  MoveOrder frequent(LabelOrder::kFrequent, 0, one, 1, false);
  frequent.Next(&cycle);
  EXPECT_EQ(cycle, (std::vector<std::int64_t>{0}));
  EXPECT_THROW(MoveOrder(LabelOrder::kFrequent, 0, m, 10, true), Error);
  EXPECT_NO_THROW(MoveOrder(LabelOrder::kRandom, 0, m, 10, true));
}

// FrequentLabelsFirst against a count written out plainly: each node's lowest cost found by a scan
// that keeps the first minimum, then labels sorted by (count descending, label ascending).
TEST(Expansion, FrequentOrderCountsEachNodesCheapestLabel) {
  std::mt19937_64 rng(31);
  const Pairwise v{PairwiseKind::kTruncatedLinear, 3, 4, {}};
  for (int trial = 0; trial < 20; ++trial) {
    // Few distinct costs so that ties (between labels of a node, and between counts) are common.
    const Label labels = 2 + trial % 7;
    const Model m = test::RandomModel(rng, Topology::Grid2D(9 + trial, 7, 4), labels, trial % 2 ? 3 : 40, v);
    std::vector<std::pair<std::int64_t, std::int64_t>> count_label(static_cast<std::size_t>(labels));
    for (Label l = 0; l < labels; ++l) count_label[static_cast<std::size_t>(l)] = {0, l};
    for (NodeId p = 0; p < m.num_nodes(); ++p) {
      Label best = 0;
      for (Label l = 1; l < labels; ++l)
        if (m.unary_cost(p, l) < m.unary_cost(p, best)) best = l;
      --count_label[static_cast<std::size_t>(best)].first;  // negated: ascending sort puts most first
    }
    std::sort(count_label.begin(), count_label.end());
    std::vector<std::int64_t> expected;
    for (const auto& [count, label] : count_label) expected.push_back(label);
    EXPECT_EQ(FrequentLabelsFirst(m), expected) << "trial " << trial;
  }
  // Every cost equal: every node's cheapest label is 0, and the rest keep their order.
  Model flat = test::RandomModel(rng, Topology::Grid2D(5, 5, 4), 4, 10, v);
  std::fill(flat.unary.begin(), flat.unary.end(), 7);
  EXPECT_EQ(FrequentLabelsFirst(flat), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

// The solver visits the labels in that order: expansion with label order frequent on a model gives the
// labels that sequential order gives on the same model with its labels renamed so that the frequent
// order becomes 0, 1, 2, ... (a move's graph depends on the costs alone, not on the labels' names).
TEST(Expansion, FrequentOrderRunsTheMovesOfARenamedSequentialRun) {
  std::mt19937_64 rng(32);
  const Pairwise v{PairwiseKind::kTruncatedLinear, 4, 3, {}};
  int orders_not_sequential = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const Label L = 5;
    Model m = test::RandomModel(rng, Topology::Grid2D(14, 11, 4), L, 30, v, 3);
    // Skew the data towards high labels so that the frequent order is far from sequential.
    for (NodeId p = 0; p < m.num_nodes(); ++p)
      for (Label l = 0; l < L; ++l) m.unary[static_cast<std::size_t>(p) * L + l] += 4 * (L - 1 - l);
    const std::vector<std::int64_t> order = FrequentLabelsFirst(m);
    orders_not_sequential += order.front() != 0;
    Model renamed = m;  // renamed label k is m's label order[k]
    renamed.pairwise.kind = PairwiseKind::kTable;
    renamed.pairwise.table.assign(static_cast<std::size_t>(L) * L, 0);
    for (Label i = 0; i < L; ++i)
      for (Label j = 0; j < L; ++j)
        renamed.pairwise.table[static_cast<std::size_t>(i) * L + j] =
            m.pairwise.distance(static_cast<Label>(order[i]), static_cast<Label>(order[j]), L);
    std::vector<Label> new_name(static_cast<std::size_t>(L));
    for (Label k = 0; k < L; ++k) new_name[static_cast<std::size_t>(order[k])] = k;
    for (NodeId p = 0; p < m.num_nodes(); ++p)
      for (Label k = 0; k < L; ++k)
        renamed.unary[static_cast<std::size_t>(p) * L + k] = m.unary_cost(p, static_cast<Label>(order[k]));
    SolveOptions frequent = OptionsFor("cpu-expansion");
    frequent.label_order = LabelOrder::kFrequent;
    SolveOptions sequential = OptionsFor("cpu-expansion");
    sequential.initial_labels.assign(static_cast<std::size_t>(m.num_nodes()), new_name[0]);  // m's label 0
    const Result a = Solve(m, frequent), b = Solve(renamed, sequential);
    ASSERT_TRUE(a.ok && b.ok) << a.message << b.message;
    EXPECT_EQ(a.energy, b.energy) << "trial " << trial;
    ASSERT_EQ(a.labels.size(), b.labels.size());
    for (std::size_t p = 0; p < a.labels.size(); ++p)
      ASSERT_EQ(new_name[static_cast<std::size_t>(a.labels[p])], b.labels[p]) << "trial " << trial << ", node " << p;
  }
  EXPECT_GT(orders_not_sequential, 0) << "the skewed models never put another label first";
}

TEST(Expansion, CallbackStopsTheRunAfterTheFirstCycle) {
  std::mt19937_64 rng(10);
  Pairwise v;
  v.kind = PairwiseKind::kPotts;
  v.lambda = 6;
  const Model m = test::RandomModel(rng, Topology::Grid2D(16, 16, 4), 6, 40, v);
  SolveOptions options = OptionsFor("cpu-expansion");
  int calls = 0;
  options.callback = [&calls](const IterationRecord& record) {
    ++calls;
    EXPECT_EQ(record.iteration, 1);
    return false;
  };
  const Result r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.iterations, 1);
  EXPECT_NE(r.message.find("stopped by the callback after cycle 1"), std::string::npos) << r.message;
  EXPECT_EQ(r.energy, r.log.back().energy);
}

TEST(Expansion, IterationAndTimeLimitsStopTheRunAndSaySo) {
  std::mt19937_64 rng(11);
  Pairwise v;
  v.kind = PairwiseKind::kTruncatedLinear;
  v.lambda = 5;
  v.truncation = 3;
  const Model m = test::RandomModel(rng, Topology::Grid2D(20, 20, 4), 8, 50, v);
  SolveOptions options = OptionsFor("cpu-expansion");
  options.max_iterations = 1;
  Result r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.iterations, 1);
  EXPECT_NE(r.message.find("iteration limit (1 cycles)"), std::string::npos) << r.message;

  options.max_iterations = 100;
  options.time_limit_s = 1e-9;  // passes during the first move
  r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.iterations, 1);
  EXPECT_NE(r.message.find("time limit"), std::string::npos) << r.message;
  EXPECT_NE(r.log.back().note.find("1 moves"), std::string::npos) << r.log.back().note;
  EXPECT_EQ(r.energy, r.log.back().energy);
}

TEST(Expansion, StartsFromTheInitialLabelling) {
  for (const test::TinyCase& c : test::TinyMetricModels(505, 1, 3, 3)) {
    Labeling optimum;
    const Energy best = test::BruteForceMinEnergy(c.model, &optimum);
    SolveOptions options = OptionsFor("cpu-expansion");
    options.initial_labels = optimum;
    const Result r = Solve(c.model, options);
    ASSERT_TRUE(r.ok) << c.name << ": " << r.message;
    EXPECT_EQ(r.energy, best) << c.name;
    EXPECT_EQ(r.labels, optimum) << c.name << ": moves that do not lower the energy must not be taken";
    EXPECT_NE(r.message.find("converged after 1 cycle:"), std::string::npos) << r.message;
  }
}

TEST(Expansion, RefusesNonMetricTermsWithOneLineNamingTheLabels) {
  std::mt19937_64 rng(12);
  const Model m = test::TinyQuadraticModel(rng, Topology::Grid2D(3, 3, 4), 4, 9);
  const Result r = Solve(m, OptionsFor("cpu-expansion"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("triangle inequality"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("V(0,2)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("truncate_nonsubmodular"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find('\n'), std::string::npos) << r.message;

  // A table that breaks the triangle inequality is named by its labels too.
  Model t = m;
  t.pairwise.kind = PairwiseKind::kTable;
  t.pairwise.table = {0, 1, 5, 1,  //
                      1, 0, 1, 1,  //
                      5, 1, 0, 1,  //
                      1, 1, 1, 0};
  const Result rt = Solve(t, OptionsFor("cpu-expansion"));
  EXPECT_FALSE(rt.ok);
  EXPECT_NE(rt.message.find("V(0,2)"), std::string::npos) << rt.message;
  EXPECT_NE(rt.message.find("V(0,1) + V(1,2)"), std::string::npos) << rt.message;

  // Quadratic terms truncated at 2 are a metric and run.
  Model ok = m;
  ok.pairwise.truncation = 2;
  EXPECT_TRUE(Solve(ok, OptionsFor("cpu-expansion")).ok);
}

TEST(Expansion, TruncationRunsReportsTruncationsAndNeverRaisesTheEnergy) {
  std::mt19937_64 rng(13);
  std::int64_t runs_with_truncations = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const Label labels = 3 + trial % 3;
    const Topology topology = test::TinyTopologies(rng, labels)[trial % 3];
    const Model m = test::TinyQuadraticModel(rng, topology, labels, 3 + trial % 12);
    for (TruncationRule rule : {TruncationRule::kRaiseDisagreement, TruncationRule::kLowerAgreement}) {
      MoveTuning tuning;
      tuning.rule = rule;
      tuning.update_limit = trial % 2 ? 1e9 : 0.125;
      std::vector<Energy> energies;
      SolveOptions options = OptionsFor("cpu-expansion", &energies);
      options.truncate_nonsubmodular = true;
      options.initial_labels.resize(m.num_nodes());
      for (Label& l : options.initial_labels) l = static_cast<Label>(rng() % labels);
      Result r;
      r.cost_scale = m.cost_scale;
      RunAlphaExpansion(m, options, &r, tuning);
      test::ExpectMonotoneDirectRun(m, options, &r, energies, topology.Describe());
      EXPECT_NE(r.message.find("non-submodular move terms truncated"), std::string::npos) << r.message;
      runs_with_truncations += r.message.find("; 0 non-submodular") == std::string::npos;
    }
  }
  EXPECT_GT(runs_with_truncations, 0);
}

TEST(Expansion, NamedEnginesAreCheckedAndUnknownOnesRefused) {
  std::mt19937_64 rng(14);
  const Model m = test::TinyMetricModels(14, 1, 3, 3).front().model;
  SolveOptions options = OptionsFor("cpu-expansion");
  options.maxflow_backend = "no-such-engine";
  Result r = Solve(m, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("max-flow engine for the moves"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("no-such-engine"), std::string::npos) << r.message;
  options.maxflow_backend = "cpu-swap";  // a solver, not an engine
  r = Solve(m, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("cpu-swap"), std::string::npos) << r.message;
}

TEST(Expansion, OneLabelAndNoEdgesAreHandled) {
  Model m;
  m.topology = Topology::Grid2D(3, 2, 4);
  m.num_labels = 1;
  m.unary.assign(6, 4);
  Result r = Solve(m, OptionsFor("cpu-expansion"));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.energy, 24);

  // No edges at all: every node takes its cheapest label.
  std::mt19937_64 rng(15);
  Model lonely = test::RandomModel(rng, Topology::EdgeList(5, {}, {}), 4, 30, Pairwise{});
  r = Solve(lonely, OptionsFor("cpu-expansion"));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.energy, test::BruteForceMinEnergy(lonely));
}

// Far more labels than nodes: two joined nodes with 100,000 labels each end at their exact optimum,
// found here by trying every pair of labels near each node's cheapest. A move's work no longer
// grows with the label count (a per-move table over every label made this cycle quadratic in L:
// minutes here).
TEST(Expansion, ManyMoreLabelsThanNodes) {
  constexpr Label kLabels = 100000;
  std::mt19937_64 rng(16);
  Model m;
  m.topology = Topology::Grid2D(2, 1, 4);
  m.num_labels = kLabels;
  m.pairwise = Pairwise{PairwiseKind::kTruncatedLinear, 3, 50, {}};
  m.unary.resize(2 * static_cast<std::size_t>(kLabels));
  for (Cost& c : m.unary) c = 1000 + static_cast<Cost>(rng() % 1000);
  m.unary[70000] = 3;                   // node 0 prefers label 70000
  m.unary[kLabels + 70012] = 5;         // node 1 prefers 70012, 12 away
  m.unary[kLabels + 70000] = 40;        // or its neighbour's label, for 35 more
  const Result r = Solve(m, OptionsFor("cpu-expansion"));
  ASSERT_TRUE(r.ok) << r.message;
  // Every other label costs at least 1000 at either node, more than any pairwise term (3 x 50), so the
  // optimum takes labels from {70000, 70012} at both nodes.
  Energy best = std::numeric_limits<Energy>::max();
  for (Label a : {70000, 70012})
    for (Label b : {70000, 70012}) best = std::min(best, EvaluateEnergy(m, {a, b}).total);
  EXPECT_EQ(r.energy, best);
  EXPECT_EQ(r.energy, EvaluateEnergy(m, r.labels).total);
}

}  // namespace
}  // namespace mrf
