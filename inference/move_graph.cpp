#include "inference/move_graph.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include "inference/iteration_control.h"
#include "mrf/registry.h"

namespace mrf {

// ---- LabelCosts ------------------------------------------------------------------------------------

LabelCosts::LabelCosts(const Model& model)
    : pairwise_(&model.pairwise),
      weights_(model.edge_weights.empty() ? nullptr : &model.edge_weights),
      num_labels_(model.num_labels),
      lambda_(model.pairwise.lambda) {
  // A table of up to 1024 x 1024 values (8 MiB) replaces the switch on the pairwise kind.
  if (num_labels_ <= 1024) {
    table_.resize(static_cast<std::size_t>(num_labels_) * num_labels_);
    for (Label a = 0; a < num_labels_; ++a)
      for (Label b = 0; b < num_labels_; ++b)
        table_[static_cast<std::size_t>(a) * num_labels_ + b] = lambda_ * pairwise_->distance(a, b, num_labels_);
  }
}

// ---- Adjacency -------------------------------------------------------------------------------------

Adjacency::Adjacency(const Topology& topology) {
  const NodeId n = topology.num_nodes();
  offsets_.assign(static_cast<std::size_t>(n) + 1, 0);
  topology.ForEachEdge([&](EdgeId, NodeId p, NodeId q) {
    ++offsets_[p + 1];
    ++offsets_[q + 1];
  });
  std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
  entries_.resize(static_cast<std::size_t>(offsets_[n]));
  std::vector<std::int64_t> next(offsets_.begin(), offsets_.end() - 1);
  topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
    entries_[next[p]++] = Entry{slot, q, true};
    entries_[next[q]++] = Entry{slot, p, false};
  });
}

// ---- Exact energy change ---------------------------------------------------------------------------

Energy EnergyChange(const Model& model, const LabelCosts& costs, const Adjacency& adjacency,
                    const Labeling& current, const Labeling& proposal, const std::vector<NodeId>& changed) {
  Energy delta = 0;
  for (NodeId p : changed) {
    const Label old_p = current[p], new_p = proposal[p];
    delta += Energy{model.unary_cost(p, new_p)} - model.unary_cost(p, old_p);
    for (const Adjacency::Entry* e = adjacency.begin(p); e != adjacency.end(p); ++e) {
      const NodeId q = e->other;
      const bool q_changed = proposal[q] != current[q];
      if (q_changed && q < p) continue;  // an edge between two changed nodes is counted once
      const Label old_q = current[q], new_q = proposal[q];
      if (e->node_is_from)
        delta += costs.edge(e->slot, new_p, new_q) - costs.edge(e->slot, old_p, old_q);
      else
        delta += costs.edge(e->slot, new_q, new_p) - costs.edge(e->slot, old_q, old_p);
    }
  }
  return delta;
}

// ---- LabelingState ---------------------------------------------------------------------------------

LabelingState::LabelingState(const Model& model, Labeling initial)
    : model_(model),
      costs_(model),
      adjacency_(model.topology),
      labels_(std::move(initial)),
      proposal_(labels_),
      energy_(EvaluateEnergy(model, labels_).total) {}

std::int64_t LabelingState::Commit(Energy predicted, bool exact, const std::string& move_name) {
  const Energy delta = changed_.empty() ? 0 : EnergyChange(model_, costs_, adjacency_, labels_, proposal_, changed_);
  if (exact && delta != predicted)
    throw Error("internal error in the " + move_name + ": its cut promised an energy change of " +
                std::to_string(predicted) + " but the labelling changes it by " + std::to_string(delta));
  const std::int64_t count = static_cast<std::int64_t>(changed_.size());
  if (delta < 0) {
    for (NodeId p : changed_) labels_[p] = proposal_[p];
    change_log_.insert(change_log_.end(), changed_.begin(), changed_.end());
    energy_ += delta;
  } else {
    for (NodeId p : changed_) proposal_[p] = labels_[p];
  }
  changed_.clear();
  return delta < 0 ? count : 0;
}

