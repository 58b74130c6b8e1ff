// Alpha-beta swap ("cpu-swap") on tiny random models against brute force: monotone, a local optimum
// of swap moves, exact with two labels; semimetric check, truncation and options.
#include <gtest/gtest.h>

#include "inference/alpha_beta_swap.h"
#include "move_test_support.h"
#include "mrf/registry.h"

namespace mrf {
namespace {

using test::ExpectMonotoneRun;
using test::OptionsFor;

TEST(Swap, NeverRaisesTheEnergyAndEndsInASwapLocalOptimum) {
  for (const test::TinyCase& c : test::TinyMetricModels(111)) {
    const Result r = test::SolveConvergedRun(c, "cpu-swap");
    for (Label a = 0; a < c.model.num_labels; ++a)
      for (Label b = a + 1; b < c.model.num_labels; ++b)
        EXPECT_EQ(test::BestSwap(c.model, r.labels, a, b), r.energy)
            << c.name << ": a swap of labels " << a << " and " << b << " still lowers the energy";
  }
}

TEST(Swap, CompactAndFullMoveGraphsBothEndInASwapLocalOptimum) {
  MoveTuning full;
  full.sparse_moves = false;
  MoveTuning boost;  // an engine outside the registry's choice, supplied directly
  boost.engine = [] { return Registry::Global().Find("boost-bk")->make_engine(); };
  boost.engine_name = "boost-bk";
  for (const MoveTuning& tuning : {MoveTuning(), full, boost})
    for (const test::TinyCase& c : test::TinyMetricModels(116, 1, 3, 5)) {
      std::vector<Energy> energies;
      SolveOptions options = OptionsFor("cpu-swap", &energies);
      options.label_order = LabelOrder::kRandom;
      options.seed = 5;
      Result r;
      RunAlphaBetaSwap(c.model, options, &r, tuning);
      test::ExpectMonotoneDirectRun(c.model, options, &r, energies, c.name);
      for (Label a = 0; a < c.model.num_labels; ++a)
        for (Label b = a + 1; b < c.model.num_labels; ++b)
          EXPECT_EQ(test::BestSwap(c.model, r.labels, a, b), r.energy) << c.name << ", labels " << a << ", " << b;
    }
}

TEST(Swap, TruncatedQuadraticTermsAreSemimetricAndRunWithoutTruncation) {
  std::mt19937_64 rng(112);
  for (int trial = 0; trial < 20; ++trial) {
    const Label labels = 3 + trial % 3;
    const Topology topology = test::TinyTopologies(rng, labels)[trial % 3];
    const Model m = test::TinyQuadraticModel(rng, topology, labels, 3 + trial % 10);
    std::vector<Energy> energies;
    SolveOptions options = OptionsFor("cpu-swap", &energies);
    options.initial_labels.resize(m.num_nodes());
    for (Label& l : options.initial_labels) l = static_cast<Label>(rng() % labels);
    const Result r = Solve(m, options);
    ExpectMonotoneRun(m, options, r, energies, topology.Describe());
    for (Label a = 0; a < labels; ++a)
      for (Label b = a + 1; b < labels; ++b) EXPECT_EQ(test::BestSwap(m, r.labels, a, b), r.energy);
  }
}

TEST(Swap, TwoLabelsGiveTheExactOptimum) {
  test::ExpectExactWithTwoLabels("cpu-swap", 113);
}

TEST(Swap, SameSeedSameRunAndOptionsAreHonoured) {
  std::mt19937_64 rng(114);
  Pairwise v;
  v.kind = PairwiseKind::kTruncatedLinear;
  v.lambda = 4;
  v.truncation = 3;
  const Model m = test::RandomModel(rng, Topology::Grid2D(12, 12, 4), 5, 40, v);
  SolveOptions options = OptionsFor("cpu-swap");
  options.label_order = LabelOrder::kRandom;
  options.seed = 77;
  const Result a = Solve(m, options), b = Solve(m, options);
  ASSERT_TRUE(a.ok && b.ok) << a.message << b.message;
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.log.size(), b.log.size());

  int calls = 0;
  options.callback = [&calls](const IterationRecord&) { return ++calls < 1; };
  const Result stopped = Solve(m, options);
  ASSERT_TRUE(stopped.ok) << stopped.message;
  EXPECT_EQ(stopped.iterations, 1);
  EXPECT_NE(stopped.message.find("stopped by the callback after cycle 1"), std::string::npos) << stopped.message;

  options.callback = nullptr;
  options.time_limit_s = 1e-9;
  const Result timed = Solve(m, options);
  ASSERT_TRUE(timed.ok) << timed.message;
  EXPECT_NE(timed.message.find("time limit"), std::string::npos) << timed.message;

  // Starting from a swap-optimal labelling, nothing moves.
  options.time_limit_s = 0;
  options.initial_labels = a.labels;
  const Result again = Solve(m, options);
  ASSERT_TRUE(again.ok) << again.message;
  EXPECT_EQ(again.labels, a.labels);
  EXPECT_NE(again.message.find("converged after 1 cycle:"), std::string::npos) << again.message;

  options.initial_labels.clear();
  test::ExpectSwapRefusesFrequentOrder(m, options);
}

// A cycle's bookkeeping holds a few words per label pair: 5794 labels (16,782,321 pairs, above 2^24) are
// refused in one line before anything is allocated.
TEST(Swap, RefusesLabelCountsWhosePairsWouldFillMemory) {
  Pairwise v;
  v.kind = PairwiseKind::kTruncatedLinear;
  v.truncation = 2;
  Model m;
  m.topology = Topology::Grid2D(2, 1, 4);
  m.pairwise = v;
  m.num_labels = 5794;
  m.unary.assign(2 * 5794, 1);
  const Result refused = Solve(m, OptionsFor("cpu-swap"));
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("swap with 5794 labels runs 16782321 moves a cycle, more than the 16777216 it takes"),
            std::string::npos)
      << refused.message;
}

TEST(Swap, RefusesNonSemimetricTablesUnlessTruncating) {
  std::mt19937_64 rng(115);
  Pairwise v;
  v.kind = PairwiseKind::kTable;
  v.lambda = 2;
  v.table = {3, 0, 1,  //
             0, 4, 1,  //
             1, 1, 0};
  const Model m = test::RandomModel(rng, Topology::Grid2D(3, 3, 4), 3, 20, v);
  const Result refused = Solve(m, OptionsFor("cpu-swap"));
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("semimetric"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("V(0,0) + V(1,1)"), std::string::npos) << refused.message;
  EXPECT_EQ(refused.message.find('\n'), std::string::npos);

  std::vector<Energy> energies;
  SolveOptions options = OptionsFor("cpu-swap", &energies);
  options.truncate_nonsubmodular = true;
  options.initial_labels.assign(9, 1);
  options.initial_labels[4] = 0;
  const Result r = Solve(m, options);
  ExpectMonotoneRun(m, options, r, energies, "non-semimetric table");
  EXPECT_NE(r.message.find("non-submodular move terms truncated"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("; 0 non-submodular"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace mrf
