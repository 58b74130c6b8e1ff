// The per-node steps of cuda-expansion (backends/common/expansion_steps.h) on the CPU: the graph a
// node builds prices every move exactly as the reference energy does (up to truncation, which may only
// overprice), the energy change and energy sums match EvaluateEnergy, graph updates leave valid
// preflows (checked by the CPU twin after every update and solve), re-solving from kept graphs reaches
// the same labels as solving afresh, and the twin ends at labellings no expansion move improves.
#include <gtest/gtest.h>

#include <random>

#include "mrf/solve.h"
#include "support/expansion_twin.h"
#include "support/move_cases.h"
#include "support/test_support.h"

namespace mrf {
namespace {

using test::Gather;
using test::TwinGrid;

using Case = test::MoveCase;

Pairwise RandomPairwise(std::mt19937_64& rng, int which) {
  Pairwise p;
  p.lambda = 1 + static_cast<Cost>(rng() % 40);
  switch (which % 4) {
    case 0: p.kind = PairwiseKind::kPotts; break;
    case 1:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = 1 + static_cast<Cost>(rng() % 4);
      break;
    case 2:  // not a metric for truncation > 2: moves get truncated terms
      p.kind = PairwiseKind::kTruncatedQuadratic;
      p.truncation = 3 + static_cast<Cost>(rng() % 8);
      break;
    default:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = kMaxCost;
      break;
  }
  return p;
}

// Random grid models; `tiny` ones have at most 12 nodes (brute force).
std::vector<Case> RandomCases(std::uint64_t seed, int count, bool tiny) {
  std::mt19937_64 rng(seed);
  auto topology = [&](int shape) {
    return shape == 0   ? Topology::Grid2D(tiny ? 4 : 5 + static_cast<int>(rng() % 9), tiny ? 3 : 3 + static_cast<int>(rng() % 8), 4)
           : shape == 1 ? Topology::Grid2D(tiny ? 3 : 4 + static_cast<int>(rng() % 7), tiny ? 3 : 3 + static_cast<int>(rng() % 6), 8)
                        : Topology::Grid3D(tiny ? 2 : 3 + static_cast<int>(rng() % 3), tiny ? 2 : 2 + static_cast<int>(rng() % 3), tiny ? 3 : 2 + static_cast<int>(rng() % 3));
  };
  auto pairwise = [](std::mt19937_64& r, int which, Label) { return RandomPairwise(r, which); };
  return test::RandomMoveCases(rng, count, topology, pairwise, 1000, 3, /*expansion=*/true);
}

template <int D>
void CheckMovePrices(const Case& c, std::mt19937_64& rng) {
  const Model& m = c.model;
  const std::vector<std::int32_t> table = test::SmoothnessTable(m);
  const xp::MoveCosts costs{table.data(), m.num_labels};
  const TwinGrid g(m.topology);
  const std::int64_t n = g.n();
  ASSERT_LE(n, 16);
  for (int trial = 0; trial < 3; ++trial) {
    const Labeling labels = test::RandomLabels(rng, m);
    const Energy e0 = EvaluateEnergy(m, labels).total;
    // The energy as NodeEnergy sums it.
    Energy sum = 0;
    int nl[D];
    std::int32_t w[D];
    for (std::int64_t v = 0; v < n; ++v) {
      Gather<D>(g, m, labels, v, nl, w);
      sum += xp::NodeEnergy<D>(costs, labels[v], m.unary_cost(v, labels[v]), nl, w);
    }
    ASSERT_EQ(sum, e0) << c.name;
    for (Label alpha = 0; alpha < m.num_labels; ++alpha) {
      StGraph graph(m.topology);
      const std::int64_t truncated = test::BuildMoveGraph<D>(m, costs, labels, xp::Move::Expansion(alpha), &graph);
      const Energy base = graph.CutCapacity(Labeling(static_cast<std::size_t>(n), 0));
      for (std::int64_t y = 0; y < (std::int64_t{1} << n); ++y) {
        Labeling cut(static_cast<std::size_t>(n)), moved = labels;
        for (std::int64_t v = 0; v < n; ++v) {
          cut[v] = (y >> v) & 1;
          if (cut[v]) moved[v] = alpha;
        }
        const Energy truth = EvaluateEnergy(m, moved).total - e0;
        const Energy priced = graph.CutCapacity(cut) - base;
        if (truncated == 0) ASSERT_EQ(priced, truth) << c.name << ", alpha " << alpha << ", cut " << y;
        else ASSERT_GE(priced, truth) << c.name << ", alpha " << alpha << ", cut " << y;
        // DeltaNode sums to the exact change.
        Energy delta = 0;
        int nnl[D];
        for (std::int64_t v = 0; v < n; ++v) {
          Gather<D>(g, m, labels, v, nl, w);
          Gather<D>(g, m, moved, v, nnl, w);
          delta += xp::DeltaNode<D>(costs, labels[v], moved[v], m.unary_cost(v, labels[v]), m.unary_cost(v, moved[v]),
                                    nl, nnl, w);
        }
        ASSERT_EQ(delta, truth) << c.name << ", alpha " << alpha << ", cut " << y;
      }
    }
  }
}

TEST(ExpansionSteps, MoveGraphsPriceEveryCutAsTheReferenceEnergy) {
  std::mt19937_64 rng(3);
  int truncating = 0;
  for (const Case& c : RandomCases(11, 24, true)) {
    SCOPED_TRACE(c.name);
    if (FindNonSubmodularMoveTerm(c.model, true) != "") ++truncating;
    switch (c.model.topology.kind()) {
      case TopologyKind::kGrid4: CheckMovePrices<4>(c, rng); break;
      case TopologyKind::kGrid8: CheckMovePrices<8>(c, rng); break;
      default: CheckMovePrices<6>(c, rng); break;
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(truncating, 0) << "no case exercised truncation";
}

TEST(ExpansionSteps, TwinUpdatesKeepValidPreflowsAndReachTheFreshLabels) {
  EXPECT_GT(test::CheckKeptGraphsReachTheFreshLabels(RandomCases(5, 36, false), /*swap=*/false), 100);
}

// Whether any expansion move lowers the energy of `labels` (all 2^n moves of every label).
bool SomeMoveImproves(const Model& m, const Labeling& labels) {
  const std::int64_t n = m.num_nodes();
  const Energy e0 = EvaluateEnergy(m, labels).total;
  for (Label alpha = 0; alpha < m.num_labels; ++alpha)
    for (std::int64_t y = 1; y < (std::int64_t{1} << n); ++y) {
      Labeling moved = labels;
      for (std::int64_t v = 0; v < n; ++v)
        if ((y >> v) & 1) moved[v] = alpha;
      if (EvaluateEnergy(m, moved).total < e0) return true;
    }
  return false;
}

TEST(ExpansionSteps, TwinEndsAtAnExpansionLocalOptimumNearCpuExpansion) {
  std::mt19937_64 rng(17);
  int equal = 0, total = 0;
  for (const Case& c : RandomCases(23, 30, true)) {
    SCOPED_TRACE(c.name);
    const bool metric = FindNonSubmodularMoveTerm(c.model, true).empty();
    test::TwinOptions o;
    o.initial = test::RandomLabels(rng, c.model);
    const test::TwinResult twin = test::RunExpansionTwin(c.model, o);
    ASSERT_EQ(twin.failure, "");
    if (metric) EXPECT_FALSE(SomeMoveImproves(c.model, twin.labels)) << "an expansion move still lowers the energy";
    SolveOptions so;
    so.solver = "cpu-expansion";
    so.initial_labels = o.initial;
    so.truncate_nonsubmodular = true;
    const Result cpu = Solve(c.model, so);
    ASSERT_TRUE(cpu.ok) << cpu.message;
    const Energy e = EvaluateEnergy(c.model, twin.labels).total;
    EXPECT_EQ(e, twin.cycle_energies.back());
    ++total;
    equal += e == cpu.energy;
    if (metric) EXPECT_LE(std::abs(static_cast<double>(e - cpu.energy)), 0.005 * static_cast<double>(cpu.energy) + 1e-9);
  }
  std::printf("twin and cpu-expansion reached the same energy on %d of %d models\n", equal, total);
}

// The bookkeeping of a move whose max-flow stopped early (MoveControl::stopped): whether or not its cut
// was taken, it is never skipped for the same labelling, and its kept graph is not re-solved; an exact
// move that found nothing is skipped until the labelling changes.
TEST(ExpansionSteps, MovesStoppedEarlyAreNeitherSkippedNorReSolved) {
  std::vector<std::int64_t> settled(2, -1), truncated(2, 0), snapshot(2, 0);
  std::vector<std::int32_t> has_state(2, 0), order{0, 1};
  std::vector<xp::MoveRecord> records(2);
  xp::LabelBook book;
  book.settled_at = settled.data();
  book.truncated = truncated.data();
  book.snapshot = snapshot.data();
  book.has_state = has_state.data();
  xp::MoveControl c;
  c.num_moves = 2;
  c.num_slots = 2;
  c.update_limit = 100;
  auto run = [&](int k, bool stopped, std::int64_t delta) {
    c.move_index = k;
    const bool runs = xp::BeginMove(c, order.data(), book, records.data(), true);
    if (runs) {
      c.stopped = stopped ? 1 : 0;
      c.delta = delta;
      c.moved = delta < 0 ? 3 : 0;
      xp::EndMove(c, book, records.data());
    }
    return runs;
  };
  EXPECT_TRUE(run(0, true, 0));   // label 0 stops early and finds nothing
  EXPECT_TRUE(run(1, false, 0));  // label 1 runs exactly and finds nothing
  EXPECT_EQ(records[0].stopped, 1);
  EXPECT_EQ(has_state[0], 0) << "a graph stopped early must not be re-solved incrementally";
  EXPECT_EQ(has_state[1], 1);
  EXPECT_TRUE(run(0, false, 0)) << "a move stopped early was skipped";
  EXPECT_FALSE(records[0].resolve);
  EXPECT_FALSE(run(1, false, 0)) << "an exact move that found nothing ran again on the same labelling";
  EXPECT_FALSE(run(0, false, 0)) << "an exact move that found nothing ran again on the same labelling";
  ++c.changes;  // another move changed two labels
  c.nodes_changed += 2;
  EXPECT_TRUE(run(0, true, -5));  // re-solved, stopped early, its cut taken
  EXPECT_TRUE(records[0].resolve);
  EXPECT_EQ(records[0].accepted, 1);
  EXPECT_EQ(settled[0], -1);
  EXPECT_EQ(has_state[0], 0);
  EXPECT_TRUE(run(1, false, 0)) << "the labelling changed: label 1 must run";
  EXPECT_TRUE(records[1].resolve) << "label 1's exact graph should be re-solved";
}

}  // namespace
}  // namespace mrf
