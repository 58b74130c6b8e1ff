// Cancellation: a time limit of (almost) zero and a callback returning false stop every CPU solver
// cleanly. A stopped solve is ok, says why it stopped, returns a valid labelling that the reference
// evaluator scores, and never claims a bound it does not have: stopped max-flow solves claim none,
// and the flow they routed so far is checked against the exact minimum (Boost Graph's max-flow).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

#include <tbb/info.h>

#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Labels in range, one per node, and the energy the result reports is the evaluator's.
void ExpectValidLabelling(const Model& model, const Result& r, const std::string& what) {
  ASSERT_TRUE(r.ok) << what << ": " << r.message;
  ASSERT_EQ(r.labels.size(), static_cast<std::size_t>(model.num_nodes())) << what;
  for (Label l : r.labels) ASSERT_TRUE(l >= 0 && l < model.num_labels) << what << ": label " << l;
  EXPECT_EQ(r.energy, EvaluateEnergy(model, r.labels).total) << what;
}

Model BinaryGridModel(std::uint64_t seed, int side) {
  std::mt19937_64 rng(seed);
  Pairwise potts;
  potts.kind = PairwiseKind::kPotts;
  potts.lambda = 20;
  return test::RandomModel(rng, Topology::Grid2D(side, side, 4), 2, 100, potts, 5);
}

// The exact minimum of a two-label model, from the independent reference engine.
Energy ExactMinimum(const Model& model) {
  SolveOptions options;
  options.solver = "boost-bk";
  const Result r = Solve(model, options);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(r.has_lower_bound);
  return r.energy;
}

const char* const kCpuMaxFlow[] = {"cpu-bk", "boost-bk", "tbb-pr"};

// A max-flow solve stopped early: a valid labelling, no bound claimed, an energy not below the
// minimum, and a feasible flow (never above the minimum cut).
void ExpectStoppedMaxFlow(const Model& model, const Result& r, const std::string& name, Energy minimum) {
  ExpectValidLabelling(model, r, name);
  EXPECT_FALSE(r.has_lower_bound) << name;
  EXPECT_GE(r.energy, minimum) << name;
  EXPECT_LE(r.flow, minimum) << name;
}

TEST(Cancellation, ZeroTimeLimitStopsEveryCpuMaxFlowEngine) {
  const Model model = BinaryGridModel(501, 40);
  const Energy minimum = ExactMinimum(model);
  for (const char* name : kCpuMaxFlow) {
    SolveOptions options;
    options.solver = name;
    options.time_limit_s = 1e-9;
    const Result r = Solve(model, options);
    ExpectStoppedMaxFlow(model, r, name, minimum);
    EXPECT_EQ(r.backend_used, name);
    EXPECT_TRUE(Contains(r.message, "stopped early: the time limit (1e-09 s) passed")) << name << ": " << r.message;
    EXPECT_TRUE(Contains(r.message, "not a minimum one")) << name << ": " << r.message;
  }
}

TEST(Cancellation, CallbackReturningFalseStopsEveryCpuMaxFlowEngine) {
  const Model model = BinaryGridModel(502, 40);
  const Energy minimum = ExactMinimum(model);
  for (const char* name : kCpuMaxFlow) {
    SolveOptions options;
    options.solver = name;
    int calls = 0;
    options.callback = [&calls](const IterationRecord& record) {
      ++calls;
      EXPECT_EQ(record.energy, -1);  // max-flow progress has no energy
      EXPECT_GE(record.time_ms, 0);
      return false;
    };
    const Result r = Solve(model, options);
    ExpectStoppedMaxFlow(model, r, name, minimum);
    EXPECT_EQ(calls, 1) << name;
    EXPECT_TRUE(Contains(r.message, "stopped early: the callback asked to stop")) << name << ": " << r.message;
  }
}

TEST(Cancellation, CallbackThatGoesOnChangesNothing) {
  const Model model = BinaryGridModel(503, 24);
  const Energy minimum = ExactMinimum(model);
  for (const char* name : kCpuMaxFlow) {
    SolveOptions options;
    options.solver = name;
    int calls = 0;
    options.callback = [&calls](const IterationRecord&) { return ++calls > 0; };
    options.time_limit_s = 1000;
    const Result r = Solve(model, options);
    ExpectValidLabelling(model, r, name);
    EXPECT_FALSE(Contains(r.message, "stopped")) << name << ": " << r.message;
    ASSERT_TRUE(r.has_lower_bound) << name;
    EXPECT_EQ(r.energy, minimum) << name;
    EXPECT_EQ(r.lower_bound, minimum) << name;
    EXPECT_GE(calls, 1) << name;  // every engine polls at least once (boost-bk only before it starts)
  }
}

