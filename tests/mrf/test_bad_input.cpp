// Bad input to the library, class by class (docs/errors.md lists them): every class ends in one
// mrf::Error (or a failed Result) whose one-line message is checked here word for word, so that a
// change of wording is a deliberate change of docs/errors.md too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "energies/custom.h"
#include "energies/restoration.h"
#include "energies/segmentation.h"
#include "energies/stereo.h"
#include "mrf/io/image.h"
#include "mrf/io/model_file.h"
#include "mrf/memory.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The message of the mrf::Error `f` throws ("no error" when it throws none).
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    return message;
  } catch (const std::exception& e) {
    return std::string("not an mrf::Error: ") + e.what();
  }
  return "no error";
}

// The message of a solve that must fail.
std::string SolveError(const Model& model, const SolveOptions& options = {}) {
  const Result r = Solve(model, options);
  EXPECT_FALSE(r.ok) << "solved: " << r.message;
  EXPECT_EQ(r.message.find('\n'), std::string::npos) << r.message;
  return r.message;
}

// A valid 3x2 grid model with two labels (6 nodes, 12 edge slots).
Model SmallModel() {
  Model m;
  m.topology = Topology::Grid2D(3, 2, 4);
  m.num_labels = 2;
  m.unary = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  m.pairwise.lambda = 3;
  return m;
}

// ---- Models: sizes ----------------------------------------------------------------------------------

TEST(BadModels, Sizes) {
  EXPECT_EQ(SolveError(Model{}), "model has no nodes");
  Model m = SmallModel();
  m.num_labels = 0;
  EXPECT_EQ(SolveError(m), "model needs at least 1 label (num_labels = 0)");
  m = SmallModel();
  m.unary.pop_back();
  EXPECT_EQ(SolveError(m), "unary costs: expected 6 nodes x 2 labels = 12 values, got 11");
  m = SmallModel();
  m.pairwise.kind = PairwiseKind::kTable;
  m.pairwise.table = {0, 1, 1};
  EXPECT_EQ(SolveError(m), "pairwise table: expected 2 x 2 values, got 3");
  m = SmallModel();
  m.edge_weights = {1, 2, 3, 4, 5};
  EXPECT_EQ(SolveError(m), "edge weights: expected one per edge slot (12), got 5");
  EXPECT_EQ(ErrorOf([] { Topology::Grid2D(0, 5); }), "grid size 0x5 is not positive");
  EXPECT_EQ(ErrorOf([] { Topology::Grid2D(70000, 70000); }),
            "a grid has 4900000000 nodes, more than the 2^31-1 supported");
  EXPECT_EQ(ErrorOf([] { Topology::EdgeList(3, {0, 1}, {1, 5}); }), "edge 1 (1, 5) names a node outside 0..2");
  EXPECT_EQ(ErrorOf([] { Topology::EdgeList(3, {0, 1}, {1, 1}); }), "edge 1 joins node 1 to itself");
}

// ---- Models: negative and non-finite values ---------------------------------------------------------

TEST(BadModels, NegativeWeightsAndBadScale) {
  Model m = SmallModel();
  m.pairwise.lambda = -1;
  EXPECT_EQ(SolveError(m), "smoothness lambda is negative (-1)");
  m = SmallModel();
  m.pairwise.kind = PairwiseKind::kTruncatedLinear;
  m.pairwise.truncation = -2;
  EXPECT_EQ(SolveError(m), "smoothness truncation is negative (-2)");
  m = SmallModel();
  m.edge_weights.assign(12, 1);
  m.edge_weights[0] = -4;
  EXPECT_EQ(SolveError(m), "edge weight -4 of edge 0-1 (slot 0) is negative");
  m.edge_weights[0] = 1;
  m.edge_weights[2] = -5;  // node 2 is at the right border: slot 2 (its right edge) holds no edge
  EXPECT_EQ(SolveError(m), "edge weight -5 in slot 2 (a slot past the grid's border, which holds no edge) is negative");
  m = SmallModel();
  m.cost_scale = kNaN;
  EXPECT_EQ(SolveError(m), "cost scale must be a positive finite number (got nan)");
}

// ---- Models: overflow of 32-bit terms and 64-bit sums ----------------------------------------------

