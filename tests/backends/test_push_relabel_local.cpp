// Local re-solves of the grid push-relabel engines (backends/common/push_relabel_local.h), on tbb-pr:
// - the optimality certificate holds on every solved state, its finite nodes are the cut, and each
//   kind of broken state (excess that can reach the sink, sink capacity on a node marked dead, a
//   height too far above a residual neighbour, a height with no way down) fails it;
// - re-solves after terminal changes equal Boost Graph's max-flow and a fresh solve's cut, whether
//   the local repairs were certified or fell back to global relabels (both paths are exercised).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <random>

#include "backends/common/push_relabel_local.h"
#include "backends/cpu/tbb_push_relabel.h"
#include "mrf/st_graph.h"
#include "support/grid_flow_cases.h"
#include "support/push_relabel_states.h"
#include "support/test_support.h"

namespace mrf {
namespace {

using test::CapacityProfile;

constexpr const char* kLocalPrefix = "maximum flow found by local repairs";

using test::ReferenceFlow;

const Topology kShapes[] = {Topology::Grid2D(41, 33, 4), Topology::Grid2D(29, 26, 8), Topology::Grid3D(11, 9, 8),
                            Topology::Grid2D(1, 97, 4), Topology::Grid2D(131, 2, 8)};  // strips too

// Settling's steps on one node of a 4-connected grid (directions +x, +y, -x, -y; inf = 100):
// brute force over small heights checks that a settled node is supported or inf, never falls, and
// keeps every residual edge valid (at most one above the neighbour it points at).
TEST(PushRelabelLocal, SettleStepRaisesOnlyUnsupportedNodesAndStaysValid) {
  constexpr int kInf = 100;
  EXPECT_EQ(pr::SettleStep<4>(-5, 3, kInf, 0b0001, {7, 0, 0, 0}), 3) << "residual capacity to the sink supports";
  EXPECT_EQ(pr::SettleStep<4>(0, kInf, kInf, 0b1111, {1, 1, 1, 1}), kInf) << "inf stays inf";
  EXPECT_EQ(pr::SettleStep<4>(0, 3, kInf, 0b0011, {2, 9, 1, 1}), 3) << "a lower residual neighbour supports";
  EXPECT_EQ(pr::SettleStep<4>(0, 3, kInf, 0b0110, {1, 5, 4, 1}), 5) << "one above the lowest residual neighbour";
  EXPECT_EQ(pr::SettleStep<4>(0, 3, kInf, 0b0000, {1, 1, 1, 1}), kInf) << "no residual edge: cut off";
  EXPECT_EQ(pr::SettleStep<4>(0, 3, kInf, 0b0101, {kInf, 0, kInf, 0}), kInf) << "only inf neighbours: cut off";
  int checked = 0;
  for (int h = 1; h < 6; ++h)
    for (int mask = 0; mask < 16; ++mask)
      for (int code = 0; code < 6 * 6 * 6 * 6; ++code) {
        int nh[4];
        for (int d = 0, c = code; d < 4; ++d, c /= 6) nh[d] = c % 6 == 5 ? kInf : c % 6 + 1;
        bool valid = true;  // the node's residual edges obey C1 before
        for (int d = 0; d < 4; ++d) valid &= !(mask >> d & 1) || h <= nh[d] + 1;
        if (!valid) continue;
        const int settled = pr::SettleStep<4>(0, h, kInf, static_cast<std::uint8_t>(mask), nh);
        bool supported = false;
        for (int d = 0; d < 4; ++d) {
          if (!(mask >> d & 1)) continue;
          supported |= nh[d] < settled;
          if (settled < kInf) EXPECT_LE(settled, nh[d] + 1) << "C1 broken: h " << h << ", mask " << mask;
        }
        EXPECT_GE(settled, h);
        EXPECT_TRUE(settled == kInf || supported) << "h " << h << ", mask " << mask;
        ++checked;
      }
  EXPECT_GT(checked, 1000);
}

TEST(PushRelabelLocal, AliveStepSpreadsAlongResidualEdgesOnly) {
  EXPECT_TRUE(pr::AliveStep<4>(true, 0b0000, {false, false, false, false})) << "alive stays alive";
  EXPECT_FALSE(pr::AliveStep<4>(false, 0b0101, {false, true, false, true})) << "no residual edge to the alive ones";
  EXPECT_TRUE(pr::AliveStep<4>(false, 0b0100, {false, false, true, false}));
}

TEST(PushRelabelLocal, SolvedStatesAreCertifiedAndBrokenOnesAreNot) {
  std::mt19937_64 rng(3);
  int total_seen[4] = {0, 0, 0, 0};
  for (const Topology& shape : kShapes)
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kSparse}) {
      int broken_kinds_seen[4] = {0, 0, 0, 0};  // per graph: each kind a few times
      const std::string what = shape.Describe() + ", " + test::ToString(p);
      StGraph g = test::GridFlowCase(rng, shape, p);
      auto engine = MakeTbbPushRelabelEngine();
      Result result;
      engine->Solve(g, &result);
      ASSERT_EQ(result.flow, ReferenceFlow(g)) << what << ": " << result.message;
      const PushRelabelState solved = engine->DownloadState();
      const pr::TileLayout L = test::CertificateLayout(shape);
      EXPECT_EQ(test::CertificateViolations(solved, L), 0) << what;
      for (NodeId v = 0; v < shape.num_nodes(); ++v)
        ASSERT_EQ(result.labels[v], solved.h[v] < L.inf ? 1 : 0) << what << ": the finite nodes are the sink side";
      // Each way of breaking it, at the first node where it applies.
      const int D = pr::NumDirs(L.kind);
      for (std::int64_t v = 0; v < L.num_nodes; ++v) {
        const int h = solved.h[v];
        if (h < L.inf && !broken_kinds_seen[0]++) {  // excess where the sink can be reached (C2)
          PushRelabelState s = solved;
          s.x[v] = 1;
          EXPECT_GT(test::CertificateViolations(s, L), 0) << what << ": excess at a finite node";
        }
        if (solved.x[v] < 0 && broken_kinds_seen[1] <= 3) {  // sink capacity on a node marked dead (C4)
          PushRelabelState s = solved;
          s.h[v] = L.inf;
          EXPECT_GT(test::CertificateViolations(s, L), 0) << what << ": sink capacity at an inf node";
          ++broken_kinds_seen[1];
        }
        for (int d = 0; d < D; ++d) {
          std::int64_t w;
          if (!pr::NeighbourOf(L, v, d, &w) || solved.r[d * L.num_nodes + v] == 0 || solved.h[w] >= L.inf) continue;
          if (h < L.inf) {  // two above a residual neighbour (C1)
            PushRelabelState s = solved;
            s.h[v] = solved.h[w] + 2;
            EXPECT_GT(test::CertificateViolations(s, L), 0) << what << ": height two above a residual neighbour";
            ++broken_kinds_seen[2];
          }
          if (solved.x[v] >= 0 && h < L.inf) {  // no way down (C3): every residual neighbour raised to h
            PushRelabelState s = solved;
            for (int e = 0; e < D; ++e) {
              std::int64_t u;
              if (pr::NeighbourOf(L, v, e, &u) && solved.r[e * L.num_nodes + v] > 0 && s.h[u] < h) s.h[u] = h;
            }
            EXPECT_GT(test::CertificateViolations(s, L), 0) << what << ": a finite node with no lower residual neighbour";
            ++broken_kinds_seen[3];
          }
          break;
        }
        if (broken_kinds_seen[1] > 3 && broken_kinds_seen[2] > 3 && broken_kinds_seen[3] > 3) break;
      }
      for (int k = 0; k < 4; ++k) total_seen[k] += broken_kinds_seen[k];
    }
  for (int k = 0; k < 4; ++k) EXPECT_GT(total_seen[k], 0) << "broken state kind " << k << " never built";
}