// Stopped in the middle of a solve (not at its start), the graph keeps the engine: cpu-bk continues
// from the flow routed so far, tbb-pr starts afresh; either way the next solves end at the maximum flow.
TEST(Cancellation, StGraphStoppedSolvesContinueToTheMaximumFlow) {
  std::mt19937_64 rng(504);
  const Topology grid = Topology::Grid2D(200, 200, 4);
  StGraph reference = test::RandomGridGraph(rng, grid, 50);
  const Result exact = reference.maxflow("boost-bk");
  ASSERT_TRUE(exact.ok) << exact.message;
  for (const char* name : {"cpu-bk", "tbb-pr"}) {
    std::mt19937_64 same(504);
    StGraph g = test::RandomGridGraph(same, grid, 50);
    int polls = 0;
    // Go on at the first poll, stop at the second: cpu-bk stops after 16384 growth steps, tbb-pr
    // after its second cycle.
    g.set_limits(0, [&polls](const IterationRecord&) { return ++polls % 2 == 1; });
    Result r = g.maxflow(name);
    ASSERT_TRUE(r.ok) << name << ": " << r.message;
    ASSERT_GE(polls, 2) << name << ": the graph is too easy to be stopped in the middle";
    EXPECT_TRUE(Contains(r.message, "stopped early: the callback asked to stop after")) << name << ": " << r.message;
    EXPECT_FALSE(r.has_lower_bound);
    EXPECT_EQ(r.energy, g.CutCapacity(r.labels)) << name;
    EXPECT_GE(r.energy, exact.flow) << name;
    EXPECT_LE(r.flow, exact.flow) << name;
    EXPECT_EQ(g.what_segment(0) == Segment::kSink, r.labels[0] == 1) << name;
    if (std::string(name) == "cpu-bk") {
      // Continue, stopped again at every second poll: each call moves on by 16384 growth steps.
      int solves = 1;
      while (Contains(r.message, "stopped early") && solves < 1000) {
        polls = 0;
        r = g.maxflow(name);
        ASSERT_TRUE(r.ok) << name << ": " << r.message;
        EXPECT_LE(r.flow, exact.flow) << name;
        ++solves;
      }
      EXPECT_GT(solves, 2) << name;
    } else {
      g.set_limits(0);
      r = g.maxflow(name);
    }
    EXPECT_TRUE(r.has_lower_bound) << name << ": " << r.message;
    EXPECT_EQ(r.flow, exact.flow) << name;
    EXPECT_EQ(r.energy, exact.flow) << name;
  }
}

TEST(Cancellation, StGraphLimitsAreChecked) {
  StGraph g;
  EXPECT_THROW(g.set_limits(-1), Error);
  EXPECT_THROW(g.set_limits(std::numeric_limits<double>::infinity()), Error);
  EXPECT_THROW(g.set_limits(std::numeric_limits<double>::quiet_NaN()), Error);
  try {
    g.set_limits(-2);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "set_limits: the time limit must be a finite number of seconds >= 0 (got -2)");
  }
}

TEST(Cancellation, StGraphZeroTimeLimitStopsEveryCpuEngineWithAValidCut) {
  const Topology grid = Topology::Grid2D(30, 20, 8);
  for (const char* name : kCpuMaxFlow) {
    std::mt19937_64 same(505);
    StGraph g = test::RandomGridGraph(same, grid, 30);
    g.add_tweights(3, -7, 2);  // a negative capacity: the constant is part of both numbers
    g.set_limits(1e-9);
    const Result r = g.maxflow(name);
    ASSERT_TRUE(r.ok) << name << ": " << r.message;
    EXPECT_TRUE(Contains(r.message, "stopped early: the time limit (1e-09 s) passed")) << name << ": " << r.message;
    EXPECT_EQ(r.energy, g.CutCapacity(r.labels)) << name;
    g.set_limits(0);
    const Result exact = g.maxflow("boost-bk", false);
    ASSERT_TRUE(exact.ok) << exact.message;
    EXPECT_GE(r.energy, exact.flow) << name;
    EXPECT_LE(r.flow, exact.flow) << name;
  }
}

