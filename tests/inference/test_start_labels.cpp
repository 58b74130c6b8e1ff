// SolveOptions::start (--start bp): expansion and swap started from tiled belief propagation's labelling.
// Checked against the pieces run by hand: the start record is the labelling tbb-bp gives with the same
// options, and the moves from it give exactly the labels of the same solver given those labels as
// initial_labels; energies never rise from the start; bad combinations are one-line errors.
#include <gtest/gtest.h>

#include <random>

#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

// A small Potts model on a 2-D grid of the given connectivity.
Model PottsGrid(std::mt19937_64& rng, int width, int height, int connectivity) {
  Pairwise v;
  v.kind = PairwiseKind::kPotts;
  v.lambda = 3;
  return test::RandomModel(rng, Topology::Grid2D(width, height, connectivity), 3, 20, v, 1);
}

std::vector<Model> GridModels(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Model> models;
  for (int i = 0; i < 6; ++i) {
    Pairwise v;
    v.kind = i % 2 ? PairwiseKind::kTruncatedLinear : PairwiseKind::kPotts;
    v.lambda = 2 + static_cast<Cost>(rng() % 9);
    v.truncation = i % 2 ? 2 + static_cast<Cost>(rng() % 3) : kMaxCost;
    const int width = 17 + static_cast<int>(rng() % 24), height = 16 + static_cast<int>(rng() % 21);
    const Label labels = 3 + static_cast<Label>(rng() % 6);
    models.push_back(test::RandomModel(rng, Topology::Grid2D(width, height, 4), labels, 40, v, 3));
  }
  return models;
}

TEST(StartLabels, MovesStartFromTheBpLabellingAndNeverRiseAboveIt) {
  if (!Registry::Global().IsAvailable("tbb-bp")) GTEST_SKIP() << "no tbb-bp in this build";
  for (const char* solver : {"cpu-expansion", "cpu-swap"}) {
    int index = 0;
    for (const Model& model : GridModels(41)) {
      const std::string name = std::string(solver) + " on model " + std::to_string(index++);
      const Result bp = test::BpStartByHand(model);
      ASSERT_TRUE(bp.ok) << name << ": " << bp.message;

      SolveOptions options;
      options.solver = solver;
      options.start = StartLabels::kBeliefPropagation;
      std::vector<IterationRecord> seen;
      options.callback = [&seen](const IterationRecord& r) {
        seen.push_back(r);
        return true;
      };
      const Result r = Solve(model, options);
      ASSERT_TRUE(r.ok) << name << ": " << r.message;
      ASSERT_GE(r.log.size(), 2u) << name;
      EXPECT_EQ(r.log[0].iteration, 0) << name;
      EXPECT_EQ(r.log[0].energy, bp.energy) << name << ": the start is not tbb-bp's labelling";
      EXPECT_NE(r.log[0].note.find("start: tbb-bp"), std::string::npos) << r.log[0].note;
      // The start's split names the phases that ran: tbb-bp has no transfers.
      EXPECT_NE(r.log[0].note.find(" ms: setup "), std::string::npos) << r.log[0].note;
      EXPECT_EQ(r.log[0].note.find("transfers"), std::string::npos) << r.log[0].note;
      EXPECT_NE(r.message.find("started from tbb-bp's labelling (energy " + std::to_string(bp.energy) + ")"),
                std::string::npos)
          << r.message;
      EXPECT_LE(r.energy, bp.energy) << name;
      EXPECT_GE(r.timings.start_ms, 0) << name;
      for (std::size_t i = 1; i < r.log.size(); ++i) {
        EXPECT_GE(r.log[i].time_ms, r.log[i - 1].time_ms) << name << ": log times go back at record " << i;
        EXPECT_GE(r.log[i].time_ms, r.timings.start_ms) << name << ": a cycle before the start ended";
      }
      // The user's callback sees the start's BP iterations (numbered 0; one or two, as BP converges),
      // then the moves' records on the log's clock.
      std::size_t bp_records = 0;
      while (bp_records < seen.size() && seen[bp_records].iteration == 0) ++bp_records;
      EXPECT_GE(bp_records, 1u) << name;
      EXPECT_LE(bp_records, 2u) << name;
      ASSERT_EQ(seen.size() - bp_records, r.log.size() - 1) << name;
      for (std::size_t i = bp_records; i < seen.size(); ++i)
        EXPECT_EQ(seen[i].time_ms, r.log[i - bp_records + 1].time_ms) << name << ", record " << i;

      SolveOptions by_hand;
      by_hand.solver = solver;
      by_hand.initial_labels = bp.labels;
      const Result same = Solve(model, by_hand);
      ASSERT_TRUE(same.ok) << name << ": " << same.message;
      EXPECT_EQ(same.labels, r.labels) << name << ": not the moves of the same solver from the BP labelling";
    }
  }
}

