// cuda-pr kernels: one CUDA block per tile, one thread per node; the per-node steps are the ones
// tbb-pr runs (backends/common/push_relabel_steps.h), in the same phase order.
#include <cuda_runtime.h>

#include "backends/cuda/push_relabel_kernels.h"

namespace mrf::cuda_pr {
namespace {

using pr::TileLayout;

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

__device__ bool Open(const DeviceState& s, Gate gate) {
  if (gate.flag >= 0 && s.flags[gate.flag] != gate.flag_value) return false;
  if (gate.mode == Gate::kAlways) return true;
  if (gate.mode == Gate::kIfPreviousChanged) return s.counters[gate.first] != 0;
  bool converged = false;
  for (int j = gate.first; j < gate.first + gate.count; ++j) converged |= s.counters[j] == 0;
  return converged && (gate.mode == Gate::kIfConverged || s.totals[kActiveNodes] != 0);
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

// ---- Push: up to `iterations` synchronous push / pull / relabel iterations on one tile ----------
template <int KIND, int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ)
    PushTilesKernel(DeviceState s, int colour, int counter, Gate gate, int iterations) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int NT = TX * TY * TZ, HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  __shared__ std::uint32_t sh_out[D][NT];
  const TileLayout& L = s.layout;
  if (!Open(s, gate)) return;  // decided the same way by every block: nothing to do costs one launch
  int tx, ty, tz;
  if (!L.ColourTile(colour, blockIdx.x, blockIdx.y, blockIdx.z, &tx, &ty, &tz)) return;
  const int tile = L.TileIndex(tx, ty, tz);
  if (!s.active[tile]) return;  // only this block and other-colour tiles (idle now) write it

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
  sh_h[hc] = h;
  bool any = __syncthreads_or(pr::IsActive(x, h, inf));
  if (!any) {
    if (tid == 0) s.active[tile] = 0;
    return;
  }
  int it = 0;
  while (it < iterations) {
    int nh[D];
    std::uint32_t o[D];
    const bool act = pr::IsActive(x, h, inf);
#pragma unroll
    for (int d = 0; d < D; ++d) nh[d] = act ? sh_h[hc + HaloOffset<KIND, HX, HY>(d)] : inf;
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
    if (pr::IsActive(x, h, inf)) {
#pragma unroll
      for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];
      new_h = pr::RelabelStep<D>(x, h, inf, r, nh);
    }
    __syncthreads();  // every thread has read sh_h and sh_out
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
    s.active[L.TileIndex(nx / TX, ny / TY, nz / TZ)] = 1;
    s.touched[L.TileIndex(nx / TX, ny / TY, nz / TZ)] = 1;
  }
  if (tid == 0) {
    s.active[tile] = any ? 1 : 0;
    s.touched[tile] = 1;
    atomicAdd(&s.counters[counter], 1u);
    atomicAdd(&s.totals[kTileVisits], 1ull);
    atomicAdd(&s.totals[kTileIterations], static_cast<unsigned long long>(it));
  }
}

// ---- Global relabel ---------------------------------------------------------------------------
template <int KIND>
__global__ void BfsInitKernel(DeviceState s) {
  constexpr int D = KindTraits<KIND>::D;
  const std::int64_t N = s.layout.num_nodes;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < N;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    s.h[v] = pr::BfsInitStep(s.x[v], s.layout.inf);
    std::uint32_t r[D];
#pragma unroll
    for (int d = 0; d < D; ++d) r[d] = s.r[d * N + v];
    s.mask[v] = pr::ResidualMask<D>(r);
  }
}

// One BFS visit of every tile with work: relax to the local fixpoint with the halo as read. Halo
// heights of tiles changing in the same launch may be read old or new: distances only fall and
// any order reaches the same fixpoint; a tile that changed marks itself, so its neighbours look
// again next round, and a round where nothing changed is the fixpoint.
// With `start` (the first round of a global relabel, fused_bfs_start): the round computes the
// starting distances itself (1 with residual capacity to the sink, else inf) from the excess, for
// its nodes and its halo, writes them and the residual bitmasks, and relaxes from there; no other
// tile's heights are read in that round.
template <int KIND, int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ)
    BfsTilesKernel(DeviceState s, int counter, Gate gate, const std::uint8_t* dirty_in, std::uint8_t* dirty_out,
                   bool start) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  const TileLayout& L = s.layout;
  if (!Open(s, gate)) return;
  const int tx = blockIdx.x, ty = blockIdx.y, tz = blockIdx.z;
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
      s.mask[v] = mask;
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
  }
  sh_h[hc] = h;
  __syncthreads();
  bool changed_any = false;
  for (;;) {
    int nh[D];
#pragma unroll
    for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];
    const int new_h = pr::BfsStep<D>(h, inf, mask, nh);
    const bool changed = new_h != h;
    __syncthreads();
    if (changed) {
      h = new_h;
      sh_h[hc] = h;
    }
    changed_any |= changed;
    if (!__syncthreads_or(changed)) break;
  }
  if ((changed_any || start) && in_grid) s.h[v] = h;
  const bool block_changed = __syncthreads_or(changed_any);
  if (tid == 0) {
    dirty_out[tile] = block_changed ? 1 : 0;
    if (block_changed) atomicAdd(&s.counters[counter], 1u);
  }
}

