// The wave relaxation of cuda-pr's 4-connected tiles (backends/common/push_relabel_wave.h) on the
// CPU: a host emulation of the device's BfsWave and KillWave (backends/cuda/push_relabel_tiles.cuh;
// lanes looped over, shuffles, ballots and shared memory as arrays, the same index arithmetic and
// the same rules) reaches exactly the fixpoint of the hop-by-hop loops it replaces (BfsStep and
// KillStep, Jacobi steps with the halo constant) on thousands of random tiles: every tile height,
// random masks, heights, halos and excess signs, partial tiles at the grid's right and bottom edges,
// tiny and huge inf. The bit helpers are checked against plain loops. Wave pushes: the device's
// WaveRows and WaveColumns, emulated the same way (hop-by-hop relaxation across warps, the
// transposed columns), move exactly the flows of a plain node-after-node reference on thousands of
// random tiles, conserving excess and capacities and pushing only along admissible edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backends/common/push_relabel_steps.h"
#include "backends/common/push_relabel_wave.h"

namespace mrf {
namespace {

constexpr int kLanes = 32;
constexpr int kHX = kLanes + 2;  // halo box width, as in the tile visits

// A tile of TY rows and 32 columns and its halo ring, as a visit sees it after loading.
struct Tile {
  int ty = 8;
  int inf = 0;
  int cols = kLanes, rows = 8;      // the in-grid part: columns [0, cols), rows [0, rows)
  std::vector<int> h;               // [ly * 32 + lx]; inf outside the grid
  std::vector<std::uint8_t> mask;   // 0 outside the grid
  std::vector<std::int64_t> x;      // 0 outside the grid
  std::vector<int> halo;            // the halo box, kHX x (ty + 2); only the ring is used

