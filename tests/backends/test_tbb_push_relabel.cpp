// tbb-pr, the CPU twin of cuda-pr: flows equal Boost Graph's max-flow (and brute force on tiny
// grids) on random grids of the three kinds, odd sizes, strips, zero and near-2^31 capacities; the
// cut read from the residual graph has the flow's capacity; re-solving after changes equals
// solving from scratch; tuning values change the schedule, never the answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "backends/cpu/tbb_push_relabel.h"
#include "mrf/binary_graph.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/grid_flow_cases.h"
#include "support/push_relabel_states.h"
#include "support/test_support.h"

namespace mrf {
namespace {

using test::CapacityProfile;

std::string Describe(const Topology& t, CapacityProfile p, int trial) {
  return t.Describe() + ", " + test::ToString(p) + " capacities, trial " + std::to_string(trial);
}

using test::ReferenceFlow;

TEST(TbbPushRelabel, RandomGridsMatchBoost) {
  std::mt19937_64 rng(11);
  int cases = 0;
  for (const Topology& shape : test::GridFlowShapes(false))
    for (int p = 0; p < test::kNumCapacityProfiles; ++p)
      for (int trial = 0; trial < 2; ++trial) {
        StGraph g = test::GridFlowCase(rng, shape, static_cast<CapacityProfile>(p));
        const std::string what = Describe(shape, static_cast<CapacityProfile>(p), trial);
        const Result r = g.maxflow("tbb-pr");
        ASSERT_TRUE(r.ok) << what << ": " << r.message;  // ok includes cut capacity == flow
        EXPECT_EQ(r.backend_used, "tbb-pr");
        EXPECT_EQ(r.flow, ReferenceFlow(g)) << what;
        ++cases;
      }
  EXPECT_GT(cases, 100);
}

TEST(TbbPushRelabel, TinyGridsMatchBruteForce) {
  std::mt19937_64 rng(5);
  const Topology shapes[] = {Topology::Grid2D(3, 4, 4), Topology::Grid2D(4, 3, 8), Topology::Grid2D(1, 12, 8),
                             Topology::Grid3D(2, 2, 3)};
  for (const Topology& shape : shapes)
    for (int p = 0; p < test::kNumCapacityProfiles; ++p) {
      StGraph g = test::GridFlowCase(rng, shape, static_cast<CapacityProfile>(p));
      const Result r = g.maxflow("tbb-pr");
      ASSERT_TRUE(r.ok) << r.message;
      EXPECT_EQ(r.flow, test::BruteForceMinCut(g)) << Describe(shape, static_cast<CapacityProfile>(p), 0);
    }
}

TEST(TbbPushRelabel, TuningChangesTheScheduleNotTheFlow) {
  std::mt19937_64 rng(3);
  const Topology shapes[] = {Topology::Grid2D(77, 41, 4), Topology::Grid2D(40, 70, 8), Topology::Grid3D(20, 9, 13)};
  std::vector<PushRelabelTuning> tunings(5);
  tunings[1].local_iterations = 1;
  tunings[1].rounds_per_global_relabel = 2;
  tunings[2].tile_y = 8;
  tunings[2].tile3d_x = 32;
  tunings[2].tile3d_y = 4;
  tunings[2].tile3d_z = 4;
  tunings[2].local_iterations = 200;
  tunings[3].tile_y = 32;
  tunings[3].rounds_per_global_relabel = 500;
  tunings[3].local_iterations = 3;
  tunings[4].rounds_per_global_relabel = 7;
  tunings[4].bfs_check_every = 2;
  for (const Topology& shape : shapes) {
    StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
    const Energy expected = ReferenceFlow(g);
    for (const PushRelabelTuning& tuning : tunings) {
      auto engine = MakeTbbPushRelabelEngine(tuning);
      Result r;
      engine->Solve(g, &r);
      EXPECT_EQ(r.flow, expected) << shape.Describe() << ", " << tuning.Describe();
      EXPECT_EQ(g.CutCapacity(r.labels), expected) << shape.Describe() << ", " << tuning.Describe();
      EXPECT_GE(engine->stats().global_relabels, 1);
    }
  }
}

// The incremental global relabel finds the same exact distances as the one from scratch, so the
// whole run is the same, step by step.
TEST(TbbPushRelabel, IncrementalRelabelsEqualFullOnesStepByStep) {
  std::mt19937_64 rng(17);
  PushRelabelTuning full, incremental;
  full.incremental_relabel = 0;
  incremental.incremental_relabel = 2;  // every cycle after the first
  for (PushRelabelTuning* t : {&full, &incremental}) {
    t->local_iterations = 3;
    t->rounds_per_global_relabel = 2;
  }
  for (const Topology& shape : {Topology::Grid2D(70, 45, 4), Topology::Grid2D(33, 41, 8), Topology::Grid3D(17, 9, 12)})
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kSparse}) {
      StGraph g = test::GridFlowCase(rng, shape, p);
      const std::string what = Describe(shape, p, 0);
      for (int rounds : {2, 5, 9, 30}) {
        auto a = MakeTbbPushRelabelEngine(full), b = MakeTbbPushRelabelEngine(incremental);
        a->RunForTest(g, rounds);
        b->RunForTest(g, rounds);
        test::ExpectSameState(a->DownloadState(), b->DownloadState(), what + ", " + std::to_string(rounds) + " rounds");
      }
    }
}

