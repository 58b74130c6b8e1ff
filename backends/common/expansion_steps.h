#pragma once
/// @file expansion_steps.h
/// @brief The per-node steps of the move-making solvers on grids (alpha-expansion and alpha-beta
/// swap), written once for the GPU (`cuda-expansion`, `cuda-swap`) and their CPU twin (the tests'
/// reference implementation).
///
/// A move is a binary problem over the nodes that take part in it (Move::Free): node p goes to the
/// source side (x_p = 0) or the sink side (x_p = 1) of a cut, and each side stands for a label
/// (Move::Source, Move::Sink). Expansion on `alpha`: every node not labelled alpha keeps its label
/// (source) or takes alpha (sink). Swap of (alpha, beta): the nodes labelled alpha or beta take
/// beta (source) or alpha (sink); the others keep their labels. A node that does not take part has
/// no capacity at all (an isolated node, on the source side of every cut the solver reports), and
/// its edges to nodes that do take part become terminal terms of those nodes.
///
/// The graph uses the push-relabel engines' state (see push_relabel_steps.h): the netted excess x
/// (source minus sink capacity) and the residual capacity r[d] per direction, forward directions
/// first. The steps here
/// - build a node's part of the move graph from the labels around it (BuildNode),
/// - turn a solved move graph built from older labels into a valid state of the graph of the
///   current labels, keeping as much flow as the new capacities allow (UpdateNode; Kohli and
///   Torr's reparametrisation, used across expansion cycles as in Vineet and Narayanan's
///   incremental alpha-expansion),
/// - compute the exact energy change of a cut, node by node (DeltaNode), and a labelling's energy
///   (NodeEnergy);
/// - keep the move loop's bookkeeping (BeginMove, EndMove: which moves may be skipped, which kept
///   residual graphs may be reused, what each move did).
///
/// The move terms are those of inference/alpha_expansion.cpp and inference/alpha_beta_swap.cpp
/// (Kolmogorov-Zabih construction; a non-submodular term is truncated by raising E(0,1) and E(1,0),
/// the first of the two labels in the CPU solvers' orientation getting the smaller half, so a
/// truncated move never raises the true energy), so the GPU and the CPU solvers price every move
/// alike. Swap puts alpha on the sink side where cpu-swap puts it on the source side: the GPU's
/// sink-minimal cut is then cpu-swap's source-minimal one (cpu-bk's), the same labels.
///
/// Per-node inputs are gathered by the caller: the labels of the node's neighbours in direction
/// order (`nl[d]`) and the weights of the edges (`w[d]`, 0 outside the grid). For a forward
/// direction d < F the node is the edge's first endpoint (the edge slot is d * N + node); for a
/// backward direction it is the second.

#include <cstdint>

#include "backends/common/push_relabel_steps.h"

namespace mrf::xp {

/// Which move a solver makes.
enum MoveKind : int { kExpansionMove = 0, kSwapMove = 1 };

/// One binary move: who takes part and which label each side of the cut stands for.
struct Move {
  int kind = kExpansionMove;
  int alpha = 0;  ///< Expansion: the label. Swap: the pair's first label (the sink side).
  int beta = 0;   ///< Swap: the pair's second label (the source side). Unused by expansion.

