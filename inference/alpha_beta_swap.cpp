#include "inference/alpha_beta_swap.h"

#include <chrono>
#include <utility>

namespace mrf {

namespace {
double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void RunAlphaBetaSwap(const Model& model, const SolveOptions& options, Result* out, const MoveTuning& tuning) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  MoveOrder::CheckUsable(options.label_order, /*pairs=*/true);
  model.ValidateOrThrow();
  const std::string broken = FindNonSubmodularMoveTerm(model, /*expansion=*/false);
  if (!broken.empty() && !options.truncate_nonsubmodular)
    throw Error(NonSubmodularRefusal(model, broken, /*expansion=*/false));

  // A cycle visits every label pair: refuse label counts whose pairs alone would fill memory.
  if (!SwapTakesLabelCount(model.num_labels))
    throw Error("swap with " + std::to_string(model.num_labels) + " labels runs " +
                std::to_string(SwapPairs(model.num_labels)) +
                " moves a cycle, more than the " + std::to_string(kMaxSwapPairs) + " it takes; use expansion or bp");

  LabelingState state(model, InitialLabels(model, options));
  BinaryMoveGraph graph(model, options.maxflow_backend, Device::kCpu, options.truncate_nonsubmodular, 1, tuning);
  std::vector<std::pair<Label, Label>> pairs;
  for (Label a = 0; a < model.num_labels; ++a)  // the reference implementation's order
    for (Label b = model.num_labels - 1; b > a; --b) pairs.emplace_back(a, b);
  out->timings.setup_ms = MsSince(start);
  const auto solve_start = std::chrono::steady_clock::now();

  const NodeId n = model.num_nodes();
  const LabelCosts& cost = state.costs();
  Labeling reference(static_cast<std::size_t>(n), 0);  // the current labelling as a cut: 1 = label b
  const std::string move_name = "swap move";
  const Adjacency& adjacency = state.adjacency();
  std::vector<NodeId> free_nodes;
  auto swap = [&](std::int64_t move) {
    const Label a = pairs[static_cast<std::size_t>(move)].first, b = pairs[static_cast<std::size_t>(move)].second;
    const Labeling& labels = state.labels();
    // x = 0: label a, x = 1: label b, for the nodes that have one of them; the rest stay out, and
    // the graph holds just the free nodes when the engine takes general graphs.
    free_nodes.clear();
    for (NodeId p = 0; p < n; ++p)
      if (labels[p] == a || labels[p] == b) free_nodes.push_back(p);
    if (free_nodes.empty()) return MoveOutcome{};
    graph.BeginSparse(0);
    const Energy v_aa = cost(a, a), v_ab = cost(a, b), v_ba = cost(b, a), v_bb = cost(b, b);
    for (NodeId p : free_nodes) {
      reference[p] = labels[p] == b;
      graph.AddUnary(p, model.unary_cost(p, a), model.unary_cost(p, b));
      for (const Adjacency::Entry* e = adjacency.begin(p); e != adjacency.end(p); ++e) {
        const Energy w = cost.weight(e->slot);
        if (w == 0) continue;
        const Label lq = labels[e->other];
        if (lq == a || lq == b) {
          if (e->node_is_from) graph.AddPairwise(e->slot, p, e->other, w * v_aa, w * v_ab, w * v_ba, w * v_bb);
        } else if (e->node_is_from) {
          graph.AddUnary(p, w * cost(a, lq), w * cost(b, lq));
        } else {
          graph.AddUnary(p, w * cost(lq, a), w * cost(lq, b));
        }
      }
    }
    const Energy predicted = graph.Solve(&reference);
    const Labeling& cut = graph.cut();
    for (NodeId p : free_nodes) state.Propose(p, cut[p] ? b : a);
    MoveOutcome outcome;
    outcome.exact = graph.last_move_truncations() == 0;
    outcome.nodes_changed = state.Commit(predicted, outcome.exact, move_name);
    return outcome;
  };
  const MoveOrder order(options.label_order, options.seed, model, static_cast<std::int64_t>(pairs.size()), true);
  out->message = RunMoveCycles(options, order, move_name, state, graph, swap, out);
  out->labels = state.labels();
  out->timings.solve_ms = MsSince(solve_start);
}

}  // namespace mrf