// ---- Wave pushes (wave_push=1): rows and columns of 4-connected tiles carried in one pass ----------

std::vector<Topology> Grid4Shapes() {
  std::vector<Topology> shapes;
  for (const Topology& t : test::GridFlowShapes(false))
    if (t.kind() == TopologyKind::kGrid4) shapes.push_back(t);
  shapes.push_back(Topology::Grid2D(64, 48, 4));   // whole tiles
  shapes.push_back(Topology::Grid2D(97, 70, 4));   // partial ones
  shapes.push_back(Topology::Grid2D(130, 3, 4));  // a strip across tiles
  return shapes;
}

TEST(TbbPushRelabel, WavePushSolvesMatchTheReferencesOnRandomGrids) {
  std::mt19937_64 rng(23);
  const bool have_bk = Registry::Global().IsAvailable("cpu-bk");
  int cases = 0;
  for (const Topology& shape : Grid4Shapes())
    for (int p = 0; p < test::kNumCapacityProfiles; ++p)
      for (int trial = 0; trial < 3; ++trial) {
        StGraph g = test::GridFlowCase(rng, shape, static_cast<CapacityProfile>(p));
        PushRelabelTuning tuning;
        tuning.wave_push = true;
        tuning.tile_y = 8 << trial;                        // every 4-connected tile height
        tuning.local_iterations = trial == 1 ? 1 : 8;      // a wave pass and one hop per visit, too
        tuning.incremental_relabel = trial == 2 ? 2 : 1;
        const std::string what = Describe(shape, static_cast<CapacityProfile>(p), trial) + ", " + tuning.Describe();
        auto engine = MakeTbbPushRelabelEngine(tuning);
        Result r;
        engine->Solve(g, &r);
        EXPECT_EQ(r.flow, ReferenceFlow(g)) << what;
        EXPECT_EQ(g.CutCapacity(r.labels), r.flow) << what;
        if (have_bk) EXPECT_EQ(r.flow, ReferenceFlow(g, "cpu-bk")) << what;
        ++cases;
      }
  EXPECT_GT(cases, 150);
}

