#include "backends/cpu/tbb_push_relabel.h"

#include "backends/common/push_relabel_local.h"

#include <tbb/blocked_range.h>
#include <tbb/combinable.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "backends/common/push_relabel_wave.h"
#include "mrf/memory.h"

namespace mrf {
namespace {

using pr::TileLayout;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Per-task scratch: one tile with its halo, laid out like the CUDA block's shared memory and registers.
// Flow pushed to a node of the same tile (target, direction at the target, amount).
struct Message {
  int target, dir;
  std::uint32_t flow;
};
// Flow pushed out of the tile (node, direction, amount), handed over after the visit.
struct Outflow {
  int node, dir;
  std::uint32_t flow;
};

// Per-task scratch: one tile with its halo (the CUDA block's shared memory and registers).
struct TileScratch {
  std::vector<int> halo_h;               // heights of tile + halo
  std::vector<std::int64_t> x;           // per tile node
  std::vector<int> h, new_h, stamp;
  std::vector<std::uint32_t> r;          // [node * D + d]
  std::vector<std::uint8_t> mask, queued;
  std::vector<std::uint8_t> alive;       // settling: per cell of tile + halo (pr::AliveStep)
  std::vector<std::int64_t> node;        // global index, -1 outside the grid
  std::vector<int> active, candidates;   // tile nodes (work lists)
  std::vector<Message> messages;
  std::vector<Outflow> outside;
};

class TbbPushRelabelEngine final : public PushRelabelEngine {
 public:
  explicit TbbPushRelabelEngine(const PushRelabelTuning& tuning) : PushRelabelEngine(tuning) {}
  std::string name() const override { return "tbb-pr"; }

  PushRelabelState DownloadState() override {
    PushRelabelState state;
    state.x = x_;
    state.h = h_;
    state.r = r_;
    return state;
  }

 protected:
  void Prepare(const TileLayout& layout) override {
    const std::size_t n = static_cast<std::size_t>(layout.num_nodes);
    const int dirs = pr::NumDirs(layout.kind);
    x0_.resize(n);
    x_.resize(n);
    h_.resize(n);
    mask_.resize(n);
    r_.resize(n * dirs);
    cap_.resize(n * dirs / 2);
    rev_.resize(n * dirs / 2);
    labels_.resize(n);
    active_.assign(layout.num_tiles(), 0);
    dirty_.assign(layout.num_tiles(), 0);
    touched_.assign(layout.num_tiles(), 0);
    seed_.assign(layout.num_tiles(), 0);
  }

  std::int64_t* HostExcessBuffer() override { return x0_.data(); }

  void Upload(const StGraph& graph) override {
    const auto start = std::chrono::steady_clock::now();
    std::copy(graph.edge_caps().begin(), graph.edge_caps().end(), cap_.begin());
    std::copy(graph.edge_rev_caps().begin(), graph.edge_rev_caps().end(), rev_.begin());
    times_ = {};
    times_.upload_ms = MsSince(start);
    visits_ = 0;
    iterations_ = 0;
    bfs_visits_ = 0;
    const auto build = std::chrono::steady_clock::now();
    const std::int64_t n = layout_.num_nodes;
    const int fwd = pr::NumForward(layout_.kind);
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 4096), [&](const tbb::blocked_range<std::int64_t>& range) {
      for (std::int64_t v = range.begin(); v != range.end(); ++v) {
        x_[v] = x0_[v];
        const int x = static_cast<int>(v % layout_.width);
        const std::int64_t rest = v / layout_.width;
        const int y = static_cast<int>(rest % layout_.height), z = static_cast<int>(rest / layout_.height);
        for (int d = 0; d < fwd; ++d) {
          const int kind = layout_.kind;
          const bool ahead = layout_.InGrid(x + pr::DirX(kind, d), y + pr::DirY(kind, d), z + pr::DirZ(kind, d));
          const bool behind = layout_.InGrid(x - pr::DirX(kind, d), y - pr::DirY(kind, d), z - pr::DirZ(kind, d));
          r_[d * n + v] = ahead ? static_cast<std::uint32_t>(cap_[d * n + v]) : 0u;
          r_[(d + fwd) * n + v] = behind ? static_cast<std::uint32_t>(rev_[d * n + v - DirOffset(d)]) : 0u;
        }
      }
    });
    times_.solve_ms += MsSince(build);
  }

