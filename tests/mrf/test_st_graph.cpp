// The s-t graph, the Kolmogorov-Zabih construction and the solve API, checked against brute force
// through the Boost Graph reference engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "mrf/binary_graph.h"
#include "mrf/memory.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

TEST(StGraph, KolmogorovStyleCallsGiveTheMinimumCut) {
  StGraph g;
  g.add_node(2);
  g.add_tweights(0, 1, 5);
  g.add_tweights(1, 2, 6);
  g.add_edge(0, 1, 3, 4);
  const Result r = g.maxflow("boost-bk");
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.flow, 3);  // both nodes on the sink side: 1 + 2
  EXPECT_EQ(r.flow, test::BruteForceMinCut(g));
  EXPECT_EQ(g.what_segment(0), Segment::kSink);
  EXPECT_EQ(r.backend_used, "boost-bk");
}

TEST(StGraph, NegativeTerminalWeightsShiftTheFlow) {
  StGraph g;
  g.add_node(1);
  g.add_tweights(0, -4, 3);  // as in Kolmogorov's library: min cut = min(-4, 3) = -4
  const Result r = g.maxflow("boost-bk");
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.flow, -4);
  EXPECT_EQ(g.what_segment(0), Segment::kSink);
}

TEST(StGraph, GridGraphsAcceptNeighboursOnly) {
  StGraph g(Topology::Grid2D(3, 3, 4));
  EXPECT_NO_THROW(g.add_edge(4, 1, 2, 3));
  EXPECT_THROW(g.add_edge(0, 8, 1, 1), Error);
  EXPECT_THROW(g.add_edge(0, 1, -1, 1), Error);
  EXPECT_THROW(g.add_tweights(9, 1, 1), Error);
  const EdgeId slot = g.topology().grid_slot(1, 4);
  EXPECT_EQ(g.edge_cap(slot), 3);  // slot runs 1 -> 4
  EXPECT_EQ(g.edge_rev_cap(slot), 2);
}

TEST(StGraph, ResetCapacitiesKeepsTheShapeAndSolvesAfresh) {
  std::mt19937_64 rng(11);
  const Topology grid = Topology::Grid2D(3, 4, 8);
  StGraph g = test::RandomGridGraph(rng, grid, 9);
  g.add_tweights(0, -5, 2);  // a negative capacity leaves a constant behind
  ASSERT_TRUE(g.maxflow("boost-bk").ok);
  g.ResetCapacities();
  EXPECT_EQ(g.constant(), 0);
  EXPECT_EQ(g.num_nodes(), grid.num_nodes());
  for (NodeId v = 0; v < g.num_nodes(); ++v) EXPECT_EQ(g.source_cap(v) + g.sink_cap(v), 0);
  // Refill with another random graph's capacities: the cut must match brute force again.
  const StGraph other = test::RandomGridGraph(rng, grid, 9);
  for (NodeId v = 0; v < g.num_nodes(); ++v) g.add_tweights(v, other.source_cap(v), other.sink_cap(v));
  grid.ForEachEdge([&](EdgeId e, NodeId, NodeId) { g.add_to_edge_slot(e, other.edge_cap(e), other.edge_rev_cap(e)); });
  const Result r = g.maxflow("boost-bk");
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.flow, test::BruteForceMinCut(other));
}

TEST(StGraph, MarkSolvedLetsCallersDriveAnEngineIncrementally) {
  // Solve with an engine directly, change capacities (set_edge_slot and set_tweights), re-solve
  // from the changes recorded since MarkSolved(): every flow must match brute force.
  std::mt19937_64 rng(12);
  const Topology grid = Topology::Grid2D(4, 3, 4);
  StGraph g = test::RandomGridGraph(rng, grid, 9);
  const SolverEntry* entry = Registry::Global().Find("cpu-bk");
  ASSERT_NE(entry, nullptr);
  std::unique_ptr<MaxFlowEngine> engine = entry->make_engine();
  Result r;
  engine->Solve(g, &r);
  EXPECT_EQ(r.flow + g.constant(), test::BruteForceMinCut(g));
  g.MarkSolved();
  EXPECT_FALSE(g.changes().structure_changed);
  for (int round = 0; round < 20; ++round) {
    const NodeId v = static_cast<NodeId>(rng() % grid.num_nodes());
    g.set_tweights(v, static_cast<Energy>(rng() % 10), static_cast<Energy>(rng() % 10));
    grid.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
      if (rng() % 5 == 0) g.set_edge_slot(e, static_cast<Cost>(rng() % 10), static_cast<Cost>(rng() % 10));
    });
    EXPECT_FALSE(g.changes().nodes.empty());
    Result again;
    engine->Resolve(g, &again);
    g.MarkSolved();
    EXPECT_TRUE(g.changes().nodes.empty() && g.changes().edges.empty());
    EXPECT_EQ(again.flow + g.constant(), test::BruteForceMinCut(g)) << "round " << round;
    EXPECT_EQ(g.CutCapacity(again.labels), again.flow + g.constant()) << "round " << round;
  }
  EXPECT_THROW(g.set_edge_slot(-1, 1, 1), Error);
  EXPECT_THROW(g.set_edge_slot(0, -1, 1), Error);
}

TEST(StGraph, ErrorsEndInTheResult) {
  StGraph g;
  g.add_node(2);
  Result r = g.maxflow("no-such-engine");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("unknown backend 'no-such-engine'"), std::string::npos) << r.message;
  EXPECT_THROW(g.what_segment(0), Error);
}