  /// Expansion on `a`.
  static MRF_HD Move Expansion(int a) { return Move{kExpansionMove, a, 0}; }
  /// Swap of `a` and `b`.
  static MRF_HD Move Swap(int a, int b) { return Move{kSwapMove, a, b}; }
  /// Whether a node labelled `l` takes part.
  MRF_HD bool Free(int l) const { return kind == kSwapMove ? (l == alpha || l == beta) : l != alpha; }
  /// The label of a node labelled `l` on the source side (x = 0).
  MRF_HD int Source(int l) const { return kind == kSwapMove && Free(l) ? beta : l; }
  /// The label of a node labelled `l` on the sink side (x = 1).
  MRF_HD int Sink(int l) const { return Free(l) ? alpha : l; }
  /// The label of a node labelled `l` after a cut that puts it on `sink_side`.
  MRF_HD int NewLabel(int l, bool sink_side) const { return sink_side ? Sink(l) : Source(l); }
};

/// The smoothness lookups of a move: V(a, b) = lambda * distance(a, b) as an L x L table.
struct MoveCosts {
  const std::int32_t* table = nullptr;  ///< table[a * num_labels + b].
  int num_labels = 0;                   ///< L.
  /// lambda * distance(a, b).
  MRF_HD std::int64_t V(int a, int b) const { return table[static_cast<std::int64_t>(a) * num_labels + b]; }
};

/// One edge's part of a move graph: terminal terms of its two endpoints and its capacities.
struct EdgeTerm {
  std::int64_t d_from = 0;  ///< Added to the first endpoint's slope (cost of the sink side minus the source side).
  std::int64_t d_to = 0;    ///< Added to the second endpoint's slope.
  std::int64_t cap = 0;     ///< Capacity first -> second (cut when the first is on the source side, the second on the sink side).
  std::int64_t rev = 0;     ///< Capacity second -> first.
  int truncated = 0;        ///< 1 when the term was not submodular and was truncated.
};

/// The move term of the edge (from, to) with labels `lf`, `lt` and weight `w`.
MRF_HD EdgeTerm EdgeMoveTerm(const MoveCosts& c, const Move& m, int lf, int lt, std::int64_t w) {
  EdgeTerm t;
  if (w == 0) return t;
  const bool free_from = m.Free(lf), free_to = m.Free(lt);
  if (!free_from && !free_to) return t;
  if (!free_from) {  // the first endpoint keeps its label either way: a unary term of the second
    t.d_to = w * (c.V(lf, m.Sink(lt)) - c.V(lf, m.Source(lt)));
    return t;
  }
  if (!free_to) {
    t.d_from = w * (c.V(m.Sink(lf), lt) - c.V(m.Source(lf), lt));
    return t;
  }
  const int sf = m.Source(lf), st = m.Source(lt), a = m.alpha;
  const std::int64_t e00 = w * c.V(sf, st), e11 = w * c.V(a, a);
  std::int64_t e01 = w * c.V(sf, a), e10 = w * c.V(a, st);
  if (e01 + e10 < e00 + e11) {  // truncation (Rother et al.): raise the disagreement costs
    const std::int64_t deficit = e00 + e11 - e01 - e10;
    // The smaller half goes where the CPU solvers put it: E(keep, move) for expansion, the term of
    // (alpha, beta) for swap (cpu-swap's E(0,1); here E(1,0), its sides being the other way round).
    std::int64_t& first = m.kind == kSwapMove ? e10 : e01;
    std::int64_t& second = m.kind == kSwapMove ? e01 : e10;
    first += deficit / 2;
    second += deficit - deficit / 2;
    t.truncated = 1;
  }
  // E = e00 + (e11 - e00) x_from + b [x_from = 0, x_to = 1] + c [x_from = 1, x_to = 0]; a negative
  // b or c is moved to the terminals so both capacities are non-negative.
  t.d_from = e11 - e00;
  const std::int64_t b = e01 - e00, cc = e10 - e11;
  if (b < 0) {
    t.d_from -= b;
    t.d_to += b;
    t.rev = b + cc;
  } else if (cc < 0) {
    t.d_from += cc;
    t.d_to -= cc;
    t.cap = b + cc;
  } else {
    t.cap = b;
    t.rev = cc;
  }
  return t;
}

/// The unary part of a node's slope: U(sink label) - U(source label), 0 for nodes that do not take
/// part. `u_source`, `u_sink`: the node's unary costs of m.Source(label) and m.Sink(label).
MRF_HD std::int64_t UnarySlope(const Move& m, int label, std::int64_t u_source, std::int64_t u_sink) {
  return m.Free(label) ? u_sink - u_source : 0;
}

/// Builds node p's part of the move graph: the netted excess (its slope) and the residual
/// capacities of its edges (forward: the edge's capacity; backward: its reverse capacity).
/// `u_source`, `u_sink`: p's unary costs of m.Source(lp) and m.Sink(lp) (expansion: of lp and alpha).
/// Returns the number of truncated terms on the node's forward edges (each edge counted once).
template <int D>
MRF_HD int BuildNode(const MoveCosts& c, const Move& m, int lp, std::int64_t u_source, std::int64_t u_sink,
                     const int (&nl)[D], const std::int32_t (&w)[D], std::int64_t* x, std::uint32_t (&r)[D]) {
  constexpr int F = D / 2;
  std::int64_t slope = UnarySlope(m, lp, u_source, u_sink);
  int truncated = 0;
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    if (d < F) {
      const EdgeTerm t = EdgeMoveTerm(c, m, lp, nl[d], w[d]);
      slope += t.d_from;
      r[d] = static_cast<std::uint32_t>(t.cap);
      truncated += t.truncated;
    } else {
      const EdgeTerm t = EdgeMoveTerm(c, m, nl[d], lp, w[d]);
      slope += t.d_to;
      r[d] = static_cast<std::uint32_t>(t.rev);
    }
  }
  *x = slope;
  return truncated;
}