// ---- Cycles of moves -------------------------------------------------------------------------------

std::string RunMoveCycles(const SolveOptions& options, MoveOrder move_order, const std::string& move_name,
                          const LabelingState& state, const BinaryMoveGraph& graph,
                          const std::function<MoveOutcome(std::int64_t move)>& run_move, Result* out) {
  IterationControl control(options, out);
  const std::int64_t moves_per_cycle = move_order.count();
  std::vector<std::int64_t> order;
  std::int64_t changes = 0;  // moves that changed the labelling so far
  // settled_at[m] = `changes` right after move m last ran exactly; equal to `changes` now means
  // nothing moved since, so move m would find nothing again.
  std::vector<std::int64_t> settled_at(static_cast<std::size_t>(moves_per_cycle), -1);
  std::string stop;
  for (int cycle = 1;; ++cycle) {
    move_order.Next(&order);
    const std::int64_t changes_before = changes, truncations_before = graph.truncations();
    std::int64_t run = 0, skipped = 0, nodes_changed = 0;
    bool time_up = false;
    for (std::int64_t move : order) {
      if (settled_at[move] == changes) {
        ++skipped;
        continue;
      }
      ++run;
      const MoveOutcome outcome = run_move(move);
      if (outcome.nodes_changed > 0) {
        ++changes;
        nodes_changed += outcome.nodes_changed;
      }
      settled_at[move] = outcome.exact || outcome.nodes_changed == 0 ? changes : -1;
      if (control.TimeUp()) {
        time_up = true;
        break;
      }
    }
    std::string note = std::to_string(run) + " moves, " + std::to_string(skipped) + " skipped, " +
                       std::to_string(nodes_changed) + " nodes changed";
    if (graph.truncating())
      note += ", " + std::to_string(graph.truncations() - truncations_before) + " terms truncated";
    if (time_up) note += " (stopped by the time limit during this cycle)";
    const bool go_on = control.Record(cycle, state.energy(), note);
    if (time_up) {
      stop = "stopped by the time limit (" + SecondsText(options.time_limit_s) + ") during cycle " +
             std::to_string(cycle);
      break;
    }
    if (changes == changes_before) {
      stop = "converged after " + std::to_string(cycle) + (cycle == 1 ? " cycle" : " cycles") + ": no " + move_name +
             " lowers the energy";
      break;
    }
    if (!go_on) {
      stop = "stopped by the callback after cycle " + std::to_string(cycle);
      break;
    }
    if (cycle >= options.max_iterations) {
      stop = "stopped at the iteration limit (" + std::to_string(options.max_iterations) + " cycles)";
      break;
    }
  }
  stop += "; max-flow engine " + graph.engine_name();
  if (!graph.engine_note().empty()) stop += " (" + graph.engine_note() + ")";
  if (graph.truncating()) stop += "; " + std::to_string(graph.truncations()) + " non-submodular move terms truncated";
  return stop;
}

// ---- Up-front submodularity check ------------------------------------------------------------------

namespace {

std::string V(Label a, Label b) { return "V(" + std::to_string(a) + "," + std::to_string(b) + ")"; }

bool HasSmoothness(const Model& model) {
  if (model.pairwise.lambda == 0 || model.topology.num_edges() == 0) return false;
  if (model.edge_weights.empty()) return true;
  bool any = false;
  model.topology.ForEachEdge([&](EdgeId slot, NodeId, NodeId) { any = any || model.edge_weight(slot) != 0; });
  return any;
}

}  // namespace