// The multilabel CPU solvers, through mrf::Solve.
struct MultilabelCase {
  const char* solver;
  const char* time_message;      // what the message says when the time limit stopped it
  const char* callback_message;  // ... and when the callback did
};
const MultilabelCase kMultilabel[] = {
    {"cpu-expansion", "stopped by the time limit (1e-09 s) during cycle 1", "stopped by the callback after cycle 1"},
    {"cpu-swap", "stopped by the time limit (1e-09 s) during cycle 1", "stopped by the callback after cycle 1"},
    {"cpu-icm", "stopped by the time limit (1e-09 s) after sweep 1", "stopped by the callback after sweep 1"},
    {"tbb-bp", "time limit reached", "stopped by the callback"},
};

Model MultilabelModel() {
  std::mt19937_64 rng(506);
  Pairwise linear;
  linear.kind = PairwiseKind::kTruncatedLinear;
  linear.lambda = 8;
  linear.truncation = 3;
  return test::RandomModel(rng, Topology::Grid2D(24, 20, 4), 6, 60, linear);
}

TEST(Cancellation, ZeroTimeLimitStopsEveryMultilabelCpuSolver) {
  const Model model = MultilabelModel();
  for (const MultilabelCase& c : kMultilabel) {
    SolveOptions options;
    options.solver = c.solver;
    options.time_limit_s = 1e-9;
    const Result r = Solve(model, options);
    ExpectValidLabelling(model, r, c.solver);
    EXPECT_TRUE(Contains(r.message, c.time_message)) << c.solver << ": " << r.message;
    EXPECT_EQ(r.iterations, 1) << c.solver;
    if (r.has_lower_bound) EXPECT_LE(r.lower_bound, r.energy) << c.solver;
  }
}

TEST(Cancellation, CallbackReturningFalseStopsEveryMultilabelCpuSolver) {
  const Model model = MultilabelModel();
  for (const MultilabelCase& c : kMultilabel) {
    SolveOptions options;
    options.solver = c.solver;
    int calls = 0;
    Energy reported = -1;
    options.callback = [&](const IterationRecord& record) {
      ++calls;
      reported = record.energy;
      return false;
    };
    const Result r = Solve(model, options);
    ExpectValidLabelling(model, r, c.solver);
    EXPECT_EQ(calls, 1) << c.solver;
    EXPECT_TRUE(Contains(r.message, c.callback_message)) << c.solver << ": " << r.message;
    // The solver keeps the best labelling so far: never worse than what the callback was shown.
    if (reported >= 0) EXPECT_LE(r.energy, reported) << c.solver;
  }
}

// options.num_threads bounds the whole solve, not only belief propagation, and so does a caller's own
// TBB arena when it is 0 (BP and its start once opened an arena of every core there). Each solver's
// callback runs where its loops do, so it sees the limit. A request above the cores gets the cores.
TEST(Cancellation, CallbacksRunWithinTheThreadCountAsked) {
  const int cores = tbb::info::default_concurrency();
  if (cores < 2) GTEST_SKIP() << "one core: a limit of one thread cannot be told from the default";
  const Model binary = BinaryGridModel(503, 24);
  const Model multilabel = MultilabelModel();
  const Energy minimum = ExactMinimum(binary);
  struct Case {
    const char* solver;
    StartLabels start;
  };
  for (const Case& c : {Case{"tbb-pr", StartLabels::kZero}, Case{"cpu-expansion", StartLabels::kZero},
                        Case{"cpu-expansion", StartLabels::kBeliefPropagation}, Case{"tbb-bp", StartLabels::kZero}})
    for (const test::ThreadLimit limit :
         {test::ThreadLimit::kNumThreads, test::ThreadLimit::kCallersArena, test::ThreadLimit::kAboveTheCores}) {
      const std::string name = std::string(c.solver) + (c.start == StartLabels::kZero ? "" : " --start bp") + ", " +
                               test::ToString(limit);
      const Model& model = std::string(c.solver) == "tbb-pr" ? binary : multilabel;
      SolveOptions options;
      options.solver = c.solver;
      options.start = c.start;
      int most = 0;
      const Result r = test::SolveUnderThreadLimit(model, options, limit, &most);
      ExpectValidLabelling(model, r, name);
      EXPECT_EQ(most, test::ThreadsAllowed(limit)) << name;
      EXPECT_EQ(r.threads, test::ThreadsAllowed(limit)) << name;
      if (&model == &binary) EXPECT_EQ(r.energy, minimum) << name;
    }
}

}  // namespace
}  // namespace mrf