TEST(StGraph, RandomGraphsMatchBruteForce) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const NodeId n = 1 + trial % 12;
    StGraph g = test::RandomGeneralGraph(rng, n, 2 * n, trial % 2 ? 1000 : 5);
    const Result r = g.maxflow("boost-bk");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.flow, test::BruteForceMinCut(g)) << "trial " << trial;
  }
}

TEST(BinaryGraph, CutEnergyEqualsModelEnergyForEveryLabelling) {
  std::mt19937_64 rng(11);
  for (const Topology& t : {Topology::Grid2D(3, 3, 4), Topology::Grid2D(3, 2, 8), Topology::Grid3D(2, 2, 2),
                            Topology::EdgeList(5, {0, 1, 2, 3, 0}, {1, 2, 3, 4, 4})}) {
    Pairwise table{PairwiseKind::kTable, 3, 0, {1, 7, 4, 2}};  // submodular: 7 + 4 >= 1 + 2
    Model m = test::RandomModel(rng, t, 2, 50, table, 5);
    Energy offset = 0;
    StGraph g = BuildBinaryGraph(m, &offset);
    const NodeId n = m.num_nodes();
    for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
      Labeling x(n);
      for (NodeId v = 0; v < n; ++v) x[v] = (mask >> v) & 1;
      ASSERT_EQ(g.CutCapacity(x) + offset, EvaluateEnergy(m, x).total) << t.Describe();
    }
  }
}

// Grids of many rows are built on all cores, each node gathering its slope from its edges both
// ways: on 4-, 8- and 6-connected grids of odd sizes the cut of any labelling must still cost the
// model's energy, and the graph must equal the one an edge list of the same edges gives (built by
// one serial pass). A capacity above 32 bits names the edge a pass in slot order meets first.
TEST(BinaryGraph, GridsBuiltOnAllCoresEqualTheSerialEdgeListBuild) {
  std::mt19937_64 rng(12);
  for (const Topology& t : {Topology::Grid2D(67, 53, 4), Topology::Grid2D(41, 70, 8), Topology::Grid3D(13, 11, 9),
                            Topology::Grid2D(1, 300, 4), Topology::Grid2D(300, 1, 8)}) {
    Pairwise table{PairwiseKind::kTable, 3, 0, {1, 7, 4, 2}};
    const Model m = test::RandomModel(rng, t, 2, 50, table, 5);
    Model list = m;
    std::vector<NodeId> from, to;
    std::vector<Cost> weights;
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
      from.push_back(p);
      to.push_back(q);
      weights.push_back(m.edge_weight(slot));
    });
    list.topology = Topology::EdgeList(m.num_nodes(), from, to);
    list.edge_weights = weights;
    Energy grid_offset = 0, list_offset = 0;
    const StGraph grid = BuildBinaryGraph(m, &grid_offset);
    const StGraph serial = BuildBinaryGraph(list, &list_offset);
    EXPECT_EQ(grid_offset, list_offset) << t.Describe();
    EXPECT_EQ(grid.source_caps(), serial.source_caps()) << t.Describe();
    EXPECT_EQ(grid.sink_caps(), serial.sink_caps()) << t.Describe();
    // The edge list holds the nonzero capacities, in the grid's slot order.
    std::size_t k = 0;
    t.ForEachEdge([&](EdgeId slot, NodeId, NodeId) {
      if (grid.edge_cap(slot) == 0) return;
      ASSERT_LT(k, serial.edge_caps().size()) << t.Describe();
      EXPECT_EQ(grid.edge_cap(slot), serial.edge_caps()[k++]) << t.Describe() << ", slot " << slot;
    });
    EXPECT_EQ(k, serial.edge_caps().size()) << t.Describe();
    for (int trial = 0; trial < 20; ++trial) {
      Labeling x(m.num_nodes());
      for (Label& l : x) l = static_cast<Label>(rng() % 2);
      ASSERT_EQ(grid.CutCapacity(x) + grid_offset, EvaluateEnergy(m, x).total) << t.Describe();
    }
  }
  // Two edges above 32 bits: slot (direction 1, node 0) and slot (direction 0, node 70); the second
  // comes first in slot order.
  Model big;
  big.topology = Topology::Grid2D(40, 30, 4);
  big.num_labels = 2;
  big.unary.assign(2 * 1200, 1);
  big.pairwise = {PairwiseKind::kPotts, 1, 0, {}};
  big.edge_weights.assign(static_cast<std::size_t>(big.topology.num_edge_slots()), 1);
  big.edge_weights[1 * 1200 + 0] = (Cost{1} << 30) + 1;
  big.edge_weights[0 * 1200 + 70] = (Cost{1} << 30) + 1;
  Energy offset = 0;
  try {
    BuildBinaryGraph(big, &offset);
    ADD_FAILURE() << "a capacity above 32 bits was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "edge 70-71 needs capacity 2147483650, more than 32 bits");
  }
}