  bool InGrid(int lx, int ly) const { return lx < cols && ly < rows; }
  int Centre(int lx, int ly) const { return (lx + 1) + kHX * (ly + 1); }
};

int HaloOffset(int d) { return pr::DirX(pr::kKindGrid4, d) + kHX * pr::DirY(pr::kKindGrid4, d); }

// ---- The hop-by-hop loops (BfsTile / KillTile without waves) ----------------------------------

std::vector<int> HopByHop(const Tile& t, bool kill, int* hops) {
  std::vector<int> sh = t.halo, h = t.h;
  for (int ly = 0; ly < t.ty; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) sh[t.Centre(lx, ly)] = h[ly * kLanes + lx];
  *hops = 0;
  for (;;) {
    ++*hops;
    std::vector<int> next = h;
    bool changed = false;
    for (int ly = 0; ly < t.ty; ++ly)
      for (int lx = 0; lx < kLanes; ++lx) {
        const int i = ly * kLanes + lx;
        int nh[4];
        for (int d = 0; d < 4; ++d) nh[d] = sh[t.Centre(lx, ly) + HaloOffset(d)];
        next[i] = !kill                ? pr::BfsStep<4>(h[i], t.inf, t.mask[i], nh)
                  : t.InGrid(lx, ly) ? pr::KillStep<4>(t.x[i], h[i], t.inf, t.mask[i], nh)
                                     : t.inf;
        changed |= next[i] != h[i];
      }
    h = next;
    for (int ly = 0; ly < t.ty; ++ly)
      for (int lx = 0; lx < kLanes; ++lx) sh[t.Centre(lx, ly)] = h[ly * kLanes + lx];
    if (!changed) return h;
  }
}

// ---- Warp primitives on arrays of lanes ---------------------------------------------------------

template <class T>
using Lanes = std::array<T, kLanes>;

template <class T>
std::uint32_t Ballot(const Lanes<T>& v) {
  std::uint32_t w = 0;
  for (int l = 0; l < kLanes; ++l) w |= v[l] ? 1u << l : 0u;
  return w;
}
// __shfl_up_sync / __shfl_down_sync: a lane whose source is outside the warp keeps its own value.
template <class T>
Lanes<T> ShflUp(const Lanes<T>& v, int k) {
  Lanes<T> out;
  for (int l = 0; l < kLanes; ++l) out[l] = l >= k ? v[l - k] : v[l];
  return out;
}
template <class T>
Lanes<T> ShflDown(const Lanes<T>& v, int k) {
  Lanes<T> out;
  for (int l = 0; l < kLanes; ++l) out[l] = l + k < kLanes ? v[l + k] : v[l];
  return out;
}

// WaveScan of one warp.
template <int SPAN>
Lanes<int> WaveScan(const Lanes<int>& h, const Lanes<std::uint32_t>& steps) {
  Lanes<int> b;
  for (int l = 0; l < kLanes; ++l) b[l] = h[l] - l;
  for (int j = 0; (1 << j) < SPAN; ++j) {
    const Lanes<int> other = ShflUp(b, 1 << j);
    for (int l = 0; l < kLanes; ++l) b[l] = pr::ScanTake(b[l], other[l], (steps[l] >> j) & 1u);
  }
  for (int l = 0; l < kLanes; ++l) b[l] += 2 * l;
  for (int j = 0; (1 << j) < SPAN; ++j) {
    const Lanes<int> other = ShflDown(b, 1 << j);
    for (int l = 0; l < kLanes; ++l) b[l] = pr::ScanTake(b[l], other[l], (steps[l] >> (5 + j)) & 1u);
  }
  Lanes<int> out;
  for (int l = 0; l < kLanes; ++l) out[l] = b[l] - l;
  return out;
}

// ---- BfsWave, emulated (warp = row ly, lane = lx; barriers separate the phases) -------------------

template <int TY>
std::vector<int> WaveBfs(const Tile& t, int* iterations) {
  constexpr int G = kLanes / TY, P = kLanes + G;
  std::vector<int> sh_t(TY * P, -1);
  std::vector<std::uint8_t> sh_links(TY * P, 0xff);
  std::array<Lanes<int>, TY> h;
  std::array<Lanes<std::uint32_t>, TY> steps;
  auto own = [](int ly, int lx) { return ly * P + lx; };
  auto cell = [](int ly, int lx) { return (lx % TY) * P + ly * G + lx / TY; };
  for (int ly = 0; ly < TY; ++ly) {
    Lanes<std::uint8_t> links;
    for (int lx = 0; lx < kLanes; ++lx) {
      const int i = ly * kLanes + lx;
      const std::uint8_t inside = pr::InsideDirs4(lx, ly, kLanes, TY);
      int nh[4];
      for (int d = 0; d < 4; ++d)
        nh[d] = (inside & (1u << d)) ? t.inf : t.halo[t.Centre(lx, ly) + HaloOffset(d)];
      h[ly][lx] = pr::BfsStep<4>(t.h[i], t.inf, static_cast<std::uint8_t>(t.mask[i] & ~inside), nh);
      links[lx] = pr::BfsWaveLinks(h[ly][lx], t.mask[i], inside);
      sh_links[own(ly, lx)] = links[lx];
    }
    Lanes<bool> left, right;
    for (int lx = 0; lx < kLanes; ++lx) {
      left[lx] = links[lx] & pr::kTakeLeft;
      right[lx] = links[lx] & pr::kTakeRight;
    }
    for (int lx = 0; lx < kLanes; ++lx)
      steps[ly][lx] = pr::ScanSteps(lx, pr::SegmentFirst(Ballot(left), lx), pr::SegmentLast(Ballot(right), lx));
    h[ly] = WaveScan<32>(h[ly], steps[ly]);
    for (int lx = 0; lx < kLanes; ++lx) sh_t[own(ly, lx)] = h[ly][lx];
  }
  // __syncthreads
  for (int ly = 0; ly < TY; ++ly) {
    Lanes<bool> above, below;
    for (int lx = 0; lx < kLanes; ++lx) {
      above[lx] = sh_links[cell(ly, lx)] & pr::kTakeAbove;
      below[lx] = sh_links[cell(ly, lx)] & pr::kTakeBelow;
    }
    for (int lx = 0; lx < kLanes; ++lx)
      steps[ly][lx] |= pr::ScanSteps(lx, pr::SegmentFirst(Ballot(above), lx), pr::SegmentLast(Ballot(below), lx)) << 10;
  }
  for (*iterations = 1;; ++*iterations) {
    bool any = false;
    for (int ly = 0; ly < TY; ++ly) {
      Lanes<int> before;
      Lanes<std::uint32_t> col_steps;
      for (int lx = 0; lx < kLanes; ++lx) {
        before[lx] = sh_t[cell(ly, lx)];
        col_steps[lx] = steps[ly][lx] >> 10;
      }
      const Lanes<int> after = WaveScan<TY>(before, col_steps);
      for (int lx = 0; lx < kLanes; ++lx)
        if (after[lx] != before[lx]) {
          sh_t[cell(ly, lx)] = after[lx];
          any = true;
        }
    }
    // __syncthreads_or
    if (!any) break;
    for (int ly = 0; ly < TY; ++ly) {
      for (int lx = 0; lx < kLanes; ++lx) h[ly][lx] = sh_t[own(ly, lx)];
      h[ly] = WaveScan<32>(h[ly], steps[ly]);
      for (int lx = 0; lx < kLanes; ++lx) sh_t[own(ly, lx)] = h[ly][lx];
    }
    // __syncthreads
  }
  std::vector<int> out(TY * kLanes);
  for (int ly = 0; ly < TY; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) out[ly * kLanes + lx] = h[ly][lx];
  return out;
}

// ---- KillWave, emulated ---------------------------------------------------------------------------

template <int TY>
std::vector<int> WaveKill(const Tile& t, int* iterations) {
  std::vector<int> sh_h = t.halo;
  std::array<std::uint32_t, TY> sh_base, sh_alive;
  std::array<std::array<std::uint32_t, TY>, 4> sh_links;
  for (int ly = 0; ly < TY; ++ly) {
    Lanes<bool> base;
    for (int lx = 0; lx < kLanes; ++lx) {
      sh_h[t.Centre(lx, ly)] = t.h[ly * kLanes + lx];
      base[lx] = t.x[ly * kLanes + lx] < 0;
    }
    sh_base[ly] = Ballot(base);
  }
  // __syncthreads
  for (int ly = 0; ly < TY; ++ly) {
    Lanes<bool> alive;
    std::array<Lanes<bool>, 4> links;
    for (int lx = 0; lx < kLanes; ++lx) {
      const int i = ly * kLanes + lx;
      const std::uint8_t inside = pr::InsideDirs4(lx, ly, kLanes, TY);
      int nh[4];
      std::uint8_t base = 0;
      for (int d = 0; d < 4; ++d) {
        nh[d] = sh_h[t.Centre(lx, ly) + HaloOffset(d)];
        if (inside & (1u << d)) {
          const std::uint32_t row = sh_base[ly + pr::DirY(pr::kKindGrid4, d)];
          base |= static_cast<std::uint8_t>(((row >> (lx + pr::DirX(pr::kKindGrid4, d))) & 1u) << d);
        }
      }
      const pr::KillSeed seed = pr::KillWaveSeed<4>(t.x[i], t.h[i], t.inf, t.mask[i], nh, base, inside);
      alive[lx] = seed.alive;
      for (int d = 0; d < 4; ++d) links[d][lx] = seed.links & (1u << d);
    }
    sh_alive[ly] = Ballot(alive);
    for (int d = 0; d < 4; ++d) sh_links[d][ly] = Ballot(links[d]);
  }
  // __syncthreads; warp 0, lane = row
  Lanes<std::uint32_t> alive{}, right{}, below{}, left{}, above{};
  for (int y = 0; y < TY; ++y) {
    alive[y] = sh_alive[y];
    right[y] = sh_links[0][y];
    below[y] = sh_links[1][y];
    left[y] = sh_links[2][y];
    above[y] = sh_links[3][y];
  }
  for (*iterations = 1;; ++*iterations) {
    for (int y = 0; y < kLanes; ++y) alive[y] = pr::SpreadDown(pr::SpreadUp(alive[y], left[y]), right[y]);
    const Lanes<std::uint32_t> before = alive;
    Lanes<std::uint32_t> takes = above;
    for (int k = 1; k < TY; k *= 2) {
      const Lanes<std::uint32_t> alive_k = ShflUp(alive, k), takes_k = ShflUp(takes, k);
      for (int y = 0; y < kLanes; ++y)
        if (y >= k) pr::SpreadStep(alive[y], takes[y], alive_k[y], takes_k[y]);
    }
    takes = below;
    for (int k = 1; k < TY; k *= 2) {
      const Lanes<std::uint32_t> alive_k = ShflDown(alive, k), takes_k = ShflDown(takes, k);
      for (int y = 0; y < kLanes; ++y)
        if (y + k < TY) pr::SpreadStep(alive[y], takes[y], alive_k[y], takes_k[y]);
    }
    if (alive == before) break;  // __any_sync
  }
  std::vector<int> out(TY * kLanes);
  for (int ly = 0; ly < TY; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      const int i = ly * kLanes + lx;
      out[i] = pr::KillWaveHeight(t.x[i], t.h[i], t.inf, (alive[ly] >> lx) & 1u);
    }
  return out;
}

// ---- Random tiles ---------------------------------------------------------------------------------

int Pick(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
bool Chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// Heights of one style: small random values (many equal neighbours), a distance-like field with
// noise (long chains), 1 or inf (the start of a relabel from scratch), or anything in 1..inf.
int RandomHeight(std::mt19937_64& rng, int style, int inf, int lx, int ly, int cx, int cy) {
  if (Chance(rng, 0.04)) return inf;
  switch (style) {
    case 0: return Pick(rng, 1, std::min(inf, 6));
    case 1: {
      const int d = 1 + std::abs(lx - cx) + std::abs(ly - cy) + (Chance(rng, 0.15) ? Pick(rng, -2, 2) : 0);
      return std::max(1, std::min(inf, d));
    }
    case 2: return Chance(rng, 0.1) ? 1 : inf;
    default: return Pick(rng, 1, inf);
  }
}

Tile RandomTile(std::mt19937_64& rng, int ty) {
  Tile t;
  t.ty = ty;
  t.inf = Chance(rng, 0.2) ? Pick(rng, 2, 12) : Chance(rng, 0.5) ? 32 * ty + Pick(rng, 2, 100) : (1 << 30) + 1;
  t.cols = Chance(rng, 0.7) ? kLanes : Pick(rng, 1, kLanes);
  t.rows = Chance(rng, 0.7) ? ty : Pick(rng, 1, ty);
  const int style = Pick(rng, 0, 3), halo_style = Pick(rng, 0, 3);
  const double density = std::array<double, 4>{0.3, 0.6, 0.9, 1.0}[Pick(rng, 0, 3)];
  const double sink = std::array<double, 4>{0.0, 0.02, 0.1, 0.4}[Pick(rng, 0, 3)];
  const bool grid_masks = Chance(rng, 0.8);  // no residual edge leaves the grid, as on the device
  const int cx = Pick(rng, -8, kLanes + 8), cy = Pick(rng, -8, ty + 8);
  t.h.assign(ty * kLanes, t.inf);
  t.mask.assign(ty * kLanes, 0);
  t.x.assign(ty * kLanes, 0);
  for (int ly = 0; ly < ty; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      if (!t.InGrid(lx, ly)) continue;
      const int i = ly * kLanes + lx;
      t.h[i] = RandomHeight(rng, style, t.inf, lx, ly, cx, cy);
      t.x[i] = Chance(rng, sink) ? -Pick(rng, 1, 9) : Pick(rng, 0, 9);
      for (int d = 0; d < 4; ++d) {
        const int nx = lx + pr::DirX(pr::kKindGrid4, d), ny = ly + pr::DirY(pr::kKindGrid4, d);
        const bool off_grid = nx >= t.cols || ny >= t.rows;  // (left and top: the halo, in the grid)
        if (Chance(rng, density) && !(grid_masks && off_grid)) t.mask[i] |= static_cast<std::uint8_t>(1u << d);
      }
    }
  t.halo.assign(kHX * (ty + 2), t.inf);
  for (int cy2 = 0; cy2 < ty + 2; ++cy2)
    for (int cx2 = 0; cx2 < kHX; ++cx2) {
      const bool ring = cx2 == 0 || cx2 == kHX - 1 || cy2 == 0 || cy2 == ty + 1;
      const bool off_grid = cx2 > t.cols || cy2 > t.rows;
      if (ring && !(grid_masks && off_grid))
        t.halo[cx2 + kHX * cy2] = RandomHeight(rng, halo_style, t.inf, cx2 - 1, cy2 - 1, cx, cy);
    }
  return t;
}

// The state a kill round starts from: exact distances of an earlier relabel, then pushes and
// re-solve edits (residual edges lost, nodes that gained or lost residual capacity to the sink).
void MakeStale(std::mt19937_64& rng, Tile* t) {
  int hops = 0;
  Tile exact = *t;
  for (int i = 0; i < t->ty * kLanes; ++i) exact.h[i] = pr::BfsInitStep(exact.x[i], t->inf);
  t->h = HopByHop(exact, false, &hops);
  for (int ly = 0; ly < t->ty; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      if (!t->InGrid(lx, ly)) continue;
      const int i = ly * kLanes + lx;
      if (Chance(rng, 0.1)) t->mask[i] &= static_cast<std::uint8_t>(~(1u << Pick(rng, 0, 3)));
      if (Chance(rng, 0.05)) t->x[i] = -t->x[i] - 1;
    }
}

struct Totals {
  long tiles = 0, hops = 0, waves = 0;
};

void CheckTile(const Tile& t, bool kill, const std::string& what, Totals* totals) {
  int hops = 0, waves = 0;
  const std::vector<int> expected = HopByHop(t, kill, &hops);
  std::vector<int> got;
  if (t.ty == 8) got = kill ? WaveKill<8>(t, &waves) : WaveBfs<8>(t, &waves);
  else if (t.ty == 16) got = kill ? WaveKill<16>(t, &waves) : WaveBfs<16>(t, &waves);
  else got = kill ? WaveKill<32>(t, &waves) : WaveBfs<32>(t, &waves);
  ASSERT_EQ(got, expected) << what << " (32x" << t.ty << ", in grid " << t.cols << "x" << t.rows << ", inf " << t.inf
                           << ")";
  if (!kill) EXPECT_LE(waves, hops) << what;  // a wave iteration covers any single hop
  ++totals->tiles;
  totals->hops += hops;
  totals->waves += waves;
}

TEST(PushRelabelWave, BfsOnRandomTilesEqualsTheHopByHopFixpoint) {
  std::mt19937_64 rng(2024);
  Totals totals;
  for (int trial = 0; trial < 2400; ++trial) {
    const int ty = 8 << (trial % 3);
    const Tile t = RandomTile(rng, ty);
    CheckTile(t, false, "BFS tile " + std::to_string(trial), &totals);
    if (HasFatalFailure()) return;
  }
  std::cout << "BFS: " << totals.tiles << " tiles, mean iterations " << double(totals.hops) / totals.tiles
            << " hop by hop, " << double(totals.waves) / totals.tiles << " by waves\n";
}

TEST(PushRelabelWave, KillOnRandomTilesEqualsTheHopByHopFixpoint) {
  std::mt19937_64 rng(77);
  Totals totals;
  for (int trial = 0; trial < 2400; ++trial) {
    const int ty = 8 << (trial % 3);
    Tile t = RandomTile(rng, ty);
    if (trial % 2) MakeStale(rng, &t);
    CheckTile(t, true, "kill tile " + std::to_string(trial), &totals);
    if (HasFatalFailure()) return;
  }
  std::cout << "kill: " << totals.tiles << " tiles, mean iterations " << double(totals.hops) / totals.tiles
            << " hop by hop, " << double(totals.waves) / totals.tiles << " by waves\n";
}

// A path that winds through every row: hundreds of hops, one wave iteration per turn.
TEST(PushRelabelWave, SerpentineTakesOneWavePerTurn) {
  for (int ty : {8, 16, 32}) {
    Tile t;
    t.ty = t.rows = ty;
    t.inf = (1 << 30) + 1;
    t.h.assign(ty * kLanes, t.inf);
    t.mask.assign(ty * kLanes, 0);
    t.x.assign(ty * kLanes, 0);
    t.halo.assign(kHX * (ty + 2), t.inf);
    t.h[0] = 1;  // the sink's neighbour: top left
    // Nodes of even rows take from the left, of odd rows from the right; a row's first node takes
    // from the row above, where that row ends.
    for (int ly = 0; ly < ty; ++ly)
      for (int lx = 0; lx < kLanes; ++lx) {
        const bool from_left = ly % 2 == 0;
        std::uint8_t& m = t.mask[ly * kLanes + lx];
        if (from_left && lx > 0) m |= pr::kTakeLeft;
        if (!from_left && lx + 1 < kLanes) m |= pr::kTakeRight;
        if (ly > 0 && lx == (from_left ? 0 : kLanes - 1)) m |= pr::kTakeAbove;
      }
    Totals totals;
    CheckTile(t, false, "serpentine", &totals);
    EXPECT_EQ(totals.hops, ty * kLanes);  // the far end is ty * 32 - 1 hops away, plus one to see the fixpoint
    EXPECT_LE(totals.waves, ty + 1) << ty;
  }
}

// ---- The bit helpers against plain loops ------------------------------------------------------------

TEST(PushRelabelWave, BitHelpersMatchPlainLoops) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint32_t density_mask = trial % 4 == 0 ? 0xffffffffu : static_cast<std::uint32_t>(rng());
    const std::uint32_t takes_up = static_cast<std::uint32_t>(rng()) & density_mask & ~1u;
    const std::uint32_t takes_down = static_cast<std::uint32_t>(rng()) & density_mask & 0x7fffffffu;
    const std::uint32_t alive = static_cast<std::uint32_t>(rng()) & static_cast<std::uint32_t>(rng());
    for (int lane = 0; lane < kLanes; ++lane) {
      int first = lane, last = lane;
      while (takes_up & (1u << first)) --first;
      while (takes_down & (1u << last)) ++last;
      ASSERT_EQ(pr::SegmentFirst(takes_up, lane), first);
      ASSERT_EQ(pr::SegmentLast(takes_down, lane), last);
      const std::uint32_t steps = pr::ScanSteps(lane, first, last);
      for (int j = 0; j < 5; ++j) {
        ASSERT_EQ((steps >> j) & 1u, lane - (1 << j) >= first ? 1u : 0u);
        ASSERT_EQ((steps >> (5 + j)) & 1u, lane + (1 << j) <= last ? 1u : 0u);
      }
    }
    std::uint32_t up = alive, down = alive;
    for (int i = 1; i < kLanes; ++i)
      if ((takes_up >> i) & 1u) up |= ((up >> (i - 1)) & 1u) << i;
    for (int i = kLanes - 2; i >= 0; --i)
      if ((takes_down >> i) & 1u) down |= ((down >> (i + 1)) & 1u) << i;
    ASSERT_EQ(pr::SpreadUp(alive, takes_up), up);
    ASSERT_EQ(pr::SpreadDown(alive, takes_down), down);
  }
}

// ---- Wave pushes ------------------------------------------------------------------------------------

// The push state of a 32 x ty tile as a visit holds it: excess, residuals (directions +x, +y, -x, -y)
// and the heights of this iteration. Nodes outside the grid: x = 0, residuals 0, height inf.
struct PushTile {
  int ty = 8, inf = 0;
  std::vector<std::int64_t> x;
  std::vector<std::array<std::uint32_t, 4>> r;
  std::vector<int> h;
};

// The reference: every line node after node, with plain arithmetic (none of the wave helpers):
// rows rightwards then leftwards, then columns downwards then upwards.
void ReferenceLine(PushTile& t, int first, int step, int count, int d_out, int d_back) {
  std::int64_t in = 0;
  for (int k = 0; k < count; ++k) {
    const int l = first + k * step;
    const bool admissible =
        k + 1 < count && t.h[l] < t.inf && t.r[l][d_out] > 0 && t.h[l + step] == t.h[l] - 1;
    const std::int64_t out =
        admissible ? std::min<std::int64_t>(t.r[l][d_out], std::max<std::int64_t>(0, t.x[l] + in)) : 0;
    t.x[l] += in - out;
    t.r[l][d_out] = static_cast<std::uint32_t>(t.r[l][d_out] - out);
    t.r[l][d_back] = static_cast<std::uint32_t>(t.r[l][d_back] + in);
    in = out;
  }
}

void ReferenceWavePush(PushTile& t) {
  for (int ly = 0; ly < t.ty; ++ly) {
    ReferenceLine(t, ly * kLanes, 1, kLanes, 0, 2);
    ReferenceLine(t, ly * kLanes + kLanes - 1, -1, kLanes, 2, 0);
  }
  for (int lx = 0; lx < kLanes; ++lx) {
    ReferenceLine(t, lx, kLanes, t.ty, 1, 3);
    ReferenceLine(t, lx + (t.ty - 1) * kLanes, -kLanes, t.ty, 3, 1);
  }
}

// WaveLine of one warp (steps: relaxation steps taken, added up).
template <int SPAN, bool UP>
void EmulatedWaveLine(Lanes<std::int64_t>& x, Lanes<std::uint32_t>& r_out, Lanes<std::uint32_t>& r_back,
                      const Lanes<std::uint32_t>& cap, const Lanes<int>& pos, long* steps) {
  bool any = false;  // __any_sync
  for (int l = 0; l < kLanes; ++l) any |= x[l] > 0 && cap[l] > 0;
  if (!any) return;
  Lanes<std::uint32_t> out, in;
  for (int l = 0; l < kLanes; ++l) out[l] = pr::WaveCarry(x[l], cap[l], 0);
  for (;;) {
    ++*steps;
    in = UP ? ShflUp(out, 1) : ShflDown(out, 1);
    Lanes<std::uint32_t> next;
    bool changed = false;
    for (int l = 0; l < kLanes; ++l) {
      if (UP ? pos[l] == 0 : pos[l] == SPAN - 1) in[l] = 0;
      next[l] = pr::WaveCarry(x[l], cap[l], in[l]);
      changed |= next[l] != out[l];
    }
    if (!changed) break;  // __any_sync
    out = next;
  }
  for (int l = 0; l < kLanes; ++l) pr::WaveApply(x[l], r_out[l], r_back[l], in[l], out[l]);
}

// The neighbour heights a lane reads (inf past the tile: those links are never used).
int NeighbourHeight(const PushTile& t, int lx, int ly) {
  return lx >= 0 && ly >= 0 && lx < kLanes && ly < t.ty ? t.h[ly * kLanes + lx] : t.inf;
}

// WaveRows of a block (warp = row ly, lane = lx).
void EmulatedWaveRows(PushTile& t, long* steps) {
  for (int ly = 0; ly < t.ty; ++ly) {
    Lanes<std::int64_t> x;
    Lanes<std::uint32_t> r0, r2, cap;
    Lanes<int> pos;
    for (int lx = 0; lx < kLanes; ++lx) {
      x[lx] = t.x[ly * kLanes + lx];
      r0[lx] = t.r[ly * kLanes + lx][0];
      r2[lx] = t.r[ly * kLanes + lx][2];
      pos[lx] = lx;
    }
    for (int lx = 0; lx < kLanes; ++lx)
      cap[lx] = pr::WaveLinkCap(t.h[ly * kLanes + lx], t.inf, r0[lx], NeighbourHeight(t, lx + 1, ly), lx + 1 < kLanes);
    EmulatedWaveLine<kLanes, true>(x, r0, r2, cap, pos, steps);
    for (int lx = 0; lx < kLanes; ++lx)
      cap[lx] = pr::WaveLinkCap(t.h[ly * kLanes + lx], t.inf, r2[lx], NeighbourHeight(t, lx - 1, ly), lx > 0);
    EmulatedWaveLine<kLanes, false>(x, r2, r0, cap, pos, steps);
    for (int lx = 0; lx < kLanes; ++lx) {
      t.x[ly * kLanes + lx] = x[lx];
      t.r[ly * kLanes + lx][0] = r0[lx];
      t.r[ly * kLanes + lx][2] = r2[lx];
    }
  }
}

// WaveColumns of a block (barriers separate the phases). Returns whether the columns ran (the vote).
template <int TY>
bool EmulatedWaveColumns(PushTile& t, long* steps) {
  constexpr int G = kLanes / TY, P = kLanes + G;
  std::vector<std::int64_t> sh_x(TY * P, -777);
  std::vector<std::uint32_t> sh_down(TY * P, 0xdeadbeefu), sh_up(TY * P, 0xdeadbeefu);
  auto own = [](int ly, int lx) { return ly * P + lx; };
  auto cell = [](int ly, int lx) { return (lx % TY) * P + ly * G + lx / TY; };
  bool vote = false;
  for (int ly = 0; ly < TY; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      const int i = ly * kLanes + lx;
      const std::uint32_t down = pr::WaveLinkCap(t.h[i], t.inf, t.r[i][1], NeighbourHeight(t, lx, ly + 1), ly + 1 < TY);
      const std::uint32_t up = pr::WaveLinkCap(t.h[i], t.inf, t.r[i][3], NeighbourHeight(t, lx, ly - 1), ly > 0);
      sh_x[own(ly, lx)] = t.x[i];
      sh_down[own(ly, lx)] = down;
      sh_up[own(ly, lx)] = up;
      vote |= t.x[i] > 0 && (down > 0 || up > 0);
    }
  // __syncthreads_or
  if (!vote) return false;
  for (int ly = 0; ly < TY; ++ly) {
    Lanes<std::int64_t> cx;
    Lanes<std::uint32_t> down, up, dr_down{}, dr_up{};
    Lanes<int> pos;
    for (int lx = 0; lx < kLanes; ++lx) {
      cx[lx] = sh_x[cell(ly, lx)];
      down[lx] = sh_down[cell(ly, lx)];
      up[lx] = sh_up[cell(ly, lx)];
      pos[lx] = lx % TY;
    }
    EmulatedWaveLine<TY, true>(cx, dr_down, dr_up, down, pos, steps);
    EmulatedWaveLine<TY, false>(cx, dr_up, dr_down, up, pos, steps);
    for (int lx = 0; lx < kLanes; ++lx) {
      sh_x[cell(ly, lx)] = cx[lx];
      sh_down[cell(ly, lx)] = dr_down[lx];
      sh_up[cell(ly, lx)] = dr_up[lx];
    }
  }
  // __syncthreads
  for (int ly = 0; ly < TY; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      const int i = ly * kLanes + lx;
      t.x[i] = sh_x[own(ly, lx)];
      t.r[i][1] += sh_down[own(ly, lx)];
      t.r[i][3] += sh_up[own(ly, lx)];
    }
  return true;
}

// Rows, then columns (the push and pull between them in a visit do not matter here).
bool EmulatedWavePush(PushTile& t, long* steps) {
  EmulatedWaveRows(t, steps);
  return t.ty == 8 ? EmulatedWaveColumns<8>(t, steps) : t.ty == 16 ? EmulatedWaveColumns<16>(t, steps)
                                                                   : EmulatedWaveColumns<32>(t, steps);
}

// A random push tile: heights of a distance-like field (long admissible chains along rows and
// columns) or of a few values, some inf; excess of every sign and size up to 2^62; residual pairs
// that sum to less than 2^32 (as cap + rev_cap), often 0, sometimes near the limit; a partial tile
// at the grid's edge now and then.
PushTile RandomPushTile(std::mt19937_64& rng, int ty) {
  PushTile t;
  t.ty = ty;
  t.inf = Chance(rng, 0.2) ? Pick(rng, 3, 40) : 32 * ty * 4 + 1;
  const int cols = Chance(rng, 0.7) ? kLanes : Pick(rng, 1, kLanes), rows = Chance(rng, 0.7) ? ty : Pick(rng, 1, ty);
  const int n = ty * kLanes, style = Pick(rng, 0, 2), cx = Pick(rng, -40, kLanes + 40), cy = Pick(rng, -40, ty + 40);
  const double residual = std::array<double, 3>{0.3, 0.7, 1.0}[Pick(rng, 0, 2)];
  t.x.assign(n, 0);
  t.h.assign(n, t.inf);
  t.r.assign(n, {0, 0, 0, 0});
  auto in_grid = [&](int lx, int ly) { return lx < cols && ly < rows; };
  auto amount = [&](int scale) -> std::int64_t {
    switch (scale) {
      case 0: return Pick(rng, 1, 9);
      case 1: return Pick(rng, 1, 2000);
      default: return std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 62)(rng);
    }
  };
  for (int ly = 0; ly < ty; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      if (!in_grid(lx, ly)) continue;
      const int i = ly * kLanes + lx;
      const int d = 1 + std::abs(lx - cx) + std::abs(ly - cy);
      t.h[i] = Chance(rng, 0.03) ? t.inf
               : style == 0      ? std::min(t.inf, d + (Chance(rng, 0.1) ? Pick(rng, -2, 2) : 0))
               : style == 1      ? Pick(rng, 1, std::min(t.inf, 5))
                                 : std::min(t.inf, 1 + ((lx + 3 * ly) % 7));
      t.h[i] = std::max(1, t.h[i]);
      const int scale = Pick(rng, 0, 2);
      const double p = Pick(rng, 0, 9) / 10.0;
      t.x[i] = Chance(rng, 0.3) ? 0 : Chance(rng, p * 0.5) ? -amount(scale) : amount(scale);
    }
  // Residual pairs of the edges to the right and below (inside the grid), and of edges into the halo.
  for (int ly = 0; ly < ty; ++ly)
    for (int lx = 0; lx < kLanes; ++lx) {
      if (!in_grid(lx, ly)) continue;
      const int i = ly * kLanes + lx;
      for (int d : {0, 1}) {
        const int nx = lx + (d == 0), ny = ly + (d == 1);
        const bool inside = nx < kLanes && ny < ty;
        if (inside && !in_grid(nx, ny)) continue;  // no edge leaves the grid
        const std::uint32_t total = !Chance(rng, residual) ? 0u
                                    : Chance(rng, 0.1)     ? 0xffffffffu - static_cast<std::uint32_t>(Pick(rng, 0, 5))
                                                           : static_cast<std::uint32_t>(Pick(rng, 0, 3000));
        const auto part = static_cast<std::uint32_t>(std::uniform_int_distribution<std::uint64_t>(0, total)(rng));
        t.r[i][d] = part;
        if (inside) t.r[ny * kLanes + nx][d + 2] = total - part;
      }
      if (lx == 0) t.r[i][2] = static_cast<std::uint32_t>(Pick(rng, 0, 50));  // into the halo
      if (ly == 0) t.r[i][3] = static_cast<std::uint32_t>(Pick(rng, 0, 50));
    }
  return t;
}

