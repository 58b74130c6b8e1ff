// The swap moves of the shared per-node steps (backends/common/expansion_steps.h) on the CPU, the
// reference of cuda-swap: the graph a node builds for a pair prices every cut exactly as the reference
// energy does (up to truncation, which may only overprice), and DeltaNode sums to the exact change; the
// CPU twin making swap moves keeps valid preflows (checked after every update and solve), reaches the
// same labels with and without kept residual graphs, ends where no swap move improves (brute force),
// and -- with cpu-swap's pair order and the sink-minimal cut on its flipped sides -- reaches exactly
// cpu-swap's labels and per-cycle energies (cpu-swap's engine, cpu-bk, reports the source-minimal cut).
#include <gtest/gtest.h>

#include <random>

#include "inference/alpha_beta_swap.h"
#include "mrf/solve.h"
#include "support/expansion_twin.h"
#include "support/move_cases.h"
#include "support/test_support.h"

namespace mrf {
namespace {

using test::Gather;
using test::TwinGrid;

using Case = test::MoveCase;

// A random distance table: symmetric with a zero diagonal (a semimetric), or asymmetric with a
// non-zero diagonal (swap terms that break submodularity, so truncation with odd deficits).
Pairwise RandomTable(std::mt19937_64& rng, Label labels, bool semimetric) {
  Pairwise p;
  p.kind = PairwiseKind::kTable;
  p.lambda = 1 + static_cast<Cost>(rng() % 5);
  p.table.assign(static_cast<std::size_t>(labels) * labels, 0);
  for (Label a = 0; a < labels; ++a)
    for (Label b = 0; b < labels; ++b) {
      Cost& v = p.table[static_cast<std::size_t>(a) * labels + b];
      if (semimetric) {
        if (b > a) v = static_cast<Cost>(rng() % 30);
        else if (b < a) v = p.table[static_cast<std::size_t>(b) * labels + a];
      } else {
        v = static_cast<Cost>(rng() % (a == b ? 25 : 20));
      }
    }
  return p;
}

Pairwise RandomPairwise(std::mt19937_64& rng, int which, Label labels) {
  Pairwise p;
  p.lambda = 1 + static_cast<Cost>(rng() % 40);
  switch (which % 5) {
    case 0: p.kind = PairwiseKind::kPotts; break;
    case 1:
      p.kind = PairwiseKind::kTruncatedLinear;
      p.truncation = 1 + static_cast<Cost>(rng() % 4);
      break;
    case 2:  // a semimetric for every truncation: swap never truncates it
      p.kind = PairwiseKind::kTruncatedQuadratic;
      p.truncation = 3 + static_cast<Cost>(rng() % 8);
      break;
    case 3: return RandomTable(rng, labels, true);
    default: return RandomTable(rng, labels, false);
  }
  return p;
}

// Random grid models; `size` 0: at most 12 nodes (brute force), 1: small, 2: a little larger.
std::vector<Case> RandomCases(std::uint64_t seed, int count, int size) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int spread) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(spread)); };
  auto topology = [&](int shape) {
    if (size == 0)
      return shape == 0 ? Topology::Grid2D(4, 3, 4) : shape == 1 ? Topology::Grid2D(3, 3, 8) : Topology::Grid3D(2, 2, 3);
    if (size == 1)
      return shape == 0 ? Topology::Grid2D(pick(5, 9), pick(3, 8), 4)
             : shape == 1 ? Topology::Grid2D(pick(4, 7), pick(3, 6), 8)
                          : Topology::Grid3D(pick(3, 3), pick(2, 3), pick(2, 3));
    return shape == 0 ? Topology::Grid2D(pick(15, 20), pick(9, 14), 4)
           : shape == 1 ? Topology::Grid2D(pick(11, 12), pick(7, 10), 8)
                        : Topology::Grid3D(pick(5, 4), pick(5, 4), pick(3, 4));
  };
  return test::RandomMoveCases(rng, count, topology, RandomPairwise, 1000, 3, /*expansion=*/false);
}

