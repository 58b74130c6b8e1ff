#include "mrf/model.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace mrf {

const char* ToString(PairwiseKind kind) {
  switch (kind) {
    case PairwiseKind::kPotts: return "potts";
    case PairwiseKind::kTruncatedLinear: return "linear";
    case PairwiseKind::kTruncatedQuadratic: return "quadratic";
    case PairwiseKind::kTable: return "table";
  }
  return "?";
}

PairwiseKind ParsePairwiseKind(const std::string& name) {
  for (PairwiseKind k : {PairwiseKind::kPotts, PairwiseKind::kTruncatedLinear, PairwiseKind::kTruncatedQuadratic,
                         PairwiseKind::kTable})
    if (name == ToString(k)) return k;
  throw Error("unknown smoothness kind '" + name + "' (expected potts, linear, quadratic or table)");
}

Cost Pairwise::MaxDistance(Label num_labels) const {
  switch (kind) {
    case PairwiseKind::kPotts: return num_labels > 1 ? 1 : 0;
    case PairwiseKind::kTruncatedLinear: return std::min<std::int64_t>(num_labels - 1, truncation);
    case PairwiseKind::kTruncatedQuadratic:
      return static_cast<Cost>(std::min<std::int64_t>(std::int64_t{num_labels - 1} * (num_labels - 1), truncation));
    case PairwiseKind::kTable: {
      std::int64_t m = 0;
      for (Cost c : table) m = std::max<std::int64_t>(m, c < 0 ? -std::int64_t{c} : c);
      return static_cast<Cost>(std::min<std::int64_t>(m, kMaxCost));
    }
  }
  return 0;
}

namespace {
// What is wrong with a pairwise term for L labels: a kind outside the named four, or a table that is
// not L x L; empty when nothing. Shared by Model's shape check and Pairwise::IsMetric.
std::string PairwiseShapeProblem(const Pairwise& v, Label L) {
  switch (v.kind) {
    case PairwiseKind::kPotts:
    case PairwiseKind::kTruncatedLinear:
    case PairwiseKind::kTruncatedQuadratic:
    case PairwiseKind::kTable:
      break;
    default:
      return "unknown pairwise kind " + std::to_string(static_cast<int>(v.kind));
  }
  if (v.kind == PairwiseKind::kTable && static_cast<std::int64_t>(v.table.size()) != std::int64_t{L} * L)
    return "pairwise table: expected " + std::to_string(L) + " x " + std::to_string(L) + " values, got " +
           std::to_string(v.table.size());
  return {};
}
}  // namespace

bool Pairwise::IsMetric(Label L, std::string* why) const {
  auto fail = [&](const std::string& msg) {
    if (why) *why = msg;
    return false;
  };
  if (const std::string problem = PairwiseShapeProblem(*this, L); !problem.empty()) throw Error(problem);
  if (kind == PairwiseKind::kPotts || kind == PairwiseKind::kTruncatedLinear) return true;
  if (kind == PairwiseKind::kTruncatedQuadratic) {
    // min(d^2, T) (T >= 0) obeys the triangle inequality iff T <= 2: then every distance of a d >= 1 is
    // in [min(1, T), T] and T <= 2 min(1, T); with T > 2, V(0, 2) = min(4, T) > 2 = V(0, 1) + V(1, 2),
    // the first triple in order to break it. O(1) instead of O(L^3) over all triples.
    if (L < 3 || truncation <= 2) return true;
    return fail("triangle inequality fails: V(0,2) > V(0,1) + V(1,2)");
  }
  for (Label a = 0; a < L; ++a)
    for (Label b = 0; b < L; ++b) {
      const Cost ab = distance(a, b, L);
      if (a == b && ab != 0) return fail("V(" + std::to_string(a) + "," + std::to_string(a) + ") is not 0");
      if (ab < 0) return fail("V(" + std::to_string(a) + "," + std::to_string(b) + ") is negative");
      if (ab != distance(b, a, L))
        return fail("V(" + std::to_string(a) + "," + std::to_string(b) + ") != V(" + std::to_string(b) + "," +
                    std::to_string(a) + ")");
    }
  for (Label a = 0; a < L; ++a)
    for (Label b = 0; b < L; ++b)
      for (Label c = 0; c < L; ++c)
        if (std::int64_t{distance(a, c, L)} > std::int64_t{distance(a, b, L)} + distance(b, c, L))
          return fail("triangle inequality fails: V(" + std::to_string(a) + "," + std::to_string(c) + ") > V(" +
                      std::to_string(a) + "," + std::to_string(b) + ") + V(" + std::to_string(b) + "," +
                      std::to_string(c) + ")");
  return true;
}

