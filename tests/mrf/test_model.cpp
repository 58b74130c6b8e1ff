// The model, its one energy evaluator, validation messages and quantisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "mrf/model.h"
#include "support/test_support.h"

namespace mrf {
namespace {

TEST(Topology, GridEdgeCountsMatchSlotsThatHoldEdges) {
  for (const Topology& t : {Topology::Grid2D(5, 3, 4), Topology::Grid2D(5, 3, 8), Topology::Grid3D(4, 3, 2),
                            Topology::Grid2D(1, 7, 4), Topology::Grid2D(7, 1, 8)}) {
    EdgeId counted = 0;
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
      NodeId a = -1, b = -1;
      ASSERT_TRUE(t.edge_endpoints(slot, &a, &b));
      EXPECT_EQ(a, p);
      EXPECT_EQ(b, q);
      EXPECT_EQ(t.grid_slot(p, q), slot);
      EXPECT_EQ(t.grid_slot(q, p), slot);
      ++counted;
    });
    EXPECT_EQ(counted, t.num_edges()) << t.Describe();
    EdgeId existing = 0;
    NodeId a, b;
    for (EdgeId s = 0; s < t.num_edge_slots(); ++s) existing += t.edge_endpoints(s, &a, &b);
    EXPECT_EQ(existing, counted) << t.Describe();
  }
}

// Loops that split a grid by rows visit, over all their row ranges, exactly ForEachEdge's edges
// (same slots and endpoints), each once, whatever the split; so do the forward spans of every row
// and direction, and the backward spans seen from the edges' second ends.
TEST(Topology, EdgesByRowsAreTheEdgesOfTheWholeGrid) {
  for (const Topology& t : {Topology::Grid2D(7, 5, 4), Topology::Grid2D(6, 5, 8), Topology::Grid3D(4, 3, 5),
                            Topology::Grid2D(1, 7, 4), Topology::Grid2D(7, 1, 8), Topology::Grid2D(1, 1, 8)}) {
    std::vector<std::array<std::int64_t, 3>> whole, by_rows, by_spans, by_back_spans;
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) { whole.push_back({slot, p, q}); });
    const std::int64_t rows = std::int64_t{t.height()} * t.depth();
    for (std::int64_t begin = 0; begin < rows; begin += 2)
      t.ForEachEdgeInRows(begin, std::min(rows, begin + 2),
                          [&](EdgeId slot, NodeId p, NodeId q) { by_rows.push_back({slot, p, q}); });
    for (std::int64_t row = 0; row < rows; ++row)
      for (int d = 0; d < t.num_directions(); ++d) {
        const Topology::RowSpan span = t.ForwardSpan(row, d);
        for (int x = span.x_begin; x < span.x_end; ++x) {
          const NodeId p = static_cast<NodeId>(row * t.width() + x);
          by_spans.push_back({EdgeId{d} * t.num_nodes() + p, p, p + span.offset});
        }
        const Topology::RowSpan back = t.BackwardSpan(row, d);  // the same edges, from their second end
        for (int x = back.x_begin; x < back.x_end; ++x) {
          const NodeId q = static_cast<NodeId>(row * t.width() + x);
          by_back_spans.push_back({EdgeId{d} * t.num_nodes() + q + back.offset, q + back.offset, q});
        }
      }
    std::sort(whole.begin(), whole.end());
    std::sort(by_rows.begin(), by_rows.end());
    std::sort(by_spans.begin(), by_spans.end());
    std::sort(by_back_spans.begin(), by_back_spans.end());
    EXPECT_EQ(by_rows, whole) << t.Describe();
    EXPECT_EQ(by_spans, whole) << t.Describe();
    EXPECT_EQ(by_back_spans, whole) << t.Describe();
  }
}

TEST(Topology, EightConnectedNeighboursAreTheDiagonals) {
  const Topology t = Topology::Grid2D(3, 3, 8);
  // Centre node 4 = (1,1): right 5, down 7, down-right 8, down-left 6.
  EXPECT_EQ(t.neighbor(4, 0), 5);
  EXPECT_EQ(t.neighbor(4, 1), 7);
  EXPECT_EQ(t.neighbor(4, 2), 8);
  EXPECT_EQ(t.neighbor(4, 3), 6);
  EXPECT_EQ(t.neighbor(3, 3), -1);  // left column has no down-left neighbour
  EXPECT_EQ(t.neighbor(8, 0), -1);
}

TEST(Topology, RejectsBadShapesWithMessages) {
  EXPECT_THROW(Topology::Grid2D(0, 5), Error);
  EXPECT_THROW(Topology::Grid2D(4, 4, 6), Error);
  EXPECT_THROW(Topology::EdgeList(3, {0, 1}, {1}), Error);
  try {
    Topology::EdgeList(3, {0}, {7});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside 0..2"), std::string::npos) << e.what();
  }
}