// Incremental relabel, first phase: drop heights no longer backed by a residual path (KillStep),
// to the local fixpoint with the halo as read. Heights only rise here (but for nodes that gained
// residual capacity to the sink, which drop to 1 once, by their own excess): a halo height read
// old can only keep a node alive too long, and then the tile that changed marks itself, so its
// neighbours look again; the nodes that survive in the end do not depend on the order.
template <int KIND, int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ)
    KillTilesKernel(DeviceState s, int counter, Gate gate, const std::uint8_t* dirty_in, std::uint8_t* dirty_out,
                    bool refresh_masks) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  const TileLayout& L = s.layout;
  if (!Open(s, gate)) return;
  const int tx = blockIdx.x, ty = blockIdx.y, tz = blockIdx.z;
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
      s.mask[v] = mask;
    } else {
      mask = s.mask[v];
    }
  }
  const int hc = (lx + 1) + HX * ((ly + 1) + HY * (lz + ZP));
  LoadHaloRing<KIND, TX, TY, TZ>(s, tx, ty, tz, sh_h);
  sh_h[hc] = h;
  __syncthreads();
  bool changed_any = false;
  for (;;) {
    int nh[D];
#pragma unroll
    for (int d = 0; d < D; ++d) nh[d] = sh_h[hc + HaloOffset<KIND, HX, HY>(d)];
    const int new_h = in_grid ? pr::KillStep<D>(x, h, inf, mask, nh) : inf;
    const bool changed = new_h != h;
    __syncthreads();
    if (changed) {
      h = new_h;
      sh_h[hc] = h;
    }
    changed_any |= changed;
    if (!__syncthreads_or(changed)) break;
  }
  if (changed_any && in_grid) s.h[v] = h;
  const bool block_changed = __syncthreads_or(changed_any);
  if (tid == 0) {
    dirty_out[tile] = block_changed ? 1 : 0;
    if (block_changed) {
      s.seed[tile] = 1;
      atomicAdd(&s.counters[counter], 1u);
    }
  }
}

// Tile flags, active-node count, the cut, and the residual capacity left on the sink edges.
template <int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ) CensusKernel(DeviceState s, Gate gate) {
  if (!Open(s, gate)) return;  // the host runs more BFS rounds first
  const TileLayout& L = s.layout;
  const int tx = blockIdx.x, ty = blockIdx.y, tz = blockIdx.z;
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
    s.labels[v] = h < L.inf ? 1 : 0;
    residual = x < 0 ? static_cast<unsigned long long>(-x) : 0ull;
  }
  const int count = __syncthreads_count(act);
  for (int offset = 16; offset > 0; offset /= 2) residual += __shfl_down_sync(0xffffffffu, residual, offset);
  if ((tid & 31) == 0 && residual) atomicAdd(&s.totals[kSinkResidual], residual);
  if (tid == 0) {
    s.active[L.TileIndex(tx, ty, tz)] = count > 0 ? 1 : 0;
    if (count) atomicAdd(&s.totals[kActiveNodes], static_cast<unsigned long long>(count));
  }
}

template <int KIND>
__global__ void BuildResidualsKernel(DeviceState s) {
  constexpr int F = pr::NumForward(KIND);
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < N;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int x = static_cast<int>(v % L.width);
    const std::int64_t rest = v / L.width;
    const int y = static_cast<int>(rest % L.height), z = static_cast<int>(rest / L.height);
#pragma unroll
    for (int d = 0; d < F; ++d) {
      const int dx = pr::DirX(KIND, d), dy = pr::DirY(KIND, d), dz = pr::DirZ(KIND, d);
      const bool ahead = L.InGrid(x + dx, y + dy, z + dz), behind = L.InGrid(x - dx, y - dy, z - dz);
      s.r[d * N + v] = ahead ? static_cast<std::uint32_t>(s.cap[d * N + v]) : 0u;
      s.r[(d + F) * N + v] = behind ? static_cast<std::uint32_t>(s.rev[d * N + L.Node(x - dx, y - dy, z - dz)]) : 0u;
    }
  }
}