std::string NonSubmodularRefusal(const Model& model, const std::string& broken, bool expansion) {
  const std::string advice = "; set truncate_nonsubmodular (--truncate of mrf-solve, mrf-stereo and mrf-restore) to "
                             "truncate such move terms, or use ";
  if (!expansion)
    return std::string("swap needs a semimetric smoothness term, but this ") + ToString(model.pairwise.kind) +
           " term has " + broken + advice + "bp";
  return std::string("expansion needs a metric smoothness term, but this ") + ToString(model.pairwise.kind) +
         " term breaks the triangle inequality: " + broken + advice + "swap or bp";
}

std::string FindNonSubmodularMoveTerm(const Model& model, bool expansion) {
  const Label L = model.num_labels;
  const PairwiseKind kind = model.pairwise.kind;
  if (L < 2 || !HasSmoothness(model)) return {};
  if (kind == PairwiseKind::kPotts || kind == PairwiseKind::kTruncatedLinear) return {};  // metrics
  const LabelCosts cost(model);
  if (kind == PairwiseKind::kTruncatedQuadratic) {
    // A semimetric: swap is always fine. Pairwise::IsMetric holds the rule (T <= 2); the first triple
    // to break it is (0, 1, 2).
    if (!expansion || model.pairwise.IsMetric(L)) return {};
    return V(0, 2) + " = " + std::to_string(cost(0, 2)) + " > " + V(0, 1) + " + " + V(1, 2) + " = " +
           std::to_string(cost(0, 1) + cost(1, 2));
  }
  if (!expansion) {
    for (Label a = 0; a < L; ++a)
      for (Label b = a + 1; b < L; ++b)
        if (cost(a, b) + cost(b, a) < cost(a, a) + cost(b, b))
          return V(a, a) + " + " + V(b, b) + " = " + std::to_string(cost(a, a) + cost(b, b)) + " > " + V(a, b) +
                 " + " + V(b, a) + " = " + std::to_string(cost(a, b) + cost(b, a));
    return {};
  }
  // Expansion on label `a` of an edge labelled (b, c): E01 + E10 = V(b,a) + V(a,c) must be at least
  // E00 + E11 = V(b,c) + V(a,a).
  for (Label a = 0; a < L; ++a)
    for (Label b = 0; b < L; ++b) {
      if (b == a) continue;
      for (Label c = 0; c < L; ++c) {
        if (c == a) continue;
        if (cost(b, a) + cost(a, c) >= cost(b, c) + cost(a, a)) continue;
        std::string left = V(b, c), right = V(b, a) + " + " + V(a, c);
        if (cost(a, a) != 0) left += " + " + V(a, a);
        return left + " = " + std::to_string(cost(b, c) + cost(a, a)) + " > " + right + " = " +
               std::to_string(cost(b, a) + cost(a, c));
      }
    }
  return {};
}

// ---- BinaryMoveGraph -------------------------------------------------------------------------------

struct BinaryMoveGraph::KeyGraph {
  StGraph graph;
  std::unique_ptr<MaxFlowEngine> engine;
  Energy sink_total = 0;        // sum of the sink capacities: the cut where nobody moves
  std::int64_t truncated = 0;   // truncated terms the graph holds
  bool solved = false;          // the engine holds this graph's residual flow (reuse only)
};