// How re-solves ended, by their messages: certified locally (`local`; of them `repaired`: after the
// nodes that failed the certificate were repaired, local_resolve = 3) or went on with relabels
// (`fallback`; of them `repaired_in_vain`: after such repairs).
struct ResolveCounts {
  int local = 0, fallback = 0, repaired = 0, repaired_in_vain = 0;
  void Add(const std::string& message) {
    const bool certified = message.rfind(kLocalPrefix, 0) == 0;
    (certified ? local : fallback) += 1;
    if (test::RepairedFailingNodes(message, true)) ++repaired;
    if (test::RepairedFailingNodes(message, false)) ++repaired_in_vain;
  }
};

// Terminal-only edits (a few nodes, 1%, 5%; weights of another node or random ones), re-solved from
// the residual graph; then a large block repainted, which the local repairs cannot absorb. Counts the
// re-solves certified locally and those that went on with relabels.
void CheckResolves(std::uint64_t seed, ResolveCounts* counts) {
  std::mt19937_64 rng(seed);
  for (const Topology& shape : kShapes)
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kSparse,
                              CapacityProfile::kHuge, CapacityProfile::kZero}) {
      StGraph g = test::GridFlowCase(rng, shape, p);
      ASSERT_TRUE(g.maxflow("tbb-pr").ok);
      const NodeId n = shape.num_nodes();
      auto pick = [&](std::int64_t k) { return std::uniform_int_distribution<std::int64_t>(0, k - 1)(rng); };
      for (int step = 0; step < 7; ++step) {
        const std::string what = shape.Describe() + ", " + test::ToString(p) + ", step " + std::to_string(step);
        if (step < 6) {
          const std::int64_t count = step % 3 == 0 ? 1 + pick(3) : step % 3 == 1 ? 1 + n / 100 : 1 + n / 20;
          for (std::int64_t i = 0; i < count; ++i) {
            const NodeId v = static_cast<NodeId>(pick(n));
            if (step < 3) {
              const NodeId donor = static_cast<NodeId>(pick(n));
              g.set_tweights(v, g.source_cap(donor), g.sink_cap(donor));
            } else {
              g.set_tweights(v, pick(1000), pick(1000));
            }
          }
        } else {
          for (NodeId v = 0; v < n / 2; ++v) g.set_tweights(v, 5000, 0);  // half the grid forced to the source
        }
        const Result again = g.maxflow("tbb-pr");  // from the residual graph
        ASSERT_TRUE(again.ok) << what << ": " << again.message;
        counts->Add(again.message);
        EXPECT_EQ(again.flow, ReferenceFlow(g)) << what << ": " << again.message;
        const Result fresh = g.maxflow("tbb-pr", /*reuse=*/false);
        ASSERT_TRUE(fresh.ok) << fresh.message;
        EXPECT_EQ(again.labels, fresh.labels) << what << ": the sink-minimal cut (" << again.message << ")";
      }
    }
}

