#pragma once
// The CPU twin of cuda-expansion and cuda-swap (test-only): the same per-node steps
// (backends/common/expansion_steps.h), the same move bookkeeping and the same graph state (netted
// excess, residuals per direction), with the GPU's push-relabel replaced by a plain FIFO push-relabel.
// The cut of a move is the set of nodes that can reach the sink in the residual graph of a maximum
// flow, which is the same for every maximum flow, so the GPU solvers must reach exactly the labels
// this twin reaches, whatever flow either keeps between moves. The twin also checks, after every graph
// update and every solve, that its state is a valid preflow of the current move graph.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backends/common/expansion_steps.h"
#include "inference/move_graph.h"
#include "mrf/model.h"
#include "mrf/options.h"

namespace mrf::test {

struct TwinOptions {
  bool swap = false;            // alpha-beta swap moves over the pairs of cpu-swap's order (else expansion)
  bool reuse = true;            // keep each label's residual graph and update it (else solve afresh)
  double update_fraction = 0.25;  // reuse when at most this fraction of the nodes changed since
  int max_cycles = 100;
  LabelOrder order = LabelOrder::kSequential;
  std::uint64_t seed = 0;
  Labeling initial;             // empty: all 0
};

struct TwinResult {
  Labeling labels;
  std::vector<Energy> cycle_energies;  // after each cycle
  std::int64_t moves_run = 0, moves_skipped = 0, resolves = 0, truncations = 0;
  std::string failure;  // a broken invariant, empty when none
};

// The grid's neighbour structure in the engines' direction order.
class TwinGrid {
 public:
  explicit TwinGrid(const Topology& t) {
    layout_.kind = static_cast<int>(t.kind());
    layout_.width = t.width();
    layout_.height = t.height();
    layout_.depth = t.depth();
    layout_.num_nodes = t.num_nodes();
    dirs_ = pr::NumDirs(layout_.kind);
  }
  int dirs() const { return dirs_; }
  int forward() const { return dirs_ / 2; }
  std::int64_t n() const { return layout_.num_nodes; }
  // Neighbour of v in direction d, or -1.
  std::int64_t Neighbour(std::int64_t v, int d) const {
    const int x = static_cast<int>(v % layout_.width);
    const std::int64_t rest = v / layout_.width;
    const int y = static_cast<int>(rest % layout_.height), z = static_cast<int>(rest / layout_.height);
    const int k = layout_.kind;
    const int nx = x + pr::DirX(k, d), ny = y + pr::DirY(k, d), nz = z + pr::DirZ(k, d);
    return layout_.InGrid(nx, ny, nz) ? layout_.Node(nx, ny, nz) : -1;
  }
  // Slot of the edge of v in direction d (forward: d * N + v; backward: the neighbour's forward slot).
  std::int64_t Slot(std::int64_t v, int d) const {
    const int F = forward();
    if (d < F) return d * n() + v;
    return (d - F) * n() + Neighbour(v, d);
  }

 private:
  pr::TileLayout layout_;
  int dirs_ = 4;
};

// Gathers node v's neighbour labels and weights (w = 0 outside the grid).
template <int D>
void Gather(const TwinGrid& g, const Model& m, const Labeling& labels, std::int64_t v, int (&nl)[D],
            std::int32_t (&w)[D]) {
  for (int d = 0; d < D; ++d) {
    const std::int64_t q = g.Neighbour(v, d);
    nl[d] = q >= 0 ? labels[q] : 0;
    w[d] = q >= 0 ? m.edge_weight(g.Slot(v, d)) : 0;
  }
}

// The GPU engines' state of one move graph.
struct TwinState {
  std::vector<std::int64_t> x;
  std::vector<std::uint32_t> r;  // [d * N + v]
};

// A fresh graph of `move` for `labels` as every node's BuildNode writes it into `s`: netted terminal
// capacities and residuals per direction. Returns the truncated terms.
template <int D>
std::int64_t BuildMoveState(const TwinGrid& g, const Model& m, const xp::MoveCosts& costs, const xp::Move& move,
                            const Labeling& labels, TwinState* s) {
  const std::int64_t n = g.n();
  s->x.assign(n, 0);
  s->r.assign(n * D, 0);
  std::int64_t truncated = 0;
  int nl[D];
  std::int32_t w[D];
  std::uint32_t r[D];
  for (std::int64_t v = 0; v < n; ++v) {
    Gather<D>(g, m, labels, v, nl, w);
    const Label l = labels[v];
    truncated += xp::BuildNode<D>(costs, move, l, m.unary_cost(v, move.Source(l)), m.unary_cost(v, move.Sink(l)), nl,
                                  w, &s->x[v], r);
    for (int d = 0; d < D; ++d) s->r[d * n + v] = r[d];
  }
  return truncated;
}

template <int D>
class MoveTwin {
 public:
  MoveTwin(const Model& model, const TwinOptions& options)
      : m_(model), o_(options), g_(model.topology), kind_(static_cast<int>(model.topology.kind())) {
    const Label L = m_.num_labels;
    table_.resize(static_cast<std::size_t>(L) * L);
    for (Label a = 0; a < L; ++a)
      for (Label b = 0; b < L; ++b)
        table_[static_cast<std::size_t>(a) * L + b] =
            static_cast<std::int32_t>(Energy{m_.pairwise.lambda} * m_.pairwise.distance(a, b, L));
    costs_.table = table_.data();
    costs_.num_labels = L;
    if (o_.swap)  // cpu-swap's order: a = 0, 1, ..., and for each a, b = L-1 down to a+1
      for (Label a = 0; a < L; ++a)
        for (Label b = L - 1; b > a; --b) {
          pairs_.push_back(a);
          pairs_.push_back(b);
        }
  }