template <int D>
void CheckSwapPrices(const Case& c, std::mt19937_64& rng, int* truncating_moves) {
  const Model& m = c.model;
  const std::vector<std::int32_t> table = test::SmoothnessTable(m);
  const xp::MoveCosts costs{table.data(), m.num_labels};
  const TwinGrid g(m.topology);
  const std::int64_t n = g.n();
  ASSERT_LE(n, 16);
  for (int trial = 0; trial < 2; ++trial) {
    const Labeling labels = test::RandomLabels(rng, m);
    const Energy e0 = EvaluateEnergy(m, labels).total;
    for (Label a = 0; a < m.num_labels; ++a)
      for (Label b = a + 1; b < m.num_labels; ++b) {
        const xp::Move move = xp::Move::Swap(a, b);
        StGraph graph(m.topology);
        const std::int64_t truncated = test::BuildMoveGraph<D>(m, costs, labels, move, &graph);
        *truncating_moves += truncated > 0;
        const Energy base = graph.CutCapacity(Labeling(static_cast<std::size_t>(n), 0));
        Labeling all_source = labels;  // every free node on the source side: the labelling with beta for a and b
        for (std::int64_t v = 0; v < n; ++v) all_source[v] = move.NewLabel(labels[v], false);
        const Energy e_source = EvaluateEnergy(m, all_source).total;
        for (std::int64_t y = 0; y < (std::int64_t{1} << n); ++y) {
          Labeling cut(static_cast<std::size_t>(n)), proposal = labels;
          bool fixed_moved = false;
          for (std::int64_t v = 0; v < n; ++v) {
            cut[v] = (y >> v) & 1;
            proposal[v] = move.NewLabel(labels[v], cut[v] != 0);
            fixed_moved = fixed_moved || (cut[v] && !move.Free(labels[v]));
          }
          if (fixed_moved) continue;  // nodes that take no part have no say
          const Energy truth = EvaluateEnergy(m, proposal).total - e_source;
          const Energy priced = graph.CutCapacity(cut) - base;
          if (truncated == 0) ASSERT_EQ(priced, truth) << c.name << ", pair " << a << "," << b << ", cut " << y;
          else ASSERT_GE(priced, truth) << c.name << ", pair " << a << "," << b << ", cut " << y;
          Energy delta = 0;
          int nl[D], nnl[D];
          std::int32_t w[D];
          for (std::int64_t v = 0; v < n; ++v) {
            Gather<D>(g, m, labels, v, nl, w);
            Gather<D>(g, m, proposal, v, nnl, w);
            delta += xp::DeltaNode<D>(costs, labels[v], proposal[v], m.unary_cost(v, labels[v]),
                                      m.unary_cost(v, proposal[v]), nl, nnl, w);
          }
          ASSERT_EQ(delta, EvaluateEnergy(m, proposal).total - e0) << c.name << ", pair " << a << "," << b;
        }
      }
  }
}