__global__ void ApplyNodeDeltasKernel(DeviceState s, const NodeDelta* deltas, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  s.x[deltas[i].node] += deltas[i].delta;  // nodes are distinct
  s.active[s.layout.TileOfNode(deltas[i].node)] = 1;
  s.touched[s.layout.TileOfNode(deltas[i].node)] = 1;
}

// Keeps the edge's flow where the new capacities allow it; the excess of a flow that no longer
// fits goes back to the sending node and is taken from the receiving one (the netted excess
// stands for Kohli and Torr's reparametrisation of the terminal edges).
template <int KIND>
__global__ void ApplyEdgeUpdatesKernel(DeviceState s, const EdgeUpdate* updates, int count) {
  constexpr int F = pr::NumForward(KIND);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes, slot = updates[i].slot;
  const int d = static_cast<int>(slot / N);
  const std::int64_t v = slot % N;
  const std::int64_t w = v + pr::DirX(KIND, d) + static_cast<std::int64_t>(L.width) *
                                                     (pr::DirY(KIND, d) + static_cast<std::int64_t>(L.height) * pr::DirZ(KIND, d));
  const std::int64_t flow = static_cast<std::int64_t>(s.cap[slot]) - s.r[d * N + v];
  const std::int64_t lo = -static_cast<std::int64_t>(updates[i].rev_cap), hi = updates[i].cap;
  const std::int64_t kept = flow < lo ? lo : flow > hi ? hi : flow;
  s.r[d * N + v] = static_cast<std::uint32_t>(hi - kept);
  s.r[(d + F) * N + w] = static_cast<std::uint32_t>(-lo + kept);
  s.cap[slot] = updates[i].cap;
  s.rev[slot] = updates[i].rev_cap;
  s.active[L.TileOfNode(v)] = 1;
  s.active[L.TileOfNode(w)] = 1;
  s.touched[L.TileOfNode(v)] = 1;
  s.touched[L.TileOfNode(w)] = 1;
  if (flow != kept) {
    atomicAdd(reinterpret_cast<unsigned long long*>(s.x + v), static_cast<unsigned long long>(flow - kept));
    atomicAdd(reinterpret_cast<unsigned long long*>(s.x + w), static_cast<unsigned long long>(kept - flow));
  }
}

int NodeBlocks(std::int64_t n) {
  const std::int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);
}

// Calls f.template operator()<KIND, TX, TY, TZ>() for the compiled tile shape of the layout.
template <class F>
cudaError_t Dispatch(const TileLayout& L, F&& f) {
  if (L.kind == pr::kKindGrid4) {
    if (L.tile_x == 32 && L.tile_y == 8) return f.template operator()<pr::kKindGrid4, 32, 8, 1>();
    if (L.tile_x == 32 && L.tile_y == 16) return f.template operator()<pr::kKindGrid4, 32, 16, 1>();
    if (L.tile_x == 32 && L.tile_y == 32) return f.template operator()<pr::kKindGrid4, 32, 32, 1>();
  } else if (L.kind == pr::kKindGrid8) {
    if (L.tile_x == 32 && L.tile_y == 8) return f.template operator()<pr::kKindGrid8, 32, 8, 1>();
    if (L.tile_x == 32 && L.tile_y == 16) return f.template operator()<pr::kKindGrid8, 32, 16, 1>();
  } else {
    if (L.tile_x == 8 && L.tile_y == 8 && L.tile_z == 8) return f.template operator()<pr::kKindGrid3D6, 8, 8, 8>();
    if (L.tile_x == 32 && L.tile_y == 4 && L.tile_z == 4) return f.template operator()<pr::kKindGrid3D6, 32, 4, 4>();
  }
  return cudaErrorInvalidValue;
}

template <class F>
cudaError_t DispatchKind(int kind, F&& f) {
  if (kind == pr::kKindGrid4) return f.template operator()<pr::kKindGrid4>();
  if (kind == pr::kKindGrid8) return f.template operator()<pr::kKindGrid8>();
  return f.template operator()<pr::kKindGrid3D6>();
}

struct ProbeFunctor {
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const { return cudaSuccess; }
};

