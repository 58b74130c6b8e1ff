// DIMACS max-flow files: round trips keep the maximum flow (and grid shapes), terminal arcs map as
// documented (checked against Boost's push-relabel and brute force on the raw arc list, which know
// nothing of the mapping), and every kind of bad input fails with its own one-line message.
#include <gtest/gtest.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "mrf/io/dimacs.h"
#include "support/test_support.h"

namespace mrf {
namespace {

Energy FlowOf(StGraph& g) {
  const Result r = g.maxflow("boost-bk");
  EXPECT_TRUE(r.ok) << r.message;
  return r.flow;
}

StGraph RoundTrip(const StGraph& g, DimacsInfo* info = nullptr) {
  std::stringstream text;
  WriteDimacs(g, text);
  return ReadDimacs(text, "round-trip", info);
}

StGraph ReadText(const std::string& text, DimacsInfo* info = nullptr, const DimacsReadOptions& options = {}) {
  std::istringstream in(text);
  return ReadDimacs(in, "bad.max", info, options);
}

// The message ReadText throws for `text` ("" when it reads fine).
std::string ErrorOf(const std::string& text, const DimacsReadOptions& options = {}) {
  try {
    ReadText(text, nullptr, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- An independent reference: the raw arc list of a file ------------------------------------------

struct RawArc {
  int from, to;  // 1-based DIMACS ids
  long long cap;
};

struct RawProblem {
  int nodes = 0, source = 0, sink = 0;
  std::vector<RawArc> arcs;

  std::string Text() const {
    std::ostringstream out;
    out << "c random test problem\np max " << nodes << " " << arcs.size() << "\nn " << source << " s\nn " << sink
        << " t\n";
    for (const RawArc& a : arcs) out << "a " << a.from << " " << a.to << " " << a.cap << "\n";
    return out.str();
  }
  // Capacity of the cut whose sink side is `sink_side` (1-based ids, all nodes).
  long long CutCapacity(const std::vector<bool>& sink_side) const {
    long long total = 0;
    for (const RawArc& a : arcs)
      if (!sink_side[a.from] && sink_side[a.to]) total += a.cap;
    return total;
  }
  // Minimum over all 2^(nodes-2) cuts.
  long long BruteForceMinCut() const {
    std::vector<int> inner;
    for (int v = 1; v <= nodes; ++v)
      if (v != source && v != sink) inner.push_back(v);
    long long best = std::numeric_limits<long long>::max();
    for (std::uint32_t mask = 0; mask < (1u << inner.size()); ++mask) {
      std::vector<bool> side(nodes + 1, false);
      side[sink] = true;
      for (std::size_t i = 0; i < inner.size(); ++i) side[inner[i]] = (mask >> i) & 1;
      best = std::min(best, CutCapacity(side));
    }
    return best;
  }
  // Boost Graph's push-relabel on the raw graph.
  long long BoostMaxFlow() const {
    using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
    using Graph = boost::adjacency_list<
        boost::vecS, boost::vecS, boost::directedS, boost::no_property,
        boost::property<boost::edge_capacity_t, long long,
                        boost::property<boost::edge_residual_capacity_t, long long,
                                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
    Graph g(static_cast<std::size_t>(nodes));
    auto capacity = boost::get(boost::edge_capacity, g);
    auto reverse = boost::get(boost::edge_reverse, g);
    for (const RawArc& a : arcs) {
      if (a.from == a.to) continue;  // a loop carries no flow
      const auto forward = boost::add_edge(a.from - 1, a.to - 1, g).first;
      const auto backward = boost::add_edge(a.to - 1, a.from - 1, g).first;
      capacity[forward] = a.cap;
      capacity[backward] = 0;
      reverse[forward] = backward;
      reverse[backward] = forward;
    }
    return boost::push_relabel_max_flow(g, source - 1, sink - 1);
  }
};

// Terminals anywhere, parallel arcs, arcs into the source, out of the sink, source -> sink and loops.
RawProblem RandomRawProblem(std::mt19937_64& rng, int nodes, int arcs, long long max_cap, bool loops) {
  RawProblem p;
  p.nodes = nodes;
  std::uniform_int_distribution<int> pick(1, nodes);
  p.source = pick(rng);
  do p.sink = pick(rng);
  while (p.sink == p.source);
  std::uniform_int_distribution<long long> cap(0, max_cap);
  for (int i = 0; i < arcs; ++i) {
    RawArc a{pick(rng), pick(rng), cap(rng)};
    if (!loops) while (a.to == a.from) a.to = pick(rng);
    // Lean towards terminal arcs, as in vision problems.
    if (rng() % 3 == 0) a.from = p.source;
    if (rng() % 3 == 0) a.to = p.sink;
    if (!loops && a.from == a.to) continue;
    p.arcs.push_back(a);
  }
  return p;
}

// ---- Round trips ----------------------------------------------------------------------------------

TEST(Dimacs, GeneralGraphsRoundTripToTheSameFlow) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 120; ++trial) {
    const NodeId n = 1 + trial % 25;
    StGraph g = test::RandomGeneralGraph(rng, n, 3 * n, trial % 2 ? 1000 : 7);
    if (trial % 3 == 0) g.add_tweights(trial % n, -(trial + 1), 2);  // a negative weight: constant() < 0
    DimacsInfo info;
    StGraph back = RoundTrip(g, &info);
    ASSERT_EQ(back.num_nodes(), g.num_nodes());
    EXPECT_FALSE(back.topology().is_grid());
    EXPECT_EQ(back.source_caps(), g.source_caps());
    EXPECT_EQ(back.sink_caps(), g.sink_caps());
    EXPECT_EQ(back.constant(), g.constant());
    EXPECT_EQ(info.flow_offset, g.constant());
    const Energy flow = FlowOf(g);
    EXPECT_EQ(FlowOf(back), flow) << "trial " << trial;
    if (n <= 12) EXPECT_EQ(flow, test::BruteForceMinCut(back)) << "trial " << trial;
  }
}

TEST(Dimacs, GridGraphsRoundTripWithTheirShape) {
  std::mt19937_64 rng(2);
  for (const Topology& grid : {Topology::Grid2D(7, 5, 4), Topology::Grid2D(5, 6, 8), Topology::Grid3D(4, 3, 5),
                               Topology::Grid2D(1, 9, 4), Topology::Grid3D(3, 2, 1), Topology::Grid2D(2, 2, 8)}) {
    for (int trial = 0; trial < 5; ++trial) {
      StGraph g = test::RandomGridGraph(rng, grid, trial % 2 ? 50 : 100000);
      if (trial == 4) g.add_tweights(0, -17, 0);
      DimacsInfo info;
      StGraph back = RoundTrip(g, &info);
      EXPECT_TRUE(info.grid_from_comment);
      ASSERT_EQ(back.topology(), grid) << back.topology().Describe();
      EXPECT_EQ(back.source_caps(), g.source_caps());
      EXPECT_EQ(back.sink_caps(), g.sink_caps());
      EXPECT_EQ(back.edge_caps(), g.edge_caps());
      EXPECT_EQ(back.edge_rev_caps(), g.edge_rev_caps());
      EXPECT_EQ(back.constant(), g.constant());
      EXPECT_EQ(FlowOf(back), FlowOf(g)) << grid.Describe();
    }
  }
}

TEST(Dimacs, FilesOnDiskRoundTrip) {
  std::mt19937_64 rng(3);
  const std::string dir = test::ScratchDir("dimacs_files");
  StGraph g = test::RandomGridGraph(rng, Topology::Grid2D(30, 20, 4), 200);
  WriteDimacs(g, dir + "/g.max");
  StGraph back = ReadDimacs(dir + "/g.max");
  EXPECT_EQ(back.topology(), g.topology());
  EXPECT_EQ(FlowOf(back), FlowOf(g));
}

TEST(Dimacs, ImposedGridShapeReadsAFileWithoutTheComment) {
  std::mt19937_64 rng(4);
  const Topology grid = Topology::Grid2D(6, 4, 8);
  StGraph g = test::RandomGridGraph(rng, grid, 30);
  std::stringstream written;
  WriteDimacs(g, written);
  std::string text, line;
  while (std::getline(written, line))
    if (line.rfind("c mrf-grid", 0) != 0) text += line + "\n";

  StGraph general = ReadText(text);
  EXPECT_FALSE(general.topology().is_grid());
  DimacsReadOptions options;
  options.grid = grid;
  DimacsInfo info;
  StGraph imposed = ReadText(text, &info, options);
  EXPECT_EQ(imposed.topology(), grid);
  EXPECT_FALSE(info.grid_from_comment);
  EXPECT_EQ(imposed.edge_caps(), g.edge_caps());
  const Energy flow = FlowOf(g);
  EXPECT_EQ(FlowOf(general), flow);
  EXPECT_EQ(FlowOf(imposed), flow);

  options.grid = Topology::Grid2D(4, 6, 8);  // right node count, wrong neighbours
  EXPECT_NE(ErrorOf(text, options).find("does not join two neighbours of the grid 4x6, 8-connected imposed on the file"),
            std::string::npos)
      << ErrorOf(text, options);
  options.grid = Topology::Grid2D(5, 5, 4);
  EXPECT_EQ(ErrorOf(text, options),
            "bad.max: the imposed grid 5x5, 4-connected has 25 nodes but the file has 24 non-terminal nodes");
}

// ---- Terminal arcs and the raw reference ----------------------------------------------------------

TEST(Dimacs, RandomFilesMatchBruteForceOnTheRawArcs) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 150; ++trial) {
    const RawProblem p = RandomRawProblem(rng, 2 + trial % 11, 3 + trial % 30, trial % 2 ? 9 : 1000, true);
    DimacsInfo info;
    StGraph g = ReadText(p.Text(), &info);
    const Result r = g.maxflow("boost-bk");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.flow, p.BruteForceMinCut()) << "trial " << trial << "\n" << p.Text();
    // The cut maps back to DIMACS ids: its capacity on the raw arcs is the flow.
    std::vector<bool> sink_side(p.nodes + 1, false);
    sink_side[p.sink] = true;
    if (!info.extra_node)
      for (NodeId v = 0; v < g.num_nodes(); ++v) sink_side[info.DimacsId(v)] = r.labels[v] == 1;
    EXPECT_EQ(p.CutCapacity(sink_side), r.flow) << "trial " << trial;
  }
}

