// cpu-bk, the Boykov-Kolmogorov engine, against independent references: Boost Graph's
// Boykov-Kolmogorov engine (boost-bk), Boost Graph's push-relabel called directly (another
// algorithm, no terminal netting), brute-force enumeration of cuts and of labellings.
#include <gtest/gtest.h>

// Boost Graph 1.74 trips GCC 12's -Wmaybe-uninitialized inside its own iterators.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#pragma GCC diagnostic pop

#include <algorithm>
#include <limits>
#include <random>

#include "backends/cpu/bk_maxflow.h"
#include "backends/cpu/boost_maxflow.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

constexpr Cost kBigCost = std::numeric_limits<Cost>::max();
constexpr Energy kBigTerminal = Energy{1} << 40;

// ---- References ----------------------------------------------------------------------------------

// Boost's push-relabel on the graph exactly as given: both terminal edges of every node, every
// edge as a pair of arcs. Shares nothing with the engines under test.
Energy PushRelabelFlow(const StGraph& graph) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, Energy,
                      boost::property<boost::edge_residual_capacity_t, Energy,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const NodeId n = graph.num_nodes();
  Graph g(static_cast<std::size_t>(n) + 2);
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  auto add_pair = [&](std::size_t u, std::size_t v, Energy cap, Energy rev_cap) {
    const auto e = boost::add_edge(u, v, g).first, r = boost::add_edge(v, u, g).first;
    capacity[e] = cap;
    capacity[r] = rev_cap;
    reverse[e] = r;
    reverse[r] = e;
  };
  const std::size_t source = n, sink = n + 1;
  for (NodeId v = 0; v < n; ++v) {
    add_pair(source, v, graph.source_cap(v), 0);
    add_pair(v, sink, graph.sink_cap(v), 0);
  }
  graph.topology().ForEachEdge(
      [&](EdgeId e, NodeId p, NodeId q) { add_pair(p, q, graph.edge_cap(e), graph.edge_rev_cap(e)); });
  return boost::push_relabel_max_flow(g, source, sink) + graph.constant();
}

// The registry's Boost Graph Boykov-Kolmogorov engine, run on its own (the graph keeps its engine).
Energy BoostBkFlow(const StGraph& graph) {
  Result r;
  MakeBoostMaxFlowEngine()->Solve(graph, &r);
  return r.flow + graph.constant();
}

// A fresh cpu-bk engine on the graph as it is now (no reuse).
Result FreshBk(const StGraph& graph) {
  Result r;
  MakeBkEngine()->Solve(graph, &r);
  r.flow += graph.constant();
  return r;
}

// ---- Random graphs with capacities where bugs hide -------------------------------------------------

// Capacity regimes: tiny (many ties and zeros), medium, and near the 32-bit limit.
enum class Regime { kTiny, kMedium, kHuge, kMixed };

Cost RandomEdgeCap(std::mt19937_64& rng, Regime regime) {
  if (rng() % 4 == 0) return 0;
  switch (regime) {
    case Regime::kTiny: return static_cast<Cost>(rng() % 4);
    case Regime::kMedium: return static_cast<Cost>(rng() % 1000);
    case Regime::kHuge: return kBigCost - static_cast<Cost>(rng() % 3);
    case Regime::kMixed: break;
  }
  const int pick = static_cast<int>(rng() % 3);
  return RandomEdgeCap(rng, pick == 0 ? Regime::kTiny : pick == 1 ? Regime::kMedium : Regime::kHuge);
}

Energy RandomTerminalCap(std::mt19937_64& rng, Regime regime) {
  if (rng() % 3 == 0) return 0;
  if (regime == Regime::kHuge || (regime == Regime::kMixed && rng() % 3 == 0))
    return kBigTerminal - static_cast<Energy>(rng() % 1000);
  return RandomEdgeCap(rng, regime == Regime::kHuge ? Regime::kMedium : regime);
}

Regime RandomRegime(std::mt19937_64& rng) { return static_cast<Regime>(rng() % 4); }