namespace {
// What is wrong with the model's counts, kind and array sizes (O(1), no cost is read); empty when
// nothing. The unary costs' count is checked only when `with_unary` (Validate() checks it last).
std::string ShapeProblem(const Model& m, bool with_unary) {
  const std::int64_t n = m.topology.num_nodes(), L = m.num_labels;
  if (n <= 0) return "model has no nodes";
  if (L < 1) return "model needs at least 1 label (num_labels = " + std::to_string(L) + ")";
  if (std::string problem = PairwiseShapeProblem(m.pairwise, m.num_labels); !problem.empty()) return problem;
  const EdgeId slots = m.topology.num_edge_slots();
  if (!m.edge_weights.empty() && static_cast<EdgeId>(m.edge_weights.size()) != slots)
    return "edge weights: expected one per edge slot (" + std::to_string(slots) + "), got " +
           std::to_string(m.edge_weights.size());
  if (with_unary && static_cast<std::int64_t>(m.unary.size()) != n * L)
    return "unary costs: expected " + std::to_string(n) + " nodes x " + std::to_string(L) + " labels = " +
           std::to_string(n * L) + " values, got " + std::to_string(m.unary.size());
  return {};
}
}  // namespace

void Model::CheckShapeOrThrow(bool with_unary) const {
  const std::string problem = ShapeProblem(*this, with_unary);
  if (!problem.empty()) throw Error(problem);
}

bool Model::Validate(std::string* error) const {
  auto fail = [&](const std::string& msg) {
    if (error) *error = msg;
    return false;
  };
  const std::int64_t n = topology.num_nodes();
  if (const std::string problem = ShapeProblem(*this, false); !problem.empty()) return fail(problem);
  if (!(cost_scale > 0) || !std::isfinite(cost_scale))
    return fail("cost scale must be a positive finite number (got " + mrf::NumberText(cost_scale) + ")");
  if (pairwise.lambda < 0) return fail("smoothness lambda is negative (" + std::to_string(pairwise.lambda) + ")");
  if (pairwise.truncation < 0)
    return fail("smoothness truncation is negative (" + std::to_string(pairwise.truncation) + ")");

  const EdgeId slots = topology.num_edge_slots();
  Cost max_weight = 1;
  if (!edge_weights.empty()) {
    // The smallest and largest weight by plain min/max loops (they vectorise), on all cores for large
    // models (one core took 24 ms for a 4096 x 4096 grid's 33.5M slots, and mrf::Solve validates
    // twice); the first negative weight is looked for only when there is one.
    struct Range {
      Cost lo = std::numeric_limits<Cost>::max(), hi = 0;
    };
    const Cost* weights = edge_weights.data();
    auto scan = [weights](std::int64_t begin, std::int64_t end, Range r) {
      for (std::int64_t s = begin; s < end; ++s) {
        r.lo = std::min(r.lo, weights[s]);
        r.hi = std::max(r.hi, weights[s]);
      }
      return r;
    };
    const Range range =
        slots < (std::int64_t{1} << 20)
            ? scan(0, slots, Range{})
            : tbb::parallel_reduce(
                  tbb::blocked_range<std::int64_t>(0, slots, std::int64_t{1} << 16), Range{},
                  [&](const tbb::blocked_range<std::int64_t>& b, Range r) { return scan(b.begin(), b.end(), r); },
                  [](Range a, Range b) { return Range{std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; });
    if (range.lo < 0) {
      const EdgeId s = std::find_if(weights, weights + slots, [](Cost w) { return w < 0; }) - weights;
      const Cost w = weights[s];
      NodeId p = -1, q = -1;
      if (!topology.edge_endpoints(s, &p, &q))  // a grid slot past the border: no edge, still no negative weight
        return fail("edge weight " + std::to_string(w) + " in slot " + std::to_string(s) +
                    " (a slot past the grid's border, which holds no edge) is negative");
      return fail("edge weight " + std::to_string(w) + " of edge " + std::to_string(p) + "-" + std::to_string(q) +
                  " (slot " + std::to_string(s) + ") is negative");
    }
    max_weight = range.hi;
  }
  // Every pairwise term must fit a 32-bit Cost: weight * lambda * distance.
  const __int128 max_term = static_cast<__int128>(max_weight) * pairwise.lambda * pairwise.MaxDistance(num_labels);
  if (max_term > kMaxCost) {
    std::ostringstream msg;
    msg << "pairwise term overflows 32 bits: edge weight " << max_weight << " x lambda " << pairwise.lambda
        << " x distance " << pairwise.MaxDistance(num_labels) << " > " << kMaxCost;
    return fail(msg.str());
  }
  // Any labelling's energy must fit a 64-bit sum (bounded without scanning the costs).
  const __int128 bound = static_cast<__int128>(n) * (std::int64_t{kMaxCost} + 1) + static_cast<__int128>(slots) * max_term;
  if (bound > std::numeric_limits<Energy>::max())
    return fail("model is too large: its energy could overflow a 64-bit sum");
  // Last: the bounds above need no costs, so they also catch shapes whose costs could not be allocated.
  if (const std::string problem = ShapeProblem(*this, true); !problem.empty()) return fail(problem);
  return true;
}

void Model::ValidateOrThrow() const {
  std::string error;
  if (!Validate(&error)) throw Error(error);
}

EnergyBreakdown EvaluateEnergy(const Model& model, const Labeling& labels) {
  model.CheckShapeOrThrow();  // the sums below index every array without checks
  const NodeId n = model.num_nodes();
  if (static_cast<std::int64_t>(labels.size()) != n)
    throw Error("labelling has " + std::to_string(labels.size()) + " labels for a model of " + std::to_string(n) +
                " nodes");
  auto bad_label = [&](NodeId p) {
    return Error("label " + std::to_string(labels[p]) + " at node " + std::to_string(p) + " is outside 0.." +
                 std::to_string(model.num_labels - 1));
  };
  EnergyBreakdown e;
  const Topology& t = model.topology;
  if (!t.is_grid() || n < (NodeId{1} << 16)) {
    for (NodeId p = 0; p < n; ++p) {
      const Label l = labels[p];
      if (l < 0 || l >= model.num_labels) throw bad_label(p);
      e.data += model.unary_cost(p, l);
    }
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) { e.smoothness += model.pairwise_cost(slot, labels[p], labels[q]); });
    e.total = e.data + e.smoothness;
    return e;
  }
  // Large grids: rows of nodes on all cores, each node adding its own cost and those of its forward
  // edges (one core took 62-65 ms for a 4096 x 4096 segmentation's cut on the GPU machine, six times
  // the cut). Integer sums: the order does not change them. A bad label names the first such node.
  struct Sums {
    Energy data = 0, smoothness = 0;
    NodeId first_bad = std::numeric_limits<NodeId>::max();
  };
  const int width = t.width(), directions = t.num_directions();
  const Sums sums = tbb::parallel_reduce(
      tbb::blocked_range<std::int64_t>(0, std::int64_t{t.height()} * t.depth(), 16), Sums{},
      [&](const tbb::blocked_range<std::int64_t>& range, Sums acc) {
        auto valid = [&](Label l) { return l >= 0 && l < model.num_labels; };
        for (std::int64_t row = range.begin(); row < range.end(); ++row) {
          // The row's own costs, then each direction's edges in a span without bounds checks (with a
          // check per node and direction: 9.0 ns a node on one core of the development machine, 8.0
          // without).
          const NodeId first = static_cast<NodeId>(row * width);
          const Label* in_row = labels.data() + first;
          for (int x = 0; x < width; ++x) {
            if (valid(in_row[x])) acc.data += model.unary_cost(first + x, in_row[x]);
            else acc.first_bad = std::min(acc.first_bad, first + x);  // its edges are left out below
          }
          for (int d = 0; d < directions; ++d) {
            const Topology::RowSpan span = t.ForwardSpan(row, d);
            const Label* neighbours = in_row + span.offset;
            const EdgeId slots = EdgeId{d} * n + first;
            for (int x = span.x_begin; x < span.x_end; ++x)
              if (valid(in_row[x]) && valid(neighbours[x]))
                acc.smoothness += model.pairwise_cost(slots + x, in_row[x], neighbours[x]);
          }
        }
        return acc;
      },
      [](Sums a, const Sums& b) {
        a.data += b.data;
        a.smoothness += b.smoothness;
        a.first_bad = std::min(a.first_bad, b.first_bad);
        return a;
      });
  if (sums.first_bad != std::numeric_limits<NodeId>::max()) throw bad_label(sums.first_bad);
  e.data = sums.data;
  e.smoothness = sums.smoothness;
  e.total = e.data + e.smoothness;
  return e;
}