TEST(Dimacs, LargerRandomFilesMatchBoostPushRelabel) {
  std::mt19937_64 rng(6);
  for (int trial = 0; trial < 20; ++trial) {
    const RawProblem p = RandomRawProblem(rng, 50 + 40 * trial, 400 + 300 * trial, trial % 2 ? 1000000 : 20, false);
    StGraph g = ReadText(p.Text());
    EXPECT_EQ(FlowOf(g), p.BoostMaxFlow()) << "trial " << trial;
  }
}

TEST(Dimacs, TerminalArcsMapAsDocumented) {
  // Source 3, sink 1: graph nodes are ids 2, 4, 5.
  const std::string text =
      "c terminals in the middle\n"
      "p max 5 8\n"
      "n 3 s\n"
      "n 1 t\n"
      "a 3 1 7\n"    // source -> sink: both terminal capacities of graph node 0 grow by 7
      "a 2 3 5\n"    // into the source: ignored
      "a 1 4 9\n"    // out of the sink: ignored
      "a 4 4 2\n"    // loop: ignored
      "a 3 2 4\n"
      "a 3 2 1\n"    // repeated: adds up
      "a 5 1 6\n"
      "a 2 5 3\n";
  DimacsInfo info;
  StGraph g = ReadText(text, &info);
  ASSERT_EQ(g.num_nodes(), 3);
  EXPECT_EQ(info.source, 3);
  EXPECT_EQ(info.sink, 1);
  EXPECT_EQ(info.ignored_arcs, 3);
  EXPECT_EQ(info.source_sink_capacity, 7);
  EXPECT_EQ(info.DimacsId(0), 2);
  EXPECT_EQ(info.DimacsId(1), 4);
  EXPECT_EQ(info.DimacsId(2), 5);
  EXPECT_EQ(g.source_cap(0), 4 + 1 + 7);
  EXPECT_EQ(g.sink_cap(0), 7);
  EXPECT_EQ(g.sink_cap(2), 6);
  EXPECT_EQ(FlowOf(g), 7 + 3);  // s->t directly, plus s->2->5->t limited by 2->5
}