TEST(PushRelabelLocal, ResolvesEqualBoostAndFreshSolves) {
  ResolveCounts counts;
  CheckResolves(21, &counts);  // tbb-pr's default: repairs and the certificate
  std::printf("local re-solves certified: %d, fallbacks: %d\n", counts.local, counts.fallback);
  EXPECT_GT(counts.local, 40) << "the local path should certify most small edits";
  EXPECT_GT(counts.fallback, 0) << "the fallback path was never exercised";
}

// CheckResolves with MRF_PR_TUNING set to `tuning`.
ResolveCounts CheckResolvesWith(const char* tuning, std::uint64_t seed) {
  const test::ScopedEnv scope("MRF_PR_TUNING", tuning);  // read when the registry makes an engine
  ResolveCounts counts;
  CheckResolves(seed, &counts);
  return counts;
}

TEST(PushRelabelLocal, FillsBeforeUsualResolvesEqualBoostAndFreshSolves) {
  const ResolveCounts counts = CheckResolvesWith("local_resolve=2", 22);  // fills only, then the usual re-solve
  EXPECT_EQ(counts.local, 0) << "fills alone are never certified";
  EXPECT_GT(counts.fallback, 100);
}

TEST(PushRelabelLocal, FillsAndPushRoundsCheckedByTheCertificateEqualBoostAndFreshSolves) {
  // fills, push rounds from the kept heights, the certificate; no repairs of the nodes failing it
  const ResolveCounts counts = CheckResolvesWith("local_resolve=3,repair_violations=0", 23);
  std::printf("certified after push rounds: %d, went on with relabels: %d\n", counts.local, counts.fallback);
  EXPECT_GT(counts.local, 20) << "push rounds after the fills should settle most small edits";
  EXPECT_GT(counts.fallback, 0) << "the fallback path was never exercised";
  EXPECT_EQ(counts.repaired + counts.repaired_in_vain, 0) << "repairs ran although switched off";
}