bool IsSubmodularBinary(const Model& model, std::string* why) {
  model.CheckShapeOrThrow();
  if (model.num_labels != 2) {
    if (why) *why = "model has " + std::to_string(model.num_labels) + " labels, not 2";
    return false;
  }
  const Pairwise& v = model.pairwise;
  const std::int64_t excess =
      std::int64_t{v.distance(0, 1, 2)} + v.distance(1, 0, 2) - v.distance(0, 0, 2) - v.distance(1, 1, 2);
  if (excess >= 0 || v.lambda == 0) return true;
  bool ok = true;
  model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
    if (ok && model.edge_weight(slot) > 0) {
      ok = false;
      if (why)
        *why = "edge " + std::to_string(p) + "-" + std::to_string(q) +
               " is not submodular: V(0,1) + V(1,0) < V(0,0) + V(1,1)";
    }
  });
  return ok;
}

std::string NumberText(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string PrintableText(const std::string& text, std::size_t limit) {
  std::string shown = text.size() > limit ? text.substr(0, limit) + "..." : text;
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return shown;
}

Cost QuantizeCost(double value, double scale, const std::string& what, bool allow_negative) {
  if (std::isnan(value)) throw Error(what + " is NaN");
  if (std::isinf(value)) throw Error(what + " is infinite");
  if (!allow_negative && value < 0) throw Error(what + " is negative (" + NumberText(value) + ")");
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error("cost scale must be a positive finite number (got " + NumberText(scale) + ")");
  const double scaled = std::round(value * scale);
  if (!(std::fabs(scaled) <= static_cast<double>(kMaxCost)))
    throw Error(what + " = " + NumberText(value) + " x scale " + NumberText(scale) +
                " does not fit a 32-bit cost");
  return static_cast<Cost>(scaled);
}

}  // namespace mrf