TEST(Dimacs, OnlyTerminalsGetAnExtraNode) {
  DimacsInfo info;
  StGraph g = ReadText("p max 2 2\nn 2 s\nn 1 t\na 2 1 5\na 2 1 6\n", &info);
  EXPECT_TRUE(info.extra_node);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(FlowOf(g), 11);
}

TEST(Dimacs, ToleratesBlankLinesTabsCarriageReturnsAndArcsBeforeTheTerminals) {
  const std::string plain = "p max 4 5\nn 1 s\nn 4 t\na 1 2 3\na 1 3 2\na 2 3 5\na 2 4 2\na 3 4 3\n";
  const std::string odd = "c odd but valid\r\n\r\np\tmax 4 5\r\na 1 2 3\r\n  a 1 3   +2\r\nn 4 t\r\n\r\n"
                          "a 2 3 0000000000000000000005\r\nn 1 s\r\na\t2 4 2 \r\na 3 4 3";  // no newline at the end
  StGraph a = ReadText(plain), b = ReadText(odd);
  EXPECT_EQ(FlowOf(a), 5);
  EXPECT_EQ(FlowOf(b), 5);
  EXPECT_EQ(b.source_caps(), a.source_caps());
}

// ---- Bad input: each class has its own message ---------------------------------------------------