struct BuildResidualsLaunch {
  const DeviceState& s;
  bool bad_config;
  cudaStream_t stream;
  template <int K>
  cudaError_t operator()() const {
    // Fault injection: more threads than a block may have is a real launch failure.
    cudaGetLastError();  // report this launch's error only
    BuildResidualsKernel<K><<<NodeBlocks(s.layout.num_nodes), bad_config ? 4096 : 256, 0, stream>>>(s);
    return cudaGetLastError();
  }
};

struct PushColourLaunch {
  const DeviceState& s;
  int colour, counter;
  Gate gate;
  int iterations;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    const dim3 grid(L.ColourGridX(), L.ColourGridY(), L.ColourGridZ());
    cudaGetLastError();
    PushTilesKernel<K, X, Y, Z><<<grid, X * Y * Z, 0, stream>>>(s, colour, counter, gate, iterations);
    return cudaGetLastError();
  }
};

struct BfsInitLaunch {
  const DeviceState& s;
  cudaStream_t stream;
  template <int K>
  cudaError_t operator()() const {
    cudaGetLastError();
    BfsInitKernel<K><<<NodeBlocks(s.layout.num_nodes), 256, 0, stream>>>(s);
    return cudaGetLastError();
  }
};

struct BfsRoundLaunch {
  const DeviceState& s;
  int counter;
  Gate gate;
  const std::uint8_t* dirty_in;
  std::uint8_t* dirty_out;
  bool start;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    BfsTilesKernel<K, X, Y, Z><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z, 0, stream>>>(s, counter, gate, dirty_in, dirty_out,
                                                                                  start);
    return cudaGetLastError();
  }
};

struct KillRoundLaunch {
  const DeviceState& s;
  int counter;
  Gate gate;
  const std::uint8_t* dirty_in;
  std::uint8_t* dirty_out;
  bool refresh_masks;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    KillTilesKernel<K, X, Y, Z><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z, 0, stream>>>(
        s, counter, gate, dirty_in, dirty_out, refresh_masks);
    return cudaGetLastError();
  }
};

struct CensusLaunch {
  const DeviceState& s;
  Gate gate;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    CensusKernel<X, Y, Z><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z, 0, stream>>>(s, gate);
    return cudaGetLastError();
  }
};

struct EdgeUpdatesLaunch {
  const DeviceState& s;
  const EdgeUpdate* updates;
  int count;
  cudaStream_t stream;
  template <int K>
  cudaError_t operator()() const {
    cudaGetLastError();
    ApplyEdgeUpdatesKernel<K><<<(count + 255) / 256, 256, 0, stream>>>(s, updates, count);
    return cudaGetLastError();
  }
};

}  // namespace

bool HasKernels(const pr::TileLayout& layout) { return Dispatch(layout, ProbeFunctor{}) == cudaSuccess; }

cudaError_t LaunchBuildResiduals(const DeviceState& s, bool bad_config, cudaStream_t stream) {
  return DispatchKind(s.layout.kind, BuildResidualsLaunch{s, bad_config, stream});
}

cudaError_t LaunchPushColour(const DeviceState& s, int colour, int counter, Gate gate, int local_iterations,
                             cudaStream_t stream) {
  return Dispatch(s.layout, PushColourLaunch{s, colour, counter, gate, local_iterations, stream});
}

cudaError_t LaunchBfsInit(const DeviceState& s, cudaStream_t stream) {
  return DispatchKind(s.layout.kind, BfsInitLaunch{s, stream});
}

cudaError_t LaunchBfsRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                           std::uint8_t* dirty_out, bool start, cudaStream_t stream) {
  return Dispatch(s.layout, BfsRoundLaunch{s, counter, gate, dirty_in, dirty_out, start, stream});
}

cudaError_t LaunchKillRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                            std::uint8_t* dirty_out, bool refresh_masks, cudaStream_t stream) {
  return Dispatch(s.layout, KillRoundLaunch{s, counter, gate, dirty_in, dirty_out, refresh_masks, stream});
}

cudaError_t LaunchCensus(const DeviceState& s, Gate gate, cudaStream_t stream) {
  return Dispatch(s.layout, CensusLaunch{s, gate, stream});
}

cudaError_t LaunchApplyNodeDeltas(const DeviceState& s, const NodeDelta* deltas, int count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  cudaGetLastError();
  ApplyNodeDeltasKernel<<<(count + 255) / 256, 256, 0, stream>>>(s, deltas, count);
  return cudaGetLastError();
}

cudaError_t LaunchApplyEdgeUpdates(const DeviceState& s, const EdgeUpdate* updates, int count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return DispatchKind(s.layout.kind, EdgeUpdatesLaunch{s, updates, count, stream});
}

}  // namespace mrf::cuda_pr