TEST(BadModels, Overflow) {
  Model m = SmallModel();
  m.edge_weights.assign(12, 3);
  m.pairwise.lambda = 1000000000;
  EXPECT_EQ(SolveError(m), "pairwise term overflows 32 bits: edge weight 3 x lambda 1000000000 x distance 1 > 2147483647");
  // About 2^31 nodes and 2^32 edge slots of the largest term: some labelling's energy would not fit 64 bits.
  // Caught from the shape alone, before any cost is looked at (none is allocated here).
  Model huge;
  huge.topology = Topology::Grid2D(46340, 46340);
  huge.num_labels = 2;
  huge.pairwise.lambda = kMaxCost;
  EXPECT_EQ(SolveError(huge), "model is too large: its energy could overflow a 64-bit sum");
  // StGraph: 32-bit edge capacities and 64-bit terminal sums.
  StGraph g(Topology::Grid2D(2, 1));
  g.add_edge(0, 1, kMaxCost, 0);
  EXPECT_EQ(ErrorOf([&] { g.add_edge(0, 1, 1, 0); }), "capacity of edge slot 0 overflows 32 bits");
  g.add_tweights(1, std::numeric_limits<Energy>::max(), 0);
  EXPECT_EQ(ErrorOf([&] { g.add_tweights(1, 1, 0); }), "add_tweights: source capacity of node 1 overflows a 64-bit sum");
  EXPECT_EQ(ErrorOf([&] { g.add_tweights(0, std::numeric_limits<Energy>::min(), 0); }),
            "add_tweights: terminal capacity of node 0 is below -2^63+1");
  EXPECT_EQ(g.source_cap(0), 0);  // a failed call changes nothing
}

// ---- Models: solver requirements ------------------------------------------------------------------

TEST(BadModels, SolverRequirements) {
  Model m = SmallModel();
  m.pairwise.kind = PairwiseKind::kTable;
  m.pairwise.table = {5, 0, 0, 5};  // V(0,0) + V(1,1) > V(0,1) + V(1,0): not submodular
  SolveOptions o;
  o.solver = "cpu-bk";
  EXPECT_EQ(SolveError(m, o), "edge 0-1 is not submodular: V(0,1) + V(1,0) < V(0,0) + V(1,1)");
  Model three = SmallModel();
  three.num_labels = 3;
  three.unary.resize(18, 1);
  EXPECT_EQ(SolveError(three, o), "backend 'cpu-bk' cannot solve this problem: max-flow solves two-label models only");
  Model list = SmallModel();
  list.topology = Topology::EdgeList(6, {0, 1, 2}, {1, 2, 3});
  o.solver = "tbb-pr";
  EXPECT_EQ(SolveError(list, o),
            "backend 'tbb-pr' cannot solve this problem: needs a grid-shaped graph (2-D 4- or 8-connected, or 3-D "
            "6-connected)");
  o.solver = "tbb-bp";
  EXPECT_EQ(SolveError(list, o), "belief propagation runs on 4-connected 2-D grids only, not on a graph of 6 nodes and 3 edges");
  Model quadratic = three;
  quadratic.pairwise.kind = PairwiseKind::kTruncatedQuadratic;
  quadratic.pairwise.truncation = 100;
  o.solver = "cpu-expansion";
  EXPECT_EQ(SolveError(quadratic, o),
            "expansion needs a metric smoothness term, but this quadratic term breaks the triangle inequality: "
            "V(0,2) = 12 > V(0,1) + V(1,2) = 6; set truncate_nonsubmodular (--truncate of mrf-solve, mrf-stereo and mrf-restore) to truncate such move terms, or use swap "
            "or bp");
}

// ---- Labellings -----------------------------------------------------------------------------------

TEST(BadModels, Labellings) {
  const Model m = SmallModel();
  SolveOptions o;
  o.initial_labels = {0, 1, 0};
  EXPECT_EQ(SolveError(m, o), "initial labelling has 3 labels for 6 nodes");
  o.initial_labels = {0, 5, 0, 0, 0, 0};
  EXPECT_EQ(SolveError(m, o), "initial label 5 at node 1 is outside 0..1");
  EXPECT_EQ(ErrorOf([&] { EvaluateEnergy(m, {0, 1}); }), "labelling has 2 labels for a model of 6 nodes");
  EXPECT_EQ(ErrorOf([&] { EvaluateEnergy(m, {0, 0, 0, -1, 0, 0}); }), "label -1 at node 3 is outside 0..1");
}