// Conservation, capacities and admissibility of what `after` moved from `before`.
void CheckPushInvariants(const PushTile& before, const PushTile& after, const std::string& what) {
  const int n = before.ty * kLanes;
  for (int i = 0; i < n; ++i) {
    const int lx = i % kLanes, ly = i / kLanes;
    std::int64_t sum_before = before.x[i], sum_after = after.x[i];
    for (int d = 0; d < 4; ++d) {
      sum_before -= before.r[i][d];
      sum_after -= after.r[i][d];
    }
    ASSERT_EQ(sum_after, sum_before) << what << ": node " << i << " gained or lost flow";
    ASSERT_GE(after.x[i], std::min<std::int64_t>(0, before.x[i])) << what << ": node " << i << " overdrew";
    for (int d : {0, 1}) {
      const int nx = lx + (d == 0), ny = ly + (d == 1);
      if (nx >= kLanes || ny >= before.ty) {
        ASSERT_EQ(after.r[i][d], before.r[i][d]) << what << ": flow left the tile";
        continue;
      }
      const int j = ny * kLanes + nx;
      const std::int64_t pair_before = std::int64_t{before.r[i][d]} + before.r[j][d + 2];
      ASSERT_EQ(std::int64_t{after.r[i][d]} + after.r[j][d + 2], pair_before) << what << ": capacity of edge " << i;
      // Flow i -> j needs h(j) = h(i) - 1, flow j -> i the opposite (heights do not change).
      if (after.r[i][d] < before.r[i][d]) ASSERT_EQ(before.h[j], before.h[i] - 1) << what << ": inadmissible";
      if (after.r[i][d] > before.r[i][d]) ASSERT_EQ(before.h[i], before.h[j] - 1) << what << ": inadmissible";
      if (after.r[i][d] != before.r[i][d]) ASSERT_LT(std::max(before.h[i], before.h[j]), before.inf) << what;
    }
  }
}

