#pragma once
// The tile visits of cuda-pr's kernels as device functions (one block visits one tile), shared by its
// kernels (push_relabel_kernels.cu, one launch per round) and by callers that run many rounds in one
// persistent kernel (cuda-expansion). Internal to backends/cuda.
#include <cuda_runtime.h>

#include "backends/common/push_relabel_wave.h"
#include "backends/cuda/push_relabel_kernels.h"

namespace mrf::cuda_pr {

using pr::TileLayout;

// ---- Local re-solve (backends/common/push_relabel_local.h) --------------------------------------

// The repairs' memory operations on the device: every change of excess or residual is atomic, and
// taking never goes below zero, so repairs that meet keep a valid preflow.
struct DeviceLocalOps {
  // Cached in L1: a repair reads its neighbourhood again and again. A value another SM changed
  // may be read stale; the transfers below are atomic whatever was read, and heights that come
  // out wrong fail the certificate (or, after fills only in local_resolve = 2, are recomputed by
  // the relabels that follow, which start from every tile a repair touched).
  template <class T>
  __device__ static T Load(const T* p) { return __ldca(p); }
  template <class T>
  __device__ static void Store(T* p, T value) { *const_cast<volatile T*>(p) = value; }
  // Compare-and-swap from the value the repair last read (one round trip when nothing changed it;
  // read again when that value was too small).
  __device__ static bool Take(std::int64_t* p, std::int64_t f, std::int64_t seen) {
    auto* q = reinterpret_cast<unsigned long long*>(p);
    auto old = static_cast<unsigned long long>(seen < f ? Load(p) : seen);
    for (;;) {
      const auto value = static_cast<std::int64_t>(old);
      if (value < f) return false;
      const unsigned long long now = atomicCAS(q, old, static_cast<unsigned long long>(value - f));
      if (now == old) return true;
      old = now;
    }
  }
  __device__ static bool Take(std::uint32_t* p, std::uint32_t f, std::uint32_t seen) {
    unsigned int old = seen < f ? Load(p) : seen;
    for (;;) {
      if (old < f) return false;
      const unsigned int now = atomicCAS(p, old, old - f);
      if (now == old) return true;
      old = now;
    }
  }
  __device__ static std::int64_t Add(std::int64_t* p, std::int64_t f) {
    return static_cast<std::int64_t>(
               atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(f))) + f;
  }
  __device__ static std::uint32_t Add(std::uint32_t* p, std::uint32_t f) { return atomicAdd(p, f) + f; }
  __device__ static void Flag(std::uint8_t* p) { *p = 1; }
};

template <int KIND>
struct KindTraits {
  static constexpr int D = pr::NumDirs(KIND);
  static constexpr int ZP = KIND == pr::kKindGrid3D6 ? 1 : 0;  // halo in z on 3-D grids
};

// Offset of direction d in the halo box and in the tile.
template <int KIND, int HX, int HY>
__device__ constexpr int HaloOffset(int d) {
  return pr::DirX(KIND, d) + HX * (pr::DirY(KIND, d) + HY * pr::DirZ(KIND, d));
}
template <int KIND, int TX, int TY>
__device__ constexpr int TileOffset(int d) {
  return pr::DirX(KIND, d) + TX * (pr::DirY(KIND, d) + TY * pr::DirZ(KIND, d));
}

// Loads the heights of the tile's halo ring into sh_h (the tile's own cells are set by their threads).
template <int KIND, int TX, int TY, int TZ>
__device__ void LoadHaloRing(const DeviceState& s, int tx, int ty, int tz, int* sh_h) {
  constexpr int ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP, NT = TX * TY * TZ;
  const TileLayout& L = s.layout;
  for (int i = threadIdx.x; i < HX * HY * HZ; i += NT) {
    const int cx = i % HX, cy = (i / HX) % HY, cz = i / (HX * HY);
    const bool ring = cx == 0 || cx == HX - 1 || cy == 0 || cy == HY - 1 || (ZP && (cz == 0 || cz == HZ - 1));
    if (!ring) continue;
    const int gx = tx * TX + cx - 1, gy = ty * TY + cy - 1, gz = tz * TZ + cz - ZP;
    sh_h[i] = L.InGrid(gx, gy, gz) ? s.h[L.Node(gx, gy, gz)] : L.inf;
  }
}