// Functions that take a Model and index its arrays check its shape first (Model::CheckShapeOrThrow),
// rather than read past them; a pairwise kind outside the named four is refused, not read as zero.
TEST(BadModels, EveryCallerChecksTheShape) {
  Model m = SmallModel();
  m.unary.resize(5);
  EXPECT_EQ(ErrorOf([&] { EvaluateEnergy(m, Labeling(6, 0)); }),
            "unary costs: expected 6 nodes x 2 labels = 12 values, got 5");
  m = SmallModel();
  m.edge_weights.assign(3, 1);
  EXPECT_EQ(ErrorOf([&] { EvaluateEnergy(m, Labeling(6, 0)); }), "edge weights: expected one per edge slot (12), got 3");
  EXPECT_EQ(ErrorOf([&] { HardConstraintCost(m); }), "edge weights: expected one per edge slot (12), got 3");
  m = SmallModel();
  m.pairwise.kind = PairwiseKind::kTable;  // and no table
  EXPECT_EQ(ErrorOf([&] { IsSubmodularBinary(m); }), "pairwise table: expected 2 x 2 values, got 0");
  EXPECT_EQ(ErrorOf([&] { AutoAlgorithm(m); }), "pairwise table: expected 2 x 2 values, got 0");
  m.pairwise.table = {0, 1};
  EXPECT_EQ(ErrorOf([&] { m.pairwise.IsMetric(3); }), "pairwise table: expected 3 x 3 values, got 2");
  m = SmallModel();
  m.pairwise.kind = static_cast<PairwiseKind>(9);
  m.pairwise.lambda = 1000;
  EXPECT_EQ(SolveError(m), "unknown pairwise kind 9");
  EXPECT_EQ(ErrorOf([&] { EvaluateEnergy(m, Labeling(6, 0)); }), "unknown pairwise kind 9");
  EXPECT_EQ(ErrorOf([&] { m.pairwise.IsMetric(2); }), "unknown pairwise kind 9");
}

// ---- Real costs: QuantizeCost and the custom-energy builder ----------------------------------------

TEST(BadRealCosts, QuantizeCost) {
  EXPECT_EQ(ErrorOf([] { QuantizeCost(kNaN, 100, "cost of x"); }), "cost of x is NaN");
  EXPECT_EQ(ErrorOf([] { QuantizeCost(-kInf, 100, "cost of x", true); }), "cost of x is infinite");
  EXPECT_EQ(ErrorOf([] { QuantizeCost(-0.5, 100, "cost of x"); }), "cost of x is negative (-0.5)");
  EXPECT_EQ(ErrorOf([] { QuantizeCost(3e7, 100, "cost of x"); }),
            "cost of x = 3e+07 x scale 100 does not fit a 32-bit cost");
  EXPECT_EQ(QuantizeCost(-0.5, 100, "cost of x", true), -50);  // allowed when asked for
  // A scale of 0 would make every cost 0, a negative one would flip their signs past the check above.
  EXPECT_EQ(ErrorOf([] { QuantizeCost(1, -1, "cost of x"); }), "cost scale must be a positive finite number (got -1)");
  EXPECT_EQ(ErrorOf([] { QuantizeCost(1, 0, "cost of x"); }), "cost scale must be a positive finite number (got 0)");
  EXPECT_EQ(ErrorOf([] { QuantizeCost(1, kNaN, "cost of x"); }), "cost scale must be a positive finite number (got nan)");
  EXPECT_EQ(ErrorOf([] { QuantizeDataCosts(2, 2, [](NodeId, Label) { return 3.0; }, -100); }),
            "cost scale must be a positive finite number (got -100)");
}

TEST(BadRealCosts, CustomEnergyBuilder) {
  CustomEnergy e;
  e.topology = Topology::Grid2D(4, 2, 4);
  e.num_labels = 2;
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "custom energy: no data cost function given");
  e.data = [](NodeId p, Label l) { return p == 5 && l == 1 ? kNaN : 1.0; };
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "data cost of node 5, label 1 is NaN");
  e.data = [](NodeId p, Label) { return p == 2 ? -3.0 : 1.0; };
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "data cost of node 2, label 0 is negative (-3)");
  e.data = [](NodeId, Label) { return 1.0; };
  e.lambda = kInf;
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "smoothness lambda is infinite");
  e.lambda = 1;
  e.distance = [](Label a, Label b) { return a == 0 && b == 1 ? -2.0 : 0.0; };
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "pairwise distance(0, 1) is negative (-2)");
  e.distance = {};
  e.kind = PairwiseKind::kTable;
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }),
            "custom energy: kind 'table' needs a distance function (CustomEnergy::distance)");
  e.kind = PairwiseKind::kPotts;
  e.scale = -1;
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }),
            "custom energy: scale must be 0 (automatic) or a positive finite number (got -1)");
  e.scale = 1;
  e.data = [](NodeId, Label) { return 1e12; };
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }),
            "data cost of node 0, label 0 = 1e+12 x scale 1 does not fit a 32-bit cost");
  e.num_labels = 0;
  EXPECT_EQ(ErrorOf([&] { BuildCustomModel(e); }), "custom energy: need at least 1 label (got 0)");
}

// ---- Options --------------------------------------------------------------------------------------