// Random general graph: isolated nodes when edges are few, parallel and antiparallel edges when
// they are many, some negative terminal weights (a non-zero constant). With sparse terminals most
// nodes have none, so many end up in no search tree (free), where re-solving has more to repair.
StGraph RandomGraph(std::mt19937_64& rng, NodeId nodes, EdgeId edges, Regime regime, bool sparse_terminals = false) {
  StGraph g;
  g.add_node(nodes);
  for (NodeId v = 0; v < nodes; ++v) {
    if (sparse_terminals && rng() % 8 != 0) continue;
    Energy s = RandomTerminalCap(rng, regime), t = RandomTerminalCap(rng, regime);
    if (rng() % 10 == 0) s = -s;
    g.add_tweights(v, s, t);
  }
  if (nodes < 2) return g;
  std::uniform_int_distribution<NodeId> pick(0, nodes - 1);
  for (EdgeId e = 0; e < edges; ++e) {
    const NodeId p = pick(rng);
    NodeId q = pick(rng);
    while (q == p) q = pick(rng);
    g.add_edge(p, q, RandomEdgeCap(rng, regime), RandomEdgeCap(rng, regime));
  }
  return g;
}

StGraph RandomGrid(std::mt19937_64& rng, const Topology& grid, Regime regime, bool sparse_terminals = false) {
  StGraph g(grid);
  for (NodeId v = 0; v < grid.num_nodes(); ++v)
    if (!sparse_terminals || rng() % 8 == 0)
      g.add_tweights(v, RandomTerminalCap(rng, regime), RandomTerminalCap(rng, regime));
  grid.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
    g.add_to_edge_slot(e, RandomEdgeCap(rng, regime), RandomEdgeCap(rng, regime));
  });
  return g;
}

Topology RandomGridTopology(std::mt19937_64& rng, int trial) {
  const int w = 1 + static_cast<int>(rng() % 24), h = 1 + static_cast<int>(rng() % 24);
  switch (trial % 5) {
    case 0: return Topology::Grid2D(w, h, 4);
    case 1: return Topology::Grid2D(w, h, 8);
    case 2: return Topology::Grid3D(1 + w / 3, 1 + h / 3, 1 + static_cast<int>(rng() % 7));
    case 3: return Topology::Grid2D(1, 1 + static_cast<int>(rng() % 60), trial % 2 ? 4 : 8);  // 1xN strip
    default: return Topology::Grid2D(1 + static_cast<int>(rng() % 60), 1, trial % 3 ? 4 : 8);  // Nx1 strip
  }
}

// Solves with cpu-bk through the StGraph API and checks the cut it returns.
Result SolveAndCheckCut(StGraph& g, const std::string& what) {
  Result r = g.maxflow("cpu-bk");
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
  EXPECT_EQ(r.backend_used, "cpu-bk") << what;
  if (r.ok) EXPECT_EQ(g.CutCapacity(r.labels), r.flow) << what << ": cut capacity differs from the flow";
  return r;
}

// ---- From scratch ---------------------------------------------------------------------------------

TEST(BkMaxFlow, ThousandRandomGeneralGraphsMatchBoost) {
  std::mt19937_64 rng(20240601);
  for (int trial = 0; trial < 1200; ++trial) {
    const NodeId n = 1 + static_cast<NodeId>(rng() % (trial % 10 == 0 ? 300 : 40));
    const EdgeId m = static_cast<EdgeId>(rng() % (4 * n + 1));  // from isolated nodes to many parallel edges
    const Regime regime = RandomRegime(rng);
    StGraph g = RandomGraph(rng, n, m, regime);
    const std::string what = "trial " + std::to_string(trial) + " (" + std::to_string(n) + " nodes, " +
                             std::to_string(m) + " edges, regime " + std::to_string(static_cast<int>(regime)) + ")";
    const Result r = SolveAndCheckCut(g, what);
    ASSERT_TRUE(r.ok) << what;
    ASSERT_EQ(r.flow, BoostBkFlow(g)) << what;
    if (trial % 4 == 0) ASSERT_EQ(r.flow, PushRelabelFlow(g)) << what;
  }
}

TEST(BkMaxFlow, RandomGridsMatchBoost) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 150; ++trial) {
    const Topology grid = RandomGridTopology(rng, trial);
    const Regime regime = RandomRegime(rng);
    StGraph g = RandomGrid(rng, grid, regime);
    const std::string what = "trial " + std::to_string(trial) + ": " + grid.Describe();
    const Result r = SolveAndCheckCut(g, what);
    ASSERT_TRUE(r.ok) << what;
    ASSERT_EQ(r.flow, BoostBkFlow(g)) << what;
    ASSERT_EQ(r.flow, PushRelabelFlow(g)) << what;
  }
}