// Whether a tile or one of the tiles whose nodes its halo holds is flagged.
template <int KIND>
__device__ bool FlaggedNear(const TileLayout& L, const std::uint8_t* flags, int tx, int ty, int tz) {
  constexpr int D = KindTraits<KIND>::D;
  bool flagged = flags[L.TileIndex(tx, ty, tz)] != 0;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const int nx = tx + pr::DirX(KIND, d), ny = ty + pr::DirY(KIND, d), nz = tz + pr::DirZ(KIND, d);
    if (nx >= 0 && ny >= 0 && nz >= 0 && nx < L.tiles_x && ny < L.tiles_y && nz < L.tiles_z)
      flagged |= flags[L.TileIndex(nx, ny, nz)] != 0;
  }
  return flagged;
}

// ---- Wave relaxation (backends/common/push_relabel_wave.h) ---------------------------------------

constexpr unsigned kFullWarp = 0xffffffffu;

// Tiles whose BFS and kill visits can relax by waves, and whose push visits can push by waves:
// 4-connected 2-D tiles one warp wide.
template <int KIND, int TX, int TZ>
__host__ __device__ constexpr bool HasWave() {
  return KIND == pr::kKindGrid4 && TX == 32 && TZ == 1;
}

// For a tile-shape dispatch (calls f.operator()<KIND, TX, TY, TZ>()): calls
// f.template operator()<KIND, TX, TY, TZ, WAVE>() with WAVE from the configuration, true only where the
// tile shape has a wave instantiation.
template <class F>
struct WithWave {
  const F& f;
  bool wave;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    if constexpr (HasWave<K, X, Z>())
      if (wave) return f.template operator()<K, X, Y, Z, true>();
    return f.template operator()<K, X, Y, Z, false>();
  }
};

// Min-plus relaxation along segments of lanes (a row, or the columns of the transposed layout):
// each lane ends with the least h(u) + |lane - u| over the lanes u it reaches, first from lower
// lanes, then from higher ones. steps: pr::ScanSteps. SPAN: the longest segment.
template <int SPAN>
__device__ __forceinline__ int WaveScan(int h, int lane, std::uint32_t steps) {
  int b = h - lane;  // h(u) + lane - u = b(u) + lane
#pragma unroll
  for (int j = 0; (1 << j) < SPAN; ++j) b = pr::ScanTake(b, __shfl_up_sync(kFullWarp, b, 1 << j), (steps >> j) & 1u);
  b += 2 * lane;  // h(u) + u - lane = b(u) - lane
#pragma unroll
  for (int j = 0; (1 << j) < SPAN; ++j)
    b = pr::ScanTake(b, __shfl_down_sync(kFullWarp, b, 1 << j), (steps >> (5 + j)) & 1u);
  return b - lane;
}

// BfsTile's relaxation of a 32 x TY tile of a 4-connected grid by waves: the halo once, then rows
// (warp = row, lane = x) and columns (transposed: each group of TY lanes holds one column) in turn
// until a column pass changes nothing. sh_h: the halo ring's heights, published. Returns the height.
template <int TY>
__device__ __forceinline__ int BfsWave(int h, int inf, std::uint8_t mask, const int* sh_h, int lx, int ly) {
  constexpr int HX = 32 + 2, HY = TY + 2;
  constexpr int G = 32 / TY, P = 32 + G;  // columns per warp when transposed; a pitch free of bank conflicts both ways
  __shared__ int sh_t[TY * P];
  __shared__ std::uint8_t sh_links[TY * P];
  const std::uint8_t inside = pr::InsideDirs4(lx, ly, 32, TY);
  const int hc = (lx + 1) + HX * (ly + 1);
  int nh[4];
#pragma unroll
  for (int d = 0; d < 4; ++d) nh[d] = (inside & (1u << d)) ? inf : sh_h[hc + HaloOffset<pr::kKindGrid4, HX, HY>(d)];
  h = pr::BfsStep<4>(h, inf, static_cast<std::uint8_t>(mask & ~inside), nh);  // the halo stays constant: once
  const std::uint8_t links = pr::BfsWaveLinks(h, mask, inside);
  const int own = ly * P + lx;                        // this thread's node
  const int cell = (lx % TY) * P + ly * G + lx / TY;  // its node in the transposed layout
  sh_links[own] = links;
  // The scans' steps (pr::ScanSteps) of the rows in bits 0-9, of the columns in bits 10-19.
  std::uint32_t steps = pr::ScanSteps(lx, pr::SegmentFirst(__ballot_sync(kFullWarp, links & pr::kTakeLeft), lx),
                                      pr::SegmentLast(__ballot_sync(kFullWarp, links & pr::kTakeRight), lx));
  h = WaveScan<32>(h, lx, steps);
  sh_t[own] = h;
  __syncthreads();
  const std::uint8_t cell_links = sh_links[cell];
  steps |= pr::ScanSteps(lx, pr::SegmentFirst(__ballot_sync(kFullWarp, cell_links & pr::kTakeAbove), lx),
                         pr::SegmentLast(__ballot_sync(kFullWarp, cell_links & pr::kTakeBelow), lx))
           << 10;
  for (;;) {
    const int before = sh_t[cell];
    const int after = WaveScan<TY>(before, lx, steps >> 10);
    if (after != before) sh_t[cell] = after;
    if (!__syncthreads_or(after != before)) return h;  // rows relaxed, and the columns changed nothing
    h = WaveScan<32>(sh_t[own], lx, steps);
    sh_t[own] = h;
    __syncthreads();
  }
}