// A grid graph's capacities are allocated uninitialised and zeroed in blocks on all cores. Memory
// just freed after holding other values is what the allocator hands out next, so each graph here
// follows arrays of the same sizes filled with -1: every capacity must still read 0. (Large arrays may
// come fresh from the system, already zero, in the first round; glibc reuses them in later rounds.)
TEST(StGraph, NewGridsHoldOnlyZeroCapacitiesInReusedMemory) {
  for (const Topology& t : {Topology::Grid2D(300, 301, 4), Topology::Grid2D(70, 50, 8), Topology::Grid3D(40, 40, 41),
                            Topology::Grid2D(1, 3, 4)}) {
    for (int round = 0; round < 3; ++round) {
      {
        std::vector<Energy> nodes_a(t.num_nodes(), -1), nodes_b(t.num_nodes(), -1);
        std::vector<Cost> slots_a(static_cast<std::size_t>(t.num_edge_slots()), -1);
        std::vector<Cost> slots_b(static_cast<std::size_t>(t.num_edge_slots()), -1);
      }
      const StGraph g(t);
      ASSERT_EQ(g.source_caps().size(), static_cast<std::size_t>(t.num_nodes()));
      ASSERT_EQ(g.edge_caps().size(), static_cast<std::size_t>(t.num_edge_slots()));
      auto zero = [](auto value) { return value == 0; };
      EXPECT_TRUE(std::all_of(g.source_caps().begin(), g.source_caps().end(), zero)) << t.Describe();
      EXPECT_TRUE(std::all_of(g.sink_caps().begin(), g.sink_caps().end(), zero)) << t.Describe();
      EXPECT_TRUE(std::all_of(g.edge_caps().begin(), g.edge_caps().end(), zero)) << t.Describe();
      EXPECT_TRUE(std::all_of(g.edge_rev_caps().begin(), g.edge_rev_caps().end(), zero)) << t.Describe();
    }
  }
}

// Grid cuts are summed by rows on all cores: on grids of many rows (every kind, strips) with random
// terminal, forward and reverse capacities and a constant, any labelling's capacity must equal a plain
// serial sum over the nodes and the edges.
TEST(StGraph, GridCutCapacityEqualsASerialSum) {
  std::mt19937_64 rng(13);
  for (const Topology& t : {Topology::Grid2D(57, 61, 4), Topology::Grid2D(33, 40, 8), Topology::Grid3D(9, 14, 11),
                            Topology::Grid2D(1, 500, 4), Topology::Grid2D(500, 1, 8)}) {
    StGraph g(t);
    for (NodeId v = 0; v < t.num_nodes(); ++v) g.add_tweights(v, static_cast<Energy>(rng() % 1000) - 300, static_cast<Energy>(rng() % 1000));
    t.ForEachEdge([&](EdgeId slot, NodeId, NodeId) {
      g.add_to_edge_slot(slot, static_cast<Cost>(rng() % 100), static_cast<Cost>(rng() % 100));
    });
    for (int trial = 0; trial < 10; ++trial) {
      Labeling x(t.num_nodes());
      for (Label& l : x) l = static_cast<Label>(rng() % 2);
      Energy expected = g.constant();
      for (NodeId v = 0; v < t.num_nodes(); ++v) expected += x[v] ? g.source_cap(v) : g.sink_cap(v);
      t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
        if (!x[p] && x[q]) expected += g.edge_cap(slot);
        if (x[p] && !x[q]) expected += g.edge_rev_cap(slot);
      });
      EXPECT_EQ(g.CutCapacity(x), expected) << t.Describe() << ", trial " << trial;
    }
  }
}

// Large labellings are made and copied on all cores (first touches of their pages, then pieces).
// After arrays of the same size were filled with -1 and freed, so that reused memory would show
// through, every label of a new one must read 0, and every copy must equal its source, in place
// (same size) and into a vector of another size. Sizes straddle the point where the cores join in.
TEST(StGraph, LabellingsMadeAndCopiedOnAllCoresEqualPlainOnes) {
  std::mt19937_64 rng(29);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, (std::size_t{1} << 20) - 1,
                              std::size_t{1} << 20, (std::size_t{3} << 20) + 4099}) {
    { Labeling garbage(n, -1); }
    const Labeling zeros = NewLabeling(n);
    ASSERT_EQ(zeros.size(), n);
    EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](Label l) { return l == 0; })) << n;
    { std::vector<Energy> garbage(n, -1); }
    const std::vector<Energy> wide = NewZeroedVector<Energy>(n);  // other element sizes: pages of 512
    ASSERT_EQ(wide.size(), n);
    EXPECT_TRUE(std::all_of(wide.begin(), wide.end(), [](Energy e) { return e == 0; })) << n;
    Labeling source(n);
    for (Label& l : source) l = static_cast<Label>(rng() % 7);
    Labeling same_size(n, -3), other_size(n / 2 + 5, -3);
    AssignLabeling(&same_size, source);
    AssignLabeling(&other_size, source);
    EXPECT_EQ(same_size, source) << n;
    EXPECT_EQ(other_size, source) << n;
    AssignLabeling(&source, source);  // itself: unchanged
    EXPECT_EQ(source, same_size) << n;
    std::vector<int> covered(n, 0);
    ForPiecesOfLabels(n, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) ++covered[i];
    });
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; })) << n;
    // Made in the background: what is taken has the size asked for and holds zeros, whether it was
    // begun for that size, begun twice, begun for another size, or not begun at all.
    LabelingAhead ahead;
    auto all_zeros = [](const Labeling& l, std::size_t size) {
      return l.size() == size && std::all_of(l.begin(), l.end(), [](Label x) { return x == 0; });
    };
    ahead.Start(n);
    { Labeling garbage(n, -1); }
    ahead.Start(n);
    EXPECT_TRUE(all_zeros(ahead.Take(n), n)) << n;
    EXPECT_TRUE(all_zeros(ahead.Take(n), n)) << n << ", not begun";
    ahead.Start(n);
    EXPECT_TRUE(all_zeros(ahead.Take(n + 1), n + 1)) << n << ", begun for another size";
  }
}

// The process's anonymous memory in huge pages (kB), or -1 where the kernel does not say.
long AnonHugePagesKb() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  for (std::string line; std::getline(rollup, line);)
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  return -1;
}