BinaryMoveGraph::BinaryMoveGraph(const Model& model, const std::string& backend, Device device, bool truncate,
                                 std::int64_t num_keys, const MoveTuning& tuning)
    : truncate_(truncate), rule_(tuning.rule), topology_(&model.topology) {
  const Topology& topology = model.topology;
  std::unique_ptr<MaxFlowEngine> probe;
  if (tuning.engine) {
    make_engine_ = tuning.engine;
    engine_name_ = tuning.engine_name.empty() ? std::string("custom engine") : tuning.engine_name;
    probe = make_engine_();
    const std::string cannot = probe->CannotSolve(topology);
    if (!cannot.empty()) throw Error("max-flow engine for the moves: " + engine_name_ + " cannot: " + cannot);
  } else {
    auto accepts = [&topology](const SolverEntry& e) {
      return e.make_engine ? e.make_engine()->CannotSolve(topology) : std::string("not a max-flow engine");
    };
    try {
      const SolverEntry& entry = Registry::Global().Choose(
          backend, Algorithm::kMaxFlow, backend == "auto" ? device : Device::kAuto, &engine_note_, accepts);
      make_engine_ = entry.make_engine;
      engine_name_ = entry.name;
      probe = make_engine_();
    } catch (const Error& e) {
      throw Error(std::string("max-flow engine for the moves: ") + e.what());
    }
  }
  // A graph and a residual flow per key cost about this much (the graph plus a compact engine such
  // as cpu-bk; measured: 290 MB for Tsukuba's 16 labels, 530 MB for Venus's 20).
  const double per_key = 64.0 * topology.num_nodes() + 48.0 * topology.num_edges();
  reuse_ = tuning.reuse_flow && probe->SupportsResolve() && num_keys > 1 &&
           per_key * static_cast<double>(num_keys) <= tuning.reuse_memory_budget;
  graphs_.resize(reuse_ ? static_cast<std::size_t>(num_keys) : 1);
  // Compact graphs are general graphs: only for engines that take them.
  sparse_ok_ = tuning.sparse_moves && !reuse_ && probe->CannotSolve(Topology()).empty();
  if (sparse_ok_) {
    sparse_engine_ = std::move(probe);
    local_.assign(static_cast<std::size_t>(topology.num_nodes()), -1);
  }
  const std::size_t n = static_cast<std::size_t>(topology.num_nodes());
  const std::size_t slots = static_cast<std::size_t>(topology.num_edge_slots());
  slope_.assign(n, 0);
  edge_cap_.assign(slots, 0);
  edge_rev_cap_.assign(slots, 0);
  node_touched_.assign(n, 0);
  slot_touched_.assign(slots, 0);
}

BinaryMoveGraph::~BinaryMoveGraph() = default;

bool BinaryMoveGraph::HasGraph(std::int64_t key) const {
  return reuse_ && graphs_[static_cast<std::size_t>(key)] && graphs_[static_cast<std::size_t>(key)]->solved;
}

BinaryMoveGraph::KeyGraph& BinaryMoveGraph::Graph(std::int64_t key) {
  std::unique_ptr<KeyGraph>& slot = graphs_[reuse_ ? static_cast<std::size_t>(key) : 0];
  if (slot) return *slot;
  slot = std::make_unique<KeyGraph>();
  // The graph has the model's edge slots, so a move's term for slot s goes to graph slot s.
  const Topology& topology = *topology_;
  if (topology.is_grid()) {
    slot->graph = StGraph(topology);
  } else {
    slot->graph.reserve(topology.num_nodes(), topology.num_edges());
    slot->graph.add_node(topology.num_nodes());
    StGraph& graph = slot->graph;
    topology.ForEachEdge([&graph](EdgeId, NodeId p, NodeId q) { graph.add_edge(p, q, 0, 0); });
  }
  slot->engine = make_engine_();
  return *slot;
}

void BinaryMoveGraph::Begin(std::int64_t key, bool update) {
  if (update && !HasGraph(key))
    throw Error("internal error: a move update for key " + std::to_string(key) + " without an earlier graph");
  key_ = key;
  update_ = update;
  sparse_ = false;
  move_truncations_ = 0;
}

void BinaryMoveGraph::BeginSparse(std::int64_t key) {
  Begin(key, false);
  sparse_ = sparse_ok_;
}