TEST(BkMaxFlow, SmallGraphsMatchBruteForce) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const NodeId n = 1 + trial % 12;
    StGraph g = trial % 3 == 2 ? RandomGrid(rng, Topology::Grid2D(3, 1 + trial % 4, trial % 2 ? 4 : 8), RandomRegime(rng))
                               : RandomGraph(rng, n, static_cast<EdgeId>(rng() % (3 * n + 1)), RandomRegime(rng));
    const Result r = SolveAndCheckCut(g, "trial " + std::to_string(trial));
    ASSERT_TRUE(r.ok);
    ASSERT_EQ(r.flow, test::BruteForceMinCut(g)) << "trial " << trial;
  }
}

TEST(BkMaxFlow, ResidualsBeyondInt32AreExact) {
  // a -> b and b -> a both at INT32_MAX: once INT32_MAX flows a -> b, the residual b -> a is
  // 2 * INT32_MAX, and the best flow needs it reversed again through other paths.
  StGraph g;
  g.add_node(4);
  g.add_tweights(0, kBigTerminal, 0);
  g.add_tweights(3, 0, kBigTerminal);
  g.add_edge(0, 1, kBigCost, kBigCost);
  g.add_edge(1, 2, kBigCost, kBigCost);
  g.add_edge(0, 2, kBigCost, kBigCost);
  g.add_edge(2, 3, kBigCost, kBigCost);
  g.add_edge(1, 3, kBigCost, kBigCost);
  g.add_edge(2, 1, kBigCost, kBigCost);
  const Result r = SolveAndCheckCut(g, "big");
  EXPECT_EQ(r.flow, 2 * Energy{kBigCost});
  EXPECT_EQ(r.flow, test::BruteForceMinCut(g));
  // Every edge at the limit in both directions, terminals near 2^40, on a dense graph.
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    StGraph h = RandomGraph(rng, 10, 40, Regime::kHuge);
    const Result rh = SolveAndCheckCut(h, "huge " + std::to_string(trial));
    EXPECT_EQ(rh.flow, test::BruteForceMinCut(h)) << "trial " << trial;
  }
}

TEST(BkMaxFlow, TrivialGraphs) {
  StGraph one;
  one.add_node(1);
  one.add_tweights(0, 7, 3);
  EXPECT_EQ(SolveAndCheckCut(one, "one node").flow, 3);
  StGraph lonely;
  lonely.add_node(5);  // no capacities at all: everything on the sink side, flow 0
  const Result r = SolveAndCheckCut(lonely, "no capacities");
  EXPECT_EQ(r.flow, 0);
  EXPECT_EQ(r.labels, Labeling(5, 1));
  StGraph grid(Topology::Grid2D(1, 1, 8));
  grid.add_tweights(0, 2, 9);
  EXPECT_EQ(SolveAndCheckCut(grid, "1x1 grid").flow, 2);
}

TEST(BkMaxFlow, OneEngineSolvesManyGraphs) {
  std::mt19937_64 rng(31);
  auto engine = MakeBkEngine();
  EXPECT_EQ(engine->MemoryBytes(), 0u);  // cheap to create: nothing held before a solve
  for (int trial = 0; trial < 200; ++trial) {
    StGraph g = trial % 2 ? RandomGraph(rng, 1 + static_cast<NodeId>(rng() % 50), static_cast<EdgeId>(rng() % 120),
                                        RandomRegime(rng))
                          : RandomGrid(rng, RandomGridTopology(rng, trial), RandomRegime(rng));
    Result r;
    if (trial % 3) engine->Solve(g, &r);
    else engine->Resolve(g, &r);  // a changed structure: must fall back to a full solve
    ASSERT_EQ(r.flow + g.constant(), BoostBkFlow(g)) << "trial " << trial;
    ASSERT_EQ(g.CutCapacity(r.labels), r.flow + g.constant()) << "trial " << trial;
    EXPECT_GT(engine->MemoryBytes(), 0u);
  }
}