// The same edits with the nodes that fail the certificate repaired where they stand (the default):
// re-solves certified after those repairs, and those that went on with relabels after them, equal
// Boost and a fresh solve.
TEST(PushRelabelLocal, RepairsOfTheNodesFailingTheCertificateEqualBoostAndFreshSolves) {
  const ResolveCounts counts = CheckResolvesWith("local_resolve=3", 23);
  std::printf("certified: %d (%d after repairs of the nodes failing the check), went on with relabels: %d (%d after "
              "such repairs)\n", counts.local, counts.repaired, counts.fallback, counts.repaired_in_vain);
  EXPECT_GT(counts.repaired, 0) << "no re-solve was certified after repairing the failing nodes";
  EXPECT_GT(counts.repaired_in_vain, 0) << "no re-solve went on with relabels after such repairs";
}

// Settling cut short after one hop a tile sends most changed tiles to the search for regions cut off
// from the sink: re-solves must still equal Boost and a fresh solve.
TEST(PushRelabelLocal, SettlingWithOneHopStillEqualsBoostAndFreshSolves) {
  const ResolveCounts counts = CheckResolvesWith("local_resolve=3,settle_hops=1", 24);
  std::printf("certified: %d, went on with relabels: %d\n", counts.local, counts.fallback);
  EXPECT_GT(counts.local, 0) << "no re-solve was certified with one settling hop";
}

// CheckResolvesWith each tuning (same seed): every re-solve equals Boost and a fresh solve, and some
// are certified without relabels.
void ExpectSomeCertifiedWithEach(std::initializer_list<const char*> tunings, std::uint64_t seed) {
  for (const char* tuning : tunings) {
    const ResolveCounts counts = CheckResolvesWith(tuning, seed);
    std::printf("%s: certified %d (%d after repairs), went on with relabels %d\n", tuning, counts.local,
                counts.repaired, counts.fallback);
    EXPECT_GT(counts.local, 0) << tuning << ": no re-solve was certified";
  }
}

// No push round between the fills and the certificate (settling and the repairs of the failing nodes do
// the rest), and one: re-solves must still equal Boost and a fresh solve, and some are certified.
TEST(PushRelabelLocal, FewerPushRoundsBeforeTheCertificateStillEqualBoostAndFreshSolves) {
  ExpectSomeCertifiedWithEach({"local_resolve=3,resolve_push_rounds=0", "local_resolve=3,resolve_push_rounds=1"}, 25);
  // Without the certificate the re-solve goes straight to the relabels.
  const ResolveCounts plain = CheckResolvesWith("local_resolve=0,resolve_push_rounds=0", 26);
  EXPECT_EQ(plain.local, 0);
  PushRelabelTuning t;
  EXPECT_EQ(t.resolve_push_rounds, -1);
  EXPECT_EQ(t.Describe().find("before a re-solve's first check"), std::string::npos) << t.Describe();
  t.Parse("resolve_push_rounds=0");
  EXPECT_NE(t.Describe().find("(0 before a re-solve's first check)"), std::string::npos) << t.Describe();
  EXPECT_THROW(t.Parse("resolve_push_rounds=-2"), Error);
  EXPECT_THROW(t.Parse("resolve_push_rounds=513"), Error);
}

