#pragma once
/// @file model.h
/// @brief The one plain-data MRF model that every energy builds and every solver consumes.

#include <cstddef>
#include <string>
#include <vector>

#include "mrf/topology.h"
#include "mrf/types.h"

namespace mrf {

/// The pairwise (smoothness) term families.
enum class PairwiseKind {
  kPotts,               ///< distance(a, b) = [a != b]
  kTruncatedLinear,     ///< distance(a, b) = min(|a - b|, truncation)
  kTruncatedQuadratic,  ///< distance(a, b) = min((a - b)^2, truncation)
  kTable,               ///< distance(a, b) = table[a * num_labels + b]
};

/// Name of a pairwise kind as used on command lines: potts, linear, quadratic, table.
const char* ToString(PairwiseKind kind);
/// Parses potts|linear|quadratic|table; throws mrf::Error naming the bad value.
PairwiseKind ParsePairwiseKind(const std::string& name);

/// The pairwise term shared by all edges: V_pq(a, b) = weight_pq * lambda * distance(a, b).
struct Pairwise {
  PairwiseKind kind = PairwiseKind::kPotts;  ///< Family of distance().
  Cost lambda = 1;                           ///< Multiplier applied to every edge.
  Cost truncation = kMaxCost;                ///< Cap of the linear/quadratic distance.
  std::vector<Cost> table;                   ///< L x L distances for kTable, row a, column b.

  /// The distance between labels a and b, before lambda and the edge weight.
  Cost distance(Label a, Label b, Label num_labels) const {
    switch (kind) {
      case PairwiseKind::kPotts: return a != b;
      case PairwiseKind::kTruncatedLinear: {
        const Cost d = a > b ? a - b : b - a;
        return d < truncation ? d : truncation;
      }
      case PairwiseKind::kTruncatedQuadratic: {
        const std::int64_t d = a - b;
        return d * d < truncation ? static_cast<Cost>(d * d) : truncation;
      }
      case PairwiseKind::kTable: return table[static_cast<std::size_t>(a) * num_labels + b];
    }
    return 0;
  }
  /// Largest |distance(a, b)| over all label pairs.
  Cost MaxDistance(Label num_labels) const;
  /// True when distance(a, a) = 0, distance is symmetric, non-negative and obeys the triangle
  /// inequality: the condition alpha-expansion needs (a metric). Throws mrf::Error for an unknown
  /// kind, or a table that does not hold num_labels x num_labels values.
  bool IsMetric(Label num_labels, std::string* why = nullptr) const;
};

/// A pairwise MRF with integer costs:
/// E(x) = sum_p unary[p * L + x_p] + sum_{edges pq} weight_pq * lambda * distance(x_p, x_q).
///
/// Plain data: fill the fields (or use the builders in energies/), then call Validate() or let
/// mrf::Solve() do it.
struct Model {
  Topology topology;              ///< Which nodes are joined.
  Label num_labels = 0;           ///< L, the number of labels.
  std::vector<Cost> unary;        ///< Data costs, node-major: unary[node * L + label].
  Pairwise pairwise;              ///< The smoothness term.
  std::vector<Cost> edge_weights; ///< Per edge-slot weights (non-negative); empty means all 1.
  /// Integer costs equal real costs times this scale (set by builders that quantise real values).
  double cost_scale = 1.0;

  /// Number of nodes.
  NodeId num_nodes() const { return topology.num_nodes(); }
  /// Unary cost of `label` at `node`.
  Cost unary_cost(NodeId node, Label label) const {
    return unary[static_cast<std::size_t>(node) * num_labels + label];
  }
  /// Weight of the edge in `slot` (1 when no weights are given).
  Cost edge_weight(EdgeId slot) const {
    return edge_weights.empty() ? 1 : edge_weights[static_cast<std::size_t>(slot)];
  }
  /// The full pairwise cost weight * lambda * distance(a, b) of the edge in `slot`.
  /// Validate() guarantees it fits in a Cost.
  Cost pairwise_cost(EdgeId slot, Label a, Label b) const {
    return static_cast<Cost>(std::int64_t{edge_weight(slot)} * pairwise.lambda *
                             pairwise.distance(a, b, num_labels));
  }

  /// Checks sizes, ranges and overflow. Returns false and writes a message naming the
  /// offending field or term when something is wrong.
  bool Validate(std::string* error) const;
  /// Validate() that throws mrf::Error instead.
  void ValidateOrThrow() const;
  /// The part of Validate() that reads no cost, in O(1): node and label counts, a known pairwise kind,
  /// and the sizes of the table, the edge weights and (with_unary) the unary costs. Throws mrf::Error.
  /// The functions that take a Model and index its arrays (EvaluateEnergy, IsSubmodularBinary, ...) call it.
  void CheckShapeOrThrow(bool with_unary = true) const;
};

/// The energy of a labelling, split into its two sums.
struct EnergyBreakdown {
  Energy data = 0;        ///< Sum of unary costs.
  Energy smoothness = 0;  ///< Sum of pairwise costs over edges.
  Energy total = 0;       ///< data + smoothness.
};

/// The reference energy evaluator: every test and every report scores labellings with it.
/// Throws mrf::Error if the labelling has the wrong size or a label out of range.
EnergyBreakdown EvaluateEnergy(const Model& model, const Labeling& labels);

/// True when every edge's 2x2 cost table satisfies E(0,1) + E(1,0) >= E(0,0) + E(1,1), i.e. the
/// two-label model can be minimised exactly by one graph cut. `why` names the first violating edge.
bool IsSubmodularBinary(const Model& model, std::string* why = nullptr);

/// Converts a real cost to an integer cost: round(value * scale).
/// Throws mrf::Error naming `what` if the value is NaN or infinite, negative while
/// `allow_negative` is false, or does not fit a 32-bit term after scaling.
Cost QuantizeCost(double value, double scale, const std::string& what, bool allow_negative = false);

/// A number as a short text for messages (six significant digits: "1e+300", where std::to_string
/// writes 301 digits).
std::string NumberText(double value);

/// `text` cut after `limit` characters (marked "...") with every byte outside printable ASCII shown as '?':
/// for quoting file contents in one-line messages.
std::string PrintableText(const std::string& text, std::size_t limit = 200);

}  // namespace mrf