TEST(BkMaxFlow, TimestampWrapAroundKeepsResultsExact) {
  std::mt19937_64 rng(13);
  for (std::uint32_t limit : {1u, 2u, 5u, 40u}) {
    auto engine = detail::MakeBkEngineWithTimestampLimit(limit);
    for (int trial = 0; trial < 60; ++trial) {
      StGraph g = trial % 2 ? RandomGrid(rng, Topology::Grid2D(12, 9, 8), Regime::kMedium)
                            : RandomGraph(rng, 60, 200, Regime::kMixed);
      Result r;
      engine->Solve(g, &r);
      ASSERT_EQ(r.flow + g.constant(), BoostBkFlow(g)) << "limit " << limit << ", trial " << trial;
      ASSERT_EQ(g.CutCapacity(r.labels), r.flow + g.constant());
    }
  }
}

TEST(BkMaxFlow, MemoryIsCompact) {
  // 32-bit indices: a 4-connected 200x200 grid (about 4 arcs a node) fits in 128 bytes a node
  // with the re-solve bookkeeping, where a pointer-based layout needs more than 160.
  std::mt19937_64 rng(3);
  StGraph g = RandomGrid(rng, Topology::Grid2D(200, 200, 4), Regime::kMedium);
  auto engine = MakeBkEngine();
  Result r;
  engine->Solve(g, &r);
  EXPECT_LE(engine->MemoryBytes(), 128u * 200 * 200);
  EXPECT_GE(engine->MemoryBytes(), 32u * 200 * 200);
}

// ---- Re-solving (dynamic graph cuts) ---------------------------------------------------------------

// Applies one round of random changes: terminal replacements and increments (negative ones
// included, which move the constant), edge increases and decreases, some to zero and some to
// the 32-bit limit. Slots marked in `frozen` (if given) keep zero capacity.
void RandomChanges(std::mt19937_64& rng, StGraph& g, int count, Regime regime,
                   const std::vector<char>* frozen = nullptr) {
  const NodeId n = g.num_nodes();
  std::vector<EdgeId> slots;
  g.topology().ForEachEdge([&](EdgeId e, NodeId, NodeId) {
    if (!frozen || !(*frozen)[e]) slots.push_back(e);
  });
  for (int k = 0; k < count; ++k) {
    const NodeId v = static_cast<NodeId>(rng() % n);
    switch (rng() % 5) {
      case 0: g.set_tweights(v, RandomTerminalCap(rng, regime), RandomTerminalCap(rng, regime)); break;
      case 1: g.add_tweights(v, static_cast<Energy>(rng() % 50) - 25, static_cast<Energy>(rng() % 50) - 25); break;
      default:
        if (slots.empty()) break;
        const EdgeId e = slots[rng() % slots.size()];
        switch (rng() % 4) {
          case 0: g.set_edge(e, 0, 0); break;
          case 1: g.set_edge(e, g.edge_cap(e) / 2, g.edge_rev_cap(e) / 3); break;
          case 2: g.set_edge(e, RandomEdgeCap(rng, regime), RandomEdgeCap(rng, regime)); break;
          default: g.set_edge(e, kBigCost, kBigCost - 1); break;
        }
    }
  }
}

// Solves, then re-solves after six rounds of changes, each checked against fresh solves. With
// `incremental_only`, edges empty at the first solve stay empty, so every round must re-solve
// incrementally; otherwise they may gain capacity, and the engine rebuilds when one does.
void CheckResolves(std::mt19937_64& rng, StGraph& g, Regime regime, const std::string& what, bool incremental_only) {
  const Result first = SolveAndCheckCut(g, what);
  ASSERT_TRUE(first.ok);
  std::vector<char> frozen(static_cast<std::size_t>(g.num_edge_slots()), 0);
  if (incremental_only)
    g.topology().ForEachEdge([&](EdgeId e, NodeId, NodeId) { frozen[e] = g.edge_cap(e) == 0 && g.edge_rev_cap(e) == 0; });
  for (int round = 0; round < 6; ++round) {
    // A few changes, or sweeping ones: many at once is where repairs interact.
    const int count = round % 3 == 2 ? 1 + static_cast<int>(rng() % (2 * g.num_nodes())) : 1 + static_cast<int>(rng() % 8);
    RandomChanges(rng, g, count, regime, &frozen);
    const std::string where = what + ", round " + std::to_string(round);
    const Result again = SolveAndCheckCut(g, where);
    ASSERT_TRUE(again.ok) << where;
    ASSERT_FALSE(again.log.empty());
    if (incremental_only)
      ASSERT_NE(again.log.back().note.find("re-solved from the previous flow"), std::string::npos)
          << where << ": " << again.log.back().note;
    const Result fresh = FreshBk(g);
    ASSERT_EQ(again.flow, fresh.flow) << where;
    ASSERT_EQ(again.flow, BoostBkFlow(g)) << where;
  }
}