/// Clamps the flow of an edge into [-rev, cap].
MRF_HD std::int64_t ClampFlow(std::int64_t flow, std::int64_t cap, std::int64_t rev) {
  return flow < -rev ? -rev : flow > cap ? cap : flow;
}

/// Turns node p's part of a solved (or partly solved) graph of move `m` built from the old labels
/// (`op`, `onl`) into a valid state of the graph of the same move for the new labels (`np`, `nnl`):
/// the slope changes go into the excess, each changed edge keeps its flow where the new capacities
/// allow it, and flow that no longer fits is handed back as excess (the netted excess stands for
/// the reparametrised terminal edges). Both endpoints of an edge compute the same kept flow from
/// their own residual, so each node writes only its own state. `slope_old`, `slope_new`: the node's
/// UnarySlope under its old and new labels (read only when they differ). Returns true when the
/// node's state changed; `truncated_change` receives the change in the number of truncated terms
/// on its forward edges.
template <int D>
MRF_HD bool UpdateNode(const MoveCosts& c, const Move& m, int op, int np, std::int64_t slope_old,
                       std::int64_t slope_new, const int (&onl)[D], const int (&nnl)[D], const std::int32_t (&w)[D],
                       std::int64_t* x, std::uint32_t (&r)[D], int* truncated_change) {
  constexpr int F = D / 2;
  bool changed = false;
  int truncated = 0;
  if (op != np) {
    *x += slope_new - slope_old;
    changed = true;
  }
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    if (op == np && onl[d] == nnl[d]) continue;
    changed = true;
    if (d < F) {
      const EdgeTerm o = EdgeMoveTerm(c, m, op, onl[d], w[d]);
      const EdgeTerm n = EdgeMoveTerm(c, m, np, nnl[d], w[d]);
      const std::int64_t flow = o.cap - static_cast<std::int64_t>(r[d]);  // along the edge, p -> q
      const std::int64_t kept = ClampFlow(flow, n.cap, n.rev);
      r[d] = static_cast<std::uint32_t>(n.cap - kept);
      *x += n.d_from - o.d_from + flow - kept;
      truncated += n.truncated - o.truncated;
    } else {
      const EdgeTerm o = EdgeMoveTerm(c, m, onl[d], op, w[d]);
      const EdgeTerm n = EdgeMoveTerm(c, m, nnl[d], np, w[d]);
      const std::int64_t flow = static_cast<std::int64_t>(r[d]) - o.rev;  // along the edge, q -> p
      const std::int64_t kept = ClampFlow(flow, n.cap, n.rev);
      r[d] = static_cast<std::uint32_t>(n.rev + kept);
      *x += n.d_to - o.d_to + kept - flow;
    }
  }
  *truncated_change = truncated;
  return changed;
}

/// Node p's share of the exact energy change when the labels go from `lp`, `nl` to `np`, `nnl`
/// (p's and its neighbours'): its unary change plus the change of its forward edges (so every edge
/// is counted once). `u_label`, `u_new`: p's unary costs of lp and np (read only when they differ).
template <int D>
MRF_HD std::int64_t DeltaNode(const MoveCosts& c, int lp, int np, std::int64_t u_label, std::int64_t u_new,
                              const int (&nl)[D], const int (&nnl)[D], const std::int32_t (&w)[D]) {
  constexpr int F = D / 2;
  std::int64_t delta = np != lp ? u_new - u_label : 0;
MRF_UNROLL
  for (int d = 0; d < F; ++d) {
    if (w[d] == 0 || (np == lp && nnl[d] == nl[d])) continue;
    delta += static_cast<std::int64_t>(w[d]) * (c.V(np, nnl[d]) - c.V(lp, nl[d]));
  }
  return delta;
}

/// Node p's share of a labelling's energy: its unary cost plus its forward edges' costs.
template <int D>
MRF_HD std::int64_t NodeEnergy(const MoveCosts& c, int lp, std::int64_t u_label, const int (&nl)[D],
                               const std::int32_t (&w)[D]) {
  constexpr int F = D / 2;
  std::int64_t e = u_label;
MRF_UNROLL
  for (int d = 0; d < F; ++d)
    if (w[d] != 0) e += static_cast<std::int64_t>(w[d]) * c.V(lp, nl[d]);
  return e;
}

// ---- The move loop's bookkeeping (one thread on the GPU) ----------------------------------------