TEST(DimacsErrors, MissingOrUnreadableFile) {
  try {
    ReadDimacs("/no/such/dir/x.max");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot open DIMACS file '/no/such/dir/x.max': No such file or directory");
  }
  const std::string dir = test::ScratchDir("dimacs_unreadable");
  try {
    ReadDimacs(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read DIMACS file '" + dir + "': Is a directory");
  }
}

TEST(DimacsErrors, ProblemLine) {
  EXPECT_EQ(ErrorOf(""), "bad.max: no problem line ('p max NODES ARCS')");
  EXPECT_EQ(ErrorOf("c only a comment\n\n"), "bad.max: no problem line ('p max NODES ARCS')");
  EXPECT_EQ(ErrorOf("p min 4 2\n"), "bad.max:1: problem type 'min' is not 'max' (this reader takes max-flow files)");
  EXPECT_EQ(ErrorOf("c\np max 4\n"), "bad.max:2: malformed problem line (expected 'p max NODES ARCS')");
  EXPECT_EQ(ErrorOf("p\n"), "bad.max:1: malformed problem line (expected 'p max NODES ARCS')");
  EXPECT_EQ(ErrorOf("p max 4 2 7\n"), "bad.max:1: unexpected '7' after the problem line (expected 'p max NODES ARCS')");
  EXPECT_EQ(ErrorOf("p max four 2\n"), "bad.max:1: node count 'four' is not an integer");
  EXPECT_EQ(ErrorOf("p max 4 -2\n"), "bad.max:1: negative arc count -2");
  EXPECT_EQ(ErrorOf("p max 1 0\n"),
            "bad.max:1: a max-flow problem needs at least 2 nodes (a source and a sink); the problem line says 1");
  EXPECT_EQ(ErrorOf("p max 3000000000 0\n"), "bad.max:1: node count 3000000000 exceeds the supported 2147483647");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 1 s\np max 4 0\n"), "bad.max:3: second problem line (the first is on line 1)");
}

TEST(DimacsErrors, LinesBeforeTheProblemLine) {
  EXPECT_EQ(ErrorOf("a 1 2 3\np max 4 1\n"), "bad.max:1: arc before the problem line");
  EXPECT_EQ(ErrorOf("c\nn 1 s\np max 4 0\n"), "bad.max:2: node line before the problem line");
}

TEST(DimacsErrors, UnknownNodes) {
  const std::string head = "c\nc\np max 10 1\nn 1 s\nn 10 t\nc\n";  // the arc is line 7
  EXPECT_EQ(ErrorOf(head + "a 3 12 5\n"), "bad.max:7: arc to unknown node 12 (nodes are 1..10)");
  EXPECT_EQ(ErrorOf(head + "a 0 3 5\n"), "bad.max:7: arc from unknown node 0 (nodes are 1..10)");
  EXPECT_EQ(ErrorOf("p max 10 0\nn 11 s\n"), "bad.max:2: source 11 is not a node (nodes are 1..10)");
  EXPECT_EQ(ErrorOf("p max 10 0\nn -1 t\n"), "bad.max:2: sink -1 is not a node (nodes are 1..10)");
}

TEST(DimacsErrors, CapacitiesAndFields) {
  const std::string head = "p max 4 1\nn 1 s\nn 4 t\n";
  EXPECT_EQ(ErrorOf(head + "a 1 3 -3\n"), "bad.max:4: negative capacity -3 on arc 1->3");
  EXPECT_EQ(ErrorOf(head + "a 1 3 abc\n"), "bad.max:4: capacity 'abc' is not an integer");
  EXPECT_EQ(ErrorOf(head + "a 1 3 2.5\n"), "bad.max:4: capacity '2.5' is not an integer");
  EXPECT_EQ(ErrorOf(head + "a x1 3 2\n"), "bad.max:4: arc start 'x1' is not an integer");
  EXPECT_EQ(ErrorOf(head + "a 1 3 2 junk\n"),
            "bad.max:4: unexpected 'junk' after the arc (expected 'a FROM TO CAPACITY')");
  EXPECT_EQ(ErrorOf(head + "a 1 3\n"), "bad.max:4: malformed arc (expected 'a FROM TO CAPACITY')");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 1 s extra\n"),
            "bad.max:2: unexpected 'extra' after the node line (expected 'n ID s' or 'n ID t')");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 1 q\n"), "bad.max:2: node designator 'q' is neither 's' nor 't'");
  EXPECT_EQ(ErrorOf(head + "x 1 3 2\n"), "bad.max:4: unknown line type 'x' (expected c, p, n or a)");
  EXPECT_EQ(ErrorOf(std::string("\x7f" "ELF\x01\x02\n", 7)),
            "bad.max:1: unknown line type '?ELF?" "?' (expected c, p, n or a)");
}