// KillTile's relaxation of a 32 x TY tile of a 4-connected grid by waves on bit words (one word
// per row, one bit per node): each node's seed, then one warp (lane = row) spreads the alive bits
// along the rows (doubling within a word) and the columns (doubling across lanes, all columns at
// once) until a column pass changes nothing. sh_h: the tile's heights as read and its halo ring,
// written but not yet published (the first barrier here does it). Returns the height.
template <int TY>
__device__ __forceinline__ int KillWave(std::int64_t x, int h, int inf, std::uint8_t mask, const int* sh_h, int lx,
                                        int ly) {
  constexpr int HX = 32 + 2, HY = TY + 2;
  // Per row: the nodes with x < 0, the alive ones, and the links (index: direction).
  __shared__ std::uint32_t sh_base[TY], sh_alive[TY], sh_links[4][TY];
  const std::uint32_t base_row = __ballot_sync(kFullWarp, x < 0);
  if (lx == 0) sh_base[ly] = base_row;
  __syncthreads();
  const std::uint8_t inside = pr::InsideDirs4(lx, ly, 32, TY);
  const int hc = (lx + 1) + HX * (ly + 1);
  int nh[4];
  std::uint8_t base = 0;
#pragma unroll
  for (int d = 0; d < 4; ++d) {
    nh[d] = sh_h[hc + HaloOffset<pr::kKindGrid4, HX, HY>(d)];
    if (inside & (1u << d)) {
      const std::uint32_t row = sh_base[ly + pr::DirY(pr::kKindGrid4, d)];
      base |= static_cast<std::uint8_t>(((row >> (lx + pr::DirX(pr::kKindGrid4, d))) & 1u) << d);
    }
  }
  const pr::KillSeed seed = pr::KillWaveSeed<4>(x, h, inf, mask, nh, base, inside);
  const std::uint32_t alive_row = __ballot_sync(kFullWarp, seed.alive);
  std::uint32_t link_rows[4];
#pragma unroll
  for (int d = 0; d < 4; ++d) link_rows[d] = __ballot_sync(kFullWarp, seed.links & (1u << d));
  if (lx == 0) {
    sh_alive[ly] = alive_row;
#pragma unroll
    for (int d = 0; d < 4; ++d) sh_links[d][ly] = link_rows[d];
  }
  __syncthreads();
  if (ly == 0) {  // warp 0 alone; lanes past the tile's rows hold empty words
    const bool row = lx < TY;
    std::uint32_t alive = row ? sh_alive[lx] : 0u;
    const std::uint32_t take_right = row ? sh_links[0][lx] : 0u, take_below = row ? sh_links[1][lx] : 0u;
    const std::uint32_t take_left = row ? sh_links[2][lx] : 0u, take_above = row ? sh_links[3][lx] : 0u;
    for (;;) {
      alive = pr::SpreadDown(pr::SpreadUp(alive, take_left), take_right);
      const std::uint32_t before = alive;
      std::uint32_t takes = take_above;  // row y takes from row y - 1
#pragma unroll
      for (int k = 1; k < TY; k *= 2) {
        const std::uint32_t alive_k = __shfl_up_sync(kFullWarp, alive, k);
        const std::uint32_t takes_k = __shfl_up_sync(kFullWarp, takes, k);
        if (lx >= k) pr::SpreadStep(alive, takes, alive_k, takes_k);
      }
      takes = take_below;  // row y takes from row y + 1
#pragma unroll
      for (int k = 1; k < TY; k *= 2) {
        const std::uint32_t alive_k = __shfl_down_sync(kFullWarp, alive, k);
        const std::uint32_t takes_k = __shfl_down_sync(kFullWarp, takes, k);
        if (lx + k < TY) pr::SpreadStep(alive, takes, alive_k, takes_k);
      }
      if (!__any_sync(kFullWarp, alive != before)) break;  // rows spread, and the columns changed nothing
    }
    if (row) sh_alive[lx] = alive;
  }
  __syncthreads();
  return pr::KillWaveHeight(x, h, inf, (sh_alive[ly] >> lx) & 1u);
}

