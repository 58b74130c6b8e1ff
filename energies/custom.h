#pragma once
/// @file custom.h
/// @brief Writing your own energy: data terms and pairwise tables from callbacks, quantised to integers.
///
/// Every solver in mrf works on integer costs (mrf::Cost, 32 bits a term; energies summed in 64 bits),
/// so that exact max-flow on CPU and GPU sees exactly the energy the reference evaluator scores. A
/// custom energy therefore goes through three steps:
///
/// 1. Write the data term as a function `double(NodeId node, Label label)` and, if the built-in
///    smoothness kinds (Potts, truncated linear, truncated quadratic) do not fit, the label distance
///    as a function `double(Label a, Label b)`. Real values (log-probabilities, distances) are fine.
/// 2. Pick a scale: integer cost = round(real cost x scale) (mrf::QuantizeCost). ChooseCostScale()
///    picks a power of ten that keeps about six significant digits; the scale is stored in
///    Model::cost_scale and reported in every Result, so real energies are energy / cost_scale.
/// 3. Build the model with BuildCustomModel() (or fill mrf::Model yourself with QuantizeDataCosts()
///    and QuantizePairwiseTable()) and call mrf::Solve().
///
/// @code
/// mrf::CustomEnergy energy;
/// energy.topology = mrf::Topology::Grid2D(width, height, 4);
/// energy.num_labels = 4;
/// energy.data = [&](mrf::NodeId p, mrf::Label l) { return std::abs(image[p] - level[l]) / 10.0; };
/// energy.distance = [](mrf::Label a, mrf::Label b) { return a == b ? 0.0 : 0.5 + 0.25 * std::abs(a - b); };
/// mrf::Model model = mrf::BuildCustomModel(energy);   // model.cost_scale says how costs were scaled
/// mrf::Result result = mrf::Solve(model);              // real energy = result.energy / result.cost_scale
/// @endcode
///
/// Which solvers accept the result: alpha-expansion needs a metric distance (zero on the diagonal,
/// symmetric, triangle inequality; see Pairwise::IsMetric) or SolveOptions::truncate_nonsubmodular;
/// swap needs a semi-metric; ICM and belief propagation take any table. Rounding can break the
/// triangle inequality of a real metric by one unit: check model.pairwise.IsMetric() after building.
/// apps/example-custom-energy/main.cpp is a complete program.

#include <functional>
#include <vector>

#include "mrf/model.h"

namespace mrf {

/// A real-valued data cost: the cost of giving `label` to `node`.
using DataCostFunction = std::function<double(NodeId node, Label label)>;
/// A real-valued label distance, the pairwise table entry of row a, column b.
using LabelDistanceFunction = std::function<double(Label a, Label b)>;

/// A scale for QuantizeCost: the largest power of ten (at most 1e6, at least 1e-6) with
/// largest_value x scale <= 1e6, or 1 when largest_value is 0. Throws mrf::Error for a negative,
/// NaN or infinite value.
double ChooseCostScale(double largest_value);

/// Evaluates `cost` for every node and label and quantises each value (round(value x scale)).
/// Node-major like Model::unary. Throws mrf::Error naming the node and label of a NaN, infinite,
/// negative or too large value.
std::vector<Cost> QuantizeDataCosts(NodeId num_nodes, Label num_labels, const DataCostFunction& cost, double scale);

/// An L x L pairwise table (PairwiseKind::kTable, lambda 1) with entries round(distance(a, b) x scale).
/// Throws mrf::Error naming the entry of a NaN, infinite, negative or too large value.
Pairwise QuantizePairwiseTable(Label num_labels, const LabelDistanceFunction& distance, double scale);

/// A custom energy: topology, labels, data callback, and either a distance callback or one of the
/// built-in pairwise kinds.
struct CustomEnergy {
  Topology topology;      ///< Any topology: grids or edge lists.
  Label num_labels = 0;   ///< Number of labels.
  DataCostFunction data;  ///< Required: real data cost of each node and label.
  /// Optional: real label distance. When set it becomes a quantised kTable and `pairwise` is ignored.
  LabelDistanceFunction distance;
  /// Used when `distance` is empty: a built-in kind whose lambda and truncation are *real* costs,
  /// multiplied by the scale and rounded (e.g. lambda 0.75 with scale 1000 becomes 750).
  PairwiseKind kind = PairwiseKind::kPotts;
  double lambda = 1.0;         ///< Real smoothness weight for `kind` (ignored with `distance`).
  Cost truncation = kMaxCost;  ///< Truncation of the linear/quadratic distance, in label units.
  /// Optional integer multipliers, one per edge slot (see Topology); empty = all 1.
  std::vector<Cost> edge_weights;
  /// Integer cost = round(real cost x scale). 0 = choose with ChooseCostScale() from the largest
  /// data cost and pairwise value.
  double scale = 0;
};

/// Builds and validates the model of a custom energy; Model::cost_scale holds the scale used.
/// Throws mrf::Error for a missing data callback, bad values (naming node/label or table entry)
/// or a model that fails Model::Validate().
Model BuildCustomModel(const CustomEnergy& energy);

}  // namespace mrf