  TwinResult Run() {
    TwinResult out;
    const std::int64_t n = g_.n();
    const Label L = m_.num_labels;
    const std::int64_t M = o_.swap ? static_cast<std::int64_t>(pairs_.size() / 2) : L;  // moves per cycle
    labels_ = o_.initial.empty() ? Labeling(static_cast<std::size_t>(n), 0) : o_.initial;
    settled_.assign(M, -1);
    truncated_.assign(M, 0);
    snapshot_.assign(M, 0);
    has_state_.assign(M, 0);
    states_.assign(M, TwinState{});
    built_.assign(M, Labeling{});
    label_count_.assign(L, 0);
    for (Label l : labels_) ++label_count_[l];
    xp::LabelBook book{settled_.data(), truncated_.data(), snapshot_.data(), has_state_.data()};
    xp::MoveControl c;
    if (o_.swap) {
      book.pairs = pairs_.data();
      book.label_count = label_count_.data();
      c.kind = xp::kSwapMove;
    }
    c.num_moves = M;
    c.num_slots = o_.reuse ? M : 0;
    c.update_limit = static_cast<std::int64_t>(o_.update_fraction * static_cast<double>(n));
    c.energy = LabellingEnergy(labels_);
    std::vector<xp::MoveRecord> records(M);
    MoveOrder move_order(o_.order, o_.seed, m_, M, o_.swap);
    std::vector<std::int64_t> order64;
    std::vector<std::int32_t> order(M);
    for (int cycle = 1; cycle <= o_.max_cycles; ++cycle) {
      move_order.Next(&order64);
      for (std::int64_t k = 0; k < M; ++k) order[k] = static_cast<std::int32_t>(order64[k]);
      const std::int64_t before = c.changes;
      c.move_index = 0;
      for (std::int64_t k = 0; k < M; ++k) {
        if (!xp::BeginMove(c, order.data(), book, records.data(), o_.reuse)) {
          ++out.moves_skipped;
          continue;
        }
        ++out.moves_run;
        out.resolves += c.resolve;
        RunMove(c, book, records.data(), &out);
        if (!out.failure.empty()) return out;
      }
      out.cycle_energies.push_back(c.energy);
      if (c.energy != LabellingEnergy(labels_)) {
        out.failure = "tracked energy " + std::to_string(c.energy) + " differs from the labelling's " +
                      std::to_string(LabellingEnergy(labels_));
        return out;
      }
      for (Label l = 0; l < L && o_.swap; ++l)  // (only swap keeps label counts)
        if (label_count_[l] != std::count(labels_.begin(), labels_.end(), l)) {
          out.failure = "the count of label " + std::to_string(l) + " is off";
          return out;
        }
      if (c.changes == before) break;
    }
    out.labels = labels_;
    return out;
  }

 private:
  Energy LabellingEnergy(const Labeling& labels) const {
    Energy e = 0;
    int nl[D];
    std::int32_t w[D];
    for (std::int64_t v = 0; v < g_.n(); ++v) {
      Gather<D>(g_, m_, labels, v, nl, w);
      e += xp::NodeEnergy<D>(costs_, labels[v], m_.unary_cost(v, labels[v]), nl, w);
    }
    return e;
  }

  // A fresh graph of `move` for `labels`; returns the truncated terms.
  std::int64_t Build(const xp::Move& move, const Labeling& labels, TwinState* s) const {
    return BuildMoveState<D>(g_, m_, costs_, move, labels, s);
  }

