// Min-sum belief propagation on the CPU with TBB: BP-M, synchronous and tiled schedules.
//
// Every parallel loop splits work whose items are independent (rows of a horizontal pass, column
// blocks of a vertical pass, tiles of one diagonal), and messages are integers, so the result does not
// depend on the number of threads or on how TBB splits the ranges.
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>

#include "backends/common/bp_engine.h"
#include "mrf/threads.h"

namespace mrf::bp {

namespace {

// Per-thread buffers for one message computation.
struct Scratch {
  std::vector<Cost> h, out;
  std::vector<int> tmp;
  std::vector<Cost> tile;  // tiled schedule: the four inner message arrays of one tile
  explicit Scratch(int L) : h(L), out(L), tmp(MessageScratchInts(L)) {}
};

class CpuEngine {
 public:
  CpuEngine(const Problem& p, const Config& c)
      : p_(p), c_(c), params_(p.params()), W_(p.width), H_(p.height), L_(p.num_labels),
        scratch_([this] { return Scratch(L_); }) {}

  // ---- BP-M and synchronous schedules on full grid messages -------------------------------------

  // One message from node `node` into `dst`, h = unary + the three messages a, b, c into the node.
  bool Send(Scratch& s, std::size_t node, const Cost* a, const Cost* b, const Cost* c, Cost scale, bool reverse,
            Cost* dst) {
    const Cost* d = &p_.unary[node * L_];
    for (int l = 0; l < L_; ++l) s.h[l] = d[l] + a[l] + b[l] + c[l];
    ComputeMessage(params_, scale, reverse, s.h.data(), s.out.data(), s.tmp.data());
    const bool changed = !std::equal(s.out.begin(), s.out.end(), dst);
    std::copy(s.out.begin(), s.out.end(), dst);
    return changed;
  }

  Cost* At(std::vector<Cost>& v, std::size_t node) { return &v[node * L_]; }

  bool BpmIteration(GridMessages& m) {
    std::atomic<bool> changed{false};
    // Right and left passes: each row is one chain per direction.
    tbb::parallel_for(tbb::blocked_range<int>(0, H_), [&](const tbb::blocked_range<int>& rows) {
      Scratch& s = scratch_.local();
      bool any = false;
      for (int y = rows.begin(); y < rows.end(); ++y) {
        const std::size_t row = static_cast<std::size_t>(y) * W_;
        for (int x = 0; x + 1 < W_; ++x) {
          const std::size_t n = row + x;
          any |= Send(s, n, At(m.from_left, n), At(m.from_up, n), At(m.from_down, n), p_.scale_right[n], false,
                      At(m.from_left, n + 1));
        }
      }
      for (int y = rows.begin(); y < rows.end(); ++y) {
        const std::size_t row = static_cast<std::size_t>(y) * W_;
        for (int x = W_ - 1; x > 0; --x) {
          const std::size_t n = row + x;
          any |= Send(s, n, At(m.from_right, n), At(m.from_up, n), At(m.from_down, n), p_.scale_right[n - 1], true,
                      At(m.from_right, n - 1));
        }
      }
      if (any) changed = true;
    });
    // Down and up passes: blocks of columns, each column one chain per direction.
    constexpr int kColumns = 16;
    const int blocks = (W_ + kColumns - 1) / kColumns;
    tbb::parallel_for(tbb::blocked_range<int>(0, blocks), [&](const tbb::blocked_range<int>& range) {
      Scratch& s = scratch_.local();
      bool any = false;
      for (int b = range.begin(); b < range.end(); ++b) {
        const int x0 = b * kColumns, x1 = std::min(W_, x0 + kColumns);
        for (int y = 0; y + 1 < H_; ++y)
          for (int x = x0; x < x1; ++x) {
            const std::size_t n = static_cast<std::size_t>(y) * W_ + x;
            any |= Send(s, n, At(m.from_up, n), At(m.from_left, n), At(m.from_right, n), p_.scale_down[n], false,
                        At(m.from_up, n + W_));
          }
        for (int y = H_ - 1; y > 0; --y)
          for (int x = x0; x < x1; ++x) {
            const std::size_t n = static_cast<std::size_t>(y) * W_ + x;
            any |= Send(s, n, At(m.from_down, n), At(m.from_left, n), At(m.from_right, n), p_.scale_down[n - W_],
                        true, At(m.from_down, n - W_));
          }
      }
      if (any) changed = true;
    });
    return changed;
  }