// Where transparent huge pages are given to regions that ask (the kernel's "madvise" mode, Debian's
// default), a large labelling asks: its 64 MB fault in as 2 MB pages (a fresh 4096 x 4096 labelling
// took 4.9-6.1 instead of 7.1-8.5 ms on the GPU machine's 16 cores). Without the request it gets none.
TEST(StGraph, LargeLabellingsAskForHugePages) {
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer builds do not first-touch labellings";
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  if (mode.find("[madvise]") == std::string::npos)
    GTEST_SKIP() << "transparent huge pages are not in madvise mode here ('" << mode << "')";
  const long before = AnonHugePagesKb();
  if (before < 0) GTEST_SKIP() << "/proc/self/smaps_rollup does not report AnonHugePages";
  const Labeling labels = NewLabeling(std::size_t{16} << 20);
  const long gained = AnonHugePagesKb() - before;
  // All but the unaligned ends (at most 4 MB of the 64) unless memory is too fragmented for them.
  EXPECT_GE(gained, 32 * 1024) << "kB in huge pages gained by a 64 MB labelling";
  EXPECT_EQ(labels[labels.size() / 2], 0);
}

// last_cut_capacity() is the last cut's capacity kept up to date by every capacity change, and
// maxflow() prices a new cut from it: after each change of every kind (terminals added, with
// negative amounts that shift the constant, or replaced, one by one or by rows; edges added through
// either end, added to or replaced by slot, slots off the grid included) it must equal CutCapacity()
// of that cut, and every solve's energy CutCapacity() of its own cut, on grids of every kind, strips
// and edge lists, re-solved and solved afresh.
TEST(StGraph, LastCutCapacityFollowsEveryCapacityChange) {
  std::mt19937_64 rng(29);
  auto random = [&rng](std::int64_t below) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(below)); };
  StGraph general;
  general.add_node(40);
  for (int e = 0; e < 120; ++e) {
    const auto p = static_cast<NodeId>(random(40)), q = static_cast<NodeId>(random(40));
    if (p != q) general.add_edge(p, q, static_cast<Cost>(random(50)), static_cast<Cost>(random(50)));
  }
  std::vector<StGraph> graphs;
  graphs.push_back(std::move(general));
  for (const Topology& t : {Topology::Grid2D(23, 19, 4), Topology::Grid2D(17, 21, 8), Topology::Grid3D(7, 6, 5),
                            Topology::Grid2D(1, 60, 4), Topology::Grid2D(60, 1, 8)})
    graphs.emplace_back(t);
  std::int64_t moved_nodes = 0;
  for (StGraph& g : graphs) {
    const Topology& t = g.topology();
    const NodeId n = g.num_nodes();
    const EdgeId slots = g.num_edge_slots();
    EXPECT_THROW(g.last_cut_capacity(), Error) << "no cut before the first maxflow()";
    for (NodeId v = 0; v < n; ++v) g.add_tweights(v, random(1000) - 300, random(1000));
    for (EdgeId e = 0; e < slots; ++e) g.add_to_edge_slot(e, static_cast<Cost>(random(100)), static_cast<Cost>(random(100)));
    for (const std::string backend : {"cpu-bk", t.is_grid() ? "tbb-pr" : "boost-bk", "cpu-bk"}) {
      Result first = g.maxflow(backend);
      ASSERT_TRUE(first.ok) << first.message;
      Labeling cut = first.labels;
      for (int round = 0; round < 8; ++round) {
        for (int change = 0; change < 12; ++change) {
          const auto v = static_cast<NodeId>(random(n));
          const EdgeId e = static_cast<EdgeId>(random(slots));
          const auto cap = static_cast<Cost>(random(200)), rev_cap = static_cast<Cost>(random(200));
          NodeId p = -1, q = -1;
          switch (random(t.is_grid() ? 7 : 6)) {
            case 0: g.add_tweights(v, random(3000) - 1500, random(3000) - 1500); break;
            case 1: g.set_tweights(v, random(std::int64_t{1} << 40), random(2000)); break;
            case 2: g.add_to_edge_slot(e, cap, rev_cap); break;
            case 3: g.set_edge_slot(e, cap, rev_cap); break;
            case 4:
              if (t.edge_endpoints(e, &p, &q)) g.set_edge(e, cap, rev_cap);
              break;
            case 5:
              if (t.is_grid() && t.edge_endpoints(e, &p, &q)) {
                if (random(2)) std::swap(p, q);
                g.add_edge(p, q, cap, rev_cap);
              } else {
                g.set_tweights(v, 0, 0);
              }
              break;
            default:
              g.UpdateTweightsByRows([&](std::int64_t row_begin, std::int64_t row_end, Energy* source, Energy* sink) {
                for (std::int64_t p = row_begin * t.width(); p < row_end * t.width(); ++p)
                  if (p % 7 == round) source[p] += 400, sink[p] = sink[p] / 2;
              });
          }
          ASSERT_EQ(g.last_cut_capacity(), g.CutCapacity(cut)) << t.Describe() << ", " << backend << ", round "
                                                               << round << ", change " << change;
        }
        Result r = g.maxflow(backend, round % 3 != 2);
        ASSERT_TRUE(r.ok) << t.Describe() << ", " << backend << ": " << r.message;
        EXPECT_EQ(r.energy, g.CutCapacity(r.labels)) << t.Describe() << ", " << backend << ", round " << round;
        EXPECT_EQ(r.energy, r.flow);
        EXPECT_EQ(g.last_cut_capacity(), r.energy);
        for (NodeId v = 0; v < n; ++v) moved_nodes += (cut[v] != 0) != (r.labels[v] != 0);
        cut = r.labels;
      }
    }
    g.ResetCapacities();
    EXPECT_THROW(g.last_cut_capacity(), Error) << "no cut after ResetCapacities()";
  }
  EXPECT_GT(moved_nodes, 1000) << "the solves hardly moved any node: the pricing from the last cut went untested";
  StGraph grown;
  grown.add_node(2);
  grown.add_tweights(0, 5, 1);
  ASSERT_TRUE(grown.maxflow("cpu-bk").ok);
  EXPECT_EQ(grown.last_cut_capacity(), 1);
  grown.add_edge(0, 1, 2, 2);
  EXPECT_THROW(grown.last_cut_capacity(), Error) << "no cut after an edge was added to an edge list";
  ASSERT_TRUE(grown.maxflow("cpu-bk").ok);
  grown.add_node(1);
  EXPECT_THROW(grown.last_cut_capacity(), Error) << "no cut after nodes were added";
  StGraph grid(Topology::Grid2D(8, 8, 4));
  ASSERT_TRUE(grid.maxflow("cpu-bk").ok);
  EXPECT_THROW(grid.UpdateTweightsByRows([](std::int64_t, std::int64_t, Energy*, Energy* sink) { sink[0] = -1; }), Error);
  EXPECT_THROW(grid.last_cut_capacity(), Error) << "no cut after a failed rewrite";
}