TEST(PushRelabelWave, WavePushOnRandomTilesEqualsTheNodeByNodeReference) {
  std::mt19937_64 rng(99);
  long moved = 0, columns = 0, far = 0, steps = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int ty = 8 << (trial % 3);
    const PushTile start = RandomPushTile(rng, ty);
    PushTile expected = start, got = start;
    ReferenceWavePush(expected);
    const bool column_phase = EmulatedWavePush(got, &steps);
    const std::string what = "tile " + std::to_string(trial) + " (32x" + std::to_string(ty) + ")";
    ASSERT_EQ(got.x, expected.x) << what << ": excess differs";
    ASSERT_EQ(got.r, expected.r) << what << ": residuals differ";
    CheckPushInvariants(start, got, what);
    if (HasFatalFailure()) return;
    moved += got.r != start.r;
    columns += column_phase;
    // Nodes without excess before that pushed: they passed on flow that reached them in this pass.
    for (int i = 0; i < ty * kLanes; ++i) {
      bool pushed = false;
      for (int d = 0; d < 4; ++d) pushed |= got.r[i][d] < start.r[i][d];
      far += start.x[i] <= 0 && pushed;
    }
  }
  std::cout << "wave push: " << moved << " of 3000 tiles moved flow, " << columns << " ran the column phase, " << far
            << " nodes passed on flow they received, " << steps << " warp relaxation steps\n";
  EXPECT_GT(moved, 1500);
  EXPECT_GT(far, 1000);
}