/// The state of the move loop, in device memory (plain data; every field 64-bit for alignment).
struct MoveControl {
  // Across moves and cycles.
  std::int64_t changes = 0;        ///< Moves that changed the labelling so far.
  std::int64_t nodes_changed = 0;  ///< Node label changes so far.
  std::int64_t energy = 0;         ///< Energy of the current labelling.
  std::int64_t move_index = 0;     ///< Next move of the cycle (index into the cycle's order).
  std::int64_t num_moves = 0;      ///< Moves per cycle (expansion: labels; swap: label pairs).
  std::int64_t num_slots = 0;      ///< Moves (keys) 0..num_slots-1 keep their residual graph between runs.
  std::int64_t kind = kExpansionMove;  ///< The MoveKind of every move.
  std::int64_t update_limit = 0;   ///< A kept graph is reused if at most this many node changes happened since.
  std::int64_t max_rounds = 0;     ///< Bound on relabels and on BFS rounds per relabel (a bug must not hang the caller).
  std::int64_t error = 0;          ///< 1: a solve did not converge within max_rounds; 2: its grid barrier timed out; 3: an asynchronous relabel ended with work left.
  /// A solve may stop once a global relabel leaves at most this many active nodes (0: every solve
  /// runs to the maximum flow). Set by the host per cycle (CudaExpansionTuning::early_cycles).
  std::int64_t stop_active = 0;
  // The move in progress.
  std::int64_t key = 0;        ///< Its index into the per-move bookkeeping (expansion: its label; swap: its pair).
  std::int64_t alpha = 0;      ///< Its label (swap: the pair's first label).
  std::int64_t beta = 0;       ///< Swap: the pair's second label.
  std::int64_t run = 0;        ///< 1 when it runs (0: skipped, nothing changed since it last ran).
  std::int64_t resolve = 0;    ///< 1 when it starts from the label's kept residual graph.
  std::int64_t delta = 0;      ///< Exact energy change of its cut.
  std::int64_t moved = 0;      ///< Nodes its cut moves.
  std::int64_t to_alpha = 0;   ///< Of those, the nodes that take alpha (swap keeps its label counts with it).
  std::int64_t truncated = 0;  ///< Truncated terms in its graph.
  /// 1 when its solve stopped early (stop_active): its cut, from the exact distances of the last
  /// relabel, is then within the excess of the nodes left active of a minimum one.
  std::int64_t stopped = 0;
  std::int64_t relabels = 0;   ///< Global relabels of its solve.
  std::int64_t push_rounds = 0;  ///< Push rounds of its solve.
  std::int64_t bfs_rounds = 0; ///< BFS and kill rounds of its solve (an asynchronous rest counts as one).
  std::int64_t stamp_start = 0;  ///< Device clock (ns) when the move started...
  std::int64_t stamp_built = 0;  ///< ...when its graph was built...
  std::int64_t stamp_solved = 0; ///< ...when its cut was found.
  // A re-solve's local path (the GPU's; CudaExpansionTuning::local_changes): the nodes its update
  // changed are listed and repaired where they stand, and the certificate checked around them.
  std::int64_t listed = 0;          ///< Nodes the re-solve's update changed (listed up to the list's size).
  std::int64_t local_failures = 0;  ///< Repairs that gave up at their bounds.
  std::int64_t local_moved = 0;     ///< Listed nodes whose excess or height changed during the repairs.
  std::int64_t local_bad = 0;       ///< Nodes failing the certificate after the repairs.
  std::int64_t certified = 0;       ///< 1: the repaired state passed it, and no max-flow ran.
  std::uint32_t blocks_done[4] = {0, 0, 0, 0};  ///< Last-block counters of multi-block kernels.
};

/// What one move of a cycle did (one record per move index of the cycle).
struct MoveRecord {
  std::int64_t alpha = -1, beta = -1, run = 0, resolve = 0, accepted = 0, stopped = 0, certified = 0;
  std::int64_t moved = 0, delta = 0, truncated = 0, relabels = 0, push_rounds = 0, bfs_rounds = 0;
  std::int64_t stamp_start = 0, stamp_built = 0, stamp_solved = 0, stamp_done = 0;
  std::int64_t listed = 0, local_failures = 0, local_moved = 0, local_bad = 0;  ///< The local path's (MoveControl).
};

