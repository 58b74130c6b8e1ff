#include "mrf/binary_graph.h"

namespace mrf {

StGraph BuildBinaryGraph(const Model& model, Energy* energy_offset) {
  model.ValidateOrThrow();
  if (model.num_labels != 2)
    throw Error("a single graph cut needs a two-label model (this one has " + std::to_string(model.num_labels) +
                " labels)");
  std::string why;
  if (!IsSubmodularBinary(model, &why)) throw Error(why);

  const NodeId n = model.num_nodes();
  StGraph graph = model.topology.is_grid() ? StGraph(model.topology) : StGraph();
  if (!model.topology.is_grid()) {
    graph.reserve(n, model.topology.num_edges());
    graph.add_node(n);
  }
  // E(x) = offset + sum_p slope[p] * x_p + sum_pq cap_pq * [x_p = 0, x_q = 1]  (Kolmogorov-Zabih).
  Energy offset = 0;
  std::vector<Energy> slope(n);
  for (NodeId p = 0; p < n; ++p) {
    offset += model.unary_cost(p, 0);
    slope[p] = Energy{model.unary_cost(p, 1)} - model.unary_cost(p, 0);
  }
  model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
    const Energy a = model.pairwise_cost(slot, 0, 0), b = model.pairwise_cost(slot, 0, 1);
    const Energy c = model.pairwise_cost(slot, 1, 0), d = model.pairwise_cost(slot, 1, 1);
    offset += a;
    slope[p] += c - a;
    slope[q] += d - c;
    const Energy cap = b + c - a - d;  // >= 0 by submodularity
    if (cap > kMaxCost)
      throw Error("edge " + std::to_string(p) + "-" + std::to_string(q) + " needs capacity " + std::to_string(cap) +
                  ", more than 32 bits");
    if (cap == 0) return;
    if (model.topology.is_grid()) graph.add_to_edge_slot(slot, static_cast<Cost>(cap), 0);
    else graph.add_edge(p, q, static_cast<Cost>(cap), 0);
  });
  // A positive slope is paid on the sink side (x_p = 1): capacity source->p.
  for (NodeId p = 0; p < n; ++p) {
    if (slope[p] >= 0) {
      graph.add_tweights(p, slope[p], 0);
    } else {
      graph.add_tweights(p, 0, -slope[p]);
      offset += slope[p];
    }
  }
  *energy_offset = offset;
  return graph;
}

}  // namespace mrf