TEST(SwapSteps, MoveGraphsPriceEveryCutAsTheReferenceEnergy) {
  std::mt19937_64 rng(3);
  int truncating = 0;
  for (const Case& c : RandomCases(11, 30, 0)) {
    SCOPED_TRACE(c.name);
    switch (c.model.topology.kind()) {
      case TopologyKind::kGrid4: CheckSwapPrices<4>(c, rng, &truncating); break;
      case TopologyKind::kGrid8: CheckSwapPrices<8>(c, rng, &truncating); break;
      default: CheckSwapPrices<6>(c, rng, &truncating); break;
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(truncating, 0) << "no move exercised truncation";
}

TEST(SwapSteps, TwinKeepsValidPreflowsAndKeptGraphsReachTheFreshLabels) {
  EXPECT_GT(test::CheckKeptGraphsReachTheFreshLabels(RandomCases(5, 30, 1), /*swap=*/true), 50);
}

// Whether any swap move lowers the energy of `labels` (all moves of every pair).
bool SomeSwapImproves(const Model& m, const Labeling& labels) {
  const std::int64_t n = m.num_nodes();
  const Energy e0 = EvaluateEnergy(m, labels).total;
  for (Label a = 0; a < m.num_labels; ++a)
    for (Label b = a + 1; b < m.num_labels; ++b) {
      std::vector<std::int64_t> free_nodes;
      for (std::int64_t v = 0; v < n; ++v)
        if (labels[v] == a || labels[v] == b) free_nodes.push_back(v);
      for (std::int64_t y = 0; y < (std::int64_t{1} << free_nodes.size()); ++y) {
        Labeling moved = labels;
        for (std::size_t i = 0; i < free_nodes.size(); ++i) moved[free_nodes[i]] = (y >> i) & 1 ? b : a;
        if (EvaluateEnergy(m, moved).total < e0) return true;
      }
    }
  return false;
}

TEST(SwapSteps, TwinEndsWhereNoSwapImproves) {
  std::mt19937_64 rng(17);
  int cases = 0;
  for (const Case& c : RandomCases(23, 24, 0)) {
    SCOPED_TRACE(c.name);
    if (c.truncate) continue;  // a truncated move may miss an improvement
    test::TwinOptions o;
    o.reuse = false;
    o.initial = test::RandomLabels(rng, c.model);
    const test::TwinResult twin = test::RunSwapTwin(c.model, o);
    ASSERT_EQ(twin.failure, "");
    EXPECT_FALSE(SomeSwapImproves(c.model, twin.labels)) << "a swap move still lowers the energy";
    ++cases;
  }
  EXPECT_GT(cases, 10);
}

// The twin against cpu-swap: same pairs in the same order (sequential, or shuffled with the same
// seed), the same cuts (sink-minimal on the flipped sides = cpu-bk's source-minimal), the same
// truncation: the same labels and the same energy after every cycle.
TEST(SwapSteps, TwinReachesCpuSwapsLabelsAndCycleEnergies) {
  std::mt19937_64 rng(29);
  int truncating = 0, cycles = 0;
  for (int size = 1; size <= 2; ++size)
    for (const Case& c : RandomCases(31 + size, 30, size)) {
      SCOPED_TRACE(c.name);
      for (LabelOrder order : {LabelOrder::kSequential, LabelOrder::kRandom}) {
        SolveOptions so;
        so.solver = "cpu-swap";
        so.label_order = order;
        so.seed = 13;
        so.truncate_nonsubmodular = c.truncate;
        so.max_iterations = 100;
        test::TwinOptions o;
        o.reuse = false;
        o.order = order;
        o.seed = so.seed;
        if (order == LabelOrder::kRandom) {
          o.initial = test::RandomLabels(rng, c.model);
          so.initial_labels = o.initial;
        }
        const Result cpu = Solve(c.model, so);
        ASSERT_TRUE(cpu.ok) << cpu.message;
        const test::TwinResult twin = test::RunSwapTwin(c.model, o);
        ASSERT_EQ(twin.failure, "");
        EXPECT_EQ(twin.labels, cpu.labels);
        ASSERT_EQ(twin.cycle_energies.size(), cpu.log.size()) << cpu.message;
        for (std::size_t i = 0; i < cpu.log.size(); ++i) EXPECT_EQ(twin.cycle_energies[i], cpu.log[i].energy) << "cycle " << i + 1;
        truncating += twin.truncations > 0;
        cycles += static_cast<int>(cpu.log.size());
      }
    }
  EXPECT_GT(truncating, 3) << "too few cases truncated terms";
  std::printf("the swap twin matched cpu-swap over %d cycles (%d runs truncated terms)\n", cycles, truncating);
}

}  // namespace
}  // namespace mrf
