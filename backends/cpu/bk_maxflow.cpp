// The Boykov-Kolmogorov max-flow engine ("cpu-bk"); see bk_maxflow.h for the layout.
//
// Vocabulary. Each node is in the source tree, the sink tree, or free. A tree node's `parent` is
// the arc from the node to its parent, or kTerminal for a tree root (a node with residual
// capacity to its terminal). Flow runs parent -> child in the source tree and child -> parent in
// the sink tree, so the arc a tree edge needs residual on is sister(parent) in the source tree
// and parent itself in the sink tree. Terminal capacities are netted: tr_cap > 0 is residual from
// the source, tr_cap < 0 residual to the sink.
//
// Active nodes (a FIFO threaded through `next`) are the tree frontier: a node that is not active
// has no residual arc, in its tree's direction, to a node outside its tree. The main loop grows
// the trees from active nodes until they touch, pushes the bottleneck along the path, and then
// re-attaches the nodes whose tree arc was saturated (orphans), preferring the parent closest to
// its terminal (distance labels checked with a per-round timestamp).
#include "backends/cpu/bk_maxflow.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "mrf/memory.h"

namespace mrf {
namespace {

constexpr std::uint32_t kNone = 0xFFFFFFFFu;      // no node (active list), free node (parent)
constexpr std::uint32_t kTerminal = 0xFFFFFFFEu;  // parent of a tree root
constexpr std::uint32_t kOrphan = 0xFFFFFFFDu;    // parent of an orphan waiting for adoption
constexpr std::uint32_t kFree = kNone;
constexpr std::uint64_t kMaxArcs = 0xFFFFFFF0u;   // arc indices stay below the markers above

struct Node {
  std::uint32_t first;   // first arc; the arcs of node v are [first(v), first(v + 1))
  std::uint32_t parent;  // arc to the parent, kTerminal, kOrphan or kFree
  std::uint32_t next;    // next active node (the last one points to itself), kNone if inactive
  std::uint32_t ts;      // adoption round in which dist was last known exact
  std::uint32_t dist;    // distance to the terminal along the tree (heuristic between rounds)
  std::uint32_t sink;    // 1: in the sink tree (meaningful only when parent != kFree)
  std::int64_t tr_cap;   // netted terminal residual: > 0 from the source, < 0 to the sink
};

struct Arc {
  std::uint32_t head;    // node the arc points to
  std::uint32_t sister;  // the reverse arc
  std::uint32_t r_cap;   // residual; r_cap + sister's r_cap = cap + rev_cap < 2^32
};

// A fixed-size array left uninitialised on allocation (the builders write every element).
template <class T>
class PodBuffer {
 public:
  void Allocate(std::size_t size) {
    if (size != size_) {
      data_.reset();
      data_.reset(new T[size]);
      size_ = size;
    }
  }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_ = 0;
};

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

class BkEngine final : public MaxFlowEngine {
 public:
  explicit BkEngine(std::uint32_t timestamp_limit) : timestamp_limit_(timestamp_limit) {}

  std::string name() const override { return "cpu-bk"; }
  bool SupportsResolve() const override { return true; }

  std::size_t MemoryBytes() const override {
    return nodes_.size() * sizeof(Node) + arcs_.size() * sizeof(Arc) +
           slot_arc_.capacity() * sizeof(std::uint32_t) + slot_cap_.capacity() * sizeof(Cost) +
           node_net_.capacity() * sizeof(Energy) + orphans_.capacity() * sizeof(std::uint32_t) +
           touched_.capacity() * sizeof(std::uint32_t);
  }

  void Solve(const StGraph& graph, Result* out) override {
    ClearStop();
    const auto t0 = std::chrono::steady_clock::now();
    Build(graph);
    const double setup_ms = MsSince(t0);
    const auto t1 = std::chrono::steady_clock::now();
    augmentations_ = 0;
    Run();
    Finish(graph, out);
    out->timings.setup_ms = setup_ms;
    out->timings.solve_ms = MsSince(t1);
    out->log.push_back({1, -1, out->timings.setup_ms + out->timings.solve_ms,
                        (stop_reason().empty() ? "solved from scratch: " : "stopped early: ") +
                            std::to_string(augmentations_) + " augmentations, " + std::to_string(arcs_.size() / 2) +
                            " arc pairs"});
  }