void BinaryMoveGraph::PairwiseTerm(EdgeId slot, NodeId p, NodeId q, Energy e00, Energy e01, Energy e10, Energy e11,
                                   int sign) {
  if (e01 + e10 < e00 + e11) {
    if (!truncate_)
      throw Error("internal error: the move term of edge " + std::to_string(p) + "-" + std::to_string(q) +
                  " (slot " + std::to_string(slot) + ") is not submodular although the smoothness term passed the check");
    const Energy deficit = e00 + e11 - e01 - e10;
    if (rule_ == TruncationRule::kRaiseDisagreement) {
      e01 += deficit / 2;
      e10 += deficit - deficit / 2;
    } else {
      e11 -= deficit;
    }
    move_truncations_ += sign;
  }
  // E = e00 + (e11 - e00) x_p + R with R(0,1) = b, R(1,0) = c, R(0,0) = R(1,1) = 0, b + c >= 0.
  // R goes on the edge in both directions where b, c >= 0 (a symmetric term adds no terminal
  // capacity, so the engine has no extra flow to route); a negative part moves to the terminals.
  Energy dp = e11 - e00, dq = 0, cap = 0, rev_cap = 0;
  const Energy b = e01 - e00, c = e10 - e11;
  if (b < 0) {  // R = b [x_p = 0] - b [x_q = 0] + (b + c) [x_p = 1, x_q = 0]
    dp -= b;
    dq += b;
    rev_cap = b + c;
  } else if (c < 0) {  // R = c [x_p = 1] - c [x_q = 1] + (b + c) [x_p = 0, x_q = 1]
    dp += c;
    dq -= c;
    cap = b + c;
  } else {
    cap = b;
    rev_cap = c;
  }
  slope_[p] += sign * dp;
  slope_[q] += sign * dq;
  const std::size_t s = static_cast<std::size_t>(slot);
  if (!update_) {
    if (sparse_) {
      TouchNode(p);
      TouchNode(q);
      TouchSlot(slot, p, q);
    }
    AccumulateEdge(slot, p, q, cap, rev_cap);
    return;
  }
  TouchNode(p);
  TouchNode(q);
  TouchSlot(slot, p, q);
  if (sign < 0) cap = rev_cap = 0;  // a removed term leaves its edge empty unless one is added again
  if (cap > kMaxCost || rev_cap > kMaxCost)
    throw Error("the move term of edge " + std::to_string(p) + "-" + std::to_string(q) + " needs capacity " +
                std::to_string(std::max(cap, rev_cap)) + ", more than 32 bits");
  edge_cap_[s] = static_cast<Cost>(cap);
  edge_rev_cap_[s] = static_cast<Cost>(rev_cap);
}

void BinaryMoveGraph::AccumulateEdge(EdgeId slot, NodeId p, NodeId q, Energy cap, Energy rev_cap) {
  const std::size_t s = static_cast<std::size_t>(slot);
  cap += edge_cap_[s];
  rev_cap += edge_rev_cap_[s];
  if (cap > kMaxCost || rev_cap > kMaxCost)
    throw Error("the move term of edge " + std::to_string(p) + "-" + std::to_string(q) + " needs capacity " +
                std::to_string(std::max(cap, rev_cap)) + ", more than 32 bits");
  edge_cap_[s] = static_cast<Cost>(cap);
  edge_rev_cap_[s] = static_cast<Cost>(rev_cap);
}

