#pragma once
/// @file push_relabel_local.h
/// @brief Local re-solves of grid push-relabel: repairs around changed terminal weights, and the
/// certificate that proves a state optimal. Written once for tbb-pr (sequential repairs) and
/// cuda-pr (a thread per block of changes, atomics), like push_relabel_steps.h.
///
/// **The certificate.** A state (netted excess x, heights h, residuals r) holds a maximum preflow,
/// and its finite-height nodes are exactly the sink side of the sink-minimal cut, when every node v
/// satisfies
///   - (C1) for every residual edge v -> w: h(v) <= h(w) + 1, where an inf node may only point at
///          inf nodes;
///   - (C2) x(v) > 0 implies h(v) = inf (no excess where the sink can be reached);
///   - (C3) h(v) finite implies x(v) < 0 or a residual edge to a lower neighbour;
///   - (C4) x(v) < 0 implies h(v) finite.
/// By C1 an inf node reaches only inf nodes, and by C4 no node with residual capacity to the sink is
/// one of them: inf nodes cannot reach the sink. By C3, following lower neighbours from a finite node
/// ends at a node with x < 0: finite nodes reach the sink. With C2 no excess can reach the sink.
/// Each condition reads only a node and its neighbours' heights, so one pass checks a whole grid.
/// A solve's final state satisfies it (exact distances after its last global relabel, no active
/// node); after a re-solve's repairs it is checked again, so the repairs need not be proven right:
/// when the check fails the engine goes on with push rounds and incremental relabels from the tiles
/// the repairs changed (local_resolve = 3: first the nodes that failed it are repaired where they
/// stand and it is checked again, up to kRepairRounds times; then from the tiles of those nodes).
///
/// **The repairs** (RepairNode, one changed node at a time). Heights are kept, flow is moved along
/// short paths, and support is restored around the node:
///   - a node that can reach the sink and now holds excess runs a small push-relabel around itself:
///     excess moves to lower neighbours, nodes left with excess are discharged in turn and rise when
///     nothing below them is left;
///   - a node that cannot reach the sink and now has residual capacity to it takes excess from nodes
///     that cannot reach the sink either, found by a small breadth-first search backwards; if some of
///     its capacity is left and the search closed, the searched region joins the sink side (at
///     heights no finite node pointing into it is more than one above);
///   - nodes that may have lost their support (the changed node, saturated path edges, filled sink
///     capacity) are re-checked: unsupported ones get inf, their dependants are re-checked, and the
///     dropped nodes are then relaxed (Bellman-Ford over the few of them) from their neighbours.
/// Each step has a small bound (discharges, searches, dropped nodes); beyond it the repair gives up.
///
/// The argument assumes the state is a valid preflow (the repairs below keep it one) and that
/// residual slots past the grid's edge are 0 (as Upload builds them).
///
/// Concurrency (cuda-pr): repairs of nearby nodes may meet. Every transfer of flow first takes the
/// excess and residual it needs with compare-and-swap (never below zero) and adds to the other side
/// afterwards, so the flow stays a valid preflow whatever the interleaving; a take that finds less
/// than it needs (another repair got there first) is undone and tried again later (the node
/// re-queued, the path searched again), until the repair's bounds run out.
/// Heights written by two repairs may disagree, which the certificate then catches.

#include <cstdint>

#include "backends/common/push_relabel_steps.h"