// One settling pass (the tiles a neighbour's rise unsettled are left to the repairs) and three:
// re-solves must still equal Boost and a fresh solve, and some are certified.
TEST(PushRelabelLocal, OtherSettlingPassesStillEqualBoostAndFreshSolves) {
  ExpectSomeCertifiedWithEach({"local_resolve=3,settle_passes=1", "local_resolve=3,settle_passes=3"}, 27);
  PushRelabelTuning t;
  EXPECT_EQ(t.settle_passes, pr::kSettlePasses);
  t.Parse("settle_passes=1");
  EXPECT_NE(t.Describe().find("1 settling passes"), std::string::npos) << t.Describe();
  EXPECT_THROW(t.Parse("settle_passes=0"), Error);
  EXPECT_THROW(t.Parse("settle_passes=17"), Error);
}

// Re-solves certified after repairs of the nodes failing the certificate (whose second check covers
// only the region of the repairs) leave states that pass it on every node.
TEST(PushRelabelLocal, StatesCertifiedAfterRepairsPassTheCertificateOnEveryNode) {
  test::ExpectStatesCertifiedAfterRepairsPassEverywhere(
      [](const PushRelabelTuning& t) { return MakeTbbPushRelabelEngine(t); }, 31);
}

TEST(PushRelabelLocal, SwitchedOffItUsesGlobalRelabels) {
  const test::ScopedEnv scope("MRF_PR_TUNING", "local_resolve=0");
  std::mt19937_64 rng(8);
  StGraph g = test::GridFlowCase(rng, Topology::Grid2D(30, 30, 4), CapacityProfile::kSegmentation);
  ASSERT_TRUE(g.maxflow("tbb-pr").ok);
  g.set_tweights(17, 0, 900);
  const Result again = g.maxflow("tbb-pr");
  ASSERT_TRUE(again.ok) << again.message;
  EXPECT_NE(again.message.rfind(kLocalPrefix, 0), 0u) << again.message;
  EXPECT_EQ(again.flow, ReferenceFlow(g));
  PushRelabelTuning t;
  EXPECT_EQ(t.local_resolve, -1);
  t.Parse("local_resolve=0");
  EXPECT_EQ(t.local_resolve, 0);
  EXPECT_NE(t.Describe().find("no local re-solves"), std::string::npos) << t.Describe();
  t.Parse("local_resolve=3");
  EXPECT_NE(t.Describe().find("checked by the certificate"), std::string::npos) << t.Describe();
  EXPECT_THROW(t.Parse("local_resolve=4"), Error);
  PushRelabelTuning repairs;
  EXPECT_EQ(repairs.Describe().find("no repairs"), std::string::npos) << repairs.Describe();
  repairs.Parse("repair_violations=0");
  EXPECT_NE(repairs.Describe().find("no repairs after a failed certificate"), std::string::npos) << repairs.Describe();
  EXPECT_THROW(repairs.Parse("repair_violations=-1"), Error);
  PushRelabelTuning hops;
  EXPECT_EQ(hops.settle_hops, pr::kSettleHops);
  hops.Parse("settle_hops=4");
  EXPECT_EQ(hops.settle_hops, 4);
  EXPECT_NE(hops.Describe().find("4 settling hops"), std::string::npos) << hops.Describe();
  EXPECT_THROW(hops.Parse("settle_hops=0"), Error);
  EXPECT_THROW(hops.Parse("settle_hops=5000"), Error);
}