// After any number of push rounds with wave pushes the state is a valid preflow of the graph: each
// edge's two residuals sum to its capacities (no residual went below 0 or above them), each node's
// excess changed by exactly the net flow along its edges, and no node sent more than it had.
TEST(TbbPushRelabel, WavePushesConserveFlowAndCapacities) {
  std::mt19937_64 rng(29);
  for (const Topology& shape : {Topology::Grid2D(70, 45, 4), Topology::Grid2D(33, 17, 4), Topology::Grid2D(130, 20, 4)})
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kHuge,
                              CapacityProfile::kSparse}) {
      const StGraph g = test::GridFlowCase(rng, shape, p);
      const NodeId n = shape.num_nodes();
      const int fwd = shape.num_directions();
      std::vector<std::int64_t> x0(n), r0_sum(n, 0);  // the initial netted excess and residuals per node
      for (NodeId v = 0; v < n; ++v) x0[v] = g.source_cap(v) - g.sink_cap(v);
      shape.ForEachEdge([&](EdgeId e, NodeId a, NodeId b) {
        r0_sum[a] += g.edge_cap(e);
        r0_sum[b] += g.edge_rev_cap(e);
      });
      for (int rounds : {1, 2, 3, 6}) {
        PushRelabelTuning tuning;
        tuning.wave_push = true;
        tuning.local_iterations = 2;
        tuning.rounds_per_global_relabel = 1;
        auto engine = MakeTbbPushRelabelEngine(tuning);
        engine->RunForTest(g, rounds);
        const PushRelabelState st = engine->DownloadState();
        const std::string what = Describe(shape, p, 0) + ", " + std::to_string(rounds) + " rounds";
        shape.ForEachEdge([&](EdgeId e, NodeId a, NodeId b) {
          const int d = static_cast<int>(e / n);
          const std::int64_t pair = std::int64_t{st.r[d * n + a]} + st.r[(d + fwd) * n + b];
          ASSERT_EQ(pair, std::int64_t{g.edge_cap(e)} + g.edge_rev_cap(e)) << what << ", edge slot " << e;
        });
        for (NodeId v = 0; v < n; ++v) {
          std::int64_t r_sum = 0;
          for (int d = 0; d < 2 * fwd; ++d) r_sum += st.r[d * n + v];
          ASSERT_EQ(st.x[v] - r_sum, x0[v] - r0_sum[v]) << what << ", node " << v;
          ASSERT_GE(st.x[v], std::min<std::int64_t>(0, x0[v])) << what << ", node " << v;
        }
      }
    }
}

// One local iteration of one push visit carries excess the whole length of a tile's row (or
// column) along admissible edges, where plain pushes move it one node.
TEST(TbbPushRelabel, WavePushCarriesExcessAcrossATileInOneIteration) {
  for (const bool column : {false, true}) {
    const int length = column ? 16 : 32;  // one tile of 32x16
    const Topology shape = column ? Topology::Grid2D(1, length, 4) : Topology::Grid2D(length, 1, 4);
    StGraph g(shape);
    g.add_tweights(0, 10, 0);
    g.add_tweights(length - 1, 0, 100);
    shape.ForEachEdge([&](EdgeId e, NodeId, NodeId) { g.add_to_edge_slot(e, 10, 0); });
    PushRelabelTuning tuning;
    tuning.local_iterations = 1;
    tuning.rounds_per_global_relabel = 1;
    for (const bool wave : {false, true}) {
      tuning.wave_push = wave;
      auto engine = MakeTbbPushRelabelEngine(tuning);
      engine->RunForTest(g, 1);  // heights = distances to the sink, then one push round
      const PushRelabelState st = engine->DownloadState();
      const std::string what = std::string(column ? "column" : "row") + (wave ? ", wave pushes" : ", plain pushes");
      EXPECT_EQ(st.x[0], 0) << what;
      EXPECT_EQ(st.x[1], wave ? 0 : 10) << what;              // one hop
      EXPECT_EQ(st.x[length - 1], wave ? -90 : -100) << what;  // the whole way to the sink
    }
  }
}

