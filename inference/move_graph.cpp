#include "inference/move_graph.h"

#include <algorithm>
#include <numeric>

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
    energy_ += delta;
  } else {
    for (NodeId p : changed_) proposal_[p] = labels_[p];
  }
  changed_.clear();
  return delta < 0 ? count : 0;
}

// ---- Cycles of moves -------------------------------------------------------------------------------

std::string RunMoveCycles(const SolveOptions& options, std::int64_t moves_per_cycle, const std::string& move_name,
                          const LabelingState& state, const BinaryMoveGraph& graph,
                          const std::function<MoveOutcome(std::int64_t move)>& run_move, Result* out) {
  IterationControl control(options, out);
  std::uint64_t rng_state = options.seed;
  std::vector<std::int64_t> order;
  std::int64_t changes = 0;  // moves that changed the labelling so far
  // settled_at[m] = `changes` right after move m last ran exactly; equal to `changes` now means
  // nothing moved since, so move m would find nothing again.
  std::vector<std::int64_t> settled_at(static_cast<std::size_t>(moves_per_cycle), -1);
  std::string stop;
  for (int cycle = 1;; ++cycle) {
    CycleOrder(options.label_order, &rng_state, moves_per_cycle, &order);
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

std::string FindNonSubmodularMoveTerm(const Model& model, bool expansion) {
  const Label L = model.num_labels;
  const PairwiseKind kind = model.pairwise.kind;
  if (L < 2 || !HasSmoothness(model)) return {};
  if (kind == PairwiseKind::kPotts || kind == PairwiseKind::kTruncatedLinear) return {};  // metrics
  const LabelCosts cost(model);
  if (kind == PairwiseKind::kTruncatedQuadratic) {
    // A semimetric: swap is always fine. min(d^2, T) obeys the triangle inequality iff T <= 2, and
    // the first triple to break it is (0, 1, 2).
    if (!expansion || L < 3 || model.pairwise.truncation <= 2) return {};
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

BinaryMoveGraph::BinaryMoveGraph(const Model& model, const std::string& backend, Device device, bool truncate,
                                 TruncationRule rule)
    : truncate_(truncate), rule_(rule) {
  const Topology& topology = model.topology;
  auto accepts = [&topology](const SolverEntry& e) {
    return e.make_engine ? e.make_engine()->CannotSolve(topology) : std::string("not a max-flow engine");
  };
  try {
    const SolverEntry& entry = Registry::Global().Choose(backend, Algorithm::kMaxFlow,
                                                         backend == "auto" ? device : Device::kAuto, &engine_note_,
                                                         accepts);
    engine_ = entry.make_engine();
    engine_name_ = entry.name;
  } catch (const Error& e) {
    throw Error(std::string("max-flow engine for the moves: ") + e.what());
  }
  // The graph has the model's edge slots, so a move's term for slot s goes to graph slot s.
  if (topology.is_grid()) {
    graph_ = StGraph(topology);
  } else {
    graph_.reserve(topology.num_nodes(), topology.num_edges());
    graph_.add_node(topology.num_nodes());
    topology.ForEachEdge([this](EdgeId, NodeId p, NodeId q) { graph_.add_edge(p, q, 0, 0); });
  }
  slope_.assign(static_cast<std::size_t>(topology.num_nodes()), 0);
}

BinaryMoveGraph::~BinaryMoveGraph() = default;

void BinaryMoveGraph::Truncate(EdgeId slot, NodeId p, NodeId q, Energy* e01, Energy* e10, Energy* e11,
                               Energy* excess) {
  if (!truncate_)
    throw Error("internal error: the move term of edge " + std::to_string(p) + "-" + std::to_string(q) + " (slot " +
                std::to_string(slot) + ") is not submodular although the smoothness term passed the check");
  ++building_truncations_;
  ++total_truncations_;
  const Energy deficit = -*excess;
  if (rule_ == TruncationRule::kRaiseDisagreement) {
    *e01 += deficit / 2;
    *e10 += deficit - deficit / 2;
  } else {
    *e11 -= deficit;
  }
  *excess = 0;
}

void BinaryMoveGraph::AddEdge(EdgeId slot, NodeId p, NodeId q, Energy capacity) {
  if (capacity > kMaxCost)
    throw Error("the move term of edge " + std::to_string(p) + "-" + std::to_string(q) + " needs capacity " +
                std::to_string(capacity) + ", more than 32 bits");
  graph_.add_to_edge_slot(slot, static_cast<Cost>(capacity), 0);
}

Energy BinaryMoveGraph::Solve(const Labeling* reference) {
  // A node paying `s` > 0 when it moves gets capacity source->node (cut when it is on the sink side);
  // one paying when it stays gets node->sink. Then E(x) - E(nobody moves) = cut(x) - sum of sink caps.
  const NodeId n = graph_.num_nodes();
  Energy sink_total = 0;
  for (NodeId p = 0; p < n; ++p) {
    const Energy s = slope_[p];
    if (s > 0) {
      graph_.set_tweights(p, s, 0);
    } else if (s < 0) {
      graph_.set_tweights(p, 0, -s);
      sink_total -= s;
    }
    slope_[p] = 0;
  }
  last_move_truncations_ = building_truncations_;
  building_truncations_ = 0;
  result_.labels.clear();
  result_.log.clear();
  result_.flow = 0;
  engine_->Solve(graph_, &result_);
  if (static_cast<NodeId>(result_.labels.size()) != n)
    throw Error("max-flow engine " + engine_name_ + " returned a cut of " + std::to_string(result_.labels.size()) +
                " nodes for a move graph of " + std::to_string(n));
  const Energy change = result_.flow + graph_.constant() -
                        (reference ? graph_.CutCapacity(*reference) : graph_.constant() + sink_total);
  graph_.ResetCapacities();
  return change;
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

void CycleOrder(LabelOrder order, std::uint64_t* rng_state, std::int64_t count, std::vector<std::int64_t>* out) {
  out->resize(static_cast<std::size_t>(count));
  std::iota(out->begin(), out->end(), std::int64_t{0});
  if (order != LabelOrder::kRandom) return;
  for (std::int64_t i = count - 1; i > 0; --i) {
    const std::int64_t j = static_cast<std::int64_t>(SplitMix64(rng_state) % static_cast<std::uint64_t>(i + 1));
    std::swap((*out)[i], (*out)[j]);
  }
}

}  // namespace mrf