  // Whether `s` is a valid preflow of the graph of `move` for `labels`: residuals of each edge sum
  // to its capacities and each node's excess is its slope plus its net inflow.
  std::string CheckPreflow(const xp::Move& move, const Labeling& labels, const TwinState& s) const {
    TwinState fresh;
    Build(move, labels, &fresh);
    const std::int64_t n = g_.n();
    for (std::int64_t v = 0; v < n; ++v) {
      std::int64_t x = fresh.x[v];
      for (int d = 0; d < D; ++d) {
        const std::int64_t q = g_.Neighbour(v, d);
        if (q < 0) {
          if (s.r[d * n + v] != 0) return "residual outside the grid at node " + std::to_string(v);
          continue;
        }
        const int back = pr::Opposite(kind_, d);
        const std::int64_t sum = std::int64_t{s.r[d * n + v]} + s.r[back * n + q];
        const std::int64_t want = std::int64_t{fresh.r[d * n + v]} + fresh.r[back * n + q];
        if (sum != want)
          return "residuals of edge " + std::to_string(v) + "-" + std::to_string(q) + " sum to " + std::to_string(sum) +
                 ", capacities to " + std::to_string(want);
        // Flow out of v along d is what its residual lost.
        x -= std::int64_t{fresh.r[d * n + v]} - s.r[d * n + v];
      }
      if (x != s.x[v])
        return "excess of node " + std::to_string(v) + " is " + std::to_string(s.x[v]) + ", its slope and net inflow give " +
               std::to_string(x);
    }
    return {};
  }

  // Exact distances to the sink over residual edges (inf = n + 1 where none).
  std::vector<std::int64_t> Distances(const TwinState& s) const {
    const std::int64_t n = g_.n(), inf = n + 1;
    const int kind = kind_;
    std::vector<std::int64_t> dist(n, inf);
    std::deque<std::int64_t> queue;
    for (std::int64_t v = 0; v < n; ++v)
      if (s.x[v] < 0) {
        dist[v] = 1;
        queue.push_back(v);
      }
    while (!queue.empty()) {
      const std::int64_t v = queue.front();
      queue.pop_front();
      for (int d = 0; d < D; ++d) {
        const std::int64_t u = g_.Neighbour(v, d);
        if (u < 0 || dist[u] != inf) continue;
        if (s.r[pr::Opposite(kind, d) * n + u] > 0) {  // u -> v has residual capacity
          dist[u] = dist[v] + 1;
          queue.push_back(u);
        }
      }
    }
    return dist;
  }

  // Maximum flow from the state as it is (any preflow), by FIFO push-relabel from exact heights;
  // returns the cut (1 = can reach the sink = moves).
  std::vector<std::uint8_t> Solve(TwinState* s) const {
    const std::int64_t n = g_.n(), inf = n + 1;
    const int kind = kind_;
    std::vector<std::int64_t> h = Distances(*s);
    std::deque<std::int64_t> queue;
    std::vector<std::uint8_t> queued(n, 0);
    for (std::int64_t v = 0; v < n; ++v)
      if (s->x[v] > 0 && h[v] < inf) {
        queue.push_back(v);
        queued[v] = 1;
      }
    while (!queue.empty()) {
      const std::int64_t u = queue.front();
      queue.pop_front();
      queued[u] = 0;
      while (s->x[u] > 0 && h[u] < inf) {
        bool pushed = false;
        for (int d = 0; d < D && s->x[u] > 0; ++d) {
          const std::int64_t v = g_.Neighbour(u, d);
          if (v < 0 || s->r[d * n + u] == 0 || h[u] != h[v] + 1) continue;
          const std::int64_t f = std::min<std::int64_t>(s->x[u], s->r[d * n + u]);
          s->r[d * n + u] -= static_cast<std::uint32_t>(f);
          s->r[pr::Opposite(kind, d) * n + v] += static_cast<std::uint32_t>(f);
          s->x[u] -= f;
          s->x[v] += f;
          pushed = true;
          if (s->x[v] > 0 && h[v] < inf && !queued[v]) {
            queue.push_back(v);
            queued[v] = 1;
          }
        }
        if (s->x[u] <= 0) break;
        if (!pushed || s->x[u] > 0) {  // relabel
          std::int64_t lowest = inf;
          for (int d = 0; d < D; ++d) {
            const std::int64_t v = g_.Neighbour(u, d);
            if (v >= 0 && s->r[d * n + u] > 0) lowest = std::min(lowest, h[v]);
          }
          h[u] = lowest >= inf - 1 ? inf : lowest + 1;
        }
      }
    }
    const std::vector<std::int64_t> dist = Distances(*s);
    std::vector<std::uint8_t> cut(n);
    for (std::int64_t v = 0; v < n; ++v) cut[v] = dist[v] < inf;
    return cut;
  }