// A re-solve's first push rounds take resolve_local_iterations, its later cycles local_iterations.
// With 1 and 8: each tile visit of a re-solve certified after those rounds (no relabel, no repairs)
// is one iteration, and the re-solves that go on with relabels have longer visits. With 8 and 1:
// some visit of a certified re-solve takes more than one. Every re-solve equals Boost.
TEST(PushRelabelLocal, ResolvePushRoundsTakeTheirOwnIterations) {
  std::mt19937_64 rng(12);
  for (const int resolve_iterations : {1, 8}) {
    PushRelabelTuning tuning;
    tuning.local_resolve = 3;
    tuning.repair_violations = 0;
    tuning.resolve_local_iterations = resolve_iterations;
    tuning.local_iterations = resolve_iterations == 1 ? 8 : 1;
    int certified = 0;
    std::int64_t longer_certified = 0, longer_relabelled = 0;
    for (const Topology& shape : kShapes) {
      StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
      auto engine = MakeTbbPushRelabelEngine(tuning);
      Result result;
      engine->Solve(g, &result);
      g.MarkSolved();
      auto pick = [&](std::int64_t k) { return std::uniform_int_distribution<std::int64_t>(0, k - 1)(rng); };
      for (int step = 0; step < 6; ++step) {
        for (std::int64_t i = 0; i < 1 + shape.num_nodes() / 100; ++i)
          g.set_tweights(static_cast<NodeId>(pick(shape.num_nodes())), pick(1000), pick(1000));
        Result again;
        engine->Resolve(g, &again);
        g.MarkSolved();
        const std::string what = shape.Describe() + ", " + std::to_string(resolve_iterations) + " iterations, step " +
                                 std::to_string(step) + ": " + again.message;
        ASSERT_EQ(again.flow, ReferenceFlow(g)) << what;
        const PushRelabelStats& stats = engine->stats();
        const std::int64_t longer = stats.tile_iterations - stats.tile_visits;
        if (again.message.rfind(kLocalPrefix, 0) == 0 && stats.global_relabels == 0) {
          ++certified;
          longer_certified += longer;
          if (resolve_iterations == 1) EXPECT_EQ(longer, 0) << what;
        } else {
          longer_relabelled += longer;
        }
      }
    }
    const std::string setting = std::to_string(resolve_iterations) + " iterations in a re-solve's first push rounds";
    EXPECT_GT(certified, 8) << setting << ": too few re-solves were certified after their push rounds";
    if (resolve_iterations == 1)
      EXPECT_GT(longer_relabelled, 0) << setting << ": the cycles after a failed certificate took 1 too";
    else
      EXPECT_GT(longer_certified, 0) << setting << ": no visit of a certified re-solve took more than one";
  }
}

// A re-solve reads a large edit's changed nodes through a bitmap, in chunks on all cores: the
// edited graph's flow must equal Boost's; a weight above what the engine accepts names the lowest
// such node, and the re-solve after it is fixed starts afresh and is right again.
TEST(PushRelabelLocal, LargeEditsAndTooLargeWeightsInResolves) {
  std::mt19937_64 rng(21);
  StGraph g = test::GridFlowCase(rng, Topology::Grid2D(300, 300, 4), CapacityProfile::kSegmentation);
  ASSERT_TRUE(g.maxflow("tbb-pr").ok);
  const NodeId n = g.num_nodes();
  // Many changes (the bitmap path; over 16384 distinct nodes, so several chunks), some nodes twice.
  for (int i = 0; i < n / 2; ++i) {
    const auto v = static_cast<NodeId>(rng() % n);
    g.set_tweights(v, static_cast<Energy>(rng() % 500), static_cast<Energy>(rng() % 500));
  }
  const Result again = g.maxflow("tbb-pr");
  ASSERT_TRUE(again.ok) << again.message;
  EXPECT_EQ(again.flow, ReferenceFlow(g));
  // Every node changes: node 80000 lies in a later chunk than node 9000, which must be the one named.
  const Energy too_large = (Energy{1} << 62) + 1;
  for (NodeId v = 0; v < n; ++v) g.set_tweights(v, g.source_cap(v) + 1, g.sink_cap(v));
  g.set_tweights(80000, 0, too_large);
  g.set_tweights(9000, too_large, 0);
  const Result bad = g.maxflow("tbb-pr");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("terminal capacity of node 9000 (" + std::to_string(too_large) + ") is above the 2^62"),
            std::string::npos) << bad.message;
  g.set_tweights(80000, 0, 5);
  g.set_tweights(9000, 5, 0);
  const Result fixed = g.maxflow("tbb-pr");
  ASSERT_TRUE(fixed.ok) << fixed.message;
  EXPECT_EQ(fixed.flow, ReferenceFlow(g));
}