// Changes refused part way leave the last cut's capacity as it was, and a stopped solve's cut (no
// flow to compare it with) is priced in full and kept as the last cut.
TEST(StGraph, LastCutCapacitySurvivesRefusedChangesAndStoppedSolves) {
  const Topology t = Topology::Grid2D(30, 20, 8);
  StGraph g(t);
  std::mt19937_64 rng(31);
  for (NodeId v = 0; v < t.num_nodes(); ++v) g.add_tweights(v, static_cast<Energy>(rng() % 900), static_cast<Energy>(rng() % 900));
  t.ForEachEdge([&](EdgeId e, NodeId, NodeId) { g.add_to_edge_slot(e, static_cast<Cost>(rng() % 90), static_cast<Cost>(rng() % 90)); });
  Result r = g.maxflow("cpu-bk");
  ASSERT_TRUE(r.ok) << r.message;
  NodeId p = -1, q = -1;
  ASSERT_TRUE(t.edge_endpoints(0, &p, &q));
  g.set_tweights(p, 1, 1);
  g.set_edge_slot(0, 5, 5);
  ASSERT_EQ(g.last_cut_capacity(), g.CutCapacity(r.labels));
  EXPECT_THROW(g.add_tweights(p, std::numeric_limits<Energy>::max(), 0), Error);
  EXPECT_THROW(g.add_tweights(p, std::numeric_limits<Energy>::min(), 0), Error);  // the shift overflows
  EXPECT_THROW(g.set_tweights(p, -1, 0), Error);
  EXPECT_THROW(g.add_to_edge_slot(0, 1, std::numeric_limits<Cost>::max()), Error);  // the reverse sum overflows
  EXPECT_THROW(g.add_edge(p, q, std::numeric_limits<Cost>::max(), 0), Error);
  EXPECT_THROW(g.set_edge(0, 1, -1), Error);
  EXPECT_EQ(g.edge_cap(0), 5) << "a refused change must change nothing";
  EXPECT_EQ(g.last_cut_capacity(), g.CutCapacity(r.labels)) << "after refused changes";
  EXPECT_THROW(g.UpdateTweightsByRows([](std::int64_t, std::int64_t, Energy*, Energy*) { throw Error("fill failed"); }),
               Error);
  EXPECT_THROW(g.last_cut_capacity(), Error) << "a failed rewrite leaves no cut to price";
  r = g.maxflow("cpu-bk");
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(g.last_cut_capacity(), r.energy);
  for (NodeId v = 0; v < t.num_nodes(); v += 3) g.set_tweights(v, static_cast<Energy>(rng() % 900), 0);
  g.set_limits(0, [](const IterationRecord&) { return false; });
  const Result stopped = g.maxflow("cpu-bk");
  g.set_limits(0);
  ASSERT_TRUE(stopped.ok) << stopped.message;
  EXPECT_EQ(stopped.message.rfind("stopped early", 0), 0u) << stopped.message;
  EXPECT_EQ(stopped.energy, g.CutCapacity(stopped.labels));
  EXPECT_EQ(g.last_cut_capacity(), stopped.energy);
}

