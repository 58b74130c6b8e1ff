#pragma once
// The CPU twin of cuda-expansion (test-only): the same per-node steps (backends/common/expansion_steps.h),
// the same move bookkeeping and the same graph state (netted excess, residuals per direction), with
// the GPU's push-relabel replaced by a plain FIFO push-relabel. The cut of a move is the set of nodes
// that can reach the sink in the residual graph of a maximum flow, which is the same for every maximum
// flow, so cuda-expansion must reach exactly the labels this twin reaches, whatever flow either keeps
// between moves. The twin also checks, after every graph update and every solve, that its state is a
// valid preflow of the current move graph.

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

template <int D>
class ExpansionTwin {
 public:
  ExpansionTwin(const Model& model, const TwinOptions& options)
      : m_(model), o_(options), g_(model.topology), kind_(static_cast<int>(model.topology.kind())) {
    const Label L = m_.num_labels;
    table_.resize(static_cast<std::size_t>(L) * L);
    for (Label a = 0; a < L; ++a)
      for (Label b = 0; b < L; ++b)
        table_[static_cast<std::size_t>(a) * L + b] =
            static_cast<std::int32_t>(Energy{m_.pairwise.lambda} * m_.pairwise.distance(a, b, L));
    costs_.table = table_.data();
    costs_.num_labels = L;
  }

  TwinResult Run() {
    TwinResult out;
    const std::int64_t n = g_.n();
    const Label L = m_.num_labels;
    labels_ = o_.initial.empty() ? Labeling(static_cast<std::size_t>(n), 0) : o_.initial;
    settled_.assign(L, -1);
    truncated_.assign(L, 0);
    snapshot_.assign(L, 0);
    has_state_.assign(L, 0);
    states_.assign(L, TwinState{});
    built_.assign(L, Labeling{});
    xp::LabelBook book{settled_.data(), truncated_.data(), snapshot_.data(), has_state_.data()};
    xp::MoveControl c;
    c.num_moves = L;
    c.num_slots = o_.reuse ? L : 0;
    c.update_limit = static_cast<std::int64_t>(o_.update_fraction * static_cast<double>(n));
    c.energy = LabellingEnergy(labels_);
    std::vector<xp::MoveRecord> records(L);
    std::uint64_t rng = o_.seed;
    std::vector<std::int64_t> order64;
    std::vector<std::int32_t> order(L);
    for (int cycle = 1; cycle <= o_.max_cycles; ++cycle) {
      CycleOrder(o_.order, &rng, L, &order64);
      for (Label k = 0; k < L; ++k) order[k] = static_cast<std::int32_t>(order64[k]);
      const std::int64_t before = c.changes;
      c.move_index = 0;
      for (Label k = 0; k < L; ++k) {
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

  // A fresh graph of the move on alpha for `labels`; returns the truncated terms.
  std::int64_t Build(int alpha, const Labeling& labels, TwinState* s) const {
    const std::int64_t n = g_.n();
    s->x.assign(n, 0);
    s->r.assign(n * D, 0);
    std::int64_t truncated = 0;
    int nl[D];
    std::int32_t w[D];
    std::uint32_t r[D];
    for (std::int64_t v = 0; v < n; ++v) {
      Gather<D>(g_, m_, labels, v, nl, w);
      truncated += xp::BuildNode<D>(costs_, alpha, labels[v], m_.unary_cost(v, labels[v]), m_.unary_cost(v, alpha),
                                    nl, w, &s->x[v], r);
      for (int d = 0; d < D; ++d) s->r[d * n + v] = r[d];
    }
    return truncated;
  }

  // Whether `s` is a valid preflow of the graph of the move on alpha for `labels`: residuals of
  // each edge sum to its capacities and each node's excess is its slope plus its net inflow.
  std::string CheckPreflow(int alpha, const Labeling& labels, const TwinState& s) const {
    TwinState fresh;
    Build(alpha, labels, &fresh);
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
    const int alpha = static_cast<int>(c.alpha);
    const bool slot = alpha < c.num_slots;
    TwinState scratch;
    TwinState& s = slot ? states_[alpha] : scratch;
    if (c.resolve) {
      const Labeling& old = built_[alpha];
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
        xp::UpdateNode<D>(costs_, alpha, old[v], labels_[v], m_.unary_cost(v, old[v]), m_.unary_cost(v, labels_[v]),
                          m_.unary_cost(v, alpha), onl, nnl, w, &x[v], rv, &dt);
        for (int d = 0; d < D; ++d) r[d * n + v] = rv[d];
        c.truncated += dt;
      }
      s.x = std::move(x);
      s.r = std::move(r);
      const std::string bad = CheckPreflow(alpha, labels_, s);
      if (!bad.empty()) {
        out->failure = "after updating the graph of label " + std::to_string(alpha) + ": " + bad;
        return;
      }
    } else {
      c.truncated = Build(alpha, labels_, &s);
    }
    const std::vector<std::uint8_t> cut = Solve(&s);
    const std::string bad = CheckPreflow(alpha, labels_, s);
    if (!bad.empty()) {
      out->failure = "after solving the move on label " + std::to_string(alpha) + ": " + bad;
      return;
    }
    out->truncations += c.truncated;
    // Energy change of the cut, node by node, as the GPU sums it.
    int nl[D];
    std::int32_t w[D];
    bool nm[D];
    for (std::int64_t v = 0; v < n; ++v) {
      Gather<D>(g_, m_, labels_, v, nl, w);
      for (int d = 0; d < D; ++d) {
        const std::int64_t q = g_.Neighbour(v, d);
        nm[d] = q >= 0 && cut[q] && labels_[q] != alpha;
      }
      const bool moved = cut[v] && labels_[v] != alpha;
      c.delta += xp::DeltaNode<D>(costs_, alpha, labels_[v], moved, m_.unary_cost(v, labels_[v]),
                                  m_.unary_cost(v, alpha), nl, nm, w);
      c.moved += moved;
    }
    if (slot) built_[alpha] = labels_;
    if (c.delta < 0)
      for (std::int64_t v = 0; v < n; ++v)
        if (cut[v]) labels_[v] = alpha;
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
  std::vector<TwinState> states_;
  std::vector<Labeling> built_;
};

// Runs the twin on a grid model (4-, 8- or 6-connected).
inline TwinResult RunExpansionTwin(const Model& model, const TwinOptions& options) {
  switch (model.topology.kind()) {
    case TopologyKind::kGrid4: return ExpansionTwin<4>(model, options).Run();
    case TopologyKind::kGrid8: return ExpansionTwin<8>(model, options).Run();
    case TopologyKind::kGrid3D6: return ExpansionTwin<6>(model, options).Run();
    default: break;
  }
  TwinResult r;
  r.failure = "the twin needs a grid";
  return r;
}

}  // namespace mrf::test