// ---- Wave pushes (backends/common/push_relabel_wave.h) -------------------------------------------

// One wave along lines of lanes, towards higher lanes (UP) or lower ones (pos: the lane's place on
// its line of SPAN lanes; cap: its link's capacity, pr::WaveLinkCap): every lane passes on
// WaveCarry of what its predecessor passes on, relaxed hop by hop with shuffles until no flow
// changes; the lane's excess and its residuals along the line (r_out towards the next lane, r_back
// towards the previous one) then take the flows. No block barrier; a warp where no lane can start
// a flow (excess and a link) skips it.
template <int SPAN, bool UP>
__device__ __forceinline__ void WaveLine(std::int64_t& x, std::uint32_t& r_out, std::uint32_t& r_back,
                                         std::uint32_t cap, int pos) {
  if (!__any_sync(kFullWarp, x > 0 && cap > 0)) return;
  const bool first = UP ? pos == 0 : pos == SPAN - 1;  // a line starts at the tile's edge
  std::uint32_t out = pr::WaveCarry(x, cap, 0), in = 0;
  for (;;) {
    in = UP ? __shfl_up_sync(kFullWarp, out, 1) : __shfl_down_sync(kFullWarp, out, 1);
    if (first) in = 0;
    const std::uint32_t next = pr::WaveCarry(x, cap, in);
    if (!__any_sync(kFullWarp, next != out)) break;  // out is the fixpoint, and `in` matches it
    out = next;
  }
  pr::WaveApply(x, r_out, r_back, in, out);
}

// The row waves of a local iteration on a 4-connected tile one warp wide (warp = row): rightwards,
// then leftwards. nh: the neighbours' heights (d: +x, +y, -x, -y).
__device__ __forceinline__ void WaveRows(std::int64_t& x, std::uint32_t (&r)[4], int h, int inf, const int (&nh)[4],
                                         int lx) {
  WaveLine<32, true>(x, r[0], r[2], pr::WaveLinkCap(h, inf, r[0], nh[0], lx + 1 < 32), lx);
  WaveLine<32, false>(x, r[2], r[0], pr::WaveLinkCap(h, inf, r[2], nh[2], lx > 0), lx);
}

// The column waves of a local iteration on a 32 x TY tile of a 4-connected grid: downwards, then
// upwards, in the transposed layout of BfsWave (each group of TY lanes holds one column) through
// shared memory. Its first block barrier (a vote) comes after every read of sh_h and sh_out of the
// iteration, so the caller needs no barrier of its own before publishing heights; a second one
// when some column moves flow.
template <int TY>
__device__ __forceinline__ void WaveColumns(std::int64_t& x, std::uint32_t (&r)[4], int h, int inf,
                                            const int (&nh)[4], int lx, int ly) {
  constexpr int G = 32 / TY, P = 32 + G;
  __shared__ std::int64_t sh_x[TY * P];
  __shared__ std::uint32_t sh_down[TY * P], sh_up[TY * P];
  // An edge that takes flow downwards is not admissible upwards, so the up links hold after the
  // downward wave too.
  const std::uint32_t down = pr::WaveLinkCap(h, inf, r[1], nh[1], ly + 1 < TY);
  const std::uint32_t up = pr::WaveLinkCap(h, inf, r[3], nh[3], ly > 0);
  const int own = ly * P + lx, cell = (lx % TY) * P + ly * G + lx / TY, pos = lx % TY;
  sh_x[own] = x;
  sh_down[own] = down;
  sh_up[own] = up;
  if (!__syncthreads_or(x > 0 && (down > 0 || up > 0))) return;  // no column moves anything
  std::int64_t cx = sh_x[cell];
  std::uint32_t dr_down = 0, dr_up = 0;  // residual changes (mod 2^32) of the cell's node
  WaveLine<TY, true>(cx, dr_down, dr_up, sh_down[cell], pos);
  WaveLine<TY, false>(cx, dr_up, dr_down, sh_up[cell], pos);
  sh_x[cell] = cx;
  sh_down[cell] = dr_down;
  sh_up[cell] = dr_up;
  __syncthreads();
  x = sh_x[own];
  r[1] += sh_down[own];
  r[3] += sh_up[own];
}

