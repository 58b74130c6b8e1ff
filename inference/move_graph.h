#pragma once
/// @file move_graph.h
/// @brief What alpha-expansion, alpha-beta swap and ICM share: label-distance lookups, node
/// adjacency, exact energy changes, and the binary move graph (the Kolmogorov-Zabih construction
/// cut by any registered max-flow engine).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/st_graph.h"

namespace mrf {

class BinaryMoveGraph;

/// lambda * distance(a, b) of a model's smoothness term, from a table when the label count is small
/// enough (the table holds L x L 64-bit values; larger models compute each value).
class LabelCosts {
 public:
  /// Reads the pairwise term of `model` (which must be valid).
  explicit LabelCosts(const Model& model);
  /// lambda * distance(a, b), before the edge weight.
  Energy operator()(Label a, Label b) const {
    return table_.empty() ? lambda_ * pairwise_->distance(a, b, num_labels_)
                          : table_[static_cast<std::size_t>(a) * num_labels_ + b];
  }
  /// The full pairwise cost of the edge in `slot` between its first endpoint's label `a` and its
  /// second endpoint's label `b`; equals Model::pairwise_cost().
  Energy edge(EdgeId slot, Label a, Label b) const {
    return weights_ ? Energy{(*weights_)[static_cast<std::size_t>(slot)]} * (*this)(a, b) : (*this)(a, b);
  }
  /// The edge weight of `slot` (1 without weights).
  Energy weight(EdgeId slot) const { return weights_ ? (*weights_)[static_cast<std::size_t>(slot)] : 1; }

 private:
  const Pairwise* pairwise_;
  const std::vector<Cost>* weights_;
  Label num_labels_;
  Energy lambda_;
  std::vector<Energy> table_;
};

/// For every node, the edges that touch it (compressed rows), built once per solve.
class Adjacency {
 public:
  /// One incident edge.
  struct Entry {
    EdgeId slot;        ///< The edge slot.
    NodeId other;       ///< The node at the other end.
    bool node_is_from;  ///< True when the node is the slot's first endpoint (pairwise_cost(slot, a, b) has a = its label).
  };
  /// Lists the edges of every node of `topology`.
  explicit Adjacency(const Topology& topology);
  /// First incident edge of `node`.
  const Entry* begin(NodeId node) const { return entries_.data() + offsets_[node]; }
  /// One past the last incident edge of `node`.
  const Entry* end(NodeId node) const { return entries_.data() + offsets_[node + 1]; }

 private:
  std::vector<std::int64_t> offsets_;
  std::vector<Entry> entries_;
};

/// Exact change of the energy when the nodes in `changed` go from `current` to `proposal` (the two
/// labellings differ exactly there). Equals EvaluateEnergy(proposal) - EvaluateEnergy(current), at the
/// cost of the changed nodes' edges only.
Energy EnergyChange(const Model& model, const LabelCosts& costs, const Adjacency& adjacency,
                    const Labeling& current, const Labeling& proposal, const std::vector<NodeId>& changed);

/// A labelling with its energy, changed only by proposals that lower the energy. Moves propose new
/// labels node by node, then Commit() scores the proposal exactly (EnergyChange) and keeps it only
/// when the energy drops.
class LabelingState {
 public:
  /// Starts from `initial` (one valid label per node); the energy comes from EvaluateEnergy().
  LabelingState(const Model& model, Labeling initial);
  /// The current labelling.
  const Labeling& labels() const { return labels_; }
  /// Its energy, kept exactly equal to EvaluateEnergy(model, labels()).
  Energy energy() const { return energy_; }
  /// The smoothness lookups of the model.
  const LabelCosts& costs() const { return costs_; }
  /// The incident edges of every node.
  const Adjacency& adjacency() const { return adjacency_; }
  /// Every node changed by an accepted proposal, in order (a node appears once per change): moves
  /// that keep graphs between runs read what changed since they last ran.
  const std::vector<NodeId>& change_log() const { return change_log_; }
  /// Proposes `label` for `node` (at most once per node and proposal).
  void Propose(NodeId node, Label label) {
    if (label == labels_[node]) return;
    proposal_[node] = label;
    changed_.push_back(node);
  }
  /// Scores the proposal and applies it when it lowers the energy; otherwise drops it. When the move
  /// was `exact` (no truncated term), `predicted` (the change its cut promised) must equal the
  /// exact change, else the engine or the move is wrong and mrf::Error is thrown. Returns the number
  /// of nodes changed (0 when the proposal was dropped).
  std::int64_t Commit(Energy predicted, bool exact, const std::string& move_name);

