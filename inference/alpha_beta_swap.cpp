#include "inference/alpha_beta_swap.h"

#include <chrono>
#include <utility>

namespace mrf {

namespace {
double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void RunAlphaBetaSwap(const Model& model, const SolveOptions& options, Result* out) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  model.ValidateOrThrow();
  const std::string broken = FindNonSubmodularMoveTerm(model, /*expansion=*/false);
  if (!broken.empty() && !options.truncate_nonsubmodular)
    throw Error(std::string("swap needs a semimetric smoothness term, but this ") + ToString(model.pairwise.kind) +
                " term has " + broken + "; set truncate_nonsubmodular to truncate such move terms, or use bp");

  LabelingState state(model, InitialLabels(model, options));
  BinaryMoveGraph graph(model, options.maxflow_backend, Device::kCpu, options.truncate_nonsubmodular);
  std::vector<std::pair<Label, Label>> pairs;
  for (Label a = 0; a < model.num_labels; ++a)  // the reference implementation's order
    for (Label b = model.num_labels - 1; b > a; --b) pairs.emplace_back(a, b);
  out->timings.setup_ms = MsSince(start);
  const auto solve_start = std::chrono::steady_clock::now();

  const NodeId n = model.num_nodes();
  const LabelCosts& cost = state.costs();
  Labeling reference(static_cast<std::size_t>(n), 0);  // the current labelling as a cut: 1 = label b
  const std::string move_name = "swap move";
  auto swap = [&](std::int64_t move) {
    const Label a = pairs[static_cast<std::size_t>(move)].first, b = pairs[static_cast<std::size_t>(move)].second;
    const Labeling& labels = state.labels();
    // x = 0: label a, x = 1: label b, for the nodes that have one of them; the rest stay out.
    graph.Begin(0);
    bool any = false;
    for (NodeId p = 0; p < n; ++p) {
      const Label l = labels[p];
      const bool free = l == a || l == b;
      reference[p] = l == b;
      if (free) graph.AddUnary(p, model.unary_cost(p, a), model.unary_cost(p, b));
      any = any || free;
    }
    if (!any) return MoveOutcome{};
    const Energy v_aa = cost(a, a), v_ab = cost(a, b), v_ba = cost(b, a), v_bb = cost(b, b);
    model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
      const Energy w = cost.weight(slot);
      if (w == 0) return;
      const Label lp = labels[p], lq = labels[q];
      const bool p_free = lp == a || lp == b, q_free = lq == a || lq == b;
      if (p_free) {
        if (q_free)
          graph.AddPairwise(slot, p, q, w * v_aa, w * v_ab, w * v_ba, w * v_bb);
        else
          graph.AddUnary(p, w * cost(a, lq), w * cost(b, lq));
      } else if (q_free) {
        graph.AddUnary(q, w * cost(lp, a), w * cost(lp, b));
      }
    });
    const Energy predicted = graph.Solve(&reference);
    const Labeling& cut = graph.cut();
    for (NodeId p = 0; p < n; ++p) {
      const Label l = labels[p];
      if (l == a || l == b) state.Propose(p, cut[p] ? b : a);
    }
    MoveOutcome outcome;
    outcome.exact = graph.last_move_truncations() == 0;
    outcome.nodes_changed = state.Commit(predicted, outcome.exact, move_name);
    return outcome;
  };
  out->message = RunMoveCycles(options, static_cast<std::int64_t>(pairs.size()), move_name, state, graph, swap, out);
  out->labels = state.labels();
  out->timings.solve_ms = MsSince(solve_start);
}

}  // namespace mrf