// One block visits tile (tx, ty, tz); a visit that found work counts itself in *work.
// WAVE: wave pushes where the tile allows it (HasWave): each local iteration carries excess along
// the rows before the push, and along the columns after the pull (tbb-pr: the same order).
// census: the visit also does the census of a global relabel that skipped it (cuda-expansion's
// fused_census): it looks at the tile whatever its flag, writes the cut from the heights it
// finds, and counts the tile's active nodes in *work instead.
// keep_masks (cuda-pr's re-solves): the visit keeps s.mask current for the residuals it changes, its
// own nodes' and the reverse edges of the flow it sends out of the tile, so that settling and the
// certificate can read a byte a node instead of the residuals. Those reverse edges only gain
// capacity: their bits are set with atomicOr on the mask's 32-bit word, which must not hold a node of
// a tile visited in the same launch (the engine asks for it only where the grid's and the tile's
// widths are multiples of 4: then a word's 4 nodes lie in one tile).
template <int KIND, int TX, int TY, int TZ, bool WAVE = false>
__device__ __forceinline__ void PushTile(const DeviceState& s, int tx, int ty, int tz, int iterations,
                                         std::uint32_t* work, bool census = false, bool keep_masks = false) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int NT = TX * TY * TZ, HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  __shared__ std::uint32_t sh_out[D][NT];
  const TileLayout& L = s.layout;
  const int tile = L.TileIndex(tx, ty, tz);
  if (!census && !s.active[tile]) return;  // only this block and other-colour tiles (idle now) write it

  const int tid = threadIdx.x;
  const int lx = tid % TX, ly = (tid / TX) % TY, lz = tid / (TX * TY);
  const int gx = tx * TX + lx, gy = ty * TY + ly, gz = tz * TZ + lz;
  const bool in_grid = L.InGrid(gx, gy, gz);
  const std::int64_t N = L.num_nodes, v = in_grid ? L.Node(gx, gy, gz) : 0;
  const int inf = L.inf;
  std::int64_t x = 0;
  int h = inf;
  std::uint32_t r[D], acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    r[d] = in_grid ? s.r[d * N + v] : 0u;
    acc[d] = 0;
  }
  if (in_grid) {
    x = s.x[v];
    h = s.h[v];
  }
  const int hc = (lx + 1) + HX * ((ly + 1) + HY * (lz + ZP));
  LoadHaloRing<KIND, TX, TY, TZ>(s, tx, ty, tz, sh_h);
  if (census && in_grid) s.labels[v] = pr::CutSide(h, inf);  // after the halo's loads, which a byte store may alias
  sh_h[hc] = h;
  const int active_nodes = __syncthreads_count(pr::IsActive(x, h, inf));
  if (census && tid == 0 && active_nodes) atomicAdd(work, static_cast<std::uint32_t>(active_nodes));
  bool any = active_nodes > 0;
  if (!any) {
    if (keep_masks && in_grid) s.mask[v] = pr::ResidualMask<D>(r);  // it may be a tile a repair changed
    if (tid == 0) s.active[tile] = 0;
    return;
  }
  int it = 0;
  constexpr bool kWavePush = WAVE && HasWave<KIND, TX, TZ>();
  while (it < iterations) {
    int nh[D];
    std::uint32_t o[D];
    if constexpr (kWavePush) {
#pragma unroll
      for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];  // for the whole iteration
      WaveRows(x, r, h, inf, nh, lx);
    } else {
      const bool act = pr::IsActive(x, h, inf);
#pragma unroll
      for (int d = 0; d < D; ++d) nh[d] = act ? sh_h[hc + HaloOffset<KIND, HX, HY>(d)] : inf;
    }
    pr::PushStep<D>(x, h, inf, r, nh, o);
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const bool inside = lx + pr::DirX(KIND, d) >= 0 && lx + pr::DirX(KIND, d) < TX && ly + pr::DirY(KIND, d) >= 0 &&
                          ly + pr::DirY(KIND, d) < TY && lz + pr::DirZ(KIND, d) >= 0 && lz + pr::DirZ(KIND, d) < TZ;
      if (inside) sh_out[d][tid] = o[d];
      else acc[d] += o[d];
    }
    __syncthreads();
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const bool inside = lx + pr::DirX(KIND, d) >= 0 && lx + pr::DirX(KIND, d) < TX && ly + pr::DirY(KIND, d) >= 0 &&
                          ly + pr::DirY(KIND, d) < TY && lz + pr::DirZ(KIND, d) >= 0 && lz + pr::DirZ(KIND, d) < TZ;
      if (inside) pr::PullStep(x, r[d], sh_out[pr::Opposite(KIND, d)][tid + TileOffset<KIND, TX, TY>(d)]);
    }
    int new_h = h;
    if constexpr (kWavePush) {
      WaveColumns<TY>(x, r, h, inf, nh, lx, ly);  // its barriers: every thread has read sh_h and sh_out
      if (pr::IsActive(x, h, inf)) new_h = pr::RelabelStep<D>(x, h, inf, r, nh);
    } else {
      if (pr::IsActive(x, h, inf)) {
#pragma unroll
        for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];
        new_h = pr::RelabelStep<D>(x, h, inf, r, nh);
      }
      __syncthreads();  // every thread has read sh_h and sh_out
    }
    if (new_h != h) {
      h = new_h;
      sh_h[hc] = h;
    }
    ++it;
    any = __syncthreads_or(pr::IsActive(x, h, inf));
    if (!any) break;
  }
  if (in_grid) {
    s.x[v] = x;
    s.h[v] = h;
#pragma unroll
    for (int d = 0; d < D; ++d) s.r[d * N + v] = r[d];
    if (keep_masks) s.mask[v] = pr::ResidualMask<D>(r);
  }
  // Flow pushed out of the tile: the receiving tiles are idle (other colours); several tiles may
  // feed one node, so its excess is added atomically; the residual slot has this node as its only writer.