 private:
  const Model& model_;
  LabelCosts costs_;
  Adjacency adjacency_;
  Labeling labels_, proposal_;
  std::vector<NodeId> changed_, change_log_;
  Energy energy_;
};

/// The labels in LabelOrder::kFrequent's order: by the number of nodes whose data cost is lowest at the
/// label (the lowest such label where several tie), most first; equal counts in label order.
std::vector<std::int64_t> FrequentLabelsFirst(const Model& model);

/// The moves one cycle visits, cycle after cycle, in the order `order` asks for: the model's labels
/// (expansion) or `count` label pairs (swap, `pairs` true). Sequential: 0..count-1. Random: a fresh
/// permutation per cycle drawn from `seed` (Fisher-Yates, identical on every platform). Frequent:
/// FrequentLabelsFirst() every cycle; it orders labels, so swap's pairs refuse it (mrf::Error).
class MoveOrder {
 public:
  MoveOrder(LabelOrder order, std::uint64_t seed, const Model& model, std::int64_t count, bool pairs);
  /// Throws mrf::Error when `order` cannot order moves of this kind (frequent, for swap's pairs): solvers
  /// call it before any costly setup (the BP start included).
  static void CheckUsable(LabelOrder order, bool pairs);
  /// Moves per cycle.
  std::int64_t count() const { return count_; }
  /// Fills `out` with the next cycle's moves.
  void Next(std::vector<std::int64_t>* out);

 private:
  LabelOrder order_;
  std::uint64_t rng_state_;
  std::int64_t count_;
  std::vector<std::int64_t> frequent_;  // kFrequent's fixed order
};

/// What one move did, as RunMoveCycles() needs to know it.
struct MoveOutcome {
  std::int64_t nodes_changed = 0;  ///< Nodes that took a new label (0: the labelling is unchanged).
  /// False when the move truncated terms and changed the labelling: running the same move again
  /// on the new labelling might still lower the energy.
  bool exact = true;
};

/// The cycle loop shared by expansion and swap. A cycle runs the moves `move_order` gives it; a move
/// is skipped when no labelling change happened since it last ran exactly (its optimal result would be
/// "no change" again). Stops when a cycle changes nothing (converged), at options.max_iterations
/// cycles, at the time limit (checked after every move), or when the callback returns false; logs one
/// record per cycle. `move_name` ("expansion move") and the engine of `graph` go into the messages.
/// Returns the message saying why it stopped.
std::string RunMoveCycles(const SolveOptions& options, MoveOrder move_order, const std::string& move_name,
                          const LabelingState& state, const BinaryMoveGraph& graph,
                          const std::function<MoveOutcome(std::int64_t move)>& run_move, Result* out);

/// Which labels alpha-expansion (`expansion` true) or alpha-beta swap (false) needs, checked once before
/// a run: returns "" when every move term is submodular, else a one-line description of a label
/// triple (expansion) or pair (swap) that breaks it, e.g. "V(0,2) = 200 > V(0,1) + V(1,2) = 100".
std::string FindNonSubmodularMoveTerm(const Model& model, bool expansion);
/// The one-line refusal of a model whose move terms break submodularity (`broken`, from
/// FindNonSubmodularMoveTerm()), shared by the CPU and GPU expansion (`expansion` true) and swap solvers.
std::string NonSubmodularRefusal(const Model& model, const std::string& broken, bool expansion);

/// How a move term with E(0,0) + E(1,1) > E(0,1) + E(1,0) is made submodular: truncation in the
/// sense of Rother et al. ("Digital tapestry", CVPR 2005), counted and reported by the solvers.
enum class TruncationRule {
  /// Raise E(0,1) and E(1,0) by the excess, split in two: the truncated move energy is >= the true
  /// one and equal to it at "nobody moves", so no truncated move can raise the true energy.
  kRaiseDisagreement,
  /// Lower E(1,1) by the excess: tighter where both nodes move, but a move can then raise the true
  /// energy; such moves are caught by the exact energy check and rejected.
  kLowerAgreement,
};

/// Internal switches of the move-making solvers, for tests and benchmarks that compare the paths;
/// the defaults are the fast ones.
struct MoveTuning {
  TruncationRule rule = TruncationRule::kRaiseDisagreement;  ///< How non-submodular terms are truncated.
  bool reuse_flow = true;   ///< Keep a graph and residual flow per move key when memory allows.
  /// Bytes the kept graphs may take, estimated at 64 a node and 48 an edge per key; above it, one
  /// graph serves every move.
  double reuse_memory_budget = 1.5 * (1 << 30);
  bool incremental = true;  ///< With reuse, give the graph only the terms that changed...
  double update_limit = 0.125;  ///< ...unless more than this fraction of the nodes changed since.
  /// Swap: cut compact graphs of just the free nodes when the engine takes general graphs.
  bool sparse_moves = true;
  /// When set, moves are cut by engines from this factory (named `engine_name`) instead of the
  /// registry's options.maxflow_backend: benchmarks compare engines that are not registered.
  std::function<std::unique_ptr<MaxFlowEngine>()> engine;
  std::string engine_name;  ///< Name of `engine` for messages.
};

/// One binary move over all nodes of a model: every node either keeps its label (x = 0, source side)
/// or takes the move's label (x = 1, sink side). A move adds its terms, then Solve() cuts the graph.
/// Graphs have the model's shape (the same edge slots); graphs, engines and buffers are reused.
///
/// Moves carry a key (expansion: the label). When the engine re-solves incrementally and the
/// memory allows, every key keeps its own graph and residual flow, so a later move with the same
/// key pays only for what changed since (dynamic graph cuts, Kohli and Torr; reused across
/// expansion cycles as in Alahari, Kohli and Torr): the caller may then give just the changed
/// terms (Begin() with `update`). Otherwise one graph and one engine serve every move, solving from
/// scratch.
class BinaryMoveGraph {
 public:
  /// Chooses the max-flow engine: `backend` names a registered engine or is "auto" (the
  /// highest-priority available engine on `device` that accepts the model's topology). Throws
  /// mrf::Error for an unknown, unavailable or unsuitable engine. `num_keys` is the number of
  /// distinct move keys; `tuning` gives the truncation rule, can force solving every move from
  /// scratch, or supplies the engine.
  BinaryMoveGraph(const Model& model, const std::string& backend, Device device, bool truncate,
                  std::int64_t num_keys = 1, const MoveTuning& tuning = MoveTuning());
  ~BinaryMoveGraph();
  BinaryMoveGraph(const BinaryMoveGraph&) = delete;
  BinaryMoveGraph& operator=(const BinaryMoveGraph&) = delete;

