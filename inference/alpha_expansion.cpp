#include "inference/alpha_expansion.h"

#include <chrono>
#include <cstdint>

namespace mrf {

namespace {
double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void RunAlphaExpansion(const Model& model, const SolveOptions& options, Result* out, const MoveTuning& tuning) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  model.ValidateOrThrow();
  const std::string broken = FindNonSubmodularMoveTerm(model, /*expansion=*/true);
  if (!broken.empty() && !options.truncate_nonsubmodular)
    throw Error(NonSubmodularRefusal(model, broken, /*expansion=*/true));

  LabelingState state(model, InitialLabels(model, options));
  BinaryMoveGraph graph(model, options.maxflow_backend, Device::kCpu, options.truncate_nonsubmodular, model.num_labels,
                        tuning);
  out->timings.setup_ms = MsSince(start);
  const auto solve_start = std::chrono::steady_clock::now();

  const NodeId n = model.num_nodes();
  const Label num_labels = model.num_labels;
  const LabelCosts& cost = state.costs();
  const Adjacency& adjacency = state.adjacency();

  // The terms of the move on `alpha` (x = 1: the node takes alpha) for a node or an edge whose
  // labels are given; sign -1 takes back terms an earlier graph holds. Nodes labelled alpha stay
  // out of the move; their edges become unary terms of their neighbours.
  // (V(l, alpha) and V(alpha, l) are looked up per term: tabling them per move cost O(L) a move,
  // which dominated models with many more labels than nodes.)
  Label alpha = 0;
  Energy v_aa = 0;
  auto node_terms = [&](int sign, NodeId p, Label lp) {
    if (lp != alpha) graph.AddUnary(p, sign * Energy{model.unary_cost(p, lp)}, sign * Energy{model.unary_cost(p, alpha)});
  };
  auto edge_terms = [&](int sign, EdgeId slot, NodeId p, NodeId q, Label lp, Label lq) {
    const Energy w = cost.weight(slot);
    if (w == 0) return;
    if (lp != alpha) {
      if (lq == alpha) {
        graph.AddUnary(p, sign * w * cost(lp, alpha), sign * w * v_aa);
      } else if (sign > 0) {
        graph.AddPairwise(slot, p, q, w * cost(lp, lq), w * cost(lp, alpha), w * cost(alpha, lq), w * v_aa);
      } else {
        graph.RemovePairwise(slot, p, q, w * cost(lp, lq), w * cost(lp, alpha), w * cost(alpha, lq), w * v_aa);
      }
    } else if (lq != alpha) {
      graph.AddUnary(q, sign * w * cost(alpha, lq), sign * w * v_aa);
    }
  };

  // With a graph kept per label: the labels each label's graph was built from, and how far into
  // the change log it has read. An update rebuilds only the terms of nodes changed since, and
  // their edges; when too much changed, the whole move is given again (only differences reach
  // the engine either way).
  const bool incremental = tuning.incremental && graph.reuses_flow();
  std::vector<Labeling> built_from(incremental ? static_cast<std::size_t>(num_labels) : 0);
  std::vector<std::size_t> log_read(static_cast<std::size_t>(num_labels), 0);
  std::vector<std::uint8_t> in_update(incremental ? static_cast<std::size_t>(n) : 0, 0);
  std::vector<NodeId> update_nodes;
  const std::string move_name = "expansion move";

  auto expand = [&](std::int64_t move) {
    alpha = static_cast<Label>(move);
    v_aa = cost(alpha, alpha);
    const Labeling& labels = state.labels();
    const std::vector<NodeId>& log = state.change_log();
    const std::size_t a = static_cast<std::size_t>(alpha);
    const bool update = incremental && graph.HasGraph(alpha) &&
                        static_cast<double>(log.size() - log_read[a]) <= tuning.update_limit * n;
    graph.Begin(alpha, update);
    if (update) {
      Labeling& old = built_from[a];
      update_nodes.clear();
      for (std::size_t i = log_read[a]; i < log.size(); ++i) {
        const NodeId p = log[i];
        if (!in_update[p] && labels[p] != old[p]) {
          in_update[p] = 1;
          update_nodes.push_back(p);
        }
      }
      for (NodeId p : update_nodes) {
        node_terms(-1, p, old[p]);
        node_terms(+1, p, labels[p]);
      }
      for (NodeId p : update_nodes)
        for (const Adjacency::Entry* e = adjacency.begin(p); e != adjacency.end(p); ++e) {
          const NodeId q = e->other;
          if (in_update[q] && q < p) continue;  // an edge between two changed nodes is redone once
          const NodeId from = e->node_is_from ? p : q, to = e->node_is_from ? q : p;
          edge_terms(-1, e->slot, from, to, old[from], old[to]);
        }
      for (NodeId p : update_nodes)
        for (const Adjacency::Entry* e = adjacency.begin(p); e != adjacency.end(p); ++e) {
          const NodeId q = e->other;
          if (in_update[q] && q < p) continue;
          const NodeId from = e->node_is_from ? p : q, to = e->node_is_from ? q : p;
          edge_terms(+1, e->slot, from, to, labels[from], labels[to]);
        }
      for (NodeId p : update_nodes) {
        old[p] = labels[p];
        in_update[p] = 0;
      }
    } else {
      for (NodeId p = 0; p < n; ++p)
        if (labels[p] != alpha) graph.AddUnary(p, model.unary_cost(p, labels[p]), model.unary_cost(p, alpha));
      model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
        const Energy w = cost.weight(slot);
        const Label lp = labels[p], lq = labels[q];
        if (w == 0 || (lp == alpha && lq == alpha)) return;
        if (lp == alpha) graph.AddUnary(q, w * cost(alpha, lq), w * v_aa);
        else if (lq == alpha) graph.AddUnary(p, w * cost(lp, alpha), w * v_aa);
        else graph.AddPairwise(slot, p, q, w * cost(lp, lq), w * cost(lp, alpha), w * cost(alpha, lq), w * v_aa);
      });
      if (incremental) built_from[a] = labels;
    }
    log_read[a] = log.size();
    const Energy predicted = graph.Solve();
    const Labeling& cut = graph.cut();
    for (NodeId p = 0; p < n; ++p)
      if (cut[p] && labels[p] != alpha) state.Propose(p, alpha);
    MoveOutcome outcome;
    outcome.exact = graph.last_move_truncations() == 0;
    outcome.nodes_changed = state.Commit(predicted, outcome.exact, move_name);
    return outcome;
  };
  const MoveOrder order(options.label_order, options.seed, model, num_labels, false);
  out->message = RunMoveCycles(options, order, move_name, state, graph, expand, out);
  out->labels = state.labels();
  out->timings.solve_ms = MsSince(solve_start);
}

}  // namespace mrf