TEST(BkMaxFlow, ResolveAfterRandomChangesEqualsAFreshSolveOnGeneralGraphs) {
  std::mt19937_64 rng(101);
  for (int trial = 0; trial < 600; ++trial) {
    const NodeId n = 2 + static_cast<NodeId>(rng() % 60);
    const Regime regime = RandomRegime(rng);
    StGraph g = RandomGraph(rng, n, static_cast<EdgeId>(rng() % (4 * n)), regime, trial % 2 == 1);
    CheckResolves(rng, g, regime, "general trial " + std::to_string(trial), trial % 4 < 3);
    if (HasFatalFailure()) return;
  }
}

TEST(BkMaxFlow, ResolveAfterRandomChangesEqualsAFreshSolveOnGrids) {
  std::mt19937_64 rng(202);
  for (int trial = 0; trial < 300; ++trial) {
    const Topology grid = RandomGridTopology(rng, trial);
    const Regime regime = RandomRegime(rng);
    StGraph g = RandomGrid(rng, grid, regime, trial % 2 == 1);
    CheckResolves(rng, g, regime, "grid trial " + std::to_string(trial) + " " + grid.Describe(), trial % 4 < 3);
    if (HasFatalFailure()) return;
  }
}

TEST(BkMaxFlow, ResolveOfSmallGraphsMatchesBruteForce) {
  std::mt19937_64 rng(303);
  for (int trial = 0; trial < 150; ++trial) {
    StGraph g = RandomGraph(rng, 2 + trial % 10, 3 * (2 + trial % 10), RandomRegime(rng), trial % 2 == 1);
    ASSERT_TRUE(SolveAndCheckCut(g, "brute").ok);
    for (int round = 0; round < 4; ++round) {
      RandomChanges(rng, g, 3, Regime::kTiny);
      const Result r = SolveAndCheckCut(g, "brute round");
      ASSERT_EQ(r.flow, test::BruteForceMinCut(g)) << "trial " << trial << ", round " << round;
    }
  }
}

TEST(BkMaxFlow, ResolveOfADenseSceneAfterLocalEdits) {
  // A larger grid with segmentation-like structure: strong smoothness, terminals of both signs.
  std::mt19937_64 rng(404);
  StGraph g(Topology::Grid2D(120, 90, 4));
  for (NodeId v = 0; v < g.num_nodes(); ++v) {
    const NodeId x = v % 120, y = v / 120;
    const bool inside = (x - 60) * (x - 60) + (y - 45) * (y - 45) < 900;
    g.add_tweights(v, inside ? 40 + rng() % 30 : rng() % 30, inside ? rng() % 30 : 40 + rng() % 30);
  }
  g.topology().ForEachEdge([&](EdgeId e, NodeId, NodeId) { g.add_to_edge_slot(e, 25, 25); });
  ASSERT_TRUE(SolveAndCheckCut(g, "scene").ok);
  for (int round = 0; round < 10; ++round) {
    // Paint a brush stroke: a disc of pixels forced to one side.
    const NodeId cx = static_cast<NodeId>(rng() % 120), cy = static_cast<NodeId>(rng() % 90);
    const bool to_source = rng() % 2;
    for (NodeId y = std::max(0, cy - 8); y < std::min(90, cy + 8); ++y)
      for (NodeId x = std::max(0, cx - 8); x < std::min(120, cx + 8); ++x)
        g.set_tweights(y * 120 + x, to_source ? 1000 : 0, to_source ? 0 : 1000);
    const Result r = SolveAndCheckCut(g, "stroke " + std::to_string(round));
    ASSERT_EQ(r.flow, FreshBk(g).flow) << "round " << round;
    ASSERT_EQ(r.flow, PushRelabelFlow(g)) << "round " << round;
  }
}