#pragma unroll
  for (int d = 0; d < D; ++d) {
    if (acc[d] == 0) continue;
    const int nx = gx + pr::DirX(KIND, d), ny = gy + pr::DirY(KIND, d), nz = gz + pr::DirZ(KIND, d);
    const std::int64_t w = L.Node(nx, ny, nz);
    atomicAdd(reinterpret_cast<unsigned long long*>(s.x + w), static_cast<unsigned long long>(acc[d]));
    s.r[pr::Opposite(KIND, d) * N + w] += acc[d];
    if (keep_masks)
      atomicOr(reinterpret_cast<unsigned int*>(s.mask) + w / 4, (1u << pr::Opposite(KIND, d)) << (8 * (w % 4)));
    s.active[L.TileIndex(nx / TX, ny / TY, nz / TZ)] = 1;
    s.touched[L.TileIndex(nx / TX, ny / TY, nz / TZ)] = 1;
  }
  if (tid == 0) {
    s.active[tile] = any ? 1 : 0;
    s.touched[tile] = 1;
    if (!census) atomicAdd(work, 1u);
    atomicAdd(&s.totals[kTileVisits], 1ull);
    atomicAdd(&s.totals[kTileIterations], static_cast<unsigned long long>(it));
  }
}

// Relaxes a tile hop by hop to its local fixpoint (the halo as read): every thread replaces its height
// by step(its neighbours' heights) until no height changes, two block barriers a hop. Returns whether
// this thread's height changed. max_hops > 0 bounds the hops; `unsettled` (optional) then tells
// whether the tile was still changing at the bound.
template <int KIND, int HX, int HY, class Step>
__device__ __forceinline__ bool HopsToFixpoint(int& h, int* sh_h, int hc, Step step, bool* unsettled = nullptr,
                                               int max_hops = 0) {
  constexpr int D = KindTraits<KIND>::D;
  bool changed_any = false;
  if (unsettled) *unsettled = false;
  for (int hop = 0;; ++hop) {
    if (max_hops > 0 && hop == max_hops) {
      if (unsettled) *unsettled = true;
      break;
    }
    int nh[D];
#pragma unroll
    for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];
    const int new_h = step(nh);
    const bool changed = new_h != h;
    __syncthreads();  // every thread has read sh_h
    if (changed) {
      h = new_h;
      sh_h[hc] = h;
    }
    changed_any |= changed;
    if (!__syncthreads_or(changed)) break;
  }
  return changed_any;
}

// Bit d set when the node at (lx, ly, lz) of a tile lies in the halo of the next tile in direction d.
template <int KIND, int TX, int TY, int TZ>
__device__ __forceinline__ std::uint32_t HaloSides(int lx, int ly, int lz) {
  constexpr int D = KindTraits<KIND>::D;
  std::uint32_t bits = 0;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const int dx = pr::DirX(KIND, d), dy = pr::DirY(KIND, d), dz = pr::DirZ(KIND, d);
    if ((dx == 0 || lx == (dx > 0 ? TX - 1 : 0)) && (dy == 0 || ly == (dy > 0 ? TY - 1 : 0)) &&
        (dz == 0 || lz == (dz > 0 ? TZ - 1 : 0)))
      bits |= 1u << d;
  }
  return bits;
}