  /// True when each key keeps its graph and flow between moves.
  bool reuses_flow() const { return reuse_; }
  /// True when non-submodular terms are truncated (else they are an error).
  bool truncating() const { return truncate_; }
  /// Name of the engine that cuts the moves.
  const std::string& engine_name() const { return engine_name_; }
  /// Why `auto` passed over a preferred engine ("" when it did not).
  const std::string& engine_note() const { return engine_note_; }
  /// True when a graph of an earlier move with this key is kept (only with reuse).
  bool HasGraph(std::int64_t key) const;

  /// Starts the move with key `key`. Without `update` the terms added next are the whole move.
  /// With `update` (only when HasGraph(key)) they are changes to the key's last graph: first take
  /// back the terms that no longer hold (the same calls with RemovePairwise() for pairwise terms and
  /// negated costs for unary ones), then add the new ones.
  void Begin(std::int64_t key, bool update = false);
  /// Starts a move whose terms touch few of the nodes (swap): without reuse, and when the engine
  /// takes general graphs, Solve() then cuts a compact graph of just the nodes given terms, and
  /// only their entries of cut() are meaningful. Otherwise like Begin(key).
  void BeginSparse(std::int64_t key);
  /// Adds a unary term: cost `keep` when the node keeps its label, `move` when it moves.
  void AddUnary(NodeId node, Energy keep, Energy move) {
    slope_[node] += move - keep;
    if (update_ || sparse_) TouchNode(node);
  }
  /// Adds the pairwise term of model edge `slot` (from `p` to `q`, as the topology lists it) with
  /// E(0,0) = e00, E(0,1) = e01 (p keeps, q moves), E(1,0) = e10, E(1,1) = e11. A non-submodular
  /// term is truncated when truncation is on (and counted), and is an internal error otherwise.
  void AddPairwise(EdgeId slot, NodeId p, NodeId q, Energy e00, Energy e01, Energy e10, Energy e11) {
    const Energy b = e01 - e00, c = e10 - e11;
    if (update_ || sparse_ || b < 0 || c < 0 || b > kMaxCost || c > kMaxCost) {
      PairwiseTerm(slot, p, q, e00, e01, e10, e11, +1);
      return;
    }
    // The common case, inline: a submodular term whose disagreement costs fit the edge as they are.
    const std::size_t s = static_cast<std::size_t>(slot);
    slope_[p] += e11 - e00;
    if (edge_cap_[s] == 0 && edge_rev_cap_[s] == 0) {
      edge_cap_[s] = static_cast<Cost>(b);
      edge_rev_cap_[s] = static_cast<Cost>(c);
    } else {
      AccumulateEdge(slot, p, q, b, c);
    }
  }
  /// In an update: takes back a pairwise term that the key's last graph holds (same arguments as
  /// when it was added). Its edge is left without capacity unless a term is added to it again.
  void RemovePairwise(EdgeId slot, NodeId p, NodeId q, Energy e00, Energy e01, Energy e10, Energy e11) {
    PairwiseTerm(slot, p, q, e00, e01, e10, e11, -1);
  }
  /// Computes the minimum cut of the move, then clears its terms. cut()[p] = 1 where p moves.
  /// Returns the energy change from `reference` (the current labelling as a cut, one entry per node;
  /// null: nobody moves) to the cut, as the (possibly truncated) move energy measures it: the true
  /// change when no term was truncated.
  Energy Solve(const Labeling* reference = nullptr);
  /// The last cut: 1 where the node moves (nodes without terms may read either).
  const Labeling& cut() const { return result_.labels; }
  /// Truncated terms in the graph of the last Solve().
  std::int64_t last_move_truncations() const { return last_move_truncations_; }
  /// Truncated terms summed over all moves solved so far.
  std::int64_t truncations() const { return total_truncations_; }