void BinaryMoveGraph::WriteAll(KeyGraph& g, bool fresh, std::vector<EdgeId>* placeholders) {
  // A node paying `s` > 0 when it moves gets capacity source->node (cut when it is on the sink side);
  // one paying when it stays gets node->sink. Then E(x) - E(nobody moves) = cut(x) - sum of sink caps.
  StGraph& graph = g.graph;
  if (!reuse_) graph.ResetCapacities();  // the shared graph starts from zero
  const bool write_all = !reuse_ || fresh;
  const NodeId n = graph.num_nodes();
  g.sink_total = 0;
  for (NodeId p = 0; p < n; ++p) {
    const Energy s = slope_[p];
    const Energy source_cap = s > 0 ? s : 0, sink_cap = s < 0 ? -s : 0;
    g.sink_total += sink_cap;
    if (write_all ? s != 0 : graph.source_cap(p) != source_cap || graph.sink_cap(p) != sink_cap)
      graph.set_tweights(p, source_cap, sink_cap);
  }
  const auto& caps = graph.edge_caps();
  const auto& rev_caps = graph.edge_rev_caps();
  topology_->ForEachEdge([&](EdgeId e, NodeId, NodeId) {
    const std::size_t s = static_cast<std::size_t>(e);
    const Cost cap = edge_cap_[s], rev_cap = edge_rev_cap_[s];
    if (!write_all) {
      // Only what differs: with reuse these are the changes the engine re-solves from.
      if (caps[s] != cap || rev_caps[s] != rev_cap) graph.set_edge_slot(e, cap, rev_cap);
    } else if (cap > 0 || rev_cap > 0) {
      graph.add_to_edge_slot(e, cap, rev_cap);
    } else if (reuse_) {
      // Engines may build arcs only for edges with capacity (cpu-bk does), and an edge without
      // arcs that gains capacity later forces a rebuild. Solve with a placeholder capacity first,
      // then take it away by one cheap re-solve.
      graph.add_to_edge_slot(e, 1, 1);
      placeholders->push_back(e);
    }
  });
}

void BinaryMoveGraph::WriteUpdate(KeyGraph& g) {
  StGraph& graph = g.graph;
  for (NodeId p : touched_nodes_) {
    const Energy s = graph.source_cap(p) - graph.sink_cap(p) + slope_[p];
    const Energy source_cap = s > 0 ? s : 0, sink_cap = s < 0 ? -s : 0;
    if (graph.source_cap(p) != source_cap || graph.sink_cap(p) != sink_cap) {
      g.sink_total += sink_cap - graph.sink_cap(p);
      graph.set_tweights(p, source_cap, sink_cap);
    }
  }
  for (EdgeId e : touched_slots_) {
    const std::size_t s = static_cast<std::size_t>(e);
    if (graph.edge_cap(e) != edge_cap_[s] || graph.edge_rev_cap(e) != edge_rev_cap_[s])
      graph.set_edge_slot(e, edge_cap_[s], edge_rev_cap_[s]);
  }
}

void BinaryMoveGraph::ClearTerms() {
  if (update_ || sparse_) {
    for (NodeId p : touched_nodes_) {
      slope_[p] = 0;
      node_touched_[p] = 0;
    }
    for (EdgeId e : touched_slots_) {
      const std::size_t s = static_cast<std::size_t>(e);
      edge_cap_[s] = edge_rev_cap_[s] = 0;
      slot_touched_[s] = 0;
    }
    touched_nodes_.clear();
    touched_slots_.clear();
    touched_ends_.clear();
  } else {
    std::fill(slope_.begin(), slope_.end(), 0);
    std::fill(edge_cap_.begin(), edge_cap_.end(), 0);
    std::fill(edge_rev_cap_.begin(), edge_rev_cap_.end(), 0);
  }
}