// SortedUnique reads large edits through a bitmap, marked on all cores and read back in blocks of
// 262,144 nodes, each block writing at its own offset: the result must equal sort + unique (no node
// lost, doubled or out of order, words and blocks at their edges included), and the bitmap must be
// left all zero for the next edit. Small edits take the sort.
TEST(PushRelabelLocal, SortedUniqueEqualsSortAndUnique) {
  std::mt19937_64 rng(34);
  std::vector<std::uint64_t> bitmap;
  for (const std::int64_t n : {std::int64_t{1000}, std::int64_t{600000}, std::int64_t{262144}, std::int64_t{262145}}) {
    for (const std::size_t count : {std::size_t{5}, static_cast<std::size_t>(n / 2), static_cast<std::size_t>(3 * n)}) {
      std::vector<NodeId> nodes;
      for (std::size_t i = 0; i < count; ++i) nodes.push_back(static_cast<NodeId>(rng() % n));
      for (const std::int64_t edge : {std::int64_t{0}, std::int64_t{63}, std::int64_t{64}, std::int64_t{262143},
                                      std::int64_t{262144}, n - 1})
        if (edge < n && count > 5) nodes.insert(nodes.end(), 2, static_cast<NodeId>(edge));
      std::vector<NodeId> expected = nodes;
      std::sort(expected.begin(), expected.end());
      expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
      EXPECT_EQ(PushRelabelEngine::SortedUnique(nodes, n, &bitmap), expected) << n << " nodes, " << count << " changes";
      EXPECT_TRUE(std::all_of(bitmap.begin(), bitmap.end(), [](std::uint64_t w) { return w == 0; }))
          << n << " nodes, " << count << " changes: the bitmap was not cleared";
    }
  }
}

// The same read inside re-solves of a graph of over 262,144 nodes: a node lost there would change the
// flow. Without edges the maximum flow is the sum over the nodes of min(source, sink), whatever the
// engine does.
TEST(PushRelabelLocal, EditsReadFromTheBitmapInBlocksKeepEveryNode) {
  const Topology grid = Topology::Grid2D(720, 400, 4);  // 288,000 nodes: two blocks of 4096 words
  StGraph g(grid);
  std::mt19937_64 rng(33);
  for (NodeId v = 0; v < g.num_nodes(); ++v) g.add_tweights(v, static_cast<Energy>(rng() % 100), static_cast<Energy>(rng() % 100));
  auto expected = [&g] {
    Energy sum = 0;
    for (NodeId v = 0; v < g.num_nodes(); ++v) sum += std::min(g.source_cap(v), g.sink_cap(v));
    return sum;
  };
  ASSERT_EQ(g.maxflow("tbb-pr").flow, expected());
  for (int edit = 0; edit < 2; ++edit) {  // the second edit finds the bitmap cleared by the first
    for (int i = 0; i < 100000; ++i) {
      const auto v = static_cast<NodeId>(rng() % g.num_nodes());
      g.set_tweights(v, static_cast<Energy>(rng() % 100), static_cast<Energy>(rng() % 100));
    }
    const Result again = g.maxflow("tbb-pr");
    ASSERT_TRUE(again.ok) << again.message;
    EXPECT_EQ(again.flow, expected()) << "edit " << edit;
  }
}

}  // namespace
}  // namespace mrf