  bool SyncIteration(GridMessages& old_m, GridMessages& new_m) {
    std::atomic<bool> changed{false};
    tbb::parallel_for(tbb::blocked_range<int>(0, H_), [&](const tbb::blocked_range<int>& rows) {
      Scratch& s = scratch_.local();
      bool any = false;
      for (int y = rows.begin(); y < rows.end(); ++y)
        for (int x = 0; x < W_; ++x) {
          const std::size_t n = static_cast<std::size_t>(y) * W_ + x;
          Cost* fl = At(old_m.from_left, n);
          Cost* fr = At(old_m.from_right, n);
          Cost* fu = At(old_m.from_up, n);
          Cost* fd = At(old_m.from_down, n);
          // Compare with the message this one replaces (the old value of the same slot).
          auto send = [&](const Cost* a, const Cost* b, const Cost* c, Cost scale, bool reverse,
                          std::vector<Cost>& old_v, std::vector<Cost>& new_v, std::size_t target) {
            Send(s, n, a, b, c, scale, reverse, At(new_v, target));
            any |= !std::equal(At(new_v, target), At(new_v, target) + L_, At(old_v, target));
          };
          if (x + 1 < W_) send(fl, fu, fd, p_.scale_right[n], false, old_m.from_left, new_m.from_left, n + 1);
          if (x > 0) send(fr, fu, fd, p_.scale_right[n - 1], true, old_m.from_right, new_m.from_right, n - 1);
          if (y + 1 < H_) send(fu, fl, fr, p_.scale_down[n], false, old_m.from_up, new_m.from_up, n + W_);
          if (y > 0) send(fd, fl, fr, p_.scale_down[n - W_], true, old_m.from_down, new_m.from_down, n - W_);
        }
      if (any) changed = true;
    });
    std::swap(old_m, new_m);
    return changed;
  }

  void GridLabels(const GridMessages& m, Labeling& labels) {
    tbb::parallel_for(tbb::blocked_range<int>(0, p_.num_nodes()), [&](const tbb::blocked_range<int>& r) {
      Scratch& s = scratch_.local();
      for (int n = r.begin(); n < r.end(); ++n) {
        const std::size_t o = static_cast<std::size_t>(n) * L_;
        for (int l = 0; l < L_; ++l)
          s.h[l] = p_.unary[o + l] + m.from_left[o + l] + m.from_right[o + l] + m.from_up[o + l] + m.from_down[o + l];
        labels[n] = ArgMin(s.h.data(), L_);
      }
    });
  }

  // ---- Tiled schedule --------------------------------------------------------------------------