TEST(BadOptions, SolveOptionsAndNames) {
  const Model m = SmallModel();
  SolveOptions o;
  o.max_iterations = 0;
  EXPECT_EQ(SolveError(m, o), "options.max_iterations must be >= 1 (got 0)");
  o = {};
  o.time_limit_s = -1;
  EXPECT_EQ(SolveError(m, o), "options.time_limit_s must be a finite number >= 0 (got -1)");
  o.time_limit_s = kNaN;
  EXPECT_EQ(SolveError(m, o), "options.time_limit_s must be a finite number >= 0 (got nan)");
  o = {};
  o.num_threads = -2;
  EXPECT_EQ(SolveError(m, o), "options.num_threads must be >= 0 (got -2)");
  o = {};
  o.bp.schedule = "zigzag";
  EXPECT_EQ(SolveError(m, o), "options.bp.schedule must be auto, bpm, sync or tiled (got 'zigzag')");
  o = {};
  o.solver = "nope";
  EXPECT_EQ(SolveError(m, o), "unknown backend 'nope' (known: " + Registry::Global().NameList() + ")");
  o.solver = "cpu-icm";
  o.algorithm = Algorithm::kSwap;  // conflicting: a named solver and another algorithm
  EXPECT_EQ(SolveError(m, o), "backend 'cpu-icm' runs icm, not swap (swap backends: cpu-swap, cuda-swap)");
  o = {};
  o.solver = "cpu-expansion";
  o.maxflow_backend = "tbb-bp";
  EXPECT_EQ(SolveError(m, o),
            "max-flow engine for the moves: backend 'tbb-bp' runs bp, not maxflow (maxflow backends: " +
                Registry::Global().NameList(Algorithm::kMaxFlow) + ")");
  EXPECT_EQ(ErrorOf([] { ParseAlgorithm("fast"); }),
            "unknown algorithm 'fast' (expected one of: auto, maxflow, expansion, swap, icm, bp)");
  EXPECT_EQ(ErrorOf([] { ParseDevice("gpu"); }), "unknown device 'gpu' (expected one of: auto, cpu, cuda)");
  EXPECT_EQ(ErrorOf([] { ParseLabelOrder("shuffled"); }),
            "unknown label order 'shuffled' (expected one of: sequential, random, frequent)");
  EXPECT_EQ(ErrorOf([] { ParsePairwiseKind("cubic"); }),
            "unknown smoothness kind 'cubic' (expected potts, linear, quadratic or table)");
  EXPECT_EQ(ErrorOf([] { StGraph().set_limits(-1); }),
            "set_limits: the time limit must be a finite number of seconds >= 0 (got -1)");
  if (!Registry::Global().IsCompiledIn("cuda-pr")) {
    o = {};
    o.solver = "cuda-pr";
    EXPECT_EQ(SolveError(m, o), "backend 'cuda-pr' is unavailable: not compiled in (this build has no CUDA)");
    o.solver = "auto";
    o.device = Device::kCuda;
    EXPECT_EQ(SolveError(m, o),
              "no available maxflow solver on device cuda (cuda-pr skipped: not compiled in (this build has no CUDA))");
  }
}

// Enums cast from numbers outside their values, names with control characters (the message stays one
// line), and callbacks that throw something other than a std::exception (Solve and maxflow never throw).
TEST(BadOptions, UnnamedEnumsControlCharactersAndForeignExceptions) {
  const Model m = SmallModel();
  SolveOptions o;
  o.algorithm = static_cast<Algorithm>(77);
  EXPECT_EQ(SolveError(m, o), "options.algorithm holds 77, which is none of its named values");
  o = {};
  o.device = static_cast<Device>(9);
  EXPECT_EQ(SolveError(m, o), "options.device holds 9, which is none of its named values");
  o = {};
  o.label_order = static_cast<LabelOrder>(9);
  EXPECT_EQ(SolveError(m, o), "options.label_order holds 9, which is none of its named values");
  o = {};
  o.start = static_cast<StartLabels>(5);
  EXPECT_EQ(SolveError(m, o), "options.start holds 5, which is none of its named values");
  o = {};
  o.solver = "nope\nsecond line";
  EXPECT_EQ(SolveError(m, o), "unknown backend 'nope?second line' (known: " + Registry::Global().NameList() + ")");
  o = {};
  o.bp.schedule = "zig\nzag";
  EXPECT_EQ(SolveError(m, o), "options.bp.schedule must be auto, bpm, sync or tiled (got 'zig?zag')");
  for (const char* solver : {"cpu-bk", "cpu-expansion", "cpu-icm", "tbb-bp"}) {
    o = {};
    o.solver = solver;
    o.callback = [](const IterationRecord&) -> bool { throw 42; };
    EXPECT_EQ(SolveError(m, o), kForeignException) << solver;
  }
  StGraph g(Topology::Grid2D(2, 1));
  g.add_tweights(0, 5, 0);
  g.add_tweights(1, 0, 5);
  g.add_edge(0, 1, 3, 3);
  g.set_limits(0, [](const IterationRecord&) -> bool { throw 42; });
  const Result r = g.maxflow("cpu-bk");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, kForeignException);
}