// Changes terminal and edge capacities of a solved graph (some edges drop below their flow) and
// checks that the incremental re-solve equals a fresh solve and the reference.
void CheckResolve(const Topology& shape, CapacityProfile profile, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  StGraph g = test::GridFlowCase(rng, shape, profile);
  Result first = g.maxflow("tbb-pr");
  ASSERT_TRUE(first.ok) << first.message;
  auto pick = [&](std::int64_t n) { return std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng); };
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < 1 + shape.num_nodes() / 20; ++i) {
      const NodeId v = static_cast<NodeId>(pick(shape.num_nodes()));
      g.set_tweights(v, pick(300), pick(300));
    }
    for (int i = 0; i < 1 + shape.num_nodes() / 20; ++i) {
      const EdgeId e = pick(shape.num_edge_slots());
      NodeId a, b;
      if (shape.edge_endpoints(e, &a, &b)) g.set_edge(e, static_cast<Cost>(pick(60)), static_cast<Cost>(pick(60)));
    }
    const Result again = g.maxflow("tbb-pr");  // reuses the residual graph
    ASSERT_TRUE(again.ok) << again.message;
    EXPECT_EQ(again.flow, ReferenceFlow(g)) << shape.Describe() << ", step " << step;
    const Result fresh = g.maxflow("tbb-pr", /*reuse=*/false);
    ASSERT_TRUE(fresh.ok) << fresh.message;
    EXPECT_EQ(again.flow, fresh.flow);
    EXPECT_EQ(again.labels, fresh.labels) << "the cut read from the residual graph is the sink-minimal one";
  }
}

TEST(TbbPushRelabel, ResolveEqualsSolveFromScratch) {
  std::uint64_t seed = 100;
  for (const char* tuning : {"incremental_relabel=1", "incremental_relabel=0", "incremental_relabel=2"}) {
    const test::ScopedEnv scope("MRF_PR_TUNING", tuning);  // read when the registry makes the engine
    for (const Topology& shape : {Topology::Grid2D(45, 38, 4), Topology::Grid2D(33, 29, 8), Topology::Grid3D(9, 10, 7),
                                  Topology::Grid2D(1, 40, 4)})
      for (CapacityProfile p : {CapacityProfile::kUniform, CapacityProfile::kSegmentation, CapacityProfile::kZero})
        CheckResolve(shape, p, seed++);
  }
}

// Edits of more than half the nodes of a grid of 2^18 nodes or more are solved afresh on the kept
// workspace (a re-solve works per change); smaller edits, and every edit of a smaller grid, are
// re-solved. Either way the flow must be Boost's and the cut a fresh solve's, over edits that
// accumulate on both sides of the threshold.
TEST(TbbPushRelabel, DenseEditsOfLargeGridsAreSolvedAfresh) {
  test::CheckDenseEditRule("tbb-pr", 41, {Topology::Grid2D(512, 512, 4), Topology::Grid2D(511, 512, 4)},
                           {0.4, 0.6, 0.45, 1.0}, 2, [](const StGraph& g) { return ReferenceFlow(g); });
}

TEST(TbbPushRelabel, ResolveAfterAddTweightsWithNegativeWeights) {
  std::mt19937_64 rng(9);
  StGraph g = test::GridFlowCase(rng, Topology::Grid2D(20, 20, 4), CapacityProfile::kUniform);
  ASSERT_TRUE(g.maxflow("tbb-pr").ok);
  for (NodeId v = 0; v < 400; v += 7) g.add_tweights(v, -30, 12);  // goes through constant()
  const Result again = g.maxflow("tbb-pr");
  ASSERT_TRUE(again.ok) << again.message;
  EXPECT_EQ(again.flow, ReferenceFlow(g) + g.constant()) << "flows include the graph's constant";
}

