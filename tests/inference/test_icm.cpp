// ICM ("cpu-icm") on tiny random models: monotone, a local optimum of single-node changes, any
// pairwise term; and its options.
#include <gtest/gtest.h>

#include "move_test_support.h"

namespace mrf {
namespace {

using test::ExpectMonotoneRun;
using test::OptionsFor;

TEST(Icm, NeverRaisesTheEnergyAndNoSingleNodeCanImprove) {
  std::vector<test::TinyCase> cases = test::TinyMetricModels(121);
  std::mt19937_64 rng(121);
  for (int i = 0; i < 10; ++i) {  // non-metric terms too: ICM takes any
    test::TinyCase c;
    c.model = test::TinyQuadraticModel(rng, test::TinyTopologies(rng, 4)[i % 3], 4, 5 + i);
    c.name = "quadratic #" + std::to_string(i);
    cases.push_back(std::move(c));
  }
  for (const test::TinyCase& c : cases) {
    std::vector<Energy> energies;
    SolveOptions options = OptionsFor("cpu-icm", &energies);
    options.initial_labels.resize(c.model.num_nodes());
    for (Label& l : options.initial_labels) l = static_cast<Label>(rng() % c.model.num_labels);
    const Result r = Solve(c.model, options);
    ExpectMonotoneRun(c.model, options, r, energies, c.name);
    EXPECT_EQ(r.backend_used, "cpu-icm");
    EXPECT_NE(r.message.find("converged"), std::string::npos) << r.message;
    for (NodeId p = 0; p < c.model.num_nodes(); ++p) {
      Labeling x = r.labels;
      for (Label l = 0; l < c.model.num_labels; ++l) {
        x[p] = l;
        EXPECT_GE(EvaluateEnergy(c.model, x).total, r.energy) << c.name << ": node " << p << " to label " << l;
      }
    }
  }
}

TEST(Icm, StopsOnTheCallbackAndTheIterationLimit) {
  std::mt19937_64 rng(122);
  Pairwise v;
  v.kind = PairwiseKind::kPotts;
  v.lambda = 30;  // strong smoothing: many sweeps before convergence
  const Model m = test::RandomModel(rng, Topology::Grid2D(30, 30, 4), 6, 40, v);
  SolveOptions options = OptionsFor("cpu-icm");
  options.initial_labels.resize(m.num_nodes());
  for (Label& l : options.initial_labels) l = static_cast<Label>(rng() % 6);
  options.max_iterations = 1;
  Result r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.iterations, 1);
  EXPECT_NE(r.message.find("iteration limit (1 sweeps)"), std::string::npos) << r.message;
  EXPECT_LT(r.energy, EvaluateEnergy(m, options.initial_labels).total);

  options.max_iterations = 100;
  options.callback = [](const IterationRecord&) { return false; };
  r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.iterations, 1);
  EXPECT_NE(r.message.find("stopped by the callback after sweep 1"), std::string::npos) << r.message;

  options.callback = nullptr;
  options.time_limit_s = 1e-9;
  r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_NE(r.message.find("time limit"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace mrf