TEST(DimacsErrors, CapacitiesThatDoNotFit) {
  const std::string head = "p max 4 2\nn 1 s\nn 4 t\n";
  EXPECT_EQ(ErrorOf(head + "a 1 2 9223372036854775808\na 2 4 1\n"),
            "bad.max:4: capacity 9223372036854775808 does not fit in 64 bits");
  EXPECT_EQ(ErrorOf(head + "a 1 2 92233720368547757483640\na 2 4 1\n"),  // found by fuzzing
            "bad.max:4: capacity 92233720368547757483640 does not fit in 64 bits");
  EXPECT_EQ(ErrorOf(head + "a 1 2 999999999999999999\na 2 4 1000000000000000000\n"), "");  // 18 and 19 digits
  EXPECT_EQ(ErrorOf(head + "a 2 3 2147483648\na 2 4 1\n"),
            "bad.max:4: capacity 2147483648 of arc 2->3 does not fit in 32 bits (arcs between non-terminal nodes "
            "hold at most 2147483647)");
  // Terminal arcs are 64-bit: 2^31 is fine there.
  EXPECT_EQ(ErrorOf(head + "a 1 2 2147483648\na 2 4 2147483648\n"), "");
  // Sums that overflow 64 bits.
  EXPECT_EQ(ErrorOf(head + "a 1 2 9223372036854775807\na 1 2 1\n"),
            "bad.max:5: the capacities of the arcs from the source into node 2 sum to more than 2^63-1 (64-bit "
            "overflow)");
  EXPECT_EQ(ErrorOf(head + "a 3 4 9223372036854775000\na 3 4 1000\n"),
            "bad.max:5: the capacities of the arcs from node 3 into the sink sum to more than 2^63-1 (64-bit "
            "overflow)");
  EXPECT_EQ(ErrorOf(head + "a 1 2 9223372036854775807\na 3 4 1\n"),
            "bad.max:5: the capacities sum to more than 2^63-1: flows and cuts would overflow 64 bits");
  EXPECT_EQ(ErrorOf("p max 2 2\nn 1 s\nn 2 t\na 1 2 9223372036854775807\na 1 2 1\n"),
            "bad.max:5: the capacities of the source -> sink arcs sum to more than 2^63-1 (64-bit overflow)");
}

