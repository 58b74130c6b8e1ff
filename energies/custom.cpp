#include "energies/custom.h"

#include <algorithm>
#include <cmath>

#include "mrf/memory.h"

namespace mrf {

namespace {
void CheckValue(double value, const std::string& what) {
  if (std::isnan(value)) throw Error(what + " is NaN");
  if (std::isinf(value)) throw Error(what + " is infinite");
  if (value < 0) throw Error(what + " is negative (" + NumberText(value) + ")");
}
std::string DataName(NodeId node, Label label) {
  return "data cost of node " + std::to_string(node) + ", label " + std::to_string(label);
}
std::string TableName(Label a, Label b) {
  return "pairwise distance(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}
}  // namespace

double ChooseCostScale(double largest_value) {
  CheckValue(largest_value, "largest cost");
  if (largest_value == 0) return 1.0;
  // Largest power of ten with largest_value * scale <= 1e6: six significant digits, and sums of
  // millions of terms stay far inside 64 bits.
  double scale = std::pow(10.0, std::floor(std::log10(1e6 / largest_value)));
  if (largest_value * scale > 1e6) scale /= 10;  // guard against log10 rounding up
  return std::clamp(scale, 1e-6, 1e6);
}

std::vector<Cost> QuantizeDataCosts(NodeId num_nodes, Label num_labels, const DataCostFunction& cost, double scale) {
  if (!cost) throw Error("custom energy: no data cost function given");
  if (num_nodes < 0 || num_labels < 1)
    throw Error("custom energy: need nodes >= 0 and labels >= 1 (got " + std::to_string(num_nodes) + " nodes, " +
                std::to_string(num_labels) + " labels)");
  CheckFitsInMemory(static_cast<double>(num_nodes) * num_labels * sizeof(Cost),
                    "custom energy: the data costs of " + std::to_string(num_nodes) + " nodes x " +
                        std::to_string(num_labels) + " labels");
  std::vector<Cost> out(static_cast<std::size_t>(num_nodes) * num_labels);
  for (NodeId p = 0; p < num_nodes; ++p)
    for (Label l = 0; l < num_labels; ++l) {
      const double value = cost(p, l);
      CheckValue(value, DataName(p, l));
      out[static_cast<std::size_t>(p) * num_labels + l] = QuantizeCost(value, scale, DataName(p, l));
    }
  return out;
}

Pairwise QuantizePairwiseTable(Label num_labels, const LabelDistanceFunction& distance, double scale) {
  if (!distance) throw Error("custom energy: no label distance function given");
  if (num_labels < 1) throw Error("custom energy: need labels >= 1 (got " + std::to_string(num_labels) + ")");
  Pairwise pairwise;
  pairwise.kind = PairwiseKind::kTable;
  pairwise.lambda = 1;
  CheckFitsInMemory(static_cast<double>(num_labels) * num_labels * sizeof(Cost),
                    "custom energy: the pairwise table of " + std::to_string(num_labels) + " x " +
                        std::to_string(num_labels) + " labels");
  pairwise.table.resize(static_cast<std::size_t>(num_labels) * num_labels);
  for (Label a = 0; a < num_labels; ++a)
    for (Label b = 0; b < num_labels; ++b) {
      const double value = distance(a, b);
      CheckValue(value, TableName(a, b));
      pairwise.table[static_cast<std::size_t>(a) * num_labels + b] = QuantizeCost(value, scale, TableName(a, b));
    }
  return pairwise;
}

Model BuildCustomModel(const CustomEnergy& energy) {
  if (!energy.data) throw Error("custom energy: no data cost function given");
  const NodeId n = energy.topology.num_nodes();
  const Label labels = energy.num_labels;
  if (n <= 0) throw Error("custom energy: the topology has no nodes");
  if (labels < 1) throw Error("custom energy: need at least 1 label (got " + std::to_string(labels) + ")");
  if (!energy.distance) {
    CheckValue(energy.lambda, "smoothness lambda");
    if (energy.kind == PairwiseKind::kTable)
      throw Error("custom energy: kind 'table' needs a distance function (CustomEnergy::distance)");
  }

  // Evaluate once in doubles, so the automatic scale sees the largest value before rounding (the
  // doubles and the costs made from them are both held at the end).
  CheckFitsInMemory(static_cast<double>(n) * labels * (sizeof(double) + sizeof(Cost)) +
                        (energy.distance ? static_cast<double>(labels) * labels * (sizeof(double) + sizeof(Cost)) : 0.0),
                    "custom energy: the costs of " + std::to_string(n) + " nodes x " + std::to_string(labels) +
                        " labels");
  std::vector<double> data(static_cast<std::size_t>(n) * labels);
  double largest = 0;
  for (NodeId p = 0; p < n; ++p)
    for (Label l = 0; l < labels; ++l) {
      const double value = energy.data(p, l);
      CheckValue(value, DataName(p, l));
      data[static_cast<std::size_t>(p) * labels + l] = value;
      largest = std::max(largest, value);
    }
  std::vector<double> table;
  if (energy.distance) {
    table.resize(static_cast<std::size_t>(labels) * labels);
    for (Label a = 0; a < labels; ++a)
      for (Label b = 0; b < labels; ++b) {
        const double value = energy.distance(a, b);
        CheckValue(value, TableName(a, b));
        table[static_cast<std::size_t>(a) * labels + b] = value;
        largest = std::max(largest, value);
      }
  } else {
    largest = std::max(largest, energy.lambda);
  }
  if (!(energy.scale >= 0) || !std::isfinite(energy.scale))
    throw Error("custom energy: scale must be 0 (automatic) or a positive finite number (got " +
                mrf::NumberText(energy.scale) + ")");
  const double scale = energy.scale > 0 ? energy.scale : ChooseCostScale(largest);

  Model model;
  model.topology = energy.topology;
  model.num_labels = labels;
  model.cost_scale = scale;
  model.unary.resize(data.size());
  for (NodeId p = 0; p < n; ++p)
    for (Label l = 0; l < labels; ++l) {
      const std::size_t i = static_cast<std::size_t>(p) * labels + l;
      model.unary[i] = QuantizeCost(data[i], scale, DataName(p, l));
    }
  if (energy.distance) {
    model.pairwise = QuantizePairwiseTable(
        labels, [&](Label a, Label b) { return table[static_cast<std::size_t>(a) * labels + b]; }, scale);
  } else {
    model.pairwise.kind = energy.kind;
    model.pairwise.lambda = QuantizeCost(energy.lambda, scale, "smoothness lambda");
    model.pairwise.truncation = energy.truncation;
  }
  model.edge_weights = energy.edge_weights;
  model.ValidateOrThrow();
  return model;
}

}  // namespace mrf
