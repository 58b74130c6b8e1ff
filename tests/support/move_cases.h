#pragma once
// Random multilabel grid models and move graphs for the tests of expansion and swap moves (the shared
// per-node steps on the CPU, their CPU twin, cuda-expansion and cuda-swap): one case generator, one
// move graph built node by node with BuildNode, and the kept-graphs-against-fresh check of the twin.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "inference/move_graph.h"
#include "support/expansion_twin.h"
#include "support/test_support.h"

namespace mrf::test {

/// A random model with its name and whether its moves need truncation.
struct MoveCase {
  Model model;
  bool truncate = false;  ///< Some move term is not submodular (FindNonSubmodularMoveTerm).
  std::string name;
};

/// `count` random grid models: case i is 4-connected, 8-connected or 6-connected by i % 3, sized by
/// `topology(shape)` (shape = i % 3, drawing from `rng`), with 2-6 labels, unary costs in
/// [0, max_unary], smoothness `pairwise(rng, i / 3, labels)` and edge weights up to `heavy_weight` on odd
/// cases (1 on even ones). `truncate` says whether expansion (`expansion`) or swap moves need it.
template <class MakeTopology, class MakePairwise>
std::vector<MoveCase> RandomMoveCases(std::mt19937_64& rng, int count, MakeTopology topology, MakePairwise pairwise,
                                      Cost max_unary, Cost heavy_weight, bool expansion) {
  std::vector<MoveCase> cases;
  for (int i = 0; i < count; ++i) {
    const Topology t = topology(i % 3);
    const Label labels = 2 + static_cast<Label>(rng() % 5);
    const Cost max_weight = i % 2 ? heavy_weight : 1;
    MoveCase c;
    c.model = RandomModel(rng, t, labels, max_unary, pairwise(rng, i / 3, labels), max_weight);
    c.truncate = !FindNonSubmodularMoveTerm(c.model, expansion).empty();
    c.name = t.Describe() + ", " + std::to_string(labels) + " labels, " + ToString(c.model.pairwise.kind) + ", case " +
             std::to_string(i);
    cases.push_back(std::move(c));
  }
  return cases;
}

/// Every node of `m` labelled uniformly at random.
inline Labeling RandomLabels(std::mt19937_64& rng, const Model& m) {
  Labeling l(static_cast<std::size_t>(m.num_nodes()));
  for (Label& x : l) x = static_cast<Label>(rng() % static_cast<std::uint64_t>(m.num_labels));
  return l;
}

/// lambda * distance(a, b) as the L x L table the move steps read (xp::MoveCosts).
inline std::vector<std::int32_t> SmoothnessTable(const Model& m) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(m.num_labels) * m.num_labels);
  for (Label a = 0; a < m.num_labels; ++a)
    for (Label b = 0; b < m.num_labels; ++b)
      t[static_cast<std::size_t>(a) * m.num_labels + b] = m.pairwise.lambda * m.pairwise.distance(a, b, m.num_labels);
  return t;
}

/// The graph of `move` on `labels` as every node's BuildNode writes it, as an StGraph; returns the number
/// of truncated terms. Nodes that take no part and edges leaving the grid must carry no capacity.
template <int D>
std::int64_t BuildMoveGraph(const Model& m, const xp::MoveCosts& c, const Labeling& labels, const xp::Move& move,
                            StGraph* graph) {
  const TwinGrid g(m.topology);
  const std::int64_t n = g.n();
  TwinState s;
  const std::int64_t truncated = BuildMoveState<D>(g, m, c, move, labels, &s);
  const std::vector<std::uint32_t>& r = s.r;
  for (std::int64_t v = 0; v < n; ++v) {
    graph->add_tweights(v, s.x[v] > 0 ? s.x[v] : 0, s.x[v] < 0 ? -s.x[v] : 0);
    if (!move.Free(labels[v])) {  // a node that takes no part has no capacity at all
      EXPECT_EQ(s.x[v], 0);
      for (int d = 0; d < D; ++d) EXPECT_EQ(r[d * n + v], 0u);
    }
  }
  const int kind = static_cast<int>(m.topology.kind());
  for (int d = 0; d < D / 2; ++d)
    for (std::int64_t v = 0; v < n; ++v) {
      const std::int64_t q = g.Neighbour(v, d);
      if (q < 0) {
        EXPECT_EQ(r[d * n + v], 0u);
        continue;
      }
      graph->add_to_edge_slot(d * n + v, static_cast<Cost>(r[d * n + v]),
                              static_cast<Cost>(r[pr::Opposite(kind, d) * n + q]));
    }
  return truncated;
}

/// The CPU twin (expansion or `swap` moves) with kept residual graphs always re-solved reaches the labels
/// and per-cycle energies of fresh solves, in every label order it takes (frequent: expansion only);
/// energies never rise and the last is the reference evaluator's. Returns the number of moves re-solved
/// from kept graphs.
inline std::int64_t CheckKeptGraphsReachTheFreshLabels(const std::vector<MoveCase>& cases, bool swap) {
  std::int64_t resolves = 0;
  for (const MoveCase& c : cases) {
    SCOPED_TRACE(c.name);
    for (LabelOrder order : {LabelOrder::kSequential, LabelOrder::kRandom, LabelOrder::kFrequent}) {
      if (swap && order == LabelOrder::kFrequent) continue;
      TwinOptions fresh;
      fresh.reuse = false;
      fresh.order = order;
      fresh.seed = 9;
      TwinOptions kept = fresh;
      kept.reuse = true;
      kept.update_fraction = 1000;  // always re-solve from the kept graph (changes count with repeats)
      const TwinResult a = swap ? RunSwapTwin(c.model, fresh) : RunExpansionTwin(c.model, fresh);
      const TwinResult b = swap ? RunSwapTwin(c.model, kept) : RunExpansionTwin(c.model, kept);
      EXPECT_EQ(a.failure, "");
      EXPECT_EQ(b.failure, "");
      if (!a.failure.empty() || !b.failure.empty()) return resolves;
      resolves += b.resolves;
      EXPECT_EQ(a.labels, b.labels) << "re-solving from kept graphs must give the same cuts";
      EXPECT_EQ(a.cycle_energies, b.cycle_energies);
      for (std::size_t i = 1; i < a.cycle_energies.size(); ++i) EXPECT_LE(a.cycle_energies[i], a.cycle_energies[i - 1]);
      EXPECT_EQ(EvaluateEnergy(c.model, a.labels).total, a.cycle_energies.back());
    }
  }
  return resolves;
}

}  // namespace mrf::test