// A flow is at most the smaller of the terminal sums, and the engines add it in 64 bits: a graph where
// both sums pass 2^63-1 is refused by every engine, whichever way its capacities got there (fresh,
// by add_tweights or set_tweights before a re-solve, or rewritten by rows); a graph where one sum
// fits is solved exactly even when the other does not. A cut whose capacity passes 2^63-1 is refused.
TEST(StGraph, FlowsThatCouldPassSixtyFourBitsAreRefused) {
  const Energy big = Energy{1} << 62;
  const std::string refusal = "maxflow: the flow could exceed 64 bits: the source capacities sum to ";
  for (const char* engine : {"cpu-bk", "boost-bk", "tbb-pr"}) {
    SCOPED_TRACE(engine);
    StGraph g(Topology::Grid2D(2, 1));
    g.add_tweights(0, big, big);
    g.add_tweights(1, big, big);  // the minimum cut is 2^63
    Result r = g.maxflow(engine);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.message, refusal + "9223372036854775808, the sink capacities to 9223372036854775808 and each "
                                   "node's smaller one to 9223372036854775808 (scale them down)");
    // One side fits: the flow is exact (each node sends its sink capacity, 1, and the edge carries none).
    g.set_tweights(0, big, 1);
    g.set_tweights(1, big, 1);
    g.add_edge(0, 1, 7, 7);
    r = g.maxflow(engine);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.flow, 2);
    // Re-solves: the sums follow set_tweights, add_tweights and rows rewritten after the solve.
    g.set_tweights(1, big, big);
    g.set_tweights(0, big, big - 1);
    r = g.maxflow(engine, true);
    ASSERT_TRUE(r.ok) << r.message;  // the sink side sums to 2^63 - 1: it fits
    EXPECT_EQ(r.flow, big + (big - 1));
    g.add_tweights(0, 0, 1);
    EXPECT_EQ(g.maxflow(engine, true).message.rfind(refusal, 0), 0u);
    g.set_tweights(0, 0, 0);
    ASSERT_TRUE(g.maxflow(engine, true).ok);
    g.UpdateTweightsByRows([&](std::int64_t, std::int64_t, Energy* source, Energy* sink) {
      source[0] = source[1] = big;
      sink[0] = sink[1] = big;
    });
    EXPECT_EQ(g.maxflow(engine, true).message.rfind(refusal, 0), 0u);
  }
  // Both sums may pass 2^63-1 when each node's smaller capacity is small: the cut that leaves every node
  // on its cheaper side bounds the flow (here the edges' 5).
  StGraph apart(Topology::Grid2D(4, 1));
  apart.add_tweights(0, big, 0);
  apart.add_tweights(1, big, 0);
  apart.add_tweights(2, 0, big);
  apart.add_tweights(3, 0, big);
  for (NodeId v = 0; v < 3; ++v) apart.add_edge(v, v + 1, 5, 5);
  const Result solved = apart.maxflow("cpu-bk");
  ASSERT_TRUE(solved.ok) << solved.message;
  EXPECT_EQ(solved.flow, 5);
  // A rewrite by rows that failed part way may leave a negative capacity: refused, not solved.
  EXPECT_THROW(apart.UpdateTweightsByRows([](std::int64_t, std::int64_t, Energy* source, Energy*) { source[1] = -7; }),
               Error);
  EXPECT_EQ(apart.maxflow("cpu-bk").message, "maxflow: capacities of node 1 are negative (-7, 0)");
  // General graphs count their sums too.
  StGraph general;
  general.add_node(2);
  general.add_tweights(0, big, big);
  general.add_tweights(1, big, big);
  for (const char* engine : {"cpu-bk", "boost-bk"}) EXPECT_EQ(general.maxflow(engine).message.rfind(refusal, 0), 0u);
  // Callers that drive an engine themselves start the kept sums at MarkSolved().
  StGraph driven(Topology::Grid2D(2, 1));
  driven.add_tweights(0, big, big);
  driven.add_tweights(1, 1, 1);
  driven.MarkSolved();
  driven.set_tweights(1, big, big);
  EXPECT_EQ(driven.maxflow("cpu-bk", true).message.rfind(refusal, 0), 0u);
  // Cuts that need not be minimal (a stopped solve's, a caller's): the sink side sums to 2, so the
  // flow fits, but the cut with both nodes on the sink side costs both source capacities, 2^63.
  for (const bool solved_first : {false, true}) {
    StGraph g(Topology::Grid2D(2, 1));
    g.add_tweights(0, big, 1);
    g.add_tweights(1, big, 1);
    g.add_edge(0, 1, 3, 4);
    if (solved_first) ASSERT_EQ(g.maxflow("cpu-bk").flow, 2);  // then the sums are tracked, not recounted
    try {
      g.CutCapacity({1, 1});
      ADD_FAILURE() << "a cut of 2^63 was priced";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "the cut's capacity 9223372036854775808 does not fit 64 bits");
    }
    g.set_tweights(1, big - 1, 1);
    EXPECT_EQ(g.CutCapacity({1, 1}), big + (big - 1));  // summed in 128 bits, and it fits
    EXPECT_EQ(g.CutCapacity({1, 0}), big + 1 + 4);        // node 0 on the sink side: the edge 1->0 (4) crosses
    EXPECT_EQ(g.CutCapacity({0, 1}), 1 + (big - 1) + 3);  // the edge 0->1 (3) crosses
  }
  // Cuts priced from the last one: when the sums say a cut could pass 64 bits, the full sum decides.
  StGraph last(Topology::Grid2D(64, 2));
  for (NodeId v = 0; v < 128; ++v) last.add_tweights(v, 1, 2);
  ASSERT_TRUE(last.maxflow("cpu-bk").ok);  // every node on the source side
  last.set_tweights(0, big, 2);
  last.set_tweights(1, big, 2);
  Labeling moved(128, 0);
  moved[0] = moved[1] = 1;
  try {
    last.CutCapacityFromLastCut(moved);
    ADD_FAILURE() << "a cut of 2^63 + 252 was priced";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the cut's capacity 9223372036854776060 does not fit 64 bits");
  }
}

