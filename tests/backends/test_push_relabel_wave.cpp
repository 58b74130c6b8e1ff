// The wave relaxation of cuda-pr's 4-connected tiles (backends/common/push_relabel_wave.h) on the
// CPU: a host emulation of the device's BfsWave and KillWave (backends/cuda/push_relabel_tiles.cuh;
// lanes looped over, shuffles, ballots and shared memory as arrays, the same index arithmetic and
// the same rules) reaches exactly the fixpoint of the hop-by-hop loops it replaces (BfsStep and
// KillStep, Jacobi steps with the halo constant) on thousands of random tiles: every tile height,
// random masks, heights, halos and excess signs, partial tiles at the grid's right and bottom edges,
// tiny and huge inf. The bit helpers are checked against plain loops.
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

}  // namespace
}  // namespace mrf