Energy BinaryMoveGraph::Solve(const Labeling* reference) {
  if (sparse_) return SolveSparse(reference);
  const NodeId n = topology_->num_nodes();
  const bool kept = reuse_ && graphs_[static_cast<std::size_t>(key_)];
  if (!update_ && !kept) {  // (a kept graph must follow even an empty move: later updates build on it)
    bool any_term = false;
    for (NodeId p = 0; p < n && !any_term; ++p) any_term = slope_[p] != 0;
    for (std::size_t e = 0; e < edge_cap_.size() && !any_term; ++e) any_term = edge_cap_[e] != 0 || edge_rev_cap_[e] != 0;
    if (!any_term) {  // every cut costs the same: keep the reference, no engine needed
      if (reference) result_.labels = *reference;
      else result_.labels.assign(static_cast<std::size_t>(n), 0);
      last_move_truncations_ = 0;
      return 0;
    }
  }
  KeyGraph& g = Graph(key_);
  StGraph& graph = g.graph;
  const bool fresh = !g.solved;
  std::vector<EdgeId> placeholders;
  if (update_) {
    WriteUpdate(g);
    g.truncated += move_truncations_;
  } else {
    WriteAll(g, fresh, &placeholders);
    g.truncated = move_truncations_;
  }
  ClearTerms();

  result_.labels.clear();
  result_.log.clear();
  result_.flow = 0;
  if (fresh) g.engine->Solve(graph, &result_);
  else g.engine->Resolve(graph, &result_);
  if (reuse_) {
    graph.MarkSolved();
    if (!placeholders.empty()) {
      for (EdgeId e : placeholders) graph.set_edge_slot(e, 0, 0);
      result_.log.clear();
      g.engine->Resolve(graph, &result_);
      graph.MarkSolved();
    }
    g.solved = true;
  }
  if (static_cast<NodeId>(result_.labels.size()) != n)
    throw Error("max-flow engine " + engine_name_ + " returned a cut of " + std::to_string(result_.labels.size()) +
                " nodes for a move graph of " + std::to_string(n));
  last_move_truncations_ = g.truncated;
  total_truncations_ += g.truncated;
  const Energy flow = result_.flow + graph.constant();
  return flow - (reference ? graph.CutCapacity(*reference) : graph.constant() + g.sink_total);
}

Energy BinaryMoveGraph::SolveSparse(const Labeling* reference) {
  const NodeId n = topology_->num_nodes();
  const NodeId k = static_cast<NodeId>(touched_nodes_.size());
  last_move_truncations_ = move_truncations_;
  total_truncations_ += move_truncations_;
  // The cut is read at the nodes with terms only: reset what the last sparse move wrote.
  if (static_cast<NodeId>(result_.labels.size()) != n) result_.labels.assign(static_cast<std::size_t>(n), 0);
  for (NodeId p : sparse_nodes_) result_.labels[p] = 0;
  sparse_nodes_.clear();
  if (k == 0) return 0;
  // A compact graph of the nodes with terms, numbered in the order they were touched.
  StGraph graph;
  graph.reserve(k, static_cast<EdgeId>(touched_slots_.size()));
  graph.add_node(k);
  Energy sink_total = 0;
  Labeling local_reference(reference ? static_cast<std::size_t>(k) : 0);
  for (NodeId i = 0; i < k; ++i) {
    const NodeId p = touched_nodes_[static_cast<std::size_t>(i)];
    local_[p] = i;
    const Energy s = slope_[p];
    if (s > 0) graph.add_tweights(i, s, 0);
    else if (s < 0) graph.add_tweights(i, 0, -s);
    sink_total += s < 0 ? -s : 0;
    if (reference) local_reference[static_cast<std::size_t>(i)] = (*reference)[p];
  }
  for (std::size_t j = 0; j < touched_slots_.size(); ++j) {
    const std::size_t s = static_cast<std::size_t>(touched_slots_[j]);
    if (edge_cap_[s] || edge_rev_cap_[s])
      graph.add_edge(local_[touched_ends_[j].first], local_[touched_ends_[j].second], edge_cap_[s], edge_rev_cap_[s]);
  }
  for (NodeId p : touched_nodes_) local_[p] = -1;
  sparse_nodes_.assign(touched_nodes_.begin(), touched_nodes_.end());
  ClearTerms();
  sparse_result_.labels.clear();
  sparse_result_.log.clear();
  sparse_result_.flow = 0;
  sparse_engine_->Solve(graph, &sparse_result_);
  if (static_cast<NodeId>(sparse_result_.labels.size()) != k)
    throw Error("max-flow engine " + engine_name_ + " returned a cut of " + std::to_string(sparse_result_.labels.size()) +
                " nodes for a move graph of " + std::to_string(k));
  for (NodeId i = 0; i < k; ++i)
    result_.labels[sparse_nodes_[static_cast<std::size_t>(i)]] = sparse_result_.labels[static_cast<std::size_t>(i)];
  const Energy flow = sparse_result_.flow + graph.constant();
  return flow - (reference ? graph.CutCapacity(local_reference) : graph.constant() + sink_total);
}