  void ApplyChanges(const std::vector<NodeChange>& nodes, const std::vector<EdgeChange>& edges) override {
    times_ = {};
    visits_ = 0;
    iterations_ = 0;
    bfs_visits_ = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const NodeChange& c : nodes) {
      x_[c.node] += c.delta;
      active_[layout_.TileOfNode(c.node)] = 1;
      touched_[layout_.TileOfNode(c.node)] = 1;
    }
    const std::int64_t n = layout_.num_nodes;
    const int fwd = pr::NumForward(layout_.kind);
    for (const EdgeChange& c : edges) {
      const int d = static_cast<int>(c.slot / n);
      const std::int64_t v = c.slot % n;
      const std::int64_t w = v + DirOffset(d);
      const std::int64_t flow = std::int64_t{cap_[c.slot]} - r_[d * n + v];
      const std::int64_t kept = std::clamp<std::int64_t>(flow, -std::int64_t{c.rev_cap}, c.cap);
      r_[d * n + v] = static_cast<std::uint32_t>(c.cap - kept);
      r_[(d + fwd) * n + w] = static_cast<std::uint32_t>(c.rev_cap + kept);
      x_[v] += flow - kept;
      x_[w] -= flow - kept;
      cap_[c.slot] = c.cap;
      rev_[c.slot] = c.rev_cap;
      active_[layout_.TileOfNode(v)] = 1;
      active_[layout_.TileOfNode(w)] = 1;
      touched_[layout_.TileOfNode(v)] = 1;
      touched_[layout_.TileOfNode(w)] = 1;
    }
    times_.solve_ms += MsSince(start);
  }

  CycleResult Cycle(int push_rounds, int iterations, Relabel relabel,
                    bool /*wait: the loops here always finish*/) override {
    CycleResult result;
    if (relabel != Relabel::kNone) {
      const bool incremental = relabel == Relabel::kIncremental;
      const auto start = std::chrono::steady_clock::now();
      switch (layout_.kind) {
        case pr::kKindGrid4: result.active_nodes = GlobalRelabelT<pr::kKindGrid4>(&result.bfs_rounds, incremental); break;
        case pr::kKindGrid8: result.active_nodes = GlobalRelabelT<pr::kKindGrid8>(&result.bfs_rounds, incremental); break;
        default: result.active_nodes = GlobalRelabelT<pr::kKindGrid3D6>(&result.bfs_rounds, incremental); break;
      }
      const double relabel_ms = MsSince(start);
      stats_.relabel_ms += relabel_ms;
      times_.solve_ms += relabel_ms;
      if (result.active_nodes == 0 || push_rounds == 0) return result;
    }
    const auto push_start = std::chrono::steady_clock::now();
    switch (layout_.kind) {
      case pr::kKindGrid4: PushRoundsT<pr::kKindGrid4>(push_rounds, iterations); break;
      case pr::kKindGrid8: PushRoundsT<pr::kKindGrid8>(push_rounds, iterations); break;
      default: PushRoundsT<pr::kKindGrid3D6>(push_rounds, iterations); break;
    }
    const double push_ms = MsSince(push_start);
    stats_.push_ms += push_ms;
    times_.solve_ms += push_ms;
    return result;
  }

  // The changes one after another, in schedule order (the GPU runs each colour's groups at once).
  bool RepairLocally(const std::vector<NodeChange>& nodes, const RepairSchedule&, bool dead_only) override {
    const auto start = std::chrono::steady_clock::now();
    bool certified = false;
    switch (layout_.kind) {
      case pr::kKindGrid4: certified = RepairLocallyT<pr::kKindGrid4>(nodes, dead_only); break;
      case pr::kKindGrid8: certified = RepairLocallyT<pr::kKindGrid8>(nodes, dead_only); break;
      default: certified = RepairLocallyT<pr::kKindGrid3D6>(nodes, dead_only); break;
    }
    times_.solve_ms += MsSince(start);
    return certified;
  }

  void Settle() override {
    switch (layout_.kind) {
      case pr::kKindGrid4: SettleT<pr::kKindGrid4>(); break;
      case pr::kKindGrid8: SettleT<pr::kKindGrid8>(); break;
      default: SettleT<pr::kKindGrid3D6>(); break;
    }
  }

  bool CheckCertificate(bool narrow_touched) override {
    const auto start = std::chrono::steady_clock::now();
    bool certified = false;
    if (narrow_touched) std::fill(touched_.begin(), touched_.end(), 0);
    switch (layout_.kind) {
      case pr::kKindGrid4: certified = CertifyT<pr::kKindGrid4>(narrow_touched); break;
      case pr::kKindGrid8: certified = CertifyT<pr::kKindGrid8>(narrow_touched); break;
      default: certified = CertifyT<pr::kKindGrid3D6>(narrow_touched); break;
    }
    times_.solve_ms += MsSince(start);
    return certified;
  }

  bool RepairListedViolations() override {
    const auto start = std::chrono::steady_clock::now();
    bool certified = false;
    switch (layout_.kind) {
      case pr::kKindGrid4: certified = RepairListedT<pr::kKindGrid4>(); break;
      case pr::kKindGrid8: certified = RepairListedT<pr::kKindGrid8>(); break;
      default: certified = RepairListedT<pr::kKindGrid3D6>(); break;
    }
    times_.solve_ms += MsSince(start);
    return certified;
  }

  std::int64_t Finish(std::vector<Label>* sink_side) override {
    AssignLabeling(sink_side, labels_);  // on all cores: 64 MB at 4096 x 4096
    return sink_residual_;
  }

  // On the 1024 scene (16 cores of the H200 machine, edits of +-10% at random nodes) a re-solve took
  // 77-82 ms at half the nodes and 137-146 ms at all of them, a fresh solve 100-108 ms.
  double DenseEditFraction() const override { return 0.5; }

  PhaseTimes Times() override { return times_; }

  std::size_t WorkspaceBytes() const override {
    return x0_.capacity() * 8 + x_.capacity() * 8 + h_.capacity() * 4 + mask_.capacity() + r_.capacity() * 4 +
           cap_.capacity() * 4 + rev_.capacity() * 4 + labels_.capacity() * 4 + active_.capacity() + dirty_.capacity() +
           settled_.capacity();
  }

 private:
  std::int64_t DirOffset(int d) const {
    const int k = layout_.kind;
    return pr::DirX(k, d) + std::int64_t{layout_.width} * (pr::DirY(k, d) + std::int64_t{layout_.height} * pr::DirZ(k, d));
  }

  // Calls f(tx, ty, tz) for every tile of one colour, in parallel.
  template <class F>
  void ForEachTileOfColour(int colour, F&& f) {
    const TileLayout& L = layout_;
    const int gx = L.ColourGridX(), gy = L.ColourGridY(), gz = L.ColourGridZ();
    tbb::parallel_for(tbb::blocked_range<int>(0, gx * gy * gz, 1), [&](const tbb::blocked_range<int>& range) {
      for (int b = range.begin(); b != range.end(); ++b) {
        int tx = 0, ty = 0, tz = 0;
        if (L.ColourTile(colour, b % gx, (b / gx) % gy, b / (gx * gy), &tx, &ty, &tz)) f(tx, ty, tz);
      }
    });
  }

  template <class F>
  void ForEachTile(F&& f) {
    const TileLayout& L = layout_;
    tbb::parallel_for(tbb::blocked_range<int>(0, L.num_tiles(), 1), [&](const tbb::blocked_range<int>& range) {
      for (int t = range.begin(); t != range.end(); ++t)
        f(t % L.tiles_x, (t / L.tiles_x) % L.tiles_y, t / (L.tiles_x * L.tiles_y));
    });
  }

  // Geometry of one tile with its halo (the CUDA kernels use the same arithmetic).
  struct TileFrame {
    int x0, y0, z0;   // first node of the tile
    int hx, hy, hz;   // halo box size
    int zpad;         // 1 on 3-D grids (halo in z), else 0
    int n;            // nodes per tile
    int tile_x, tile_y;  // tile size in x and y
    int HaloIndex(int lx, int ly, int lz) const { return (lx + 1) + hx * ((ly + 1) + hy * (lz + zpad)); }
    // Coordinates of tile node l inside the tile, and its index in the halo box.
    void Coords(int l, int* lx, int* ly, int* lz) const {
      *lx = l % tile_x;
      *ly = (l / tile_x) % tile_y;
      *lz = l / (tile_x * tile_y);
    }
    int HaloOf(int l) const {
      int lx, ly, lz;
      Coords(l, &lx, &ly, &lz);
      return HaloIndex(lx, ly, lz);
    }
    // The heights around halo cell c, one per direction.
    template <int KIND>
    void NeighbourHeights(const std::vector<int>& halo_h, int c, int (&nh)[pr::NumDirs(KIND)]) const {
      for (int d = 0; d < pr::NumDirs(KIND); ++d)
        nh[d] = halo_h[c + pr::DirX(KIND, d) + hx * (pr::DirY(KIND, d) + hy * pr::DirZ(KIND, d))];
    }
  };

  TileFrame Frame(int tx, int ty, int tz) const {
    const TileLayout& L = layout_;
    TileFrame f;
    f.x0 = tx * L.tile_x;
    f.y0 = ty * L.tile_y;
    f.z0 = tz * L.tile_z;
    f.zpad = L.kind == pr::kKindGrid3D6 ? 1 : 0;
    f.hx = L.tile_x + 2;
    f.hy = L.tile_y + 2;
    f.hz = L.tile_z + 2 * f.zpad;
    f.n = L.tile_x * L.tile_y * L.tile_z;
    f.tile_x = L.tile_x;
    f.tile_y = L.tile_y;
    return f;
  }

  // The graph node of tile node l, or -1 where the tile overhangs the grid.
  std::int64_t NodeOf(const TileFrame& f, int l) const {
    int lx, ly, lz;
    f.Coords(l, &lx, &ly, &lz);
    const int gx = f.x0 + lx, gy = f.y0 + ly, gz = f.z0 + lz;
    return layout_.InGrid(gx, gy, gz) ? layout_.Node(gx, gy, gz) : -1;
  }

  // Writes the halo heights of the tile's nodes back to the graph.
  void StoreHaloHeights(const TileFrame& f, const TileScratch& s) {
    for (int l = 0; l < f.n; ++l)
      if (s.node[l] >= 0) h_[s.node[l]] = s.halo_h[f.HaloOf(l)];
  }

  // Loads the heights of the tile and its halo (inf outside the grid).
  void LoadHalo(const TileFrame& f, std::vector<int>& halo_h) const {
    const TileLayout& L = layout_;
    halo_h.resize(static_cast<std::size_t>(f.hx) * f.hy * f.hz);
    for (int cz = 0; cz < f.hz; ++cz)
      for (int cy = 0; cy < f.hy; ++cy)
        for (int cx = 0; cx < f.hx; ++cx) {
          const int gx = f.x0 + cx - 1, gy = f.y0 + cy - 1, gz = f.z0 + cz - f.zpad;
          halo_h[cx + f.hx * (cy + f.hy * cz)] = L.InGrid(gx, gy, gz) ? h_[L.Node(gx, gy, gz)] : L.inf;
        }
  }

  // Wave pushes of a 4-connected tile (tuning wave_push; push_relabel_wave.h): each line carries
  // excess node after node along admissible edges of the iteration's heights. The CUDA block relaxes
  // the same recurrence across a warp and reaches the same integers.
  // One line of `count` tile nodes from `first`, `step` apart, sending along d_out (d_back points back).
  void WaveLine(TileScratch& s, int first, int step, int count, int d_out, int d_back) const {
    constexpr int D = 4;  // directions of kKindGrid4: +x, +y, -x, -y
    const int inf = layout_.inf;
    std::uint32_t in = 0;
    for (int k = 0, l = first; k < count; ++k, l += step) {
      const bool inside = k + 1 < count;
      const int nh = inside ? s.h[l + step] : inf;
      const std::uint32_t cap = pr::WaveLinkCap(s.h[l], inf, s.r[l * D + d_out], nh, inside);
      const std::uint32_t out = pr::WaveCarry(s.x[l], cap, in);
      pr::WaveApply(s.x[l], s.r[l * D + d_out], s.r[l * D + d_back], in, out);
      in = out;
    }
  }
  // Every row rightwards, then leftwards (before the push of a local iteration).
  void WaveRows(const TileFrame& f, TileScratch& s) const {
    for (int ly = 0; ly < f.tile_y; ++ly) {
      WaveLine(s, ly * f.tile_x, 1, f.tile_x, 0, 2);
      WaveLine(s, ly * f.tile_x + f.tile_x - 1, -1, f.tile_x, 2, 0);
    }
  }
  // Every column downwards, then upwards (after the pull).
  void WaveColumns(const TileFrame& f, TileScratch& s) const {
    for (int lx = 0; lx < f.tile_x; ++lx) {
      WaveLine(s, lx, f.tile_x, f.tile_y, 1, 3);
      WaveLine(s, lx + (f.tile_y - 1) * f.tile_x, -f.tile_x, f.tile_y, 3, 1);
    }
  }

  // One visit of a tile: up to max_iterations push/pull/relabel iterations, the same steps as the
  // CUDA block's loop. The GPU runs every node each iteration; here only the active nodes and those
  // that received flow are touched, which changes nothing (the steps are no-ops on the others).
  template <int KIND>
  bool PushTile(int tx, int ty, int tz, int max_iterations, TileScratch& s) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    const int tile = L.TileIndex(tx, ty, tz);
    if (!active_[tile]) return false;
    const TileFrame f = Frame(tx, ty, tz);
    const std::int64_t N = L.num_nodes;
    const int inf = L.inf;
    s.x.assign(f.n, 0);
    s.h.assign(f.n, inf);
    s.new_h.assign(f.n, inf);
    s.r.assign(static_cast<std::size_t>(f.n) * D, 0);
    s.node.assign(f.n, -1);
    s.stamp.assign(f.n, -1);
    s.active.clear();
    s.outside.clear();
    LoadHalo(f, s.halo_h);
    for (int l = 0; l < f.n; ++l) {
      const std::int64_t v = NodeOf(f, l);
      if (v < 0) continue;
      s.node[l] = v;
      s.x[l] = x_[v];
      s.h[l] = h_[v];
      for (int d = 0; d < D; ++d) s.r[l * D + d] = r_[d * N + v];
      if (pr::IsActive(s.x[l], s.h[l], inf)) s.active.push_back(l);
    }
    if (s.active.empty()) {
      active_[tile] = 0;
      return false;
    }
    auto neighbour_heights = [&](int l, int (&nh)[D]) { f.NeighbourHeights<KIND>(s.halo_h, f.HaloOf(l), nh); };
    int iterations = 0;
    while (iterations < max_iterations) {
      ++iterations;
      const bool wave = KIND == pr::kKindGrid4 && tuning_.wave_push;
      if (wave) {
        WaveRows(f, s);  // moves excess through inactive nodes too: the work list is made again
        s.active.clear();
        for (int l = 0; l < f.n; ++l)
          if (pr::IsActive(s.x[l], s.h[l], inf)) s.active.push_back(l);
      }
      // Push (heights fixed): flow for tile nodes becomes messages, flow leaving the tile waits.
      s.messages.clear();
      for (int l : s.active) {
        int nh[D];
        std::uint32_t r[D], o[D];
        neighbour_heights(l, nh);
        for (int d = 0; d < D; ++d) r[d] = s.r[l * D + d];
        pr::PushStep<D>(s.x[l], s.h[l], inf, r, nh, o);
        int lx, ly, lz;
        f.Coords(l, &lx, &ly, &lz);
        for (int d = 0; d < D; ++d) {
          s.r[l * D + d] = r[d];
          if (o[d] == 0) continue;
          const int ux = lx + pr::DirX(KIND, d), uy = ly + pr::DirY(KIND, d), uz = lz + pr::DirZ(KIND, d);
          if (ux >= 0 && uy >= 0 && uz >= 0 && ux < L.tile_x && uy < L.tile_y && uz < L.tile_z)
            s.messages.push_back({ux + L.tile_x * (uy + L.tile_y * uz), pr::Opposite(KIND, d), o[d]});
          else
            s.outside.push_back({l, d, o[d]});
        }
      }
      // Pull: what was pushed arrives (sums do not depend on order).
      s.candidates.clear();
      for (int l : s.active) {
        s.stamp[l] = iterations;
        s.candidates.push_back(l);
      }
      for (const Message& m : s.messages) {
        pr::PullStep(s.x[m.target], s.r[m.target * D + m.dir], m.flow);
        if (s.stamp[m.target] != iterations) {
          s.stamp[m.target] = iterations;
          s.candidates.push_back(m.target);
        }
      }
      if (wave) {
        WaveColumns(f, s);  // then every node may have excess
        s.candidates.resize(f.n);
        for (int l = 0; l < f.n; ++l) s.candidates[l] = l;
      }
      // Relabel decisions read the heights of before this iteration; then publish them.
      for (int l : s.candidates) {
        s.new_h[l] = s.h[l];
        if (!pr::IsActive(s.x[l], s.h[l], inf)) continue;
        int nh[D];
        std::uint32_t r[D];
        neighbour_heights(l, nh);
        for (int d = 0; d < D; ++d) r[d] = s.r[l * D + d];
        s.new_h[l] = pr::RelabelStep<D>(s.x[l], s.h[l], inf, r, nh);
      }
      s.active.clear();
      for (int l : s.candidates) {
        if (s.new_h[l] != s.h[l]) {
          s.h[l] = s.new_h[l];
          s.halo_h[f.HaloOf(l)] = s.h[l];
        }
        if (pr::IsActive(s.x[l], s.h[l], inf)) s.active.push_back(l);
      }
      if (s.active.empty()) break;
    }
    // Write back; flow pushed out of the tile goes to the neighbours (idle: other colours).
    for (int l = 0; l < f.n; ++l) {
      const std::int64_t v = s.node[l];
      if (v < 0) continue;
      x_[v] = s.x[l];
      h_[v] = s.h[l];
      for (int d = 0; d < D; ++d) r_[d * N + v] = s.r[l * D + d];
    }
    for (const Outflow& o : s.outside) {
      int lx, ly, lz;
      f.Coords(o.node, &lx, &ly, &lz);
      const int gx = f.x0 + lx + pr::DirX(KIND, o.dir), gy = f.y0 + ly + pr::DirY(KIND, o.dir),
                gz = f.z0 + lz + pr::DirZ(KIND, o.dir);
      const std::int64_t w = L.Node(gx, gy, gz);
      __atomic_fetch_add(&x_[w], static_cast<std::int64_t>(o.flow), __ATOMIC_RELAXED);
      r_[pr::Opposite(KIND, o.dir) * N + w] += o.flow;  // only this node pushes into that slot
      __atomic_store_n(&active_[L.TileIndex(gx / L.tile_x, gy / L.tile_y, gz / L.tile_z)], 1, __ATOMIC_RELAXED);
      __atomic_store_n(&touched_[L.TileIndex(gx / L.tile_x, gy / L.tile_y, gz / L.tile_z)], 1, __ATOMIC_RELAXED);
    }
    active_[tile] = s.active.empty() ? 0 : 1;
    touched_[tile] = 1;
    visits_.fetch_add(1, std::memory_order_relaxed);
    iterations_.fetch_add(iterations, std::memory_order_relaxed);
    return true;
  }

  template <int KIND>
  std::int64_t PushRoundsT(int rounds, int iterations) {
    std::int64_t busy = 0;
    stats_.launches += static_cast<std::int64_t>(rounds) * layout_.num_colours();
    for (int round = 0; round < rounds; ++round) {
      std::atomic<std::int64_t> count{0};
      for (int colour = 0; colour < layout_.num_colours(); ++colour) {
        ForEachTileOfColour(colour, [&](int tx, int ty, int tz) {
          if (PushTile<KIND>(tx, ty, tz, iterations, scratch_.local())) count.fetch_add(1, std::memory_order_relaxed);
        });
      }
      busy = count.load();
      if (busy == 0) break;  // later rounds would do nothing (the GPU's kernels exit at once)
    }
    stats_.tile_visits = visits_.load();
    stats_.tile_iterations = iterations_.load();
    return busy;
  }

  // One BFS visit of a tile: relax to the local fixpoint with the halo fixed (the same fixpoint the
  // CUDA block's Jacobi loop reaches; here a worklist visits only nodes whose neighbours fell).
  // Returns whether any height changed.
  template <int KIND>
  bool BfsTile(int tx, int ty, int tz, TileScratch& s) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    const TileFrame f = Frame(tx, ty, tz);
    const int inf = L.inf;
    LoadHalo(f, s.halo_h);
    s.mask.assign(f.n, 0);
    s.node.assign(f.n, -1);
    s.queued.assign(f.n, 1);
    s.active.clear();
    for (int l = 0; l < f.n; ++l) {
      s.active.push_back(l);
      s.node[l] = NodeOf(f, l);
      if (s.node[l] >= 0) s.mask[l] = mask_[s.node[l]];
    }
    bool changed_any = false;
    for (std::size_t head = 0; head < s.active.size(); ++head) {
      const int l = s.active[head];
      s.queued[l] = 0;
      int lx, ly, lz;
      f.Coords(l, &lx, &ly, &lz);
      const int c = f.HaloIndex(lx, ly, lz);
      int nh[D];
      f.NeighbourHeights<KIND>(s.halo_h, c, nh);
      const int new_h = pr::BfsStep<D>(s.halo_h[c], inf, s.mask[l], nh);
      if (new_h == s.halo_h[c]) continue;
      s.halo_h[c] = new_h;
      changed_any = true;
      // Tile neighbours with a residual edge to l may fall now.
      for (int d = 0; d < D; ++d) {
        const int ux = lx + pr::DirX(KIND, d), uy = ly + pr::DirY(KIND, d), uz = lz + pr::DirZ(KIND, d);
        if (ux < 0 || uy < 0 || uz < 0 || ux >= L.tile_x || uy >= L.tile_y || uz >= L.tile_z) continue;
        const int u = ux + L.tile_x * (uy + L.tile_y * uz);
        if (!s.queued[u] && (s.mask[u] >> pr::Opposite(KIND, d) & 1)) {
          s.queued[u] = 1;
          s.active.push_back(u);
        }
      }
    }
    if (changed_any) StoreHaloHeights(f, s);
    return changed_any;
  }

  // Marks tile t and the tiles whose halo holds its nodes (for 8-connected grids all 8 around;
  // all of them have other colours than t).
  template <int KIND>
  void MarkWithNeighbours(std::vector<std::uint8_t>& flags, int tx, int ty, int tz) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    __atomic_store_n(&flags[L.TileIndex(tx, ty, tz)], 1, __ATOMIC_RELAXED);
    for (int d = 0; d < D; ++d) {
      const int nx = tx + pr::DirX(KIND, d), ny = ty + pr::DirY(KIND, d), nz = tz + pr::DirZ(KIND, d);
      if (nx >= 0 && ny >= 0 && nz >= 0 && nx < L.tiles_x && ny < L.tiles_y && nz < L.tiles_z)
        __atomic_store_n(&flags[L.TileIndex(nx, ny, nz)], 1, __ATOMIC_RELAXED);
    }
  }

  // Rounds over the dirty tiles, colour by colour, until a round changes nothing; `visit` returns
  // whether the tile changed, which makes its neighbours dirty. Returns the number of rounds.
  template <int KIND, class Visit>
  std::int64_t TileRounds(Visit&& visit) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    std::int64_t rounds = 0;
    for (bool changed = true; changed;) {
      changed = false;
      ++rounds;
      stats_.launches += L.num_colours();
      for (int colour = 0; colour < L.num_colours(); ++colour) {
        std::atomic<bool> any{false};
        ForEachTileOfColour(colour, [&](int tx, int ty, int tz) {
          const int t = L.TileIndex(tx, ty, tz);
          if (!dirty_[t]) return;
          dirty_[t] = 0;
          if (!visit(tx, ty, tz, scratch_.local())) return;
          any.store(true, std::memory_order_relaxed);
          for (int d = 0; d < D; ++d) {
            const int nx = tx + pr::DirX(KIND, d), ny = ty + pr::DirY(KIND, d), nz = tz + pr::DirZ(KIND, d);
            if (nx >= 0 && ny >= 0 && nz >= 0 && nx < L.tiles_x && ny < L.tiles_y && nz < L.tiles_z)
              __atomic_store_n(&dirty_[L.TileIndex(nx, ny, nz)], 1, __ATOMIC_RELAXED);
          }
        });
        changed |= any.load();
      }
    }
    return rounds;
  }

  // Loads a tile for the relabel-like visits: halo heights, nodes, excess, and residual bitmasks
  // computed afresh (and stored).
  template <int KIND>
  void LoadTileWithMasks(const TileFrame& f, TileScratch& s) {
    constexpr int D = pr::NumDirs(KIND);
    const std::int64_t N = layout_.num_nodes;
    LoadHalo(f, s.halo_h);
    s.node.assign(f.n, -1);
    s.x.assign(f.n, 0);
    s.new_h.assign(f.n, layout_.inf);
    s.mask.assign(f.n, 0);
    for (int l = 0; l < f.n; ++l) {
      const std::int64_t v = NodeOf(f, l);
      if (v < 0) continue;
      s.node[l] = v;
      s.x[l] = x_[v];
      std::uint32_t r[D];
      for (int d = 0; d < D; ++d) r[d] = r_[d * N + v];
      s.mask[l] = mask_[v] = pr::ResidualMask<D>(r);
    }
  }

  // Whether tile (tx, ty, tz) or a tile next to it is flagged.
  template <int KIND>
  bool FlaggedNear(const std::vector<std::uint8_t>& flags, int tx, int ty, int tz) const {
    const TileLayout& L = layout_;
    bool near = flags[L.TileIndex(tx, ty, tz)] != 0;
    for (int d = 0; d < pr::NumDirs(KIND); ++d) {
      const int nx = tx + pr::DirX(KIND, d), ny = ty + pr::DirY(KIND, d), nz = tz + pr::DirZ(KIND, d);
      if (nx >= 0 && ny >= 0 && nz >= 0 && nx < L.tiles_x && ny < L.tiles_y && nz < L.tiles_z)
        near |= flags[L.TileIndex(nx, ny, nz)] != 0;
    }
    return near;
  }

  // Incremental relabel, first phase, on one tile: refresh the residual bitmasks, then drop the
  // heights no longer backed by a residual path (KillStep) to the local fixpoint.
  template <int KIND>
  bool KillTile(int tx, int ty, int tz, TileScratch& s) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    const TileFrame f = Frame(tx, ty, tz);
    const int inf = L.inf;
    LoadTileWithMasks<KIND>(f, s);
    bool changed_any = false;
    HopsToFixpoint<KIND>(f, s, &changed_any, 0, [inf](std::int64_t x, int h, std::uint8_t mask, const int (&nh)[D]) {
      return pr::KillStep<D>(x, h, inf, mask, nh);
    });
    if (changed_any) StoreHaloHeights(f, s);
    return changed_any;
  }

  // Relaxes a tile loaded by LoadTileWithMasks to its local fixpoint, the halo as read: every node's
  // height becomes step(x, h, mask, its neighbours' heights), all at once (as the CUDA block's hops),
  // until none changes or, with max_hops > 0, after that many hops. Sets *changed_any when a height
  // changed; returns true when the tile was still changing at the bound.
  template <int KIND, class Step>
  bool HopsToFixpoint(const TileFrame& f, TileScratch& s, bool* changed_any, int max_hops, Step step) {
    constexpr int D = pr::NumDirs(KIND);
    for (int hop = 0; max_hops == 0 || hop < max_hops; ++hop) {
      bool changed = false;
      for (int l = 0; l < f.n; ++l) {
        const int c = f.HaloOf(l);
        s.new_h[l] = s.halo_h[c];
        if (s.node[l] < 0) continue;
        int nh[D];
        f.NeighbourHeights<KIND>(s.halo_h, c, nh);
        s.new_h[l] = step(s.x[l], s.halo_h[c], s.mask[l], nh);
        changed |= s.new_h[l] != s.halo_h[c];
      }
      if (!changed) return false;
      *changed_any = true;
      for (int l = 0; l < f.n; ++l) s.halo_h[f.HaloOf(l)] = s.new_h[l];
    }
    return true;
  }

  // Settling before the certificate (pr::SettleStep, pr::AliveStep), in settle_passes passes colour
  // by colour: the first visits the tiles that changed or touch one that did, later ones the tiles
  // next to one that the pass before changed. The CUDA kernels take the same steps.
  template <int KIND>
  void SettleT() {
    constexpr int D = pr::NumDirs(KIND);
    const auto start = std::chrono::steady_clock::now();
    const TileLayout& L = layout_;
    const int inf = L.inf;
    const auto settle_step = [inf](std::int64_t x, int h, std::uint8_t mask, const int (&nh)[D]) {
      return pr::SettleStep<D>(x, h, inf, mask, nh);
    };
    settled_.assign(L.num_tiles(), 0);
    for (int pass = 0; pass < tuning_.settle_passes; ++pass) {
      for (int colour = 0; colour < L.num_colours(); ++colour) {
        ++stats_.launches;
        const std::vector<std::uint8_t>& near_flags = pass == 0 ? touched_ : settled_;
        ForEachTileOfColour(colour, [&](int tx, int ty, int tz) {
          const int tile = L.TileIndex(tx, ty, tz);
          const bool near = FlaggedNear<KIND>(near_flags, tx, ty, tz);  // (read before settled_ is written)
          settled_[tile] = 0;
          if (!near) return;
          TileScratch& s = scratch_.local();
          const TileFrame f = Frame(tx, ty, tz);
          LoadTileWithMasks<KIND>(f, s);  // the bitmasks are fresh for the relabels after a failed certificate
          bool changed_any = false;
          auto settle = [&] {  // true when the tile still changed after settle_hops hops
            return HopsToFixpoint<KIND>(f, s, &changed_any, tuning_.settle_hops, settle_step);
          };
          bool unsettled = settle();
          for (int l = 0; l < f.n && !unsettled; ++l) unsettled = pr::IsActive(s.x[l], s.halo_h[f.HaloOf(l)], inf);
          if (unsettled) {
            // Regions of the tile cut off from the sink (pr::AliveStep) take inf; then settle again.
            std::vector<std::uint8_t>& alive = s.alive;
            alive.resize(s.halo_h.size());
            for (std::size_t i = 0; i < alive.size(); ++i) alive[i] = s.halo_h[i] < inf;  // the halo's part counts
            for (int l = 0; l < f.n; ++l) alive[f.HaloOf(l)] = s.node[l] >= 0 && s.x[l] < 0;
            for (bool changed = true; changed;) {
              changed = false;
              for (int l = 0; l < f.n; ++l) {
                const int c = f.HaloOf(l);
                bool alive_nh[D];
                for (int d = 0; d < D; ++d)
                  alive_nh[d] = alive[c + pr::DirX(KIND, d) + f.hx * (pr::DirY(KIND, d) + f.hy * pr::DirZ(KIND, d))];
                if (alive[c] || !pr::AliveStep<D>(false, s.mask[l], alive_nh)) continue;
                alive[c] = 1;
                changed = true;
              }
            }
            for (int l = 0; l < f.n; ++l) {
              const int c = f.HaloOf(l);
              if (alive[c] || s.halo_h[c] >= inf) continue;
              s.halo_h[c] = inf;
              changed_any = true;
            }
            settle();
          }
          if (!changed_any) return;
          StoreHaloHeights(f, s);
          touched_[tile] = 1;
          settled_[tile] = 1;
        });
      }
    }
    times_.solve_ms += MsSince(start);
  }

  template <int KIND>
  std::int64_t GlobalRelabelT(std::int64_t* bfs_rounds, bool incremental) {
    constexpr int D = pr::NumDirs(KIND);
    const TileLayout& L = layout_;
    const std::int64_t N = L.num_nodes;
    const int inf = L.inf;
    std::int64_t rounds = 0;
    if (!incremental) {
      // Distances start at 1 (residual capacity to the sink) or inf; residual bitmasks for the BFS.
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, N, 4096), [&](const tbb::blocked_range<std::int64_t>& range) {
        for (std::int64_t v = range.begin(); v != range.end(); ++v) {
          h_[v] = pr::BfsInitStep(x_[v], inf);
          std::uint32_t r[D];
          for (int d = 0; d < D; ++d) r[d] = r_[d * N + v];
          mask_[v] = pr::ResidualMask<D>(r);
        }
      });
      std::fill(dirty_.begin(), dirty_.end(), 1);
      stats_.launches += 2;
    } else {
      // Drop the heights no longer backed by a residual path, around the flagged tiles (elsewhere
      // nothing changed since the last relabel, or, after a failed certificate, every node passed
      // it and the bitmasks are fresh), then relax from what is left there.
      std::fill(dirty_.begin(), dirty_.end(), 0);
      std::fill(seed_.begin(), seed_.end(), 0);
      for (int t = 0; t < L.num_tiles(); ++t)
        if (touched_[t]) {
          seed_[t] = 1;
          MarkWithNeighbours<KIND>(dirty_, t % L.tiles_x, (t / L.tiles_x) % L.tiles_y, t / (L.tiles_x * L.tiles_y));
        }
      rounds += TileRounds<KIND>([&](int tx, int ty, int tz, TileScratch& s) {
        if (!KillTile<KIND>(tx, ty, tz, s)) return false;
        seed_[L.TileIndex(tx, ty, tz)] = 1;
        return true;
      });
      for (int t = 0; t < L.num_tiles(); ++t)
        if (seed_[t]) MarkWithNeighbours<KIND>(dirty_, t % L.tiles_x, (t / L.tiles_x) % L.tiles_y, t / (L.tiles_x * L.tiles_y));
    }
    std::fill(touched_.begin(), touched_.end(), 0);
    rounds += TileRounds<KIND>([&](int tx, int ty, int tz, TileScratch& s) {
      bfs_visits_.fetch_add(1, std::memory_order_relaxed);
      return BfsTile<KIND>(tx, ty, tz, s);
    });
    *bfs_rounds = rounds;
    // Census: tile flags, active nodes, the cut, residual capacity left on the sink edges.
    tbb::combinable<std::int64_t> active_nodes([] { return std::int64_t{0}; });
    tbb::combinable<std::int64_t> residual([] { return std::int64_t{0}; });
    ForEachTile([&](int tx, int ty, int tz) {
      const TileFrame f = Frame(tx, ty, tz);
      std::int64_t count = 0, res = 0;
      for (int lz = 0; lz < L.tile_z; ++lz)
        for (int ly = 0; ly < L.tile_y; ++ly)
          for (int lx = 0; lx < L.tile_x; ++lx) {
            const int gx = f.x0 + lx, gy = f.y0 + ly, gz = f.z0 + lz;
            if (!L.InGrid(gx, gy, gz)) continue;
            const std::int64_t v = L.Node(gx, gy, gz);
            count += pr::IsActive(x_[v], h_[v], inf) ? 1 : 0;
            labels_[v] = pr::CutSide(h_[v], inf);
            res += x_[v] < 0 ? -x_[v] : 0;
          }
      active_[L.TileIndex(tx, ty, tz)] = count > 0 ? 1 : 0;
      active_nodes.local() += count;
      residual.local() += res;
    });
    sink_residual_ = residual.combine(std::plus<std::int64_t>());
    stats_.bfs_tile_visits = bfs_visits_.load();
    return active_nodes.combine(std::plus<std::int64_t>());
  }

  // Sequential repairs in node order, then the certificate.
  template <int KIND>
  bool RepairLocallyT(const std::vector<NodeChange>& nodes, bool dead_only) {
    const pr::LocalState state{x_.data(), h_.data(), r_.data(), touched_.data(), active_.data(), layout_};
    for (const NodeChange& c : nodes) {
      if (pr::RepairNode<KIND, pr::HostLocalOps>(state, c.node, dead_only)) continue;
      ++stats_.local_failures;
      if (!dead_only) break;  // no certificate now; the usual re-solve takes the rest (their tiles are flagged)
    }
    stats_.local_repairs = static_cast<std::int64_t>(nodes.size());
    if (stats_.local_failures || dead_only) return false;
    return CertifyT<KIND>(false);  // the repairs' tiles stay flagged: their bitmasks are stale
  }

  // The nodes that failed the last certificate, repaired one after another in node order (the
  // check lists them in no order), then the certificate again, marking failures without clearing.
  template <int KIND>
  bool RepairListedT() {
    const pr::LocalState state{x_.data(), h_.data(), r_.data(), touched_.data(), active_.data(), layout_};
    std::sort(failed_nodes_.begin(), failed_nodes_.end());
    for (const std::int64_t v : failed_nodes_) pr::RepairNode<KIND, pr::HostLocalOps>(state, v);
    return RecheckT<KIND>();
  }

  // The certificate again after those repairs, on the tiles flagged `touched` and their neighbours
  // only, as cuda-pr's CertifyTilesKernel does with near_touched (why that suffices is written
  // there); the sink residual is counted over every node once the check holds.
  template <int KIND>
  bool RecheckT() {
    const TileLayout& L = layout_;
    std::vector<std::uint8_t> near(static_cast<std::size_t>(L.num_tiles()));  // read before failures flag tiles
    for (int t = 0; t < L.num_tiles(); ++t)
      near[t] = FlaggedNear<KIND>(touched_, t % L.tiles_x, (t / L.tiles_x) % L.tiles_y, t / (L.tiles_x * L.tiles_y));
    StartFailureList(true);
    std::atomic<std::size_t> failures{0};
    tbb::combinable<std::int64_t> violations([] { return std::int64_t{0}; });
    ForEachTile([&](int tx, int ty, int tz) {
      if (!near[L.TileIndex(tx, ty, tz)]) return;
      const TileFrame f = Frame(tx, ty, tz);
      std::int64_t bad = 0;
      for (int lz = 0; lz < L.tile_z; ++lz)
        for (int ly = 0; ly < L.tile_y; ++ly)
          for (int lx = 0; lx < L.tile_x; ++lx) {
            const int gx = f.x0 + lx, gy = f.y0 + ly, gz = f.z0 + lz;
            if (L.InGrid(gx, gy, gz)) bad += CertifyNode<KIND>(L.Node(gx, gy, gz), true, failures) ? 0 : 1;
          }
      violations.local() += bad;
    });
    stats_.local_violations = violations.combine(std::plus<std::int64_t>());
    EndFailureList(failures.load());
    if (stats_.local_violations != 0) return false;
    sink_residual_ = tbb::parallel_reduce(
        tbb::blocked_range<std::int64_t>(0, L.num_nodes, 4096), std::int64_t{0},
        [&](const tbb::blocked_range<std::int64_t>& range, std::int64_t res) {
          for (std::int64_t v = range.begin(); v != range.end(); ++v) res += x_[v] < 0 ? -x_[v] : 0;
          return res;
        },
        std::plus<std::int64_t>());
    return true;
  }

  // One node of the certificate: whether it passes, and the cut there. With `mark_failures`, a
  // failing node's tile is flagged `touched` and the node listed in failed_nodes_ while it has room.
  template <int KIND>
  bool CertifyNode(std::int64_t v, bool mark_failures, std::atomic<std::size_t>& failures) {
    const bool certified = pr::CertifiedAt<KIND>(x_.data(), h_.data(), r_.data(), layout_, v);
    if (!certified && mark_failures) {
      __atomic_store_n(&touched_[layout_.TileOfNode(v)], 1, __ATOMIC_RELAXED);
      const std::size_t at = failures.fetch_add(1, std::memory_order_relaxed);
      if (at < failed_nodes_.size()) failed_nodes_[at] = v;
    }
    labels_[v] = pr::CutSide(h_[v], layout_.inf);
    return certified;
  }
  // failed_nodes_ gets room for tuning_.repair_violations nodes (none without `mark_failures`), and
  // after the check keeps the ones listed.
  void StartFailureList(bool mark_failures) {
    failed_nodes_.assign(mark_failures ? static_cast<std::size_t>(tuning_.repair_violations) : 0, 0);
  }
  void EndFailureList(std::size_t failures) { failed_nodes_.resize(std::min(failed_nodes_.size(), failures)); }

  // The certificate on every node in parallel; it also writes the cut and the sink residual, as a
  // census would. With `mark_failures`, the tiles of failing nodes are flagged `touched`, and the
  // nodes themselves listed in failed_nodes_ while there are at most tuning_.repair_violations.
  template <int KIND>
  bool CertifyT(bool mark_failures) {
    const std::int64_t n = layout_.num_nodes;
    tbb::combinable<std::int64_t> violations([] { return std::int64_t{0}; });
    tbb::combinable<std::int64_t> residual([] { return std::int64_t{0}; });
    StartFailureList(mark_failures);
    std::atomic<std::size_t> failures{0};
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 4096), [&](const tbb::blocked_range<std::int64_t>& range) {
      std::int64_t bad = 0, res = 0;
      for (std::int64_t v = range.begin(); v != range.end(); ++v) {
        bad += CertifyNode<KIND>(v, mark_failures, failures) ? 0 : 1;
        res += x_[v] < 0 ? -x_[v] : 0;
      }
      violations.local() += bad;
      residual.local() += res;
    });
    stats_.local_violations = violations.combine(std::plus<std::int64_t>());
    sink_residual_ = residual.combine(std::plus<std::int64_t>());
    EndFailureList(failures.load());
    return stats_.local_violations == 0;
  }

  std::vector<std::int64_t> x0_, x_;
  std::vector<std::int32_t> h_;
  std::vector<std::uint8_t> mask_;
  std::vector<std::uint32_t> r_;
  std::vector<std::int32_t> cap_, rev_;
  std::vector<Label> labels_;
  std::vector<std::uint8_t> active_, dirty_;
  std::vector<std::uint8_t> touched_;  // per tile: heights, residuals or excess changed since the last relabel
  std::vector<std::uint8_t> seed_;     // per tile: where an incremental relabel's BFS starts
  std::vector<std::uint8_t> settled_;  // per tile: heights changed by its last settling visit
  std::vector<std::int64_t> failed_nodes_;  // the nodes that failed the last certificate (see CertifyT)
  std::int64_t sink_residual_ = 0;
  std::atomic<std::int64_t> visits_{0}, iterations_{0}, bfs_visits_{0};
  PhaseTimes times_;
  tbb::enumerable_thread_specific<TileScratch> scratch_;
};

}  // namespace

std::unique_ptr<PushRelabelEngine> MakeTbbPushRelabelEngine(const PushRelabelTuning& tuning) {
  return std::make_unique<TbbPushRelabelEngine>(tuning);
}

}  // namespace mrf