/// Per-move bookkeeping arrays, indexed by the move's key (expansion: its label; swap: its pair),
/// in device memory on the GPU.
struct LabelBook {
  std::int64_t* settled_at = nullptr;  ///< [moves] `changes` right after the move last ran exactly (-1: never).
  std::int64_t* truncated = nullptr;   ///< [moves] truncated terms in the move's kept graph.
  std::int64_t* snapshot = nullptr;    ///< [slots] `nodes_changed` when the kept graph was built.
  std::int32_t* has_state = nullptr;   ///< [slots] 1 when the move keeps a solved graph.
  const std::int32_t* pairs = nullptr;  ///< Swap: [2 * pair] the labels (alpha, beta) of each pair; null for expansion.
  std::int64_t* label_count = nullptr;  ///< Swap: [L] nodes per label (a pair nobody has is skipped); null for expansion.
};

/// Starts move `move_index` of the cycle: picks its key from `order` (and a swap's labels from
/// book.pairs), decides whether it runs (a move whose last exact run saw the same labelling cannot
/// find anything new; a swap of two labels nobody has changes nothing) and whether it re-solves
/// from its kept graph (when it has one and few nodes changed since), and resets the move's
/// fields. Returns whether the move runs.
MRF_HD bool BeginMove(MoveControl& c, const std::int32_t* order, const LabelBook& book, MoveRecord* records,
                      bool reuse) {
  const std::int64_t k = c.move_index;
  c.move_index = k + 1;
  const int key = order[k];
  int alpha = key, beta = -1;
  if (c.kind == kSwapMove) {
    alpha = book.pairs[2 * key];
    beta = book.pairs[2 * key + 1];
  }
  bool run = book.settled_at[key] != c.changes;
  if (run && c.kind == kSwapMove) run = book.label_count[alpha] + book.label_count[beta] > 0;
  const bool slot = key < c.num_slots;
  const bool resolve = run && reuse && slot && book.has_state[key] &&
                       c.nodes_changed - book.snapshot[key] <= c.update_limit;
  c.key = key;
  c.alpha = alpha;
  c.beta = beta;
  c.run = run;
  c.resolve = resolve;
  c.delta = 0;
  c.moved = 0;
  c.to_alpha = 0;
  c.truncated = resolve ? book.truncated[key] : 0;
  c.stopped = 0;
  c.relabels = 0;
  c.push_rounds = 0;
  c.bfs_rounds = 0;
  c.listed = 0;
  c.local_failures = 0;
  c.local_moved = 0;
  c.local_bad = 0;
  c.certified = 0;
  if (run && slot) book.snapshot[key] = c.nodes_changed;
  MoveRecord& rec = records[k];
  rec = MoveRecord{};
  rec.alpha = alpha;
  rec.beta = beta;
  rec.run = run;
  rec.resolve = resolve;
  return run;
}

/// Ends the move in progress after its energy change was summed: accepts it when the energy
/// drops, and records what it did. Returns whether it was accepted.
MRF_HD bool EndMove(MoveControl& c, const LabelBook& book, MoveRecord* records) {
  const bool accepted = c.delta < 0;
  const std::int64_t key = c.key;
  if (accepted) {
    ++c.changes;
    c.energy += c.delta;
    c.nodes_changed += c.moved;
    if (c.kind == kSwapMove) {  // to_alpha nodes went beta -> alpha, the other moved ones alpha -> beta
      const std::int64_t gained = 2 * c.to_alpha - c.moved;
      book.label_count[c.alpha] += gained;
      book.label_count[c.beta] -= gained;
    }
  }
  // A move stopped early may have missed a better cut: it is never skipped for it. Its kept heights
  // are not exact distances where its last push round ran, which an incremental relabel relies on,
  // so its next run builds afresh.
  const bool exact = c.truncated == 0;
  book.settled_at[key] = (exact || !accepted) && !c.stopped ? c.changes : -1;
  book.truncated[key] = c.truncated;
  if (key < c.num_slots) book.has_state[key] = c.stopped ? 0 : 1;
  MoveRecord& rec = records[c.move_index - 1];
  rec.accepted = accepted;
  rec.moved = accepted ? c.moved : 0;
  rec.delta = c.delta;
  rec.truncated = c.truncated;
  rec.stopped = c.stopped;
  rec.certified = c.certified;
  rec.listed = c.listed;
  rec.local_failures = c.local_failures;
  rec.local_moved = c.local_moved;
  rec.local_bad = c.local_bad;
  rec.relabels = c.relabels;
  rec.push_rounds = c.push_rounds;
  rec.bfs_rounds = c.bfs_rounds;
  rec.stamp_start = c.stamp_start;
  rec.stamp_built = c.stamp_built;
  rec.stamp_solved = c.stamp_solved;
  return accepted;
}

}  // namespace mrf::xp