 private:
  struct KeyGraph;  // a graph, its engine and its bookkeeping

  void PairwiseTerm(EdgeId slot, NodeId p, NodeId q, Energy e00, Energy e01, Energy e10, Energy e11, int sign);
  void AccumulateEdge(EdgeId slot, NodeId p, NodeId q, Energy cap, Energy rev_cap);
  void TouchNode(NodeId node) {
    if (!node_touched_[node]) {
      node_touched_[node] = 1;
      touched_nodes_.push_back(node);
    }
  }
  void TouchSlot(EdgeId slot, NodeId p, NodeId q) {
    if (!slot_touched_[static_cast<std::size_t>(slot)]) {
      slot_touched_[static_cast<std::size_t>(slot)] = 1;
      touched_slots_.push_back(slot);
      touched_ends_.emplace_back(p, q);
    }
  }
  Energy SolveSparse(const Labeling* reference);
  KeyGraph& Graph(std::int64_t key);
  void WriteAll(KeyGraph& g, bool fresh, std::vector<EdgeId>* placeholders);
  void WriteUpdate(KeyGraph& g);
  void ClearTerms();

  bool truncate_;
  TruncationRule rule_;
  bool reuse_ = false;
  std::string engine_name_, engine_note_;
  std::function<std::unique_ptr<MaxFlowEngine>()> make_engine_;
  const Topology* topology_;
  std::vector<std::unique_ptr<KeyGraph>> graphs_;  // one per key with reuse, else one
  // The move being built: per node cost(move) - cost(keep); per slot the capacities p->q, q->p.
  std::vector<Energy> slope_;
  std::vector<Cost> edge_cap_, edge_rev_cap_;
  // Updates: which nodes and slots the changes touch.
  std::vector<std::uint8_t> node_touched_, slot_touched_;
  std::vector<NodeId> touched_nodes_;
  std::vector<EdgeId> touched_slots_;
  std::vector<std::pair<NodeId, NodeId>> touched_ends_;  // endpoints of touched_slots_
  std::int64_t key_ = 0;
  bool update_ = false, sparse_ = false, sparse_ok_ = false;
  std::unique_ptr<MaxFlowEngine> sparse_engine_;  // cuts the compact graphs
  std::vector<NodeId> local_;                     // model node -> compact graph node
  std::vector<NodeId> sparse_nodes_;              // compact graph node -> model node
  Result sparse_result_;
  std::int64_t move_truncations_ = 0;  // added minus removed in the move being built
  Result result_;
  std::int64_t last_move_truncations_ = 0, total_truncations_ = 0;
};

/// The starting labelling: options.initial_labels, checked against the model, or all label 0.
/// Throws mrf::Error naming the first bad entry.
Labeling InitialLabels(const Model& model, const SolveOptions& options);

}  // namespace mrf