TEST(BadOptions, StGraphCalls) {
  StGraph g;
  EXPECT_EQ(g.maxflow().message, "maxflow: the graph has no nodes");
  g.add_node(2);
  EXPECT_EQ(ErrorOf([&] { g.add_tweights(5, 1, 1); }), "add_tweights: node 5 does not exist (graph has 2 nodes)");
  EXPECT_EQ(ErrorOf([&] { g.add_edge(0, 1, -1, 0); }), "edge 0->1 has a negative capacity (-1, 0)");
  EXPECT_EQ(ErrorOf([&] { g.what_segment(0); }), "what_segment: maxflow() has not computed a cut yet");
  EXPECT_EQ(ErrorOf([&] { g.last_cut_capacity(); }),
            "last_cut_capacity: there is no cut to price (no maxflow() since the graph's nodes, edges or capacities "
            "were last reset)");
  EXPECT_EQ(g.maxflow("cpu-icm").message,
            "backend 'cpu-icm' runs icm, not maxflow (maxflow backends: " +
                Registry::Global().NameList(Algorithm::kMaxFlow) + ")");
  EXPECT_EQ(g.maxflow("tbb-pr").message,
            "backend 'tbb-pr' cannot solve this problem: needs a grid-shaped graph (2-D 4- or 8-connected, or 3-D "
            "6-connected)");
}

// ---- Model files ------------------------------------------------------------------------------------

// Writes a model file field by field (as docs/model_format.md lists them) with a correct checksum, so
// that each field's own check is reached.
class ModelBytes {
 public:
  template <class T>
  ModelBytes& Put(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
    return *this;
  }
  template <class T>
  ModelBytes& Array(const std::vector<T>& values) {
    Put<std::int64_t>(static_cast<std::int64_t>(values.size()));
    for (T v : values) Put(v);
    return *this;
  }
  ModelBytes& Raw(const std::string& text) {
    bytes_ += text;
    return *this;
  }
  // With the 64-bit FNV-1a checksum of everything before it, from the standard offset basis
  // (0xcbf29ce484222325) unless another is given.
  std::string Finish(std::uint64_t basis = 0xcbf29ce484222325ull) const {
    std::uint64_t h = basis;
    for (char c : bytes_) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    std::string out = bytes_;
    out.append(reinterpret_cast<const char*>(&h), sizeof h);
    return out;
  }

 private:
  std::string bytes_;
};

// A 2x1 grid model header up to and including the label count.
ModelBytes Header(std::uint32_t version = 2, std::uint32_t kind = 0, std::int32_t width = 2, std::int32_t nodes = 2,
                  std::int32_t labels = 2) {
  ModelBytes b;
  b.Raw("MRFMODEL").Put<std::uint32_t>(version).Put<std::uint32_t>(kind);
  b.Put<std::int32_t>(width).Put<std::int32_t>(1).Put<std::int32_t>(1).Put<std::int32_t>(nodes);
  b.Put<std::int32_t>(labels);
  return b;
}

// The rest of a Potts model after the label count.
ModelBytes& Tail(ModelBytes& b, std::int32_t lambda = 1, std::vector<Cost> unary = {1, 2, 3, 4}) {
  b.Put<std::uint32_t>(0).Put<std::int32_t>(lambda).Put<std::int32_t>(1).Array(std::vector<Cost>{}).Put<double>(1.0);
  b.Array(std::vector<Cost>{}).Array(unary);
  return b;
}

std::string LoadError(const std::string& bytes) {
  return ErrorOf([&] { LoadModelFromBytes(bytes, "m.mrf"); });
}