  void RunMove(xp::MoveControl& c, const xp::LabelBook& book, xp::MoveRecord* records, TwinResult* out) {
    const std::int64_t n = g_.n();
    const xp::Move move{static_cast<int>(c.kind), static_cast<int>(c.alpha), static_cast<int>(c.beta)};
    const std::int64_t key = c.key;
    const bool slot = key < c.num_slots;
    TwinState scratch;
    TwinState& s = slot ? states_[key] : scratch;
    auto slope = [&](std::int64_t v, Label l) {
      return xp::UnarySlope(move, l, m_.unary_cost(v, move.Source(l)), m_.unary_cost(v, move.Sink(l)));
    };
    if (c.resolve) {
      const Labeling& old = built_[key];
      std::vector<std::int64_t> x = s.x;
      std::vector<std::uint32_t> r = s.r;
      int onl[D], nnl[D];
      std::int32_t w[D];
      std::uint32_t rv[D];
      for (std::int64_t v = 0; v < n; ++v) {
        Gather<D>(g_, m_, old, v, onl, w);
        Gather<D>(g_, m_, labels_, v, nnl, w);
        for (int d = 0; d < D; ++d) rv[d] = s.r[d * n + v];
        int dt = 0;
        xp::UpdateNode<D>(costs_, move, old[v], labels_[v], slope(v, old[v]), slope(v, labels_[v]), onl, nnl, w, &x[v],
                          rv, &dt);
        for (int d = 0; d < D; ++d) r[d * n + v] = rv[d];
        c.truncated += dt;
      }
      s.x = std::move(x);
      s.r = std::move(r);
      const std::string bad = CheckPreflow(move, labels_, s);
      if (!bad.empty()) {
        out->failure = "after updating the graph of move " + std::to_string(key) + ": " + bad;
        return;
      }
    } else {
      c.truncated = Build(move, labels_, &s);
    }
    const std::vector<std::uint8_t> cut = Solve(&s);
    const std::string bad = CheckPreflow(move, labels_, s);
    if (!bad.empty()) {
      out->failure = "after solving move " + std::to_string(key) + ": " + bad;
      return;
    }
    out->truncations += c.truncated;
    // Energy change of the cut, node by node, as the GPU sums it.
    Labeling proposal(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) proposal[v] = move.NewLabel(labels_[v], cut[v] != 0);
    int nl[D], nnl[D];
    std::int32_t w[D];
    for (std::int64_t v = 0; v < n; ++v) {
      Gather<D>(g_, m_, labels_, v, nl, w);
      Gather<D>(g_, m_, proposal, v, nnl, w);
      const Label lp = labels_[v], np = proposal[v];
      c.delta += xp::DeltaNode<D>(costs_, lp, np, m_.unary_cost(v, lp), m_.unary_cost(v, np), nl, nnl, w);
      c.moved += np != lp;
      c.to_alpha += np != lp && np == move.alpha;
    }
    if (slot) built_[key] = labels_;
    if (c.delta < 0) labels_ = proposal;
    xp::EndMove(c, book, records);
  }

  const Model& m_;
  TwinOptions o_;
  TwinGrid g_;
  int kind_;
  std::vector<std::int32_t> table_;
  xp::MoveCosts costs_;
  Labeling labels_;
  std::vector<std::int64_t> settled_, truncated_, snapshot_;
  std::vector<std::int32_t> has_state_;
  std::vector<std::int32_t> pairs_;
  std::vector<std::int64_t> label_count_;
  std::vector<TwinState> states_;
  std::vector<Labeling> built_;
};

// Runs the twin on a grid model (4-, 8- or 6-connected): expansion, or swap with options.swap.
inline TwinResult RunMoveTwin(const Model& model, const TwinOptions& options) {
  switch (model.topology.kind()) {
    case TopologyKind::kGrid4: return MoveTwin<4>(model, options).Run();
    case TopologyKind::kGrid8: return MoveTwin<8>(model, options).Run();
    case TopologyKind::kGrid3D6: return MoveTwin<6>(model, options).Run();
    default: break;
  }
  TwinResult r;
  r.failure = "the twin needs a grid";
  return r;
}

// The expansion twin.
inline TwinResult RunExpansionTwin(const Model& model, TwinOptions options) {
  options.swap = false;
  return RunMoveTwin(model, options);
}

// The swap twin (cuda-swap's reference).
inline TwinResult RunSwapTwin(const Model& model, TwinOptions options) {
  options.swap = true;
  return RunMoveTwin(model, options);
}

}  // namespace mrf::test