// ---- Start and label order -------------------------------------------------------------------------

Labeling InitialLabels(const Model& model, const SolveOptions& options) {
  const Labeling& given = options.initial_labels;
  if (given.empty()) return Labeling(static_cast<std::size_t>(model.num_nodes()), 0);
  if (static_cast<NodeId>(given.size()) != model.num_nodes())
    throw Error("initial labelling has " + std::to_string(given.size()) + " labels for " +
                std::to_string(model.num_nodes()) + " nodes");
  for (std::size_t p = 0; p < given.size(); ++p)
    if (given[p] < 0 || given[p] >= model.num_labels)
      throw Error("initial label " + std::to_string(given[p]) + " at node " + std::to_string(p) +
                  " is outside 0.." + std::to_string(model.num_labels - 1));
  return given;
}

namespace {
std::uint64_t SplitMix64(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

std::vector<std::int64_t> FrequentLabelsFirst(const Model& model) {
  const int L = model.num_labels;
  const NodeId n = model.num_nodes();
  using Counts = std::vector<std::int64_t>;
  // Each node's cheapest label, counted in parallel: a pass over the unary costs (Tsukuba's 1.8M in
  // well under a millisecond on the GPU machine's cores), once per solve.
  const Counts counts = tbb::parallel_reduce(
      tbb::blocked_range<NodeId>(0, n, 4096), Counts(static_cast<std::size_t>(L), 0),
      [&](const tbb::blocked_range<NodeId>& range, Counts local) {
        for (NodeId p = range.begin(); p != range.end(); ++p) {
          const Cost* costs = model.unary.data() + static_cast<std::size_t>(p) * L;
          ++local[static_cast<std::size_t>(std::min_element(costs, costs + L) - costs)];
        }
        return local;
      },
      [](Counts a, const Counts& b) {
        for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
        return a;
      });
  std::vector<std::int64_t> labels(static_cast<std::size_t>(L));
  std::iota(labels.begin(), labels.end(), std::int64_t{0});
  std::stable_sort(labels.begin(), labels.end(), [&](std::int64_t a, std::int64_t b) {
    return counts[static_cast<std::size_t>(a)] > counts[static_cast<std::size_t>(b)];
  });
  return labels;
}

void MoveOrder::CheckUsable(LabelOrder order, bool pairs) {
  if (order == LabelOrder::kFrequent && pairs)
    throw Error("label order frequent orders labels, and swap moves are label pairs: use sequential or random");
}

MoveOrder::MoveOrder(LabelOrder order, std::uint64_t seed, const Model& model, std::int64_t count, bool pairs)
    : order_(order), rng_state_(seed), count_(count) {
  CheckUsable(order, pairs);
  if (order_ != LabelOrder::kFrequent) return;
  if (count != model.num_labels)
    throw Error("internal error: an expansion cycle of " + std::to_string(count) + " moves for " +
                std::to_string(model.num_labels) + " labels");
  frequent_ = FrequentLabelsFirst(model);
}

void MoveOrder::Next(std::vector<std::int64_t>* out) {
  if (order_ == LabelOrder::kFrequent) {
    *out = frequent_;
    return;
  }
  out->resize(static_cast<std::size_t>(count_));
  std::iota(out->begin(), out->end(), std::int64_t{0});
  if (order_ != LabelOrder::kRandom) return;
  for (std::int64_t i = count_ - 1; i > 0; --i) {
    const std::int64_t j = static_cast<std::int64_t>(SplitMix64(&rng_state_) % static_cast<std::uint64_t>(i + 1));
    std::swap((*out)[i], (*out)[j]);
  }
}

}  // namespace mrf