TEST(Model, EvaluatorSumsUnaryAndWeightedPairwiseTerms) {
  Model m;
  m.topology = Topology::Grid2D(2, 2, 4);  // edges 0-1, 2-3 (right), 0-2, 1-3 (down)
  m.num_labels = 3;
  m.unary = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  m.pairwise.kind = PairwiseKind::kTruncatedLinear;
  m.pairwise.lambda = 10;
  m.pairwise.truncation = 1;
  m.edge_weights.assign(m.topology.num_edge_slots(), 1);
  m.edge_weights[m.topology.grid_slot(0, 2)] = 3;
  const Labeling x = {0, 2, 2, 2};
  const EnergyBreakdown e = EvaluateEnergy(m, x);
  EXPECT_EQ(e.data, 1 + 6 + 9 + 12);
  // 0-1: |0-2| truncated to 1 -> 10; 0-2: weight 3 -> 30; others equal labels.
  EXPECT_EQ(e.smoothness, 10 + 30);
  EXPECT_EQ(e.total, e.data + e.smoothness);
}

TEST(Model, PairwiseDistances) {
  Pairwise quad{PairwiseKind::kTruncatedQuadratic, 1, 7, {}};
  EXPECT_EQ(quad.distance(0, 2, 10), 4);
  EXPECT_EQ(quad.distance(5, 0, 10), 7);
  Pairwise potts{PairwiseKind::kPotts, 1, 0, {}};
  EXPECT_EQ(potts.distance(3, 3, 5), 0);
  EXPECT_EQ(potts.distance(3, 4, 5), 1);
  EXPECT_TRUE(potts.IsMetric(5));
  std::string why;
  EXPECT_FALSE(quad.IsMetric(10, &why));
  EXPECT_NE(why.find("triangle"), std::string::npos);
}

// The quadratic kind's O(L^2) metric check against every triple, as a table of the same distances.
TEST(Model, QuadraticMetricCheckAgreesWithAllTriples) {
  for (Label labels = 1; labels <= 9; ++labels)
    for (Cost truncation = 0; truncation <= 40; ++truncation) {
      const Pairwise quad{PairwiseKind::kTruncatedQuadratic, 1, truncation, {}};
      Pairwise table{PairwiseKind::kTable, 1, 0, {}};
      for (Label a = 0; a < labels; ++a)
        for (Label b = 0; b < labels; ++b) table.table.push_back(quad.distance(a, b, labels));
      std::string quad_why, table_why;
      EXPECT_EQ(quad.IsMetric(labels, &quad_why), table.IsMetric(labels, &table_why))
          << labels << " labels, truncation " << truncation;
      EXPECT_EQ(quad_why, table_why) << labels << " labels, truncation " << truncation;
    }
}

TEST(Model, ValidationNamesTheProblem) {
  Model m;
  m.topology = Topology::Grid2D(4, 4, 4);
  m.num_labels = 3;
  m.unary.assign(47, 0);
  std::string error;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_NE(error.find("48"), std::string::npos) << error;
  m.unary.assign(48, 0);
  EXPECT_TRUE(m.Validate(&error)) << error;
  m.edge_weights.assign(m.topology.num_edge_slots(), 1);
  m.edge_weights[5] = -2;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
  m.edge_weights[5] = 1 << 20;
  m.pairwise.lambda = 1 << 12;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_NE(error.find("overflows 32 bits"), std::string::npos) << error;
  m.pairwise.lambda = 1;
  m.pairwise.kind = PairwiseKind::kTable;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_NE(error.find("pairwise table"), std::string::npos) << error;
}

// Models with 2^20 edge slots and more scan their weights in blocks on all cores: the message must
// still name the first negative weight (whichever block holds a later one), the largest weight must
// still be the one checked for overflow, and a slot past the border is named as such.
TEST(Model, LargeModelsValidateTheirWeightsLikeSmallOnes) {
  Model m;
  m.topology = Topology::Grid2D(1030, 1020, 4);  // 2,101,200 slots
  m.num_labels = 2;
  m.unary.assign(static_cast<std::size_t>(m.num_nodes()) * 2, 0);
  m.edge_weights.assign(static_cast<std::size_t>(m.topology.num_edge_slots()), 7);
  std::string error;
  EXPECT_TRUE(m.Validate(&error)) << error;

  const EdgeId first = 1500000, later = 2000000;  // in different blocks, the later one more negative
  m.edge_weights[static_cast<std::size_t>(later)] = -9;
  m.edge_weights[static_cast<std::size_t>(first)] = -1;
  NodeId p = -1, q = -1;
  ASSERT_TRUE(m.topology.edge_endpoints(first, &p, &q));
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_EQ(error, "edge weight -1 of edge " + std::to_string(p) + "-" + std::to_string(q) + " (slot 1500000) is negative");
  m.edge_weights[static_cast<std::size_t>(first)] = 7;
  m.edge_weights[static_cast<std::size_t>(later)] = 7;
  const EdgeId past_border = 1029;  // direction 0 (right) of the first row's last node
  ASSERT_FALSE(m.topology.edge_endpoints(past_border, &p, &q));
  m.edge_weights[static_cast<std::size_t>(past_border)] = -3;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_EQ(error, "edge weight -3 in slot 1029 (a slot past the grid's border, which holds no edge) is negative");
  m.edge_weights[static_cast<std::size_t>(past_border)] = 7;

  // One large weight in the last block: weight x lambda overflows 32 bits only through it.
  m.pairwise.lambda = 1 << 10;
  EXPECT_TRUE(m.Validate(&error)) << error;
  m.edge_weights.back() = 1 << 22;
  EXPECT_FALSE(m.Validate(&error));
  EXPECT_NE(error.find("edge weight 4194304 x lambda 1024"), std::string::npos) << error;
}