TEST(BadModelFiles, EveryFieldHasItsMessage) {
  {
    ModelBytes b = Header();
    EXPECT_NO_THROW(LoadModelFromBytes(Tail(b).Finish(), "m.mrf"));  // the builder itself is right
  }
  EXPECT_EQ(LoadError("MRF"), "m.mrf: not an mrf model file (bad magic)");
  EXPECT_EQ(LoadError("P5 not a model at all, long enough"), "m.mrf: not an mrf model file (bad magic)");
  {
    ModelBytes b = Header(7);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: unsupported model file version 7 (this build reads versions 1 to 2)");
  }
  {
    // Version 1 files took their checksum from an offset basis a digit short of FNV-1a's; they are
    // still read, and each version is checked with its own basis only.
    const std::uint64_t version1_basis = 1469598103934665603ull;
    ModelBytes one = Header(1), two = Header(2);
    EXPECT_NO_THROW(LoadModelFromBytes(Tail(one).Finish(version1_basis), "m.mrf"));
    EXPECT_EQ(LoadError(Tail(one).Finish()), "m.mrf: checksum mismatch (file is corrupt or truncated)");
    EXPECT_EQ(LoadError(Tail(two).Finish(version1_basis)), "m.mrf: checksum mismatch (file is corrupt or truncated)");
    ModelBytes zero = Header(0);
    EXPECT_EQ(LoadError(Tail(zero).Finish()), "m.mrf: unsupported model file version 0 (this build reads versions 1 to 2)");
  }
  {
    ModelBytes b = Header();
    std::string bytes = Tail(b).Finish();
    bytes[30] ^= 1;
    EXPECT_EQ(LoadError(bytes), "m.mrf: checksum mismatch (file is corrupt or truncated)");
  }
  {
    ModelBytes b = Header(2, 9);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: unknown topology kind 9");
  }
  {
    ModelBytes b = Header(2, 0, 2, 3);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: node count 3 does not match the grid 2x1, 4-connected");
  }
  for (const std::int32_t depth : {0, 5}) {  // a 2-D grid (4- or 8-connected) has depth 1
    for (const std::uint32_t kind : {0u, 1u}) {
      ModelBytes b;
      b.Raw("MRFMODEL").Put<std::uint32_t>(2).Put<std::uint32_t>(kind);
      b.Put<std::int32_t>(2).Put<std::int32_t>(1).Put<std::int32_t>(depth).Put<std::int32_t>(2).Put<std::int32_t>(2);
      EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: a 2-D grid's depth must be 1 (got " + std::to_string(depth) + ")");
    }
  }
  {
    ModelBytes b;  // an edge list with a grid's sizes
    b.Raw("MRFMODEL").Put<std::uint32_t>(2).Put<std::uint32_t>(3);
    b.Put<std::int32_t>(5).Put<std::int32_t>(5).Put<std::int32_t>(1).Put<std::int32_t>(2);
    b.Array(std::vector<NodeId>{0}).Array(std::vector<NodeId>{1}).Put<std::int32_t>(2);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: an edge list's width, height and depth must be 0 (got 5, 5, 1)");
  }
  {
    ModelBytes b = Header(2, 0, -2, -2);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: grid size -2x1 is not positive");
  }
  {
    ModelBytes b = Header(2, 0, 2, 2, 0);
    EXPECT_EQ(LoadError(Tail(b).Finish()), "m.mrf: label count 0 is not positive");
  }
  {
    ModelBytes b = Header();
    b.Put<std::uint32_t>(8);
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: unknown pairwise kind 8");
  }
  {
    ModelBytes b = Header();
    Tail(b, 1, {1, 2, 3});
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: unary costs: expected 4 values, the file says 3");
  }
  {
    ModelBytes b = Header();
    b.Put<std::uint32_t>(0).Put<std::int32_t>(1).Put<std::int32_t>(1).Array(std::vector<Cost>{}).Put<double>(1.0);
    b.Array(std::vector<Cost>{}).Put<std::int64_t>(4).Put<Cost>(1);  // says 4 unary costs, holds 1
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: unary costs: file is truncated (needs 4 values)");
  }
  {
    ModelBytes b = Header();
    Tail(b).Put<std::int32_t>(0);
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: 4 unexpected bytes after the unary costs");
  }
  {
    ModelBytes b = Header();
    Tail(b, -5);
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: invalid model: smoothness lambda is negative (-5)");
  }
  {
    ModelBytes b;  // an edge list whose edge count is larger than the file
    b.Raw("MRFMODEL").Put<std::uint32_t>(2).Put<std::uint32_t>(3);
    b.Put<std::int32_t>(0).Put<std::int32_t>(0).Put<std::int32_t>(0).Put<std::int32_t>(2).Put<std::int64_t>(1LL << 40);
    EXPECT_EQ(LoadError(b.Finish()), "m.mrf: edge count 1099511627776 does not fit the file");
  }
  EXPECT_EQ(ErrorOf([] { LoadModel("/no/such/dir/m.mrf"); }),
            "cannot open model file '/no/such/dir/m.mrf': No such file or directory");
  const std::string dir = test::ScratchDir("bad_model_files");
  EXPECT_EQ(ErrorOf([&] { LoadModel(dir); }), "cannot read model file '" + dir + "': Is a directory");
  EXPECT_EQ(ErrorOf([&] { SaveModel(SmallModel(), dir + "/no/such/folder/m.mrf"); }),
            "cannot write model file '" + dir + "/no/such/folder/m.mrf': No such file or directory");
  Model invalid = SmallModel();
  invalid.pairwise.lambda = -1;
  EXPECT_EQ(ErrorOf([&] { SaveModel(invalid, dir + "/m.mrf"); }), "smoothness lambda is negative (-1)");
}