TEST(DimacsErrors, SourcesAndSinks) {
  EXPECT_EQ(ErrorOf("p max 4 0\nn 1 s\nn 2 s\nn 4 t\n"),
            "bad.max:3: second source 2 (node 1 is the source, line 2); only one is allowed");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 4 t\nn 1 s\nn 3 t\n"),
            "bad.max:4: second sink 3 (node 4 is the sink, line 2); only one is allowed");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 4 t\n"), "bad.max: no source (a line 'n ID s')");
  EXPECT_EQ(ErrorOf("p max 4 1\nn 1 s\na 1 2 3\n"), "bad.max: no sink (a line 'n ID t')");
  EXPECT_EQ(ErrorOf("p max 4 0\nn 2 s\nn 2 t\n"),
            "bad.max:3: node 2 cannot be both source and sink (it is the source since line 2)");
}

TEST(DimacsErrors, ArcCount) {
  const std::string head = "p max 4 2\nn 1 s\nn 4 t\n";
  EXPECT_EQ(ErrorOf(head + "a 1 2 3\n"), "bad.max: the problem line (line 1) announces 2 arcs but the file has 1");
  EXPECT_EQ(ErrorOf(head + "a 1 2 3\na 2 4 1\na 1 3 1\n"),
            "bad.max:6: more arcs than the 2 announced by the problem line (line 1)");
}