// One BFS visit of every tile with work: relax to the local fixpoint with the halo as read. Halo
// heights of tiles changing in the same launch may be read old or new: distances only fall and
// any order reaches the same fixpoint; a tile that changed marks itself, so its neighbours look
// again next round, and a round where nothing changed is the fixpoint.
// With `start` (the first round of a global relabel, fused_bfs_start): the round computes the
// starting distances itself (1 with residual capacity to the sink, else inf) from the excess, for
// its nodes and its halo, writes them and the residual bitmasks, and relaxes from there; no other
// tile's heights are read in that round.
// WAVE: relax by waves where the tile allows it (HasWave), else hop by hop; the same fixpoint.
// changed (optional): counts the tile when it changed. sides (shared memory, optional): ORs in the
// HaloSides of every node whose height changed.
template <int KIND, int TX, int TY, int TZ, bool WAVE>
__device__ __forceinline__ void BfsTile(const DeviceState& s, int tx, int ty, int tz, const std::uint8_t* dirty_in,
                                        std::uint8_t* dirty_out, bool start, std::uint32_t* changed,
                                        std::uint32_t* sides = nullptr) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  const TileLayout& L = s.layout;
  const int tile = L.TileIndex(tx, ty, tz);
  if (!FlaggedNear<KIND>(L, dirty_in, tx, ty, tz)) {
    if (threadIdx.x == 0) dirty_out[tile] = 0;
    return;
  }
  const int tid = threadIdx.x;
  if (tid == 0) atomicAdd(&s.totals[kBfsTileVisits], 1ull);
  const int lx = tid % TX, ly = (tid / TX) % TY, lz = tid / (TX * TY);
  const int gx = tx * TX + lx, gy = ty * TY + ly, gz = tz * TZ + lz;
  const bool in_grid = L.InGrid(gx, gy, gz);
  const std::int64_t v = in_grid ? L.Node(gx, gy, gz) : 0;
  const int inf = L.inf;
  int h = inf;
  std::uint8_t mask = 0;
  const int hc = (lx + 1) + HX * ((ly + 1) + HY * (lz + ZP));
  if (!start) {
    if (in_grid) {
      h = s.h[v];
      mask = s.mask[v];
    }
    LoadHaloRing<KIND, TX, TY, TZ>(s, tx, ty, tz, sh_h);
  } else {
    if (in_grid) {
      const std::int64_t N = L.num_nodes;
      std::uint32_t r[D];
#pragma unroll
      for (int d = 0; d < D; ++d) r[d] = s.r[d * N + v];
      mask = pr::ResidualMask<D>(r);
      h = pr::BfsInitStep(s.x[v], inf);
    }
    constexpr int NT = TX * TY * TZ, HZ = TZ + 2 * ZP;
    for (int i = tid; i < HX * HY * HZ; i += NT) {
      const int cx = i % HX, cy = (i / HX) % HY, cz = i / (HX * HY);
      const bool ring = cx == 0 || cx == HX - 1 || cy == 0 || cy == HY - 1 || (ZP && (cz == 0 || cz == HZ - 1));
      if (!ring) continue;
      const int hx = tx * TX + cx - 1, hy = ty * TY + cy - 1, hz = tz * TZ + cz - ZP;
      sh_h[i] = L.InGrid(hx, hy, hz) ? pr::BfsInitStep(s.x[L.Node(hx, hy, hz)], inf) : inf;
    }
    if (in_grid) s.mask[v] = mask;  // after the halo's loads, which a byte store may alias
  }
  sh_h[hc] = h;
  __syncthreads();
  bool changed_any = false;
  if constexpr (WAVE && HasWave<KIND, TX, TZ>()) {
    const int new_h = BfsWave<TY>(h, inf, mask, sh_h, lx, ly);
    changed_any = new_h != h;  // heights only fall
    h = new_h;
  } else {
    changed_any =
        HopsToFixpoint<KIND, HX, HY>(h, sh_h, hc, [&](const auto& nh) { return pr::BfsStep<D>(h, inf, mask, nh); });
  }
  if ((changed_any || start) && in_grid) s.h[v] = h;
  if (sides && changed_any) atomicOr(sides, HaloSides<KIND, TX, TY, TZ>(lx, ly, lz));
  const bool block_changed = __syncthreads_or(changed_any);
  if (tid == 0) {
    dirty_out[tile] = block_changed ? 1 : 0;
    if (block_changed && changed) atomicAdd(changed, 1u);
  }
}