namespace mrf::pr {

/// Bounds of one repair; past them the repair reports failure (and the engine falls back).
constexpr int kLocalMaxPaths = 16;     ///< Augmenting searches for one node's sink capacity.
constexpr int kLocalMaxDischarges = 64;   ///< Discharges of nodes with excess around one node.
constexpr int kLocalMaxChecks = 128;   ///< Nodes whose support is re-checked.
constexpr int kLocalMaxDropped = 24;   ///< Nodes that lose their height.
constexpr int kLocalMaxRegion = 32;    ///< Nodes of the search around a node that joins the sink side.
/// Rounds of repairs of the nodes failing the certificate (local_resolve = 3), each followed by the
/// certificate, while the count of failing nodes falls.
constexpr int kRepairRounds = 3;

/// The state the repairs work on (device or host pointers).
struct LocalState {
  std::int64_t* x = nullptr;
  std::int32_t* h = nullptr;
  std::uint32_t* r = nullptr;
  std::uint8_t* touched = nullptr;  ///< Per tile: set where a repair changed something (relabels start there).
  std::uint8_t* active = nullptr;   ///< Per tile: set there too (push rounds visit it if the check fails).
  TileLayout layout;
};

/// The neighbour of v in direction d, or false past the grid's edge.
MRF_HD bool NeighbourOf(const TileLayout& L, std::int64_t v, int d, std::int64_t* w) {
  const int x = static_cast<int>(v % L.width);
  const std::int64_t rest = v / L.width;
  const int y = static_cast<int>(rest % L.height), z = static_cast<int>(rest / L.height);
  const int nx = x + DirX(L.kind, d), ny = y + DirY(L.kind, d), nz = z + DirZ(L.kind, d);
  if (!L.InGrid(nx, ny, nz)) return false;
  *w = L.Node(nx, ny, nz);
  return true;
}

/// The certificate at one node (C1-C4 above); nh[d] is inf where there is no neighbour.
template <int D>
MRF_HD bool CertifiedNode(std::int64_t x, int h, int inf, const std::uint32_t (&r)[D], const int (&nh)[D]) {
  if (x > 0 && h < inf) return false;   // C2
  if (x < 0 && h >= inf) return false;  // C4
  bool lower = x < 0;
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    if (r[d] == 0 || nh[d] >= inf) continue;
    if (h >= inf || h > nh[d] + 1) return false;  // C1
    lower |= nh[d] < h;
  }
  return h >= inf || lower;  // C3
}

/// Settling before the certificate (local_resolve = 3). Push rounds move flow without relabelling
/// the nodes they leave without excess, so a node whose residual edges downwards were saturated
/// fails C3 although it may still reach the sink. A finite node without residual capacity to the
/// sink whose residual neighbours all stand at its height or above rises to one above the lowest
/// of them, or to inf when none can reach the sink. Heights only rise and stay valid (C1).
template <int D>
MRF_HD int SettleStep(std::int64_t x, int h, int inf, std::uint8_t mask, const int (&nh)[D]) {
  if (x < 0 || h >= inf) return h;
  int lowest = inf;
MRF_UNROLL
  for (int d = 0; d < D; ++d)
    if (mask & (1u << d)) lowest = nh[d] < lowest ? nh[d] : lowest;
  if (lowest < h) return h;
  return lowest >= inf - 1 ? inf : lowest + 1;
}

/// Hops of one tile's settling by default (SettleStep to the tile's fixpoint, the halo as read; the
/// tuning's settle_hops). A region still rising after them may be cut off from the sink: see AliveStep.
constexpr int kSettleHops = 32;
/// Passes of settling over the tiles, all colours each: a tile's heights may rise after its
/// neighbours have settled (and regions cut off across two tiles are found one tile after the other);
/// the tuning's settle_passes.
constexpr int kSettlePasses = 2;

/// Regions cut off from the sink, found inside one tile. A tile node is alive when it has residual
/// capacity to the sink or a residual edge to an alive node, where the halo's nodes count as alive
/// when their height is finite. A finite tile node that is not alive at the fixpoint can reach
/// neither the sink nor a finite node outside the tile, so it takes height inf: its residual
/// neighbours are inf or not alive either, so C1 still holds. Whether inf nodes really cannot reach
/// the sink is left to the certificate (C4 fails where a fill gave up). Used
/// where settling ran out of hops or excess is left in the tile (excess bouncing in such a region
/// never leaves it). Returns the node's new alive bit; `alive_nh[d]`: the neighbours' bits.
template <int D>
MRF_HD bool AliveStep(bool alive, std::uint8_t mask, const bool (&alive_nh)[D]) {
MRF_UNROLL
  for (int d = 0; d < D; ++d) alive |= (mask & (1u << d)) && alive_nh[d];
  return alive;
}

/// CertifiedNode at node v of a whole state (direction-major residuals, as the engines hold them).
template <int KIND>
MRF_HD bool CertifiedAt(const std::int64_t* x, const std::int32_t* h, const std::uint32_t* r, const TileLayout& L,
                        std::int64_t v) {
  constexpr int D = NumDirs(KIND);
  std::uint32_t rv[D];
  int nh[D];
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    std::int64_t w;
    rv[d] = r[d * L.num_nodes + v];
    nh[d] = NeighbourOf(L, v, d, &w) ? h[w] : L.inf;
  }
  return CertifiedNode<D>(x[v], h[v], L.inf, rv, nh);
}

