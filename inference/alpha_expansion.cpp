#include "inference/alpha_expansion.h"

#include <chrono>

namespace mrf {

namespace {
double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void RunAlphaExpansion(const Model& model, const SolveOptions& options, Result* out, TruncationRule rule) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  model.ValidateOrThrow();
  const std::string broken = FindNonSubmodularMoveTerm(model, /*expansion=*/true);
  if (!broken.empty() && !options.truncate_nonsubmodular)
    throw Error(std::string("expansion needs a metric smoothness term, but this ") + ToString(model.pairwise.kind) +
                " term breaks the triangle inequality: " + broken +
                "; set truncate_nonsubmodular to truncate such move terms, or use swap or bp");

  LabelingState state(model, InitialLabels(model, options));
  BinaryMoveGraph graph(model, options.maxflow_backend, Device::kCpu, options.truncate_nonsubmodular, rule);
  out->timings.setup_ms = MsSince(start);
  const auto solve_start = std::chrono::steady_clock::now();

  const NodeId n = model.num_nodes();
  const LabelCosts& cost = state.costs();
  const std::string move_name = "expansion move";
  auto expand = [&](std::int64_t move) {
    const Label alpha = static_cast<Label>(move);
    const Labeling& labels = state.labels();
    // x = 1: the node takes alpha. Nodes already labelled alpha stay out of the move; their edges
    // become unary terms of their neighbours.
    for (NodeId p = 0; p < n; ++p)
      if (labels[p] != alpha) graph.AddUnary(p, model.unary_cost(p, labels[p]), model.unary_cost(p, alpha));
    const Energy v_aa = cost(alpha, alpha);
    model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
      const Energy w = cost.weight(slot);
      if (w == 0) return;
      const Label lp = labels[p], lq = labels[q];
      if (lp != alpha) {
        if (lq != alpha)
          graph.AddPairwise(slot, p, q, w * cost(lp, lq), w * cost(lp, alpha), w * cost(alpha, lq), w * v_aa);
        else
          graph.AddUnary(p, w * cost(lp, alpha), w * v_aa);
      } else if (lq != alpha) {
        graph.AddUnary(q, w * cost(alpha, lq), w * v_aa);
      }
    });
    const Energy predicted = graph.Solve();
    const Labeling& cut = graph.cut();
    for (NodeId p = 0; p < n; ++p)
      if (cut[p] && labels[p] != alpha) state.Propose(p, alpha);
    MoveOutcome outcome;
    outcome.exact = graph.last_move_truncations() == 0;
    outcome.nodes_changed = state.Commit(predicted, outcome.exact, move_name);
    return outcome;
  };
  out->message = RunMoveCycles(options, model.num_labels, move_name, state, graph, expand, out);
  out->labels = state.labels();
  out->timings.solve_ms = MsSince(solve_start);
}

}  // namespace mrf