// A fresh solve reads the terminal weights in chunks of 65536 nodes on all cores: a graph of several
// chunks must give Boost's flow, a weight above 2^62 names the lowest such node whatever chunk finds
// it first, and sink weights whose sum overflows only across chunks are still refused (before a
// later node's too-large weight, as a serial pass would).
TEST(TbbPushRelabel, FreshSolvesReadTheWeightsInChunks) {
  std::mt19937_64 rng(31);
  const Topology shape = Topology::Grid2D(400, 330, 4);  // 132,000 nodes: three chunks
  StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
  const Result r = g.maxflow("tbb-pr", /*reuse=*/false);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.flow, ReferenceFlow(g));

  const Energy too_large = (Energy{1} << 62) + 1;
  g.set_tweights(131000, 0, too_large);
  g.set_tweights(70000, too_large, 0);
  const Result refused = g.maxflow("tbb-pr", false);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("terminal capacity of node 70000 (" + std::to_string(too_large) + ") is above the 2^62"),
            std::string::npos) << refused.message;

  g.set_tweights(131000, 0, 0);
  g.set_tweights(70000, 0, 0);
  g.set_tweights(10, 0, Energy{1} << 62);      // chunk 0
  g.set_tweights(100000, 0, Energy{1} << 62);  // chunk 1: only the sum of the two overflows
  const Result overflow = g.maxflow("tbb-pr", false);
  EXPECT_FALSE(overflow.ok);
  EXPECT_NE(overflow.message.find("sum of sink capacities overflows"), std::string::npos) << overflow.message;
  // A too-large weight after the node where the sum overflows: a serial pass meets the overflow first.
  g.set_tweights(120000, 0, too_large);
  const Result first = g.maxflow("tbb-pr", false);
  EXPECT_FALSE(first.ok);
  EXPECT_NE(first.message.find("sum of sink capacities overflows"), std::string::npos) << first.message;
}

TEST(TbbPushRelabel, BinaryModelsThroughSolve) {
  std::mt19937_64 rng(2);
  const Model m = test::RandomModel(rng, Topology::Grid2D(5, 3, 8), 2, 20, Pairwise{}, 9);
  SolveOptions options;
  options.solver = "tbb-pr";
  const Result r = Solve(m, options);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.energy, test::BruteForceMinEnergy(m));
  EXPECT_EQ(r.lower_bound, r.energy);
}

TEST(TbbPushRelabel, MrfSegmentRunsItByName) {
  auto run = [](const std::string& backend) {
    const test::CommandResult r =
        test::RunCommand(test::AppPath("mrf-segment") + " --size 120x90 --seed 4 --json -q --backend " + backend);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json bk = run("cpu-bk"), pr = run("tbb-pr");
  EXPECT_EQ(pr["backend"], "tbb-pr");
  EXPECT_EQ(pr["energy"], bk["energy"]);
}

TEST(TbbPushRelabel, EdgeListsAreRefusedWithAReason) {
  StGraph g;
  g.add_node(3);
  g.add_edge(0, 2, 1, 1);
  const Result r = g.maxflow("tbb-pr");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("needs a grid-shaped graph"), std::string::npos) << r.message;
  const Result automatic = g.maxflow("auto");
  EXPECT_TRUE(automatic.ok) << automatic.message;
  EXPECT_NE(automatic.backend_used, "tbb-pr");
}