// Cuts priced from the last one equal the full sum: labellings that differ from the last cut in
// a few scattered nodes, in a block, in many (past the point where the full sum is used) or in
// all, with labels other than 0 and 1 (any non-zero label is the sink side), on grids of every
// kind, widths that are and are not multiples of the 16 labels compared at once, strips and edge
// lists; before any solve there is no last cut and the full sum is used.
TEST(StGraph, CutsPricedFromTheLastCutEqualTheFullSum) {
  std::mt19937_64 rng(37);
  StGraph general;
  general.add_node(300);
  for (int e = 0; e < 900; ++e) {
    const auto p = static_cast<NodeId>(rng() % 300), q = static_cast<NodeId>(rng() % 300);
    if (p != q) general.add_edge(p, q, static_cast<Cost>(rng() % 50), static_cast<Cost>(rng() % 50));
  }
  std::vector<StGraph> graphs;
  graphs.push_back(std::move(general));
  for (const Topology& t : {Topology::Grid2D(23, 19, 4), Topology::Grid2D(64, 40, 4), Topology::Grid2D(48, 37, 8),
                            Topology::Grid2D(70, 61, 8), Topology::Grid3D(7, 6, 5), Topology::Grid3D(32, 9, 8),
                            Topology::Grid2D(1, 300, 8), Topology::Grid2D(300, 1, 4), Topology::Grid2D(16, 1, 8)})
    graphs.emplace_back(t);
  for (StGraph& g : graphs) {
    const Topology& t = g.topology();
    const NodeId n = g.num_nodes();
    for (NodeId v = 0; v < n; ++v)
      g.add_tweights(v, static_cast<Energy>(rng() % 1000) - 200, static_cast<Energy>(rng() % 1000));
    for (EdgeId e = 0; e < g.num_edge_slots(); ++e)
      g.add_to_edge_slot(e, static_cast<Cost>(rng() % 100), static_cast<Cost>(rng() % 100));
    Labeling any(n);
    for (Label& l : any) l = static_cast<Label>(rng() % 2);
    EXPECT_EQ(g.CutCapacityFromLastCut(any), g.CutCapacity(any)) << t.Describe() << ": no last cut yet";
    const Result r = g.maxflow(t.is_grid() ? "cpu-bk" : "boost-bk");
    ASSERT_TRUE(r.ok) << r.message;
    for (const double share : {0.0, 0.001, 0.005, 0.012, 0.05, 0.5, 1.0}) {
      for (int trial = 0; trial < 4; ++trial) {
        Labeling x = r.labels;
        for (NodeId v = 0; v < n; ++v) {
          if (static_cast<double>(rng() % 100000) < share * 100000) x[v] = !x[v];
          if (x[v] && rng() % 4 == 0) x[v] = static_cast<Label>(2 + rng() % 5);
        }
        if (trial == 3 && share > 0) {  // a block of moved nodes, about the same share
          const NodeId span = std::max<NodeId>(1, static_cast<NodeId>(share * n));
          const NodeId first = static_cast<NodeId>(rng() % static_cast<std::uint64_t>(n));
          x = r.labels;
          for (NodeId v = first; v < std::min(n, first + span); ++v) x[v] = !x[v];
        }
        EXPECT_EQ(g.CutCapacityFromLastCut(x), g.CutCapacity(x)) << t.Describe() << ", share " << share << ", trial " << trial;
      }
    }
  }
}

// Rows rewritten on all cores record exactly the nodes whose capacities changed, whatever piece of
// rows holds them; a negative capacity is refused naming the lowest such node; edge lists are refused.
TEST(StGraph, TerminalsRewrittenByRowsRecordTheChangedNodes) {
  const Topology t = Topology::Grid2D(37, 90, 4);
  StGraph g(t);
  for (NodeId v = 0; v < t.num_nodes(); ++v) g.set_tweights(v, v % 7, v % 5);
  g.MarkSolved();
  g.UpdateTweightsByRows([&](std::int64_t row_begin, std::int64_t row_end, Energy* source, Energy* sink) {
    for (NodeId p = static_cast<NodeId>(row_begin * 37); p < row_end * 37; ++p)
      if (p % 11 == 0) source[p] += 1;
      else if (p % 13 == 0) sink[p] = sink[p];  // written, not changed
  });
  std::vector<NodeId> expected;
  for (NodeId p = 0; p < t.num_nodes(); p += 11) expected.push_back(p);
  EXPECT_EQ(g.changes().nodes, expected);
  for (NodeId v = 0; v < t.num_nodes(); ++v) EXPECT_EQ(g.source_cap(v), v % 7 + (v % 11 == 0)) << v;
  try {
    g.UpdateTweightsByRows([&](std::int64_t row_begin, std::int64_t row_end, Energy*, Energy* sink) {
      for (NodeId p = static_cast<NodeId>(row_begin * 37); p < row_end * 37; ++p)
        if (p == 3000 || p == 2001) sink[p] = -4;
    });
    ADD_FAILURE() << "a negative capacity was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "UpdateTweightsByRows: capacities of node 2001 must be non-negative (got 6, -4)");
  }
  EXPECT_TRUE(g.changes().structure_changed) << "after a failed rewrite the next solve must start afresh";
  StGraph general;
  general.add_node(3);
  EXPECT_THROW(general.UpdateTweightsByRows([](std::int64_t, std::int64_t, Energy*, Energy*) {}), Error);
}