// ---- Images -------------------------------------------------------------------------------------------

std::string ImageError(const std::string& bytes, int channels = 0) {
  return ErrorOf([&] { LoadImageFromMemory(bytes, "x.png", channels); });
}

TEST(BadImages, EveryClassHasItsMessage) {
  EXPECT_EQ(ErrorOf([] { LoadImage("/no/such/dir/x.png"); }), "cannot open image '/no/such/dir/x.png': No such file or directory");
  const std::string dir = test::ScratchDir("bad_images");
  EXPECT_EQ(ErrorOf([&] { LoadImage(dir); }), "cannot read image '" + dir + "': Is a directory");
  EXPECT_EQ(ImageError(""), "cannot read image 'x.png': file is empty");
  EXPECT_EQ(ImageError("GIF89a..."), "cannot read image 'x.png': not a PNG, JPEG or binary PGM/PPM image");
  EXPECT_EQ(ImageError("P2\n2 2\n255\n0 0 0 0\n"), "cannot read image 'x.png': not a PNG, JPEG or binary PGM/PPM image");
  EXPECT_EQ(ImageError("P5\n4 4\n255\n" + std::string(10, 'a')),
            "cannot read image 'x.png': file is truncated (10 of 16 pixel bytes)");
  EXPECT_EQ(ImageError("P6\n4\n"), "cannot read image 'x.png': PNM header has no height");
  EXPECT_EQ(ImageError("P5\n4 4 70000\n"), "cannot read image 'x.png': PNM maximum value 70000 is out of range");
  EXPECT_EQ(ImageError("P5\n0 4 255\n"), "cannot read image 'x.png': image has no pixels");
  EXPECT_EQ(ImageError("P5\n100000 100000 255\n"),
            "cannot read image 'x.png': image of 100000x100000 pixels is larger than the 67108864 pixels supported");
  // A real PNG cut short: stb's reason, then what it means.
  Image img = Image::Filled(40, 30, 3, 77);
  const std::string path = dir + "/ok.png";
  SavePng(path, img);
  std::string png;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buffer[4096];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, f)) > 0;) png.append(buffer, got);
    std::fclose(f);
  }
  EXPECT_EQ(ImageError(png.substr(0, 40)), "cannot read image 'x.png': PNG is truncated in the chunk at byte 33");
  EXPECT_EQ(ImageError(png.substr(0, png.size() - 12)), "cannot read image 'x.png': PNG is truncated (no IEND chunk)");
  std::string flipped = png;
  flipped[50] ^= 0x04;
  EXPECT_EQ(ImageError(flipped), "cannot read image 'x.png': PNG chunk 'IDAT' at byte 33 fails its CRC check (the file is damaged)");
  EXPECT_EQ(ImageError("P5\n2 1\n9\n\x03\x0a"), "cannot read image 'x.png': PNM sample 10 at pixel (1, 0) exceeds the maximum value 9");
  EXPECT_EQ(ImageError("P5\n2 1\n255\nabc"),
            "cannot read image 'x.png': 1 bytes after the 2x1 pixels the PNM header announces (a header that does not "
            "match the data, or a second image)");
  EXPECT_EQ(ImageError(png, 2), "LoadImage: channels must be 0, 1 or 3 (got 2)");
  EXPECT_EQ(ErrorOf([] { Image::Filled(0, 3, 1); }), "invalid image shape 0x3x1");
}