TEST(DimacsErrors, GridComment) {
  const std::string grid = "c mrf-grid 2 2 1 4\np max 6 2\nn 5 s\nn 6 t\n";  // nodes 1..4 in a 2x2 grid
  EXPECT_EQ(ErrorOf(grid + "a 1 2 3\na 1 4 3\n"),
            "bad.max:6: arc 1->4 does not join two neighbours of the grid 2x2, 4-connected (mrf-grid comment on "
            "line 1)");
  EXPECT_EQ(ErrorOf("c mrf-grid 3 3 1 4\np max 6 0\nn 5 s\nn 6 t\n"),
            "bad.max:1: the mrf-grid comment's grid 3x3, 4-connected has 9 nodes but the file has 4 non-terminal "
            "nodes");
  EXPECT_EQ(ErrorOf("c mrf-grid 2 2 4\n"),
            "bad.max:1: malformed mrf-grid comment (expected 'c mrf-grid WIDTH HEIGHT DEPTH CONNECTIVITY')");
  EXPECT_EQ(ErrorOf("c mrf-grid 2 2 2 4\n"),
            "bad.max:1: bad mrf-grid comment: connectivity 4 needs depth 1 (got 2); 3-D grids are 6-connected");
  EXPECT_EQ(ErrorOf("c mrf-grid 2 2 1 5\n"), "bad.max:1: bad mrf-grid comment: grid connectivity must be 4, 8 or 6 (got 5)");
  EXPECT_EQ(ErrorOf("c mrf-grid 2 2 1 4\nc mrf-grid 2 2 1 4\n"),
            "bad.max:2: second mrf-grid comment (the first is on line 1)");
  EXPECT_EQ(ErrorOf("p max 6 1\nn 5 s\nn 6 t\na 5 1 3\nc mrf-grid 2 2 1 4\n"),
            "bad.max:5: the mrf-grid comment must come before the first arc (line 4)");
  EXPECT_EQ(ErrorOf(grid + "a 1 2 2147483647\na 1 2 1\n"),
            "bad.max:6: the capacities of the arcs 1->2 sum to more than 2^31-1 (edges hold 32-bit capacities)");
  DimacsReadOptions other;
  other.grid = Topology::Grid2D(4, 1, 4);
  EXPECT_EQ(ErrorOf(grid + "a 1 2 3\na 2 1 3\n", other),
            "bad.max:1: the mrf-grid comment says grid 2x2, 4-connected but the reader was asked for grid 4x1, "
            "4-connected");
}

TEST(DimacsErrors, MoreNodesThanTheCallerAllows) {
  DimacsReadOptions options;
  options.max_nodes = 100;
  EXPECT_EQ(ErrorOf("p max 101 0\n", options),
            "bad.max:1: the problem line announces 101 nodes, more than the 100 this reader was allowed");
  EXPECT_EQ(ErrorOf("p max 100 0\nn 1 s\nn 2 t\n", options), "");
}

TEST(DimacsErrors, LinesThatNeverEnd) {
  EXPECT_EQ(ErrorOf("p max 4 0\nc " + std::string(17 << 20, 'x')),
            "bad.max:2: line longer than 16 MiB (not a DIMACS file?)");
}

std::string ShapeError(const std::string& text) {
  try {
    ParseGridShape(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DimacsGridShape, ParsesAndFormats) {
  EXPECT_EQ(ParseGridShape("640x480"), Topology::Grid2D(640, 480, 4));
  EXPECT_EQ(ParseGridShape("64x48:8"), Topology::Grid2D(64, 48, 8));
  EXPECT_EQ(ParseGridShape("8x7x6"), Topology::Grid3D(8, 7, 6));
  EXPECT_EQ(ParseGridShape("8x7x1:4"), Topology::Grid2D(8, 7, 4));
  for (const char* text : {"64x48:8", "8x7x6:6", "5x3:4"}) EXPECT_EQ(FormatGridShape(ParseGridShape(text)), text);
  for (const char* bad : {"", "64", "64x", "x48", "0x4", "-3x4", "4x4:5", "4x4x4:8", "4x4x4x4", "4x4:", "axb", "2x1:6"})
    EXPECT_THROW(ParseGridShape(bad), Error) << bad;
  // The messages say what is wrong: a side too large is not "not positive", and a 3-D grid needs its depth.
  EXPECT_EQ(ShapeError("99999999999x1"),
            "grid shape '99999999999x1' is invalid: grid size 99999999999x1 has a side above 2147483647 (expected WxH, "
            "WxH:8, WxHxD or WxHxD:6)");
  EXPECT_EQ(ShapeError("0x4"),
            "grid shape '0x4' is invalid: grid size 0x4 is not positive (expected WxH, WxH:8, WxHxD or WxHxD:6)");
  EXPECT_EQ(ShapeError("2x1:6"),
            "grid shape '2x1:6' is 6-connected with two sizes (a 3-D grid is WxHxD:6) (expected WxH, WxH:8, WxHxD or "
            "WxHxD:6)");
}

}  // namespace
}  // namespace mrf