  void Resolve(const StGraph& graph, Result* out) override {
    ClearStop();
    const GraphChanges& changes = graph.changes();
    if (changes.structure_changed || nodes_.size() != static_cast<std::size_t>(graph.num_nodes()) + 1 ||
        slot_arc_.size() != static_cast<std::size_t>(graph.num_edge_slots())) {
      Solve(graph, out);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (!ApplyChanges(graph)) {
      // An edge that had no capacity at all when the arcs were built gained some: no arc to adjust.
      Solve(graph, out);
      out->log.back().note += " (re-solve rebuilt the graph: an edge that was empty gained capacity)";
      return;
    }
    const double setup_ms = MsSince(t0);
    const auto t1 = std::chrono::steady_clock::now();
    augmentations_ = 0;
    Adopt();
    Run();
    Finish(graph, out);
    out->timings.setup_ms = setup_ms;
    out->timings.solve_ms = MsSince(t1);
    out->log.push_back({1, -1, out->timings.setup_ms + out->timings.solve_ms,
                        (stop_reason().empty() ? "re-solved from the previous flow: " : "re-solve stopped early: ") +
                            std::to_string(changes.nodes.size()) +
                            " node and " + std::to_string(changes.edges.size()) + " edge changes, " +
                            std::to_string(augmentations_) + " augmentations"});
  }

 private:
  // ---- Building ----------------------------------------------------------------------------------

  void Build(const StGraph& graph) {
    const NodeId n = graph.num_nodes();
    const auto& cap = graph.edge_caps();
    const auto& rev_cap = graph.edge_rev_caps();
    std::uint64_t arc_count = 0;
    graph.topology().ForEachEdge([&](EdgeId e, NodeId, NodeId) { arc_count += (cap[e] | rev_cap[e]) ? 2 : 0; });
    if (arc_count > kMaxArcs)
      throw Error("cpu-bk: the graph has " + std::to_string(arc_count / 2) +
                  " edges with capacity; at most " + std::to_string(kMaxArcs / 2) + " are supported");
    nodes_.Allocate(static_cast<std::size_t>(n) + 1);
    arcs_.Allocate(arc_count);
    slot_arc_.assign(static_cast<std::size_t>(graph.num_edge_slots()), kNone);
    slot_cap_.assign(cap.begin(), cap.end());
    if (graph.topology().is_grid()) BuildGridArcs(graph);
    else BuildListArcs(graph);

    node_net_.resize(n);
    active_first_ = active_last_ = kNone;
    orphans_.clear();
    time_ = 0;
    for (NodeId v = 0; v < n; ++v) {
      Node& node = nodes_[v];
      node.next = kNone;
      node.ts = 0;
      node.dist = 1;
      node.tr_cap = node_net_[v] = graph.source_cap(v) - graph.sink_cap(v);
      node.sink = node.tr_cap < 0;
      node.parent = node.tr_cap != 0 ? kTerminal : kFree;
      if (node.tr_cap != 0) Activate(static_cast<std::uint32_t>(v));
    }
  }

  // General graphs: count the arcs of every node, then place them (compressed rows).
  void BuildListArcs(const StGraph& graph) {
    const NodeId n = graph.num_nodes();
    const auto& cap = graph.edge_caps();
    const auto& rev_cap = graph.edge_rev_caps();
    for (NodeId v = 0; v <= n; ++v) nodes_[v].first = 0;
    graph.topology().ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if ((cap[e] | rev_cap[e]) == 0) return;
      ++nodes_[p + 1].first;
      ++nodes_[q + 1].first;
    });
    for (NodeId v = 0; v < n; ++v) nodes_[v + 1].first += nodes_[v].first;
    // `next` serves as each node's insertion cursor until Build() resets it.
    for (NodeId v = 0; v < n; ++v) nodes_[v].next = nodes_[v].first;
    graph.topology().ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if ((cap[e] | rev_cap[e]) == 0) return;
      const std::uint32_t a = nodes_[p].next++, b = nodes_[q].next++;
      arcs_[a] = Arc{static_cast<std::uint32_t>(q), b, static_cast<std::uint32_t>(cap[e])};
      arcs_[b] = Arc{static_cast<std::uint32_t>(p), a, static_cast<std::uint32_t>(rev_cap[e])};
      slot_arc_[e] = a;
    });
  }

  // Grids: one pass in node order. A node's arcs to earlier neighbours come first; their sisters
  // were placed when those neighbours were visited (forward neighbours always have larger ids).
  void BuildGridArcs(const StGraph& graph) {
    const Topology& grid = graph.topology();
    const auto& cap = graph.edge_caps();
    const auto& rev_cap = graph.edge_rev_caps();
    const NodeId n = grid.num_nodes();
    const int width = grid.width(), height = grid.height(), depth = grid.depth();
    const int directions = grid.num_directions();
    std::array<std::array<int, 3>, 4> off{};
    std::array<std::int64_t, 4> step{};
    for (int d = 0; d < directions; ++d) {
      off[d] = Topology::GridOffset(grid.kind(), d);
      step[d] = off[d][0] + std::int64_t{width} * (off[d][1] + std::int64_t{height} * off[d][2]);
    }
    std::uint32_t pos = 0;
    NodeId v = 0;
    for (int z = 0; z < depth; ++z)
      for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x, ++v) {
          nodes_[v].first = pos;
          for (int d = 0; d < directions; ++d) {  // arcs to earlier neighbours
            const int px = x - off[d][0], py = y - off[d][1], pz = z - off[d][2];
            if (px < 0 || px >= width || py < 0 || pz < 0) continue;
            const auto u = static_cast<std::uint32_t>(v - step[d]);
            const EdgeId slot = EdgeId{d} * n + u;
            const std::uint32_t a = slot_arc_[slot];
            if (a == kNone) continue;
            arcs_[pos] = Arc{u, a, static_cast<std::uint32_t>(rev_cap[slot])};
            arcs_[a].sister = pos++;
          }
          for (int d = 0; d < directions; ++d) {  // arcs to later neighbours
            const int qx = x + off[d][0], qy = y + off[d][1], qz = z + off[d][2];
            if (qx < 0 || qx >= width || qy >= height || qz >= depth) continue;
            const EdgeId slot = EdgeId{d} * n + v;
            if ((cap[slot] | rev_cap[slot]) == 0) continue;
            slot_arc_[slot] = pos;
            arcs_[pos++] = Arc{static_cast<std::uint32_t>(v + step[d]), kNone, static_cast<std::uint32_t>(cap[slot])};
          }
        }
    nodes_[n].first = pos;
  }

  // ---- The active FIFO -----------------------------------------------------------------------

  void Activate(std::uint32_t v) {
    Node& node = nodes_[v];
    if (node.next != kNone) return;
    node.next = v;
    if (active_last_ != kNone) nodes_[active_last_].next = v;
    else active_first_ = v;
    active_last_ = v;
  }

  // The next active node that is still in a tree, or kNone.
  std::uint32_t PopActive() {
    while (active_first_ != kNone) {
      const std::uint32_t v = active_first_;
      Node& node = nodes_[v];
      if (node.next == v) active_first_ = active_last_ = kNone;
      else active_first_ = node.next;
      node.next = kNone;
      if (node.parent != kFree) return v;
    }
    return kNone;
  }

  // ---- Growth and augmentation -----------------------------------------------------------------

  // Growth steps between two polls of the stop check (a power of two).
  static constexpr std::uint64_t kPollEvery = 1 << 14;

  void Run() {
    std::uint32_t current = kNone;  // the node whose growth found the last path: it goes on
    std::uint64_t steps = 0;
    for (;;) {
      std::uint32_t v = current;
      current = kNone;
      if (v == kNone || nodes_[v].parent == kFree) {
        v = PopActive();
        if (v == kNone) break;
      }
      // Between two steps the trees and the flow are consistent: stopping here leaves a valid cut,
      // and with v back in the active list a later Resolve() continues to the maximum flow.
      if (HasStopCheck() && (steps++ & (kPollEvery - 1)) == 0) {
        IterationRecord progress;
        progress.iteration = static_cast<int>(steps / kPollEvery);
        progress.note = std::to_string(augmentations_) + " augmentations";
        if (PollStop(progress)) {
          Activate(v);
          break;
        }
      }
      const std::uint32_t middle = Grow(v);
      if (middle == kNone) continue;  // v's frontier is exhausted: it stays inactive
      Augment(middle);
      Adopt();
      current = v;
    }
  }

  // Grows v's tree across every residual arc of v; returns the first arc (source side -> sink
  // side) that joins the two trees, or kNone.
  std::uint32_t Grow(std::uint32_t v) {
    Node& nv = nodes_[v];
    const std::uint32_t end = nodes_[v + 1].first;
    if (!nv.sink) {
      for (std::uint32_t a = nv.first; a < end; ++a) {
        const Arc& arc = arcs_[a];
        if (arc.r_cap == 0) continue;
        Node& nu = nodes_[arc.head];
        if (nu.parent == kFree) {
          nu.sink = 0;
          nu.parent = arc.sister;
          nu.ts = nv.ts;
          nu.dist = nv.dist + 1;
          Activate(arc.head);
        } else if (nu.sink) {
          return a;
        } else if (nu.ts <= nv.ts && nu.dist > nv.dist) {
          // A shorter way to the terminal (safe: along any tree path ts never decreases towards
          // the root and dist strictly decreases where ts is equal, so v is no descendant of u).
          nu.parent = arc.sister;
          nu.ts = nv.ts;
          nu.dist = nv.dist + 1;
        }
      }
    } else {
      for (std::uint32_t a = nv.first; a < end; ++a) {
        const Arc& arc = arcs_[a];
        if (arcs_[arc.sister].r_cap == 0) continue;
        Node& nu = nodes_[arc.head];
        if (nu.parent == kFree) {
          nu.sink = 1;
          nu.parent = arc.sister;
          nu.ts = nv.ts;
          nu.dist = nv.dist + 1;
          Activate(arc.head);
        } else if (!nu.sink) {
          return arc.sister;
        } else if (nu.ts <= nv.ts && nu.dist > nv.dist) {
          nu.parent = arc.sister;
          nu.ts = nv.ts;
          nu.dist = nv.dist + 1;
        }
      }
    }
    return kNone;
  }

  void MakeOrphan(std::uint32_t v) {
    nodes_[v].parent = kOrphan;
    orphans_.push_back(v);
  }

  // Pushes the bottleneck along source root -> ... -> tail(middle) -> head(middle) -> ... -> sink root.
  void Augment(std::uint32_t middle) {
    const std::uint32_t from = arcs_[arcs_[middle].sister].head, to = arcs_[middle].head;
    std::int64_t bottleneck = arcs_[middle].r_cap;
    std::uint32_t v = from;
    for (std::uint32_t p; (p = nodes_[v].parent) != kTerminal; v = arcs_[p].head)
      bottleneck = std::min<std::int64_t>(bottleneck, arcs_[arcs_[p].sister].r_cap);
    bottleneck = std::min(bottleneck, nodes_[v].tr_cap);
    v = to;
    for (std::uint32_t p; (p = nodes_[v].parent) != kTerminal; v = arcs_[p].head)
      bottleneck = std::min<std::int64_t>(bottleneck, arcs_[p].r_cap);
    bottleneck = std::min(bottleneck, -nodes_[v].tr_cap);
    const auto push = static_cast<std::uint32_t>(bottleneck);

    arcs_[middle].r_cap -= push;
    arcs_[arcs_[middle].sister].r_cap += push;
    for (v = from;;) {
      const std::uint32_t p = nodes_[v].parent;
      if (p == kTerminal) {
        if ((nodes_[v].tr_cap -= bottleneck) == 0) MakeOrphan(v);
        break;
      }
      Arc& down = arcs_[arcs_[p].sister];  // parent -> v, carries the flow
      arcs_[p].r_cap += push;
      if ((down.r_cap -= push) == 0) MakeOrphan(v);
      v = arcs_[p].head;
    }
    for (v = to;;) {
      const std::uint32_t p = nodes_[v].parent;
      if (p == kTerminal) {
        if ((nodes_[v].tr_cap += bottleneck) == 0) MakeOrphan(v);
        break;
      }
      arcs_[arcs_[p].sister].r_cap += push;
      if ((arcs_[p].r_cap -= push) == 0) MakeOrphan(v);
      v = arcs_[p].head;
    }
    ++augmentations_;
  }

  // ---- Adoption ------------------------------------------------------------------------------------

  // Re-attaches every queued orphan to its tree, or frees it (orphaning its children in turn).
  void Adopt() {
    if (orphans_.empty()) return;
    if (time_ >= timestamp_limit_) ResetTimestamps();
    ++time_;
    for (std::size_t k = 0; k < orphans_.size(); ++k) ProcessOrphan(orphans_[k]);
    orphans_.clear();
  }

  void MakeRoot(std::uint32_t v) {
    Node& node = nodes_[v];
    node.sink = node.tr_cap < 0;
    node.parent = kTerminal;
    node.ts = time_;
    node.dist = 1;
  }

  // Residual capacity of the arc that would make `a`'s head the tree parent of `a`'s tail.
  std::uint32_t TreeResidual(std::uint32_t a, bool sink) const {
    return sink ? arcs_[a].r_cap : arcs_[arcs_[a].sister].r_cap;
  }

  void ProcessOrphan(std::uint32_t i) {
    Node& ni = nodes_[i];
    const bool sink = ni.sink != 0;
    if (ni.tr_cap != 0) {
      // Only after capacity changes (re-solve) can an orphan have terminal capacity of its own.
      if ((ni.tr_cap < 0) != sink) FreeOrphan(i);
      MakeRoot(i);
      Activate(i);
      return;
    }
    std::uint32_t best_arc = kNone, best_dist = kNone;
    const std::uint32_t end = nodes_[i + 1].first;
    for (std::uint32_t a = ni.first; a < end; ++a) {
      if (TreeResidual(a, sink) == 0) continue;
      const std::uint32_t j = arcs_[a].head;
      if (nodes_[j].parent == kFree || (nodes_[j].sink != 0) != sink) continue;
      // Walk towards the root until a node verified in this round, the terminal, or an orphan.
      std::uint32_t d = 0, k = j;
      for (;;) {
        Node& nk = nodes_[k];
        if (nk.ts == time_) {
          d += nk.dist;
          break;
        }
        ++d;
        if (nk.parent == kTerminal) {
          nk.ts = time_;
          nk.dist = 1;
          break;
        }
        if (nk.parent == kOrphan) {
          d = kNone;
          break;
        }
        k = arcs_[nk.parent].head;
      }
      if (d == kNone) continue;
      if (d < best_dist) {
        best_dist = d;
        best_arc = a;
      }
      // Stamp the path just walked with its exact distances.
      for (k = j; nodes_[k].ts != time_; k = arcs_[nodes_[k].parent].head) {
        nodes_[k].ts = time_;
        nodes_[k].dist = d--;
      }
    }
    if (best_arc != kNone) {
      ni.parent = best_arc;
      ni.ts = time_;
      ni.dist = best_dist + 1;
      return;
    }
    FreeOrphan(i);
  }

  // Takes orphan i out of its tree: tree neighbours that could reach i become active, children
  // become orphans.
  void FreeOrphan(std::uint32_t i) {
    Node& ni = nodes_[i];
    const bool sink = ni.sink != 0;
    const std::uint32_t end = nodes_[i + 1].first;
    for (std::uint32_t a = ni.first; a < end; ++a) {
      const std::uint32_t j = arcs_[a].head;
      Node& nj = nodes_[j];
      if (nj.parent == kFree || (nj.sink != 0) != sink) continue;
      if (TreeResidual(a, sink) != 0) Activate(j);
      if (nj.parent != kTerminal && nj.parent != kOrphan && arcs_[nj.parent].head == i) MakeOrphan(j);
    }
    ni.parent = kFree;
  }

  // Before the 32-bit round counter wraps: make every distance exact for round 0 (orphans count as
  // roots) so that the ordering the growth heuristic relies on holds again, then restart at 0.
  void ResetTimestamps() {
    const std::size_t n = nodes_.size() - 1;
    for (std::size_t v = 0; v < n; ++v) nodes_[v].ts = 0;
    std::vector<std::uint32_t> path;
    for (std::size_t v = 0; v < n; ++v) {
      if (nodes_[v].parent == kFree || nodes_[v].ts) continue;
      path.clear();
      std::uint32_t k = static_cast<std::uint32_t>(v), d = 0;
      for (;;) {
        const Node& nk = nodes_[k];
        if (nk.ts) {
          d = nk.dist;
          break;
        }
        path.push_back(k);
        if (nk.parent == kTerminal || nk.parent == kOrphan) break;
        k = arcs_[nk.parent].head;
      }
      for (auto it = path.rbegin(); it != path.rend(); ++it) {
        nodes_[*it].ts = 1;
        nodes_[*it].dist = ++d;
      }
    }
    for (std::size_t v = 0; v < n; ++v) nodes_[v].ts = 0;
    time_ = 0;
  }

  // ---- Re-solving ----------------------------------------------------------------------------------

  // Moves the residual graph to the new capacities and repairs the trees. Returns false when an
  // edge that has no arcs gained capacity (the caller rebuilds).
  bool ApplyChanges(const StGraph& graph) {
    const GraphChanges& changes = graph.changes();
    for (EdgeId e : changes.edges)
      if (slot_arc_[e] == kNone && (graph.edge_cap(e) != 0 || graph.edge_rev_cap(e) != 0)) return false;
    touched_.clear();
    for (EdgeId e : changes.edges) {
      const std::uint32_t a = slot_arc_[e];
      if (a == kNone) continue;
      Arc& fwd = arcs_[a];
      Arc& bwd = arcs_[fwd.sister];
      const std::uint32_t p = bwd.head, q = fwd.head;
      const std::int64_t new_cap = graph.edge_cap(e), new_rev = graph.edge_rev_cap(e);
      // Net flow p -> q on this edge, kept within the new capacities; what no longer fits stays
      // at p (excess) and is missing at q, which is the same as moving it to their terminal edges.
      std::int64_t flow = std::int64_t{slot_cap_[e]} - fwd.r_cap;
      std::int64_t excess = 0;
      if (flow > new_cap) excess = flow - new_cap;
      else if (flow < -new_rev) excess = flow + new_rev;
      flow -= excess;
      nodes_[p].tr_cap += excess;
      nodes_[q].tr_cap -= excess;
      fwd.r_cap = static_cast<std::uint32_t>(new_cap - flow);
      bwd.r_cap = static_cast<std::uint32_t>(new_rev + flow);
      slot_cap_[e] = static_cast<Cost>(new_cap);
      touched_.push_back(p);
      touched_.push_back(q);
    }
    for (NodeId v : changes.nodes) {
      const Energy net = graph.source_cap(v) - graph.sink_cap(v);
      nodes_[v].tr_cap += net - node_net_[v];
      node_net_[v] = net;
      touched_.push_back(static_cast<std::uint32_t>(v));
    }
    for (std::uint32_t v : touched_) Repair(v);
    return true;
  }

  // Makes node v consistent with its new terminal residual and arc residuals, and active: its arcs
  // may have gained residual towards nodes outside its tree. An orphan is activated too, so that
  // it grows if it is re-adopted (a freed one is skipped by PopActive).
  void Repair(std::uint32_t v) {
    Node& node = nodes_[v];
    if (node.parent == kFree) {
      if (node.tr_cap == 0) return;
      MakeRoot(v);
    } else if (node.parent != kOrphan) {
      const bool sink = node.sink != 0;
      if (node.tr_cap != 0 && (node.tr_cap < 0) == sink) {
        MakeRoot(v);  // residual to its own terminal: a root, whatever it hung from before
      } else if (node.parent == kTerminal || node.tr_cap != 0 || TreeResidual(node.parent, sink) == 0) {
        MakeOrphan(v);  // lost its terminal, its terminal flipped, or its tree arc is saturated
      }
    }
    Activate(v);
  }

  // ---- Result --------------------------------------------------------------------------------------

  void Finish(const StGraph& graph, Result* out) {
    const auto n = static_cast<std::size_t>(graph.num_nodes());
    out->labels = NewLabeling(n);
    Label* labels = out->labels.data();
    std::atomic<Energy> flow{0};
    ForPiecesOfLabels(n, [&](std::size_t begin, std::size_t end) {
      Energy piece_flow = 0;
      for (std::size_t v = begin; v < end; ++v) {
        const Node& node = nodes_[v];
        labels[v] = node.parent != kFree && !node.sink ? 0 : 1;
        // The flow is what leaves the source: its capacity minus the residual left on it.
        piece_flow += graph.source_cap(static_cast<NodeId>(v)) - std::max<std::int64_t>(node.tr_cap, 0);
      }
      flow += piece_flow;
    });
    out->flow = flow;
    out->iterations = augmentations_;
  }

  PodBuffer<Node> nodes_;                 // n + 1 (the last only closes the arc range)
  PodBuffer<Arc> arcs_;
  std::vector<std::uint32_t> slot_arc_;   // edge slot -> arc in the slot's direction, or kNone
  std::vector<Cost> slot_cap_;            // capacity in the slot's direction when last applied
  std::vector<Energy> node_net_;          // source minus sink capacity when last applied
  std::vector<std::uint32_t> orphans_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t active_first_ = kNone, active_last_ = kNone;
  std::uint32_t time_ = 0;
  std::uint32_t timestamp_limit_;
  std::int64_t augmentations_ = 0;
};

}  // namespace

std::unique_ptr<MaxFlowEngine> MakeBkEngine() {
  return std::make_unique<BkEngine>(std::numeric_limits<std::uint32_t>::max() - 1);
}

namespace detail {
std::unique_ptr<MaxFlowEngine> MakeBkEngineWithTimestampLimit(std::uint32_t timestamp_limit) {
  return std::make_unique<BkEngine>(std::max<std::uint32_t>(timestamp_limit, 1));
}
}  // namespace detail

}  // namespace mrf