// Solves that share a KeptCut: models that differ only in their unary costs are re-solved on the
// kept graph; other edge weights, another solver or another shape build afresh. Every solve must
// equal a plain one (energy, flow, bound) and, on grids of up to 16 nodes, the brute-force optimum.
// The larger grids (8-connected, 3-D) are rewritten in several pieces of rows.
TEST(Solve, KeptCutsReSolveWhenOnlyTheUnaryCostsChange) {
  std::mt19937_64 rng(17);
  for (const char* solver : {"cpu-bk", "tbb-pr", "boost-bk"}) {
    SolveOptions options;
    options.solver = solver;
    options.kept_cut = std::make_shared<KeptCut>();
    SolveOptions plain;
    plain.solver = solver;
    for (const Topology& t : {Topology::Grid2D(4, 4, 4), Topology::Grid2D(3, 5, 8), Topology::Grid2D(4, 4, 4),
                              Topology::Grid2D(23, 41, 8), Topology::Grid3D(9, 7, 5)}) {
      Pairwise potts{PairwiseKind::kPotts, 3, 0, {}};
      Model m = test::RandomModel(rng, t, 2, 20, potts, 4);
      for (int step = 0; step < 5; ++step) {
        if (step == 3) {
          for (Cost& w : m.edge_weights) w = static_cast<Cost>(rng() % 5);  // the edge terms change
        } else if (step > 0) {
          for (Cost& u : m.unary) u = static_cast<Cost>(rng() % 21);
        }
        const Result kept = Solve(m, options);
        const Result fresh = Solve(m, plain);
        ASSERT_TRUE(kept.ok) << kept.message;
        ASSERT_TRUE(fresh.ok) << fresh.message;
        const std::string what = std::string(solver) + ", " + t.Describe() + ", step " + std::to_string(step);
        EXPECT_EQ(kept.energy, fresh.energy) << what;
        EXPECT_EQ(kept.flow, fresh.flow) << what;
        EXPECT_EQ(kept.lower_bound, fresh.lower_bound) << what;
        if (t.num_nodes() <= 16) EXPECT_EQ(kept.energy, test::BruteForceMinEnergy(m)) << what;
        // On the kept graph: steps 1, 2 and 4 (step 3 changed the edges, step 0 is a new shape's first solve).
        const bool on_kept = kept.message.find("on the kept graph") != std::string::npos;
        EXPECT_EQ(on_kept, step == 1 || step == 2 || step == 4) << what << ": " << kept.message;
      }
    }
    ASSERT_TRUE(options.kept_cut->graph);
    EXPECT_EQ(options.kept_cut->engine_name, solver);
  }
  // A failed solve leaves nothing kept.
  {
    SolveOptions options;
    options.solver = "cpu-bk";
    options.kept_cut = std::make_shared<KeptCut>();
    Model m = test::RandomModel(rng, Topology::Grid2D(5, 3, 4), 2, 20, {PairwiseKind::kPotts, 2, 0, {}}, 3);
    ASSERT_TRUE(Solve(m, options).ok);
    ASSERT_TRUE(options.kept_cut->graph);
    m.unary.pop_back();  // refused by the model's validation (one cost short)
    EXPECT_FALSE(Solve(m, options).ok);
    EXPECT_FALSE(options.kept_cut->graph);
    EXPECT_FALSE(options.kept_cut->engine);
  }
  // Another solver than the kept one builds afresh and keeps its own graph.
  SolveOptions options;
  options.kept_cut = std::make_shared<KeptCut>();
  Model m = test::RandomModel(rng, Topology::Grid2D(5, 3, 4), 2, 20, {PairwiseKind::kPotts, 2, 0, {}}, 3);
  options.solver = "cpu-bk";
  ASSERT_TRUE(Solve(m, options).ok);
  options.solver = "boost-bk";
  const Result other = Solve(m, options);
  ASSERT_TRUE(other.ok) << other.message;
  EXPECT_EQ(other.message.find("re-solved"), std::string::npos) << other.message;
  EXPECT_EQ(options.kept_cut->engine_name, "boost-bk");
  EXPECT_EQ(other.energy, test::BruteForceMinEnergy(m));
}

// A solve that the callback stops keeps its graph, but what follows on it must still be exact.
TEST(Solve, StoppedSolvesLeaveTheKeptCutUsable) {
  for (const char* solver : {"cpu-bk", "tbb-pr", "boost-bk"}) test::ExpectStoppedSolvesLeaveTheKeptCutUsable(solver);
}

TEST(Solve, TwoLabelModelsReachTheBruteForceOptimum) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    Pairwise potts{PairwiseKind::kPotts, static_cast<Cost>(1 + trial % 7), 0, {}};
    Model m = test::RandomModel(rng, Topology::Grid2D(4, 3, trial % 2 ? 4 : 8), 2, 20, potts, 3);
    SolveOptions options;
    options.solver = "boost-bk";
    const Result r = Solve(m, options);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.energy, test::BruteForceMinEnergy(m));
    EXPECT_EQ(r.lower_bound, r.energy);
    EXPECT_EQ(r.flow, r.energy);
  }
}

TEST(Solve, BadRequestsEndInTheResultWithAMessage) {
  Model m;
  m.topology = Topology::Grid2D(2, 2, 4);
  m.num_labels = 2;
  m.unary.assign(8, 1);
  SolveOptions options;
  options.solver = "warp-drive";
  Result r = Solve(m, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("unknown backend 'warp-drive'"), std::string::npos) << r.message;
  options.solver = "auto";
  options.max_iterations = 0;
  r = Solve(m, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("max_iterations"), std::string::npos) << r.message;
  options.max_iterations = 10;
  options.initial_labels = {0, 1, 5, 0};
  r = Solve(m, options);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("initial label 5"), std::string::npos) << r.message;
  EXPECT_EQ(r.timings.solve_ms, -1);
}

TEST(Registry, ReportsCompiledInAndAvailability) {
  const Registry& reg = Registry::Global();
  EXPECT_TRUE(reg.IsCompiledIn("boost-bk"));
  EXPECT_TRUE(reg.IsAvailable("boost-bk"));
  std::string why;
  EXPECT_FALSE(reg.IsAvailable("nonexistent", &why));
  EXPECT_NE(why.find("unknown"), std::string::npos);
}

}  // namespace
}  // namespace mrf