TEST(Model, EvaluatorRejectsBadLabellings) {
  Model m;
  m.topology = Topology::Grid2D(2, 1, 4);
  m.num_labels = 2;
  m.unary = {0, 0, 0, 0};
  EXPECT_THROW(EvaluateEnergy(m, {0}), Error);
  EXPECT_THROW(EvaluateEnergy(m, {0, 2}), Error);
  EXPECT_THROW(EvaluateEnergy(m, {-1, 0}), Error);
}

// Grids of 65,536 nodes and more are scored by rows on all cores: every kind, each pairwise family and
// per-edge weights must give the sums of a plain serial pass, and a labelling with two bad labels must
// name the first of them, whatever row of the grid holds the other.
TEST(Model, LargeGridEnergiesEqualASerialSum) {
  std::mt19937_64 rng(14);
  const Pairwise kinds[] = {{PairwiseKind::kPotts, 3, 0, {}},
                            {PairwiseKind::kTruncatedLinear, 2, 3, {}},
                            {PairwiseKind::kTruncatedQuadratic, 1, 9, {}},
                            {PairwiseKind::kTable, 1, 0, {0, 4, 5, 9, 6, 0, 2, 8, 3, 7, 0, 1, 5, 5, 5, 0}}};
  const Topology shapes[] = {Topology::Grid2D(301, 250, 4), Topology::Grid2D(199, 401, 8), Topology::Grid3D(50, 41, 37)};
  for (int k = 0; k < 4; ++k) {
    const Topology& t = shapes[k % 3];
    const Label labels = 4;
    const Model m = test::RandomModel(rng, t, labels, 100, kinds[k], 6);
    Labeling x(m.num_nodes());
    for (Label& l : x) l = static_cast<Label>(rng() % labels);
    Energy data = 0, smoothness = 0;
    for (NodeId p = 0; p < m.num_nodes(); ++p) data += m.unary_cost(p, x[p]);
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) { smoothness += m.pairwise_cost(slot, x[p], x[q]); });
    const EnergyBreakdown e = EvaluateEnergy(m, x);
    EXPECT_EQ(e.data, data) << t.Describe();
    EXPECT_EQ(e.smoothness, smoothness) << t.Describe();
    EXPECT_EQ(e.total, data + smoothness) << t.Describe();
    x[m.num_nodes() - 5] = labels;  // in the last rows
    x[70000] = -1;                  // the first bad one
    try {
      EvaluateEnergy(m, x);
      ADD_FAILURE() << "bad labels were accepted on the " << t.Describe();
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()), "label -1 at node 70000 is outside 0..3") << t.Describe();
    }
  }
}

TEST(Model, QuantizeRejectsNaNNegativeAndOverflow) {
  EXPECT_EQ(QuantizeCost(1.26, 100, "x"), 126);
  EXPECT_EQ(QuantizeCost(-0.5, 10, "x", true), -5);
  EXPECT_THROW(QuantizeCost(std::nan(""), 1, "unary cost of node 3"), Error);
  EXPECT_THROW(QuantizeCost(-1, 1, "x"), Error);
  EXPECT_THROW(QuantizeCost(1e12, 1, "x"), Error);
  EXPECT_THROW(QuantizeCost(INFINITY, 1, "x"), Error);
  try {
    QuantizeCost(std::nan(""), 1, "unary cost of node 3 label 1");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unary cost of node 3 label 1 is NaN");
  }
}

TEST(Model, SubmodularityCheckOnTables) {
  Model m;
  m.topology = Topology::Grid2D(2, 1, 4);
  m.num_labels = 2;
  m.unary = {0, 0, 0, 0};
  m.pairwise.kind = PairwiseKind::kTable;
  m.pairwise.table = {0, 1, 1, 0};
  EXPECT_TRUE(IsSubmodularBinary(m));
  m.pairwise.table = {3, 1, 1, 0};
  std::string why;
  EXPECT_FALSE(IsSubmodularBinary(m, &why));
  EXPECT_NE(why.find("0-1"), std::string::npos) << why;
}

}  // namespace
}  // namespace mrf