// Pictures whose fields disagree (pixels for another size, no channels) are refused by every function
// that reads pixels, not read past their end.
TEST(BadImages, InconsistentPicturesAreRefusedEverywhere) {
  Image short_rgb = Image::Filled(40, 40, 3, 9);
  short_rgb.pixels.resize(5);
  Image no_channels;
  no_channels.width = no_channels.height = 4;
  const Image grey = Image::Filled(40, 40, 1, 9);
  EXPECT_EQ(ErrorOf([&] { ComputeBtRange(short_rgb); }), "Birchfield-Tomasi image holds 5 values, expected 4800");
  EXPECT_EQ(ErrorOf([&] { ToGrey(no_channels); }), "image has 0 channels (expected 1 to 4)");
  EXPECT_EQ(ErrorOf([&] { BuildRestorationModel(short_rgb, Image{}, RestorationParams{}); }),
            "restoration: the image holds 5 values, expected 4800");
  EXPECT_EQ(ErrorOf([&] { BuildRestorationModel(no_channels, Image{}, RestorationParams{}); }),
            "restoration: the image has 0 channels (expected 1 to 4)");
  Image short_mask = Image::Filled(40, 40, 1, 0);
  short_mask.pixels.resize(3);
  EXPECT_EQ(ErrorOf([&] { BuildRestorationModel(grey, short_mask, RestorationParams{}); }),
            "restoration: the mask holds 3 values, expected 1600");
  EXPECT_EQ(ErrorOf([&] { RootMeanSquareError(grey, short_rgb); }),
            "the second image compared holds 5 values, expected 4800");
  EXPECT_EQ(ErrorOf([&] { ShrinkImage(short_rgb, 2); }), "the image to shrink holds 5 values, expected 4800");
  EXPECT_EQ(ErrorOf([&] { ShrinkGroundTruth(short_rgb, 2); }), "the image to shrink holds 5 values, expected 4800");
  EXPECT_EQ(ErrorOf([&] { BadPixelPercent(Labeling(1600, 0), short_mask, 1.0); }),
            "ground-truth image holds 3 values, expected 1600");
  EXPECT_EQ(ErrorOf([&] { SeedsFromScribbles(short_mask, 40, 40, "s.png"); }),
            "scribbles 's.png' holds 3 values, expected 1600");
  EXPECT_EQ(ErrorOf([&] { RestoredImage(Labeling(4, 0), 2, 2, 0); }), "restored image: need at least 1 level (got 0)");
  EXPECT_EQ(ErrorOf([&] { MakeSyntheticRestoration(16, 16, 1, 20, 1 << 30); }),
            "synthetic restoration: holes must be in 0..1000 (got 1073741824)");
}

// ---- Sizes beyond this machine's memory ------------------------------------------------------------

TEST(BadSizes, MemoryShortfallComparesWithTheUsableMemory) {
  const double have = UsableMemoryBytes();
  ASSERT_GT(have, 0);
  EXPECT_EQ(MemoryShortfall(1 << 20, "a megabyte"), "");
  const std::string twice = MemoryShortfall(2 * have, "twice the memory");
  EXPECT_EQ(twice.rfind("twice the memory need about ", 0), 0u) << twice;
  EXPECT_NE(twice.find(" GiB of memory, more than "), std::string::npos) << twice;
}

// Cost volumes are checked before they are allocated. Each case runs only where it cannot fit: elsewhere it
// would allocate it.
TEST(BadSizes, StereoCostsThatCannotFitAreRefusedBeforeAllocating) {
  const double bytes = 4096.0 * 4096 * 4095 * sizeof(Cost);  // 256 GiB
  if (bytes <= UsableMemoryBytes()) GTEST_SKIP() << "this machine holds the 256 GiB of the case";
  const Image image = Image::Filled(4096, 4096, 1, 0);
  StereoParams params;
  params.num_labels = 4095;
  EXPECT_EQ(ErrorOf([&] { ComputeStereoDataCosts(image, image, params); }),
            MemoryShortfall(bytes, "the data costs of 4096x4096 pixels x 4095 labels"));
}

TEST(BadSizes, CustomTablesThatCannotFitAreRefusedBeforeAllocating) {
  const double bytes = 1e6 * 1e6 * sizeof(Cost);  // 4 TB
  if (bytes <= UsableMemoryBytes()) GTEST_SKIP() << "this machine holds the 4 TB of the case";
  EXPECT_EQ(ErrorOf([&] { QuantizePairwiseTable(1000000, [](Label, Label) { return 1.0; }, 1.0); }),
            MemoryShortfall(bytes, "custom energy: the pairwise table of 1000000 x 1000000 labels"));
}

TEST(BadSizes, RestorationCostsThatCannotFitAreRefusedBeforeAllocating) {
  const double bytes = 8192.0 * 8192 * 256 * sizeof(Cost);  // 64 GiB
  if (bytes <= UsableMemoryBytes()) GTEST_SKIP() << "this machine holds the 64 GiB of the case";
  const Image image = Image::Filled(8192, 8192, 1, 0);
  EXPECT_EQ(ErrorOf([&] { BuildRestorationModel(image, Image{}, RestorationParams{}); }),
            MemoryShortfall(bytes, "restoration: the data costs of 8192x8192 pixels x 256 levels"));
}

}  // namespace
}  // namespace mrf