  // One visit of tile (tx, ty): inner messages start at 0, border messages come in from `b`, BP-M
  // iterations run inside, outgoing border messages and the tile's labels are written at the end.
  bool VisitTile(const TileGrid& g, int tx, int ty, BorderMessages& b, Labeling& labels) {
    Scratch& s = scratch_.local();
    const int T = g.tile, L = L_, W = W_, H = H_;
    const int x0 = tx * T, y0 = ty * T, tw = std::min(T, W - x0), th = std::min(T, H - y0);
    const std::size_t area = static_cast<std::size_t>(tw) * th * L;
    s.tile.assign(4 * area + 4 * static_cast<std::size_t>(T) * L, 0);
    Cost* fl = s.tile.data();  // from the left, by tile pixel (y * tw + x) * L
    Cost* fr = fl + area;
    Cost* fu = fr + area;
    Cost* fd = fu + area;
    Cost* out_right = fd + area;  // outgoing border messages, per row / column
    Cost* out_left = out_right + static_cast<std::size_t>(T) * L;
    Cost* out_down = out_left + static_cast<std::size_t>(T) * L;
    Cost* out_up = out_down + static_cast<std::size_t>(T) * L;
    auto px = [&](Cost* a, int x, int y) { return a + (static_cast<std::size_t>(y) * tw + x) * L; };
    auto unary = [&](int x, int y) { return &p_.unary[(static_cast<std::size_t>(y0 + y) * W + x0 + x) * L]; };
    const bool has_left = tx > 0, has_right = tx + 1 < g.tiles_x, has_up = ty > 0, has_down = ty + 1 < g.tiles_y;
    for (int y = 0; y < th; ++y) {
      if (has_left) std::copy_n(&b.right[((tx - 1) * static_cast<std::size_t>(H) + y0 + y) * L], L, px(fl, 0, y));
      if (has_right) std::copy_n(&b.left[(tx * static_cast<std::size_t>(H) + y0 + y) * L], L, px(fr, tw - 1, y));
    }
    for (int x = 0; x < tw; ++x) {
      if (has_up) std::copy_n(&b.down[((ty - 1) * static_cast<std::size_t>(W) + x0 + x) * L], L, px(fu, x, 0));
      if (has_down) std::copy_n(&b.up[(ty * static_cast<std::size_t>(W) + x0 + x) * L], L, px(fd, x, th - 1));
    }
    auto message = [&](const Cost* d, const Cost* a, const Cost* c1, const Cost* c2, Cost scale, bool reverse,
                       Cost* dst) {
      for (int l = 0; l < L; ++l) s.h[l] = d[l] + a[l] + c1[l] + c2[l];
      ComputeMessage(params_, scale, reverse, s.h.data(), dst, s.tmp.data());
    };
    for (int it = 0; it < c_.inner_iterations; ++it) {
      for (int y = 0; y < th; ++y) {  // right chains
        const std::size_t row = static_cast<std::size_t>(y0 + y) * W + x0;
        for (int x = 0; x < tw && x0 + x + 1 < W; ++x)
          message(unary(x, y), px(fl, x, y), px(fu, x, y), px(fd, x, y), p_.scale_right[row + x], false,
                  x + 1 < tw ? px(fl, x + 1, y) : out_right + static_cast<std::size_t>(y) * L);
      }
      for (int y = 0; y < th; ++y) {  // left chains
        const std::size_t row = static_cast<std::size_t>(y0 + y) * W + x0;
        for (int x = tw - 1; x >= 0 && x0 + x > 0; --x)
          message(unary(x, y), px(fr, x, y), px(fu, x, y), px(fd, x, y), p_.scale_right[row + x - 1], true,
                  x > 0 ? px(fr, x - 1, y) : out_left + static_cast<std::size_t>(y) * L);
      }
      for (int x = 0; x < tw; ++x)  // down chains
        for (int y = 0; y < th && y0 + y + 1 < H; ++y)
          message(unary(x, y), px(fu, x, y), px(fl, x, y), px(fr, x, y),
                  p_.scale_down[static_cast<std::size_t>(y0 + y) * W + x0 + x], false,
                  y + 1 < th ? px(fu, x, y + 1) : out_down + static_cast<std::size_t>(x) * L);
      for (int x = 0; x < tw; ++x)  // up chains
        for (int y = th - 1; y >= 0 && y0 + y > 0; --y)
          message(unary(x, y), px(fd, x, y), px(fl, x, y), px(fr, x, y),
                  p_.scale_down[static_cast<std::size_t>(y0 + y - 1) * W + x0 + x], true,
                  y > 0 ? px(fd, x, y - 1) : out_up + static_cast<std::size_t>(x) * L);
    }
    bool changed = false;
    auto put = [&](const Cost* src, Cost* dst) {
      changed |= !std::equal(src, src + L, dst);
      std::copy_n(src, L, dst);
    };
    for (int y = 0; y < th; ++y) {
      if (has_right) put(out_right + static_cast<std::size_t>(y) * L, &b.right[(tx * static_cast<std::size_t>(H) + y0 + y) * L]);
      if (has_left) put(out_left + static_cast<std::size_t>(y) * L, &b.left[((tx - 1) * static_cast<std::size_t>(H) + y0 + y) * L]);
    }
    for (int x = 0; x < tw; ++x) {
      if (has_down) put(out_down + static_cast<std::size_t>(x) * L, &b.down[(ty * static_cast<std::size_t>(W) + x0 + x) * L]);
      if (has_up) put(out_up + static_cast<std::size_t>(x) * L, &b.up[((ty - 1) * static_cast<std::size_t>(W) + x0 + x) * L]);
    }
    for (int y = 0; y < th; ++y)
      for (int x = 0; x < tw; ++x) {
        const Cost* d = unary(x, y);
        for (int l = 0; l < L; ++l)
          s.h[l] = d[l] + px(fl, x, y)[l] + px(fr, x, y)[l] + px(fu, x, y)[l] + px(fd, x, y)[l];
        labels[static_cast<std::size_t>(y0 + y) * W + x0 + x] = ArgMin(s.h.data(), L);
      }
    return changed;
  }

