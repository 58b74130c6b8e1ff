// Custom energies from callbacks: quantisation, scale choice, and errors that name the bad term.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "energies/custom.h"
#include "support/test_support.h"

namespace mrf {
namespace {

TEST(CustomEnergy, ChooseCostScaleKeepsSixDigits) {
  EXPECT_EQ(ChooseCostScale(0), 1.0);
  EXPECT_EQ(ChooseCostScale(1.0), 1e6);
  EXPECT_EQ(ChooseCostScale(52.02), 1e4);
  EXPECT_EQ(ChooseCostScale(1e6), 1.0);
  EXPECT_EQ(ChooseCostScale(2.5e7), 0.01);
  for (double v : {1.5, 9.99, 10.0, 12345.0, 4e9}) {
    const double s = ChooseCostScale(v);
    EXPECT_LE(v * s, 1e6 * (1 + 1e-12)) << v;
    EXPECT_GT(v * s * 10, 1e6 * (1 - 1e-12)) << v;  // the next power of ten would overflow the target
  }
  EXPECT_EQ(ChooseCostScale(3e-3), 1e6);  // clamped: tiny costs are not blown up without bound
  EXPECT_THROW(ChooseCostScale(-1), Error);
  EXPECT_THROW(ChooseCostScale(std::nan("")), Error);
}

TEST(CustomEnergy, ModelHoldsRoundedScaledCallbacks) {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> cost(0.0, 7.5);
  const int w = 5, h = 4;
  const Label labels = 3;
  std::vector<double> data(w * h * labels);
  for (double& v : data) v = cost(rng);
  CustomEnergy e;
  e.topology = Topology::Grid2D(w, h, 4);
  e.num_labels = labels;
  e.data = [&](NodeId p, Label l) { return data[p * labels + l]; };
  e.distance = [](Label a, Label b) { return a == b ? 0.0 : 0.25 + std::abs(a - b); };
  const Model m = BuildCustomModel(e);
  EXPECT_EQ(m.cost_scale, ChooseCostScale(*std::max_element(data.begin(), data.end())));
  for (NodeId p = 0; p < w * h; ++p)
    for (Label l = 0; l < labels; ++l) EXPECT_EQ(m.unary_cost(p, l), std::llround(data[p * labels + l] * m.cost_scale));
  ASSERT_EQ(m.pairwise.kind, PairwiseKind::kTable);
  for (Label a = 0; a < labels; ++a)
    for (Label b = 0; b < labels; ++b)
      EXPECT_EQ(m.pairwise.distance(a, b, labels), std::llround(e.distance(a, b) * m.cost_scale));
  // Energy / scale is the real energy up to half a unit per term.
  Labeling x(w * h);
  for (auto& l : x) l = static_cast<Label>(rng() % labels);
  double real = 0;
  for (NodeId p = 0; p < w * h; ++p) real += data[p * labels + x[p]];
  m.topology.ForEachEdge([&](EdgeId, NodeId p, NodeId q) { real += e.distance(x[p], x[q]); });
  const double terms = w * h + static_cast<double>(m.topology.num_edges());
  EXPECT_NEAR(EvaluateEnergy(m, x).total / m.cost_scale, real, 0.5 * terms / m.cost_scale);
}

TEST(CustomEnergy, BuiltInKindWithRealLambdaAndFixedScale) {
  CustomEnergy e;
  e.topology = Topology::Grid2D(3, 3, 4);
  e.num_labels = 4;
  e.data = [](NodeId p, Label l) { return 0.5 * p + l; };
  e.kind = PairwiseKind::kTruncatedLinear;
  e.lambda = 0.75;
  e.truncation = 2;
  e.scale = 100;
  const Model m = BuildCustomModel(e);
  EXPECT_EQ(m.cost_scale, 100);
  EXPECT_EQ(m.pairwise.lambda, 75);
  EXPECT_EQ(m.pairwise.truncation, 2);
  EXPECT_EQ(m.unary_cost(3, 2), 350);
}

TEST(CustomEnergy, BadValuesNameTheTerm) {
  CustomEnergy e;
  e.topology = Topology::Grid2D(4, 2, 4);
  e.num_labels = 2;
  e.data = [](NodeId p, Label l) { return p == 5 && l == 1 ? std::numeric_limits<double>::quiet_NaN() : 1.0; };
  try {
    BuildCustomModel(e);
    FAIL() << "NaN accepted";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()), "data cost of node 5, label 1 is NaN");
  }
  e.data = [](NodeId, Label) { return 1.0; };
  e.distance = [](Label a, Label b) { return a == 0 && b == 1 ? -2.0 : 0.0; };
  try {
    BuildCustomModel(e);
    FAIL() << "negative distance accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("pairwise distance(0, 1) is negative"), std::string::npos) << err.what();
  }
  e.distance = {};
  e.data = [](NodeId, Label) { return 1e12; };
  e.scale = 1;
  EXPECT_THROW(BuildCustomModel(e), Error);  // does not fit 32 bits
  e.data = {};
  EXPECT_THROW(BuildCustomModel(e), Error);
}

TEST(CustomEnergy, QuantizeHelpersMatchBuildCustomModel) {
  auto data = [](NodeId p, Label l) { return std::sqrt(p + 1.0) * (l + 1); };
  auto distance = [](Label a, Label b) { return std::min(std::abs(a - b), 2) * 1.5; };
  CustomEnergy e;
  e.topology = Topology::Grid2D(3, 2, 4);
  e.num_labels = 5;
  e.data = data;
  e.distance = distance;
  e.scale = 1000;
  const Model m = BuildCustomModel(e);
  EXPECT_EQ(m.unary, QuantizeDataCosts(6, 5, data, 1000));
  EXPECT_EQ(m.pairwise.table, QuantizePairwiseTable(5, distance, 1000).table);
}

}  // namespace
}  // namespace mrf