TEST(TbbPushRelabel, TuningIsValidatedAndParsed) {
  PushRelabelTuning t;
  std::string error;
  EXPECT_TRUE(t.IsValid(&error)) << error;
  t.tile_y = 12;
  EXPECT_FALSE(t.IsValid(&error));
  EXPECT_NE(error.find("tile_y"), std::string::npos) << error;
  PushRelabelTuning parsed;
  EXPECT_FALSE(parsed.wave_relabel);
  EXPECT_EQ(parsed.Describe().find("wave relabels"), std::string::npos) << parsed.Describe();
  parsed.Parse("local_iterations=3,rounds_per_global_relabel=5,cuda_graphs=0,wave_relabel=1");
  EXPECT_EQ(parsed.local_iterations, 3);
  EXPECT_EQ(parsed.rounds_per_global_relabel, 5);
  EXPECT_FALSE(parsed.cuda_graphs);
  EXPECT_TRUE(parsed.wave_relabel);
  EXPECT_NE(parsed.Describe().find("wave relabels"), std::string::npos) << parsed.Describe();
  EXPECT_FALSE(parsed.wave_push);
  EXPECT_EQ(parsed.Describe().find("wave pushes"), std::string::npos) << parsed.Describe();
  parsed.Parse("wave_push=1");
  EXPECT_TRUE(parsed.wave_push);
  EXPECT_NE(parsed.Describe().find("wave pushes"), std::string::npos) << parsed.Describe();
  EXPECT_THROW(parsed.Parse("no_such=1"), Error);
  EXPECT_THROW(parsed.Parse("local_iterations=abc"), Error);
  EXPECT_THROW(parsed.Parse("bfs_check_every=3"), Error);
  EXPECT_NE(parsed.Describe().find("3 local iterations (16 in a re-solve's first push rounds)"), std::string::npos)
      << parsed.Describe();
  PushRelabelTuning resolving;  // (parsed now holds the invalid bfs_check_every)
  resolving.Parse("resolve_local_iterations=5");
  EXPECT_EQ(resolving.resolve_local_iterations, 5);
  EXPECT_NE(resolving.Describe().find("(5 in a re-solve's"), std::string::npos) << resolving.Describe();
  EXPECT_THROW(resolving.Parse("resolve_local_iterations=0"), Error);
  PushRelabelTuning traced;
  EXPECT_EQ(traced.Describe().find("timeline"), std::string::npos) << traced.Describe();
  traced.Parse("trace=1");
  EXPECT_TRUE(traced.trace);
  EXPECT_NE(traced.Describe().find("device timeline traced"), std::string::npos) << traced.Describe();
}

TEST(TbbPushRelabel, RegistryEntries) {
  const Registry& registry = Registry::Global();
  ASSERT_NE(registry.Find("tbb-pr"), nullptr);
  ASSERT_NE(registry.Find("cuda-pr"), nullptr);
  EXPECT_EQ(registry.Find("cuda-pr")->device, Device::kCuda);
  EXPECT_EQ(registry.Find("tbb-pr")->device, Device::kCpu);
  EXPECT_GT(registry.Find("cuda-pr")->priority, registry.Find("tbb-pr")->priority);
  if (const SolverEntry* bk = registry.Find("cpu-bk")) EXPECT_LT(registry.Find("tbb-pr")->priority, bk->priority);
}

// Without a usable GPU (always so in CPU-only builds): cuda-pr is unavailable with a reason,
// asking for it by name fails with that reason, and auto runs on the CPU and says why.
TEST(TbbPushRelabel, WithoutAGpuAutoRunsOnTheCpuAndSaysWhy) {
  const std::string why = CudaUnavailableReason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present; tests/gpu covers this machine";
  std::string reason;
  EXPECT_FALSE(Registry::Global().IsAvailable("cuda-pr", &reason));
  EXPECT_FALSE(reason.empty());
  std::mt19937_64 rng(4);
  StGraph g = test::GridFlowCase(rng, Topology::Grid2D(8, 8, 4), CapacityProfile::kUniform);
  const Result named = g.maxflow("cuda-pr");
  EXPECT_FALSE(named.ok);
  EXPECT_NE(named.message.find("cuda-pr"), std::string::npos) << named.message;
  EXPECT_NE(named.message.find(reason), std::string::npos) << named.message;
  const Model m = test::RandomModel(rng, Topology::Grid2D(6, 5, 4), 2, 20, Pairwise{}, 5);
  const Result automatic = Solve(m, SolveOptions{});
  ASSERT_TRUE(automatic.ok) << automatic.message;
  EXPECT_NE(automatic.backend_used, "cuda-pr");
  EXPECT_NE(automatic.fallback_reason.find("cuda-pr skipped"), std::string::npos) << automatic.fallback_reason;
}

}  // namespace
}  // namespace mrf