TEST(BkMaxFlow, ResolveWhenAnEmptyEdgeGainsCapacityRebuilds) {
  StGraph g(Topology::Grid2D(4, 1, 4));
  g.add_tweights(0, 10, 0);
  g.add_tweights(3, 0, 10);
  const EdgeId slot01 = g.topology().grid_slot(0, 1), slot12 = g.topology().grid_slot(1, 2),
               slot23 = g.topology().grid_slot(2, 3);
  g.set_edge(slot01, 5, 0);
  g.set_edge(slot23, 5, 0);  // slot 1-2 stays empty: the first solve has no arcs for it
  EXPECT_EQ(SolveAndCheckCut(g, "empty middle").flow, 0);
  g.set_edge(slot12, 3, 0);
  const Result r = SolveAndCheckCut(g, "middle filled");
  EXPECT_EQ(r.flow, 3);
  EXPECT_EQ(r.flow, test::BruteForceMinCut(g));
}

TEST(BkMaxFlow, ResolveGrowsFromANodeThatWasOrphanedAndReadopted) {
  // p hangs from one of two source roots x, z. A change cuts the arc to whichever it hangs from
  // (so it is re-adopted by the other) and opens p -> q towards a free node q: q must join the
  // source side, or the cut would cross the open arc.
  for (int cut_x = 0; cut_x < 2; ++cut_x) {
    StGraph g;
    g.add_node(5);  // x, z, p, q, y
    const NodeId x = 0, z = 1, p = 2, q = 3, y = 4;
    g.add_tweights(x, 10, 0);
    g.add_tweights(z, 10, 0);
    g.add_tweights(y, 0, 3);
    const EdgeId xp = g.add_edge(x, p, 5, 0), zp = g.add_edge(z, p, 5, 0), pq = g.add_edge(p, q, 0, 1);
    ASSERT_EQ(SolveAndCheckCut(g, "before").flow, 0);
    g.set_edge(cut_x ? xp : zp, 0, 0);
    g.set_edge(pq, 5, 1);
    const Result r = SolveAndCheckCut(g, cut_x ? "x -> p cut" : "z -> p cut");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.flow, 0);
    EXPECT_EQ(r.labels[q], 0);
  }
}

TEST(BkMaxFlow, RepeatedResolvesWithoutChangesKeepTheFlow) {
  std::mt19937_64 rng(8);
  StGraph g = RandomGrid(rng, Topology::Grid2D(20, 20, 8), Regime::kMedium);
  const Energy flow = SolveAndCheckCut(g, "once").flow;
  for (int k = 0; k < 3; ++k) {
    const Result r = SolveAndCheckCut(g, "again");
    EXPECT_EQ(r.flow, flow);
    EXPECT_EQ(r.iterations, 0);  // nothing changed: nothing to augment
  }
}

// ---- Through the model API -------------------------------------------------------------------------

TEST(BkMaxFlow, TwoLabelModelsReachTheBruteForceOptimum) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    const Topology t = trial % 4 == 0   ? Topology::Grid2D(4, 3, 4)
                       : trial % 4 == 1 ? Topology::Grid2D(3, 3, 8)
                       : trial % 4 == 2 ? Topology::Grid3D(2, 2, 3)
                                        : Topology::EdgeList(7, {0, 1, 2, 3, 4, 5, 0, 2}, {1, 2, 3, 4, 5, 6, 6, 5});
    const Pairwise pairwise = trial % 2 ? Pairwise{PairwiseKind::kPotts, static_cast<Cost>(1 + trial % 9), 0, {}}
                                        : Pairwise{PairwiseKind::kTable, 1, 0, {2, 9, 7, 1}};
    const Model m = test::RandomModel(rng, t, 2, 40, pairwise, 4);
    SolveOptions options;
    options.solver = "cpu-bk";
    const Result r = Solve(m, options);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.backend_used, "cpu-bk");
    EXPECT_EQ(r.energy, test::BruteForceMinEnergy(m)) << "trial " << trial;
    EXPECT_EQ(r.lower_bound, r.energy);
  }
}

TEST(BkMaxFlow, IsTheCpuChoiceOfAuto) {
  StGraph g;
  g.add_node(2);
  g.add_tweights(0, 4, 1);
  g.add_edge(0, 1, 2, 0);
  std::string note;
  const SolverEntry& e = Registry::Global().Choose("auto", Algorithm::kMaxFlow, Device::kCpu, &note);
  EXPECT_EQ(e.name, "cpu-bk");
  EXPECT_TRUE(e.make_engine()->SupportsResolve());
}

}  // namespace
}  // namespace mrf