  // Tiles of diagonal tx + ty = d run in parallel: they share no border, so the result equals the
  // serial raster (or reverse raster) order.
  bool Sweep(const TileGrid& g, bool reverse, BorderMessages& b, Labeling& labels) {
    std::atomic<bool> changed{false};
    const int diagonals = g.num_diagonals();
    for (int i = 0; i < diagonals; ++i) {
      const int d = reverse ? diagonals - 1 - i : i;
      const int tx_begin = std::max(0, d - (g.tiles_y - 1)), tx_end = std::min(d, g.tiles_x - 1) + 1;
      tbb::parallel_for(tbb::blocked_range<int>(tx_begin, tx_end, 1), [&](const tbb::blocked_range<int>& r) {
        bool any = false;
        for (int tx = r.begin(); tx < r.end(); ++tx) any |= VisitTile(g, tx, d - tx, b, labels);
        if (any) changed = true;
      });
    }
    return changed;
  }

  // ---- Driver ----------------------------------------------------------------------------------

  GridMessages CoarseToFineStart() {
    std::vector<Problem> levels = CoarseLevels(p_);
    if (levels.empty()) return GridMessages::Zero(p_);
    GridMessages m = GridMessages::Zero(levels.back());
    for (int level = static_cast<int>(levels.size()) - 1; level >= 0; --level) {
      Config sync = c_;
      sync.schedule = Schedule::kSync;
      sync.coarse_to_fine = false;
      CpuEngine coarse(levels[level], sync);
      GridMessages other = GridMessages::Zero(levels[level]);
      for (int it = 0; it < c_.iterations; ++it)
        if (!coarse.SyncIteration(m, other)) break;
      m = UpsampleMessages(levels[level], m, level == 0 ? p_ : levels[level - 1]);
    }
    return m;
  }

  RunOutput Run(const IterationCallback& callback) {
    RunOutput out;
    out.labels.assign(p_.num_nodes(), 0);
    GridMessages m = c_.coarse_to_fine ? CoarseToFineStart() : GridMessages::Zero(p_);
    GridMessages other;
    if (c_.schedule == Schedule::kSync) other = GridMessages::Zero(p_);
    if (c_.schedule == Schedule::kTiled) {
      const int asked = RequestedTileSize(c_.tile_size, W_, H_);
      out.grid = TileGrid::Make(W_, H_, asked > 0 ? asked : AutoTileSize(L_, p_.kind));
      out.borders = c_.coarse_to_fine ? BordersFromGrid(p_, out.grid, m) : BorderMessages::Zero(out.grid, L_);
      m = GridMessages();
    }
    for (int it = 1; it <= c_.iterations; ++it) {
      bool changed = false;
      switch (c_.schedule) {
        case Schedule::kBpm: changed = BpmIteration(m); break;
        case Schedule::kSync: changed = SyncIteration(m, other); break;
        case Schedule::kTiled:
          changed = Sweep(out.grid, false, out.borders, out.labels);
          changed |= Sweep(out.grid, true, out.borders, out.labels);
          break;
      }
      if (c_.schedule != Schedule::kTiled) GridLabels(m, out.labels);
      out.iterations = it;
      out.converged = !changed;
      const Energy energy = ProblemEnergy(p_, out.labels);
      out.energies.push_back(energy);
      if (out.best_labels.empty() || energy < out.best_energy) {
        out.best_energy = energy;
        out.best_labels = out.labels;
      }
      if (callback && !callback(IterationState{it, energy, out.converged})) break;
      if (out.converged) break;
    }
    out.messages = std::move(m);
    return out;
  }

 private:
  const Problem& p_;
  Config c_;
  PairwiseParams params_;
  int W_, H_, L_;
  tbb::enumerable_thread_specific<Scratch> scratch_;
};

}  // namespace

RunOutput RunCpu(const Problem& problem, const Config& config, const IterationCallback& callback) {
  CheckConfig(problem, config);
  RunOutput out;
  RunOnThreads(config.num_threads, [&] {
    CpuEngine engine(problem, config);
    out = engine.Run(callback);
  });
  return out;
}

}  // namespace mrf::bp