// Excess at one end of a descending staircase crosses the whole row, then the whole column, in one
// wave push (heights fall by one a node along the path): 31 + ty - 1 hops.
TEST(PushRelabelWave, WavePushCrossesTheTileInOnePass) {
  for (int ty : {8, 16, 32}) {
    PushTile t;
    t.ty = ty;
    t.inf = 1000;
    const int n = ty * kLanes;
    t.x.assign(n, 0);
    t.h.assign(n, t.inf);
    t.r.assign(n, {0, 0, 0, 0});
    // The path: along row 0 from lane 0 to lane 31, then down column 31 to the last row.
    const int length = kLanes + ty - 1;
    for (int k = 0; k < length; ++k) {
      const int i = k < kLanes ? k : (k - kLanes + 1) * kLanes + kLanes - 1;
      t.h[i] = length + 1 - k;
      t.r[i][k + 1 < kLanes ? 0 : 1] = k + 1 < length ? 50 : 0;
    }
    t.x[0] = 70;       // 50 fit through the path
    t.x[n - 1] = -60;  // the end has residual capacity to the sink for 60
    PushTile got = t;
    long steps = 0;
    EmulatedWavePush(got, &steps);
    EXPECT_EQ(got.x[0], 20) << ty;
    EXPECT_EQ(got.x[n - 1], -10) << ty;
    for (int i = 1; i + 1 < n; ++i) EXPECT_EQ(got.x[i], 0) << ty << ", node " << i;
    // A step per hop of each line: the first hop is taken before the loop, the last step sees the fixpoint.
    EXPECT_EQ(steps, (kLanes - 1) + (ty - 1)) << ty;
  }
}

}  // namespace
}  // namespace mrf