namespace local_detail {

template <class Ops>
MRF_HD void Touch(const LocalState& s, std::int64_t v) {
  const int tile = s.layout.TileOfNode(v);
  if (s.touched) Ops::Flag(s.touched + tile);
  if (s.active) Ops::Flag(s.active + tile);
}

// Index of u among the first n entries of list, or -1.
MRF_HD int IndexIn(const std::int64_t* list, int n, std::int64_t u) {
  for (int i = 0; i < n; ++i)
    if (list[i] == u) return i;
  return -1;
}

// A node's neighbours with their heights and the residuals between them (`incoming`: of the edges
// from each neighbour into u; otherwise of u's edges out). Every load is issued before any is used:
// a repair is one thread's chain of dependent loads, and its launch lasts as long as the longest
// chain, so a direction's height is read whether or not its residual turns out to be 0.
// Past the grid's edge: residual 0, height inf.
template <int KIND, class Ops>
struct Around {
  static constexpr int D = NumDirs(KIND);
  std::int64_t w[D];
  std::uint32_t r[D];
  int h[D];
  MRF_HD Around(const LocalState& s, std::int64_t u, bool incoming) {
    const TileLayout& L = s.layout;
    bool in[D];
MRF_UNROLL
    for (int d = 0; d < D; ++d) {
      w[d] = u;
      in[d] = NeighbourOf(L, u, d, &w[d]);
      const std::uint32_t* slot = incoming ? s.r + Opposite(KIND, d) * L.num_nodes + w[d] : s.r + d * L.num_nodes + u;
      r[d] = in[d] ? Ops::Load(slot) : 0u;
      h[d] = in[d] ? Ops::Load(s.h + w[d]) : L.inf;
    }
  }
};

// Adds u to the nodes to re-check unless it waits there already (entries from `from` on are not
// checked yet); false when the list is full.
MRF_HD bool NoteCheck(std::int64_t u, std::int64_t* check, int& checks, int from = 0) {
  if (IndexIn(check + from, checks - from, u) >= 0) return true;
  if (checks == kLocalMaxChecks) return false;
  check[checks++] = u;
  return true;
}

// Queues the nodes that may have leant on u (residual edge into u, finite height above old_h) after
// u's height rose from old_h.
template <int KIND, class Ops>
MRF_HD bool QueueDependants(const LocalState& s, std::int64_t u, int old_h, std::int64_t* check, int& checks,
                            int from = 0) {
  const Around<KIND, Ops> n(s, u, /*incoming=*/true);
  for (int d = 0; d < NumDirs(KIND); ++d)
    if (n.r[d] != 0 && n.h[d] < s.layout.inf && n.h[d] > old_h && !NoteCheck(n.w[d], check, checks, from))
      return false;
  return true;
}

// Excess bouncing between a few nodes (each rising above the other) means they may be cut off from
// the sink: a search forwards from u over residual edges to finite nodes, bounded to
// kLocalMaxRegion nodes, that closes without meeting sink capacity proves it, and the region
// drops to inf (keeping its excess). Returns whether it dropped; false also when the bound was hit.
template <int KIND, class Ops>
MRF_HD bool DropClosedRegion(const LocalState& s, std::int64_t u, std::int64_t* check, int& checks, bool* full) {
  constexpr int D = NumDirs(KIND);
  const TileLayout& L = s.layout;
  std::int64_t node[kLocalMaxRegion];
  int old_h[kLocalMaxRegion];
  int size = 1;
  node[0] = u;
  old_h[0] = Ops::Load(s.h + u);
  for (int head = 0; head < size; ++head) {
    const std::int64_t a = node[head];
    const std::int64_t xa = Ops::Load(s.x + a);
    const Around<KIND, Ops> n(s, a, /*incoming=*/false);
    if (xa < 0) return false;  // reaches sink capacity
    for (int d = 0; d < D; ++d) {
      if (n.r[d] == 0 || n.h[d] >= L.inf || IndexIn(node, size, n.w[d]) >= 0) continue;
      if (size == kLocalMaxRegion) return false;
      node[size] = n.w[d];
      old_h[size] = n.h[d];
      ++size;
    }
  }
  for (int i = 0; i < size; ++i) {
    Ops::Store(s.h + node[i], L.inf);
    Touch<Ops>(s, node[i]);
  }
  for (int i = 0; i < size; ++i)
    if (!QueueDependants<KIND, Ops>(s, node[i], old_h[i], check, checks)) *full = true;
  return true;
}

// A small push-relabel around v (finite height, excess): a queue of nodes with excess, each
// discharged in turn: it pushes to lower neighbours over residual edges (which may leave them with
// excess in turn), and with none left below it rises to one above its lowest residual neighbour, or
// to inf when none can reach the sink (it then keeps its excess). Flow spreads ring by ring, so the
// serial steps are the nodes it passes, not the paths. Nodes that may have lost their support (sink
// capacity used up, a saturated edge, a neighbour that rose) go to `check`.
template <int KIND, class Ops>
MRF_HD bool DischargeLocally(const LocalState& s, std::int64_t v, std::int64_t* check, int& checks) {
  constexpr int D = NumDirs(KIND);
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  const int inf = L.inf;
  std::int64_t queue[kLocalMaxDischarges];
  int head = 0, tail = 0;
  queue[tail++] = v;
  while (head < tail) {
    const std::int64_t u = queue[head++];
    std::int64_t xu = Ops::Load(s.x + u);
    int hu = Ops::Load(s.h + u);
    if (xu <= 0 || hu >= inf) continue;
    const Around<KIND, Ops> n(s, u, /*incoming=*/false);
    const std::int64_t* w = n.w;
    const std::uint32_t* ru = n.r;
    const int* hw = n.h;
    int lowest = inf;
MRF_UNROLL
    for (int d = 0; d < D; ++d)
      if (ru[d] != 0 && hw[d] < lowest) lowest = hw[d];
    if (lowest >= hu) {  // relabel
      if (IndexIn(queue, head - 1, u) >= 0) {  // it had a turn before and must rise again: is it cut off?
        bool full = false;
        const bool dropped = DropClosedRegion<KIND, Ops>(s, u, check, checks, &full);
        if (full) return false;
        if (dropped) continue;
      }
      const int lifted = lowest >= inf - 1 ? inf : lowest + 1;
      Ops::Store(s.h + u, lifted);
      Touch<Ops>(s, u);
      if (!QueueDependants<KIND, Ops>(s, u, hu, check, checks)) return false;
      if (lifted >= inf) continue;  // no way to the sink is left: u keeps its excess, dead
      hu = lifted;
    }
    bool saturated = false;
    for (int d = 0; d < D && xu > 0; ++d) {
      if (ru[d] == 0 || hw[d] >= hu) continue;
      const std::int64_t f = xu < ru[d] ? xu : ru[d];
      // A concurrent repair (cuda-pr) moved u's excess or this residual since they were read: look
      // at u again on a later turn.
      bool taken = Ops::Take(s.x + u, f, xu);
      if (taken && !Ops::Take(s.r + d * N + u, static_cast<std::uint32_t>(f), ru[d])) {
        Ops::Add(s.x + u, f);
        taken = false;
      }
      if (!taken) {
        xu = 0;
        if (tail == kLocalMaxDischarges) return false;
        queue[tail++] = u;
        break;
      }
      Ops::Add(s.r + Opposite(KIND, d) * N + w[d], static_cast<std::uint32_t>(f));
      const std::int64_t xw = Ops::Add(s.x + w[d], f);
      Touch<Ops>(s, w[d]);
      xu -= f;
      saturated |= f == ru[d];
      // Every transfer above completes before a bound is reported, so the flow stays consistent.
      if (xw - f < 0 && xw >= 0 && !NoteCheck(w[d], check, checks)) return false;  // its sink capacity is used up
      if (xw > 0) {
        if (tail == kLocalMaxDischarges) return false;
        queue[tail++] = w[d];
      }
    }
    if (saturated && !NoteCheck(u, check, checks)) return false;
    if (xu > 0) {  // pushed all it could at this height: it rises on its next turn
      if (tail == kLocalMaxDischarges) return false;
      queue[tail++] = u;
    }
  }
  return true;
}

// v cannot reach the sink and now has residual capacity to it. A breadth-first search backwards
// from v over nodes that cannot reach the sink either (residual edges into the searched region)
// finds excess and sends it to v along the search tree; the search starts again until v's capacity
// is used up. If the search closes (no such node left outside the region) with capacity left, the
// region can reach the sink only through v: it joins the sink side with its search distances.
template <int KIND, class Ops>
MRF_HD bool FillFromDeadRegion(const LocalState& s, std::int64_t v) {
  constexpr int D = NumDirs(KIND);
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  const int inf = L.inf;
  std::int64_t node[kLocalMaxRegion];
  int parent[kLocalMaxRegion], dir[kLocalMaxRegion], depth[kLocalMaxRegion];
  std::int64_t xv = Ops::Load(s.x + v);
  for (int attempt = 0; attempt < kLocalMaxPaths && xv < 0; ++attempt) {
    node[0] = v;
    parent[0] = -1;
    depth[0] = 0;
    int size = 1, found = -1;
    for (int head = 0; head < size && found < 0; ++head) {
      const Around<KIND, Ops> n(s, node[head], /*incoming=*/true);
      std::int64_t xw[D];  // loaded with the rest: only the nodes that join need it
MRF_UNROLL
      for (int d = 0; d < D; ++d) xw[d] = n.r[d] != 0 ? Ops::Load(s.x + n.w[d]) : 0;
      for (int d = 0; d < D && found < 0; ++d) {
        if (n.r[d] == 0 || n.h[d] < inf || IndexIn(node, size, n.w[d]) >= 0) continue;
        if (size == kLocalMaxRegion) return false;
        node[size] = n.w[d];
        parent[size] = head;
        dir[size] = Opposite(KIND, d);  // w -> u
        depth[size] = depth[head] + 1;
        if (xw[d] > 0) found = size;
        ++size;
      }
    }
    if (found < 0) {
      // Closed: every node that cannot reach the sink but can reach v is in the region, and none
      // holds excess. The region gets heights base + depth: each node one above its parent, and the
      // base high enough that no finite node pointing into the region is more than one above it.
      int base = 1;
      for (int i = 0; i < size; ++i) {
        const Around<KIND, Ops> n(s, node[i], /*incoming=*/true);
        for (int d = 0; d < D; ++d)
          if (n.r[d] != 0 && n.h[d] < inf && n.h[d] - 1 - depth[i] > base) base = n.h[d] - 1 - depth[i];
      }
      if (base + depth[size - 1] >= inf) return false;
      for (int i = 0; i < size; ++i) {
        Ops::Store(s.h + node[i], base + depth[i]);
        Touch<Ops>(s, node[i]);
      }
      return true;
    }
    // Send min(excess, residuals, capacity) from node[found] to v along the tree.
    const std::int64_t excess = Ops::Load(s.x + node[found]);
    std::int64_t f = excess < -xv ? excess : -xv;
    std::uint32_t seen[kLocalMaxRegion];
    for (int i = found; i > 0; i = parent[i]) {
      seen[i] = Ops::Load(s.r + dir[i] * N + node[i]);
      f = f < seen[i] ? f : seen[i];
    }
    // A failed take means a concurrent repair (cuda-pr) changed the path: undo, search again.
    if (f <= 0 || !Ops::Take(s.x + node[found], f, excess)) continue;
    bool taken = true;
    for (int i = found; i > 0 && taken; i = parent[i]) {
      if (Ops::Take(s.r + dir[i] * N + node[i], static_cast<std::uint32_t>(f), seen[i])) continue;
      for (int j = found; j != i; j = parent[j]) Ops::Add(s.r + dir[j] * N + node[j], static_cast<std::uint32_t>(f));
      Ops::Add(s.x + node[found], f);
      taken = false;
    }
    if (!taken) continue;
    for (int i = found; i > 0; i = parent[i]) {
      Ops::Add(s.r + Opposite(KIND, dir[i]) * N + node[parent[i]], static_cast<std::uint32_t>(f));
      Touch<Ops>(s, node[i]);
    }
    xv = Ops::Add(s.x + v, f);
  }
  return xv >= 0;
}

// Re-checks the support (C3) of the nodes in `check`: an unsupported node drops to inf and its
// dependants are checked in turn; the dropped nodes are then relaxed from their neighbours.
template <int KIND, class Ops>
MRF_HD bool RestoreSupport(const LocalState& s, std::int64_t* check, int checks) {
  constexpr int D = NumDirs(KIND);
  const int inf = s.layout.inf;
  std::int64_t dropped[kLocalMaxDropped];
  int dropped_count = 0;
  for (int head = 0; head < checks; ++head) {
    const std::int64_t u = check[head];
    const int hu = Ops::Load(s.h + u);
    const std::int64_t xu = Ops::Load(s.x + u);
    if (hu >= inf) continue;
    const Around<KIND, Ops> n(s, u, /*incoming=*/false);
    bool supported = xu < 0;
MRF_UNROLL
    for (int d = 0; d < D; ++d) supported |= n.r[d] > 0 && n.h[d] < hu;
    if (supported) continue;
    if (dropped_count == kLocalMaxDropped) return false;
    dropped[dropped_count++] = u;
    Ops::Store(s.h + u, inf);
    Touch<Ops>(s, u);
    // Only a higher neighbour pointing at u can have leant on it (checked again if it was before).
    if (!QueueDependants<KIND, Ops>(s, u, hu, check, checks, head + 1)) return false;
  }
  // Bellman-Ford over the dropped nodes: one more than the lowest residual neighbour.
  int height[kLocalMaxDropped];
  for (int i = 0; i < dropped_count; ++i) height[i] = inf;
  for (int round = 0; round <= dropped_count; ++round) {
    bool changed = false;
    for (int i = 0; i < dropped_count; ++i) {
      const Around<KIND, Ops> n(s, dropped[i], /*incoming=*/false);
      int lowest = inf;
      for (int d = 0; d < D; ++d) {
        if (n.r[d] == 0) continue;
        const int j = IndexIn(dropped, dropped_count, n.w[d]);
        const int hw = j >= 0 ? height[j] : n.h[d];
        lowest = hw < lowest ? hw : lowest;
      }
      const int candidate = lowest >= inf - 1 ? inf : lowest + 1;
      if (candidate < height[i]) {
        height[i] = candidate;
        changed = true;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < dropped_count; ++i) Ops::Store(s.h + dropped[i], height[i]);
  return true;
}

}  // namespace local_detail

/// Repairs the state around node v after its terminal weights changed (x already updated); with
/// `dead_only`, only if v cannot reach the sink. Returns false when a bound was hit (races with
/// concurrent repairs are retried, each retry counting against the bounds); the state is then still
/// a valid preflow, but the engine must not trust it without a global relabel.
template <int KIND, class Ops>
MRF_HD bool RepairNode(const LocalState& s, std::int64_t v, bool dead_only = false) {
  const int inf = s.layout.inf;
  std::int64_t check[kLocalMaxChecks];
  int checks = 0;
  const int hv = Ops::Load(s.h + v);
  const std::int64_t xv = Ops::Load(s.x + v);
  local_detail::Touch<Ops>(s, v);
  if (hv >= inf) return xv >= 0 || local_detail::FillFromDeadRegion<KIND, Ops>(s, v);
  if (dead_only) return true;
  if (xv > 0 && !local_detail::DischargeLocally<KIND, Ops>(s, v, check, checks)) return false;
  if (!local_detail::NoteCheck(v, check, checks)) return false;  // support may be gone (it had residual capacity to the sink, or sent flow away)
  return local_detail::RestoreSupport<KIND, Ops>(s, check, checks);
}

/// Plain memory operations for sequential repairs on the host.
struct HostLocalOps {
  template <class T>
  static T Load(const T* p) { return *p; }
  template <class T>
  static void Store(T* p, T value) { *p = value; }
  /// Subtracts f when at least f is there (`seen`: the value last read there, which the device's
  /// compare-and-swap tries first).
  template <class T>
  static bool Take(T* p, T f, T /*seen*/) {
    if (*p < f) return false;
    *p -= f;
    return true;
  }
  /// Adds f and returns the new value.
  template <class T>
  static T Add(T* p, T f) { return *p += f; }
  static void Flag(std::uint8_t* p) { *p = 1; }
};

}  // namespace mrf::pr