TEST(StartLabels, BadCombinationsAreOneLineErrors) {
  std::mt19937_64 rng(7);
  const Model eight = PottsGrid(rng, 8, 6, 8);
  SolveOptions options;
  options.solver = "cpu-expansion";
  options.start = StartLabels::kBeliefPropagation;
  const Result r = Solve(eight, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("start bp: belief propagation runs on 4-connected 2-D grids only"), std::string::npos)
      << r.message;

  const Model four = PottsGrid(rng, 8, 6, 4);
  options.initial_labels.assign(48, 0);
  const Result both = Solve(four, options);
  EXPECT_FALSE(both.ok);
  EXPECT_NE(both.message.find("initial_labels are given too"), std::string::npos) << both.message;

  EXPECT_THROW(ParseStartLabels("random"), Error);
  EXPECT_EQ(ParseStartLabels("bp"), StartLabels::kBeliefPropagation);
  EXPECT_EQ(ParseStartLabels(ToString(StartLabels::kZero)), StartLabels::kZero);
}

TEST(StartLabels, TheTimeLimitAndTheCallbackCoverTheStart) {
  if (!Registry::Global().IsAvailable("tbb-bp")) GTEST_SKIP() << "no tbb-bp in this build";
  std::mt19937_64 rng(13);
  const Model model = GridModels(13).front();
  const Result bp = test::BpStartByHand(model);
  ASSERT_TRUE(bp.ok) << bp.message;

  // A callback that stops at once stops the start: its labelling is the answer.
  SolveOptions options;
  options.solver = "cpu-expansion";
  options.start = StartLabels::kBeliefPropagation;
  std::vector<IterationRecord> seen;
  options.callback = [&seen](const IterationRecord& r) {
    seen.push_back(r);
    return false;
  };
  const Result stopped = Solve(model, options);
  ASSERT_TRUE(stopped.ok) << stopped.message;
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].iteration, 0);
  EXPECT_NE(seen[0].note.find("start: BP iteration 1"), std::string::npos) << seen[0].note;
  EXPECT_EQ(stopped.message, "stopped by the callback during the start (tbb-bp)");
  ASSERT_EQ(stopped.log.size(), 1u);
  EXPECT_EQ(stopped.log[0].iteration, 0);
  EXPECT_EQ(stopped.energy, stopped.log[0].energy);

  // A limit spent by the start: the moves stop at their first check, and the message names the
  // user's limit, not what was left of it.
  options.callback = nullptr;
  options.time_limit_s = 1e-9;
  const Result limited = Solve(model, options);
  ASSERT_TRUE(limited.ok) << limited.message;
  EXPECT_NE(limited.message.find("stopped by the time limit (1e-09 s, the start included)"), std::string::npos)
      << limited.message;
  EXPECT_LE(limited.energy, limited.log[0].energy);
}

TEST(StartLabels, SolversWithoutMovesSayTheStartWasNotUsed) {
  std::mt19937_64 rng(9);
  const Model model = PottsGrid(rng, 9, 7, 4);
  SolveOptions options;
  options.solver = "cpu-icm";
  const Result plain = Solve(model, options);
  options.start = StartLabels::kBeliefPropagation;
  const Result r = Solve(model, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.labels, plain.labels);
  EXPECT_LT(r.timings.start_ms, 0);
  EXPECT_NE(r.message.find("--start bp applies to expansion and swap only"), std::string::npos) << r.message;
}

// Every option a solver does not read, when set away from its default, is named in the message; the
// defaults add nothing.
TEST(StartLabels, SolversNameEveryOptionTheyDoNotRead) {
  std::mt19937_64 rng(10);
  const Model model = PottsGrid(rng, 9, 7, 4);
  SolveOptions options;
  options.solver = "cpu-icm";
  EXPECT_EQ(Solve(model, options).message.find("not used by"), std::string::npos);
  options.label_order = LabelOrder::kRandom;
  options.maxflow_backend = "boost-bk";
  options.bp.schedule = "sync";
  options.bp.coarse_to_fine = true;
  const Result icm = Solve(model, options);
  ASSERT_TRUE(icm.ok) << icm.message;
  EXPECT_NE(icm.message.find("; label order random and max-flow backend boost-bk apply to expansion and swap only: "
                             "not used by cpu-icm"),
            std::string::npos)
      << icm.message;
  EXPECT_NE(icm.message.find("; BP schedule sync and BP coarse-to-fine start apply to belief propagation only: not "
                             "used by cpu-icm"),
            std::string::npos)
      << icm.message;
  options.solver = "cpu-expansion";  // reads the label order and the engine, not the BP settings
  const Result moves = Solve(model, options);
  ASSERT_TRUE(moves.ok) << moves.message;
  EXPECT_EQ(moves.message.find("expansion and swap only"), std::string::npos) << moves.message;
  EXPECT_NE(moves.message.find("apply to belief propagation only: not used by cpu-expansion"), std::string::npos)
      << moves.message;
}

}  // namespace
}  // namespace mrf