// Incremental relabel, first phase: drop heights no longer backed by a residual path (KillStep),
// to the local fixpoint with the halo as read. Heights only rise here (but for nodes that gained
// residual capacity to the sink, which drop to 1 once, by their own excess): a halo height read
// old can only keep a node alive too long, and then the tile that changed marks itself, so its
// neighbours look again; the nodes that survive in the end do not depend on the order.
// WAVE: relax by waves where the tile allows it (HasWave), else hop by hop; the same fixpoint.
// changed, sides: as for BfsTile.
template <int KIND, int TX, int TY, int TZ, bool WAVE>
__device__ __forceinline__ void KillTile(const DeviceState& s, int tx, int ty, int tz, const std::uint8_t* dirty_in,
                                         std::uint8_t* dirty_out, bool refresh_masks, std::uint32_t* changed,
                                         std::uint32_t* sides = nullptr) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  const TileLayout& L = s.layout;
  const int tile = L.TileIndex(tx, ty, tz);
  if (!FlaggedNear<KIND>(L, dirty_in, tx, ty, tz)) {
    if (threadIdx.x == 0) dirty_out[tile] = 0;
    return;
  }
  const int tid = threadIdx.x;
  const int lx = tid % TX, ly = (tid / TX) % TY, lz = tid / (TX * TY);
  const int gx = tx * TX + lx, gy = ty * TY + ly, gz = tz * TZ + lz;
  const bool in_grid = L.InGrid(gx, gy, gz);
  const std::int64_t v = in_grid ? L.Node(gx, gy, gz) : 0;
  const int inf = L.inf;
  int h = inf;
  std::int64_t x = 0;
  std::uint8_t mask = 0;
  if (in_grid) {
    h = s.h[v];
    x = s.x[v];
    if (refresh_masks) {
      const std::int64_t N = L.num_nodes;
      std::uint32_t r[D];
#pragma unroll
      for (int d = 0; d < D; ++d) r[d] = s.r[d * N + v];
      mask = pr::ResidualMask<D>(r);
    } else {
      mask = s.mask[v];
    }
  }
  const int hc = (lx + 1) + HX * ((ly + 1) + HY * (lz + ZP));
  LoadHaloRing<KIND, TX, TY, TZ>(s, tx, ty, tz, sh_h);
  if (refresh_masks && in_grid) s.mask[v] = mask;  // after the halo's loads, which a byte store may alias
  sh_h[hc] = h;
  bool changed_any = false;
  if constexpr (WAVE && HasWave<KIND, TX, TZ>()) {
    const int new_h = KillWave<TY>(x, h, inf, mask, sh_h, lx, ly);  // publishes sh_h itself
    changed_any = new_h != h;  // each height changes at most once (to 1 or to inf)
    h = new_h;
  } else {
    __syncthreads();
    changed_any = HopsToFixpoint<KIND, HX, HY>(
        h, sh_h, hc, [&](const auto& nh) { return in_grid ? pr::KillStep<D>(x, h, inf, mask, nh) : inf; });
  }
  if (changed_any && in_grid) s.h[v] = h;
  if (sides && changed_any) atomicOr(sides, HaloSides<KIND, TX, TY, TZ>(lx, ly, lz));
  const bool block_changed = __syncthreads_or(changed_any);
  if (tid == 0) {
    dirty_out[tile] = block_changed ? 1 : 0;
    if (block_changed) {
      s.seed[tile] = 1;
      if (changed) atomicAdd(changed, 1u);
    }
  }
}

// Tile flags, active-node count, the cut, and the residual capacity left on the sink edges.
// Returns the tile's active nodes (in every thread).
template <int TX, int TY, int TZ>
__device__ __forceinline__ int CensusTile(const DeviceState& s, int tx, int ty, int tz) {
  const TileLayout& L = s.layout;
  const int tid = threadIdx.x;
  const int gx = tx * TX + tid % TX, gy = ty * TY + (tid / TX) % TY, gz = tz * TZ + tid / (TX * TY);
  const bool in_grid = L.InGrid(gx, gy, gz);
  bool act = false;
  unsigned long long residual = 0;
  if (in_grid) {
    const std::int64_t v = L.Node(gx, gy, gz);
    const std::int64_t x = s.x[v];
    const int h = s.h[v];
    act = pr::IsActive(x, h, L.inf);
    s.labels[v] = pr::CutSide(h, L.inf);
    residual = x < 0 ? static_cast<unsigned long long>(-x) : 0ull;
  }
  const int count = __syncthreads_count(act);
  for (int offset = 16; offset > 0; offset /= 2) residual += __shfl_down_sync(0xffffffffu, residual, offset);
  if ((tid & 31) == 0 && residual) atomicAdd(&s.totals[kSinkResidual], residual);
  if (tid == 0) {
    s.active[L.TileIndex(tx, ty, tz)] = count > 0 ? 1 : 0;
    if (count) atomicAdd(&s.totals[kActiveNodes], static_cast<unsigned long long>(count));
  }
  return count;
}


}  // namespace mrf::cuda_pr
