// cuda-pr kernels: one CUDA block per tile, one thread per node; the per-node steps are the ones
// tbb-pr runs (backends/common/push_relabel_steps.h), in the same phase order.
#include <algorithm>

#include <cuda_runtime.h>

#include "backends/cuda/push_relabel_kernels.h"
#include "backends/cuda/device_stack.h"
#include "backends/common/push_relabel_local.h"
#include "backends/cuda/push_relabel_tiles.cuh"

namespace mrf::cuda_pr {
namespace {

using pr::TileLayout;

// v summed over the block, returned in thread 0; every thread of the block must call it.
__device__ __forceinline__ unsigned long long BlockSum(unsigned long long v) {
  __shared__ unsigned long long warp_sums[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // an earlier call's sums have been read
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp != 0) return 0;
  v = lane < static_cast<int>((blockDim.x + 31) / 32) ? warp_sums[lane] : 0ull;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Adds v summed over the block to *total, one atomic per block (every thread must call it). An
// atomic per warp meets hundreds of thousands of atomics on one address at 4096 x 4096, which the
// L2 serves one after another (H200: the fresh 4096 solve took 7% less with one per block).
__device__ __forceinline__ void AddBlockSum(unsigned long long v, unsigned long long* total) {
  v = BlockSum(v);
  if (threadIdx.x == 0 && v) atomicAdd(total, v);
}

// The K nodes of tile (tx, ty, tz) that thread threadIdx.x visits when a block of TX * TY * TZ / K
// threads covers the tile (nodes threadIdx.x + k * threads), with their excess and heights. The loads
// come before anything is stored, so that they are all in flight at once.
template <int TX, int TY, int TZ, int K>
struct TileNodes {
  bool in_grid[K];
  int gx[K], gy[K], gz[K];
  std::int64_t v[K], x[K];
  int h[K];
  __device__ __forceinline__ void Load(const DeviceState& s, int tx, int ty, int tz) {
    const TileLayout& L = s.layout;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int i = threadIdx.x + k * (TX * TY * TZ / K);
      gx[k] = tx * TX + i % TX;
      gy[k] = ty * TY + (i / TX) % TY;
      gz[k] = tz * TZ + i / (TX * TY);
      in_grid[k] = L.InGrid(gx[k], gy[k], gz[k]);
      v[k] = in_grid[k] ? L.Node(gx[k], gy[k], gz[k]) : 0;
      x[k] = in_grid[k] ? s.x[v[k]] : 0;
      h[k] = in_grid[k] ? s.h[v[k]] : L.inf;
    }
  }
};

// CensusTile (push_relabel_tiles.cuh) for cuda-pr's census launches: K nodes per thread (a block of
// TX * TY * TZ / K threads), each thread's loads issued before its stores (a thread per node spends
// its short life waiting on two loads), and one atomic per block. cuda-expansion's persistent kernel
// keeps CensusTile as it is: with CensusTile generalised to this (K = 1 there), its max-flows took 4%
// longer on Tsukuba and Venus (H200). Returns the tile's active nodes in thread 0.
template <int TX, int TY, int TZ, int K>
__device__ __forceinline__ int CensusTileNodes(const DeviceState& s, int tx, int ty, int tz) {
  const TileLayout& L = s.layout;
  const int tid = threadIdx.x;
  TileNodes<TX, TY, TZ, K> n;
  n.Load(s, tx, ty, tz);
  int active = 0;
  unsigned long long residual = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!n.in_grid[k]) continue;
    active += pr::IsActive(n.x[k], n.h[k], L.inf) ? 1 : 0;
    s.labels[n.v[k]] = pr::CutSide(n.h[k], L.inf);
    residual += n.x[k] < 0 ? static_cast<unsigned long long>(-n.x[k]) : 0ull;
  }
  const int count = static_cast<int>(BlockSum(active));
  AddBlockSum(residual, &s.totals[kSinkResidual]);
  if (tid == 0) {
    s.active[L.TileIndex(tx, ty, tz)] = count > 0 ? 1 : 0;
    if (count) atomicAdd(&s.totals[kActiveNodes], static_cast<unsigned long long>(count));
  }
  return count;
}

__device__ bool Open(const DeviceState& s, Gate gate) {
  if (gate.mode == Gate::kAlways) return true;
  if (gate.mode == Gate::kIfPreviousChanged) return s.counters[gate.first] != 0;
  bool converged = false;
  for (int j = gate.first; j < gate.first + gate.count; ++j) converged |= s.counters[j] == 0;
  return converged && (gate.mode == Gate::kIfConverged || s.totals[kActiveNodes] != 0);
}

// ---- Push: up to `iterations` synchronous push / pull / relabel iterations on one tile ----------

// Resident blocks per SM the compiler must allow for push visits. 4-connected tiles: a full SM (2048
// threads: 32 registers, 8 bytes spilled, 56-68 with wave pushes), against three 512-node tiles with
// the 40 registers the compiler takes by itself (figures for 32x16; 32x8 and 32x32 get 32 registers
// too). A visit waits on its barriers more than on memory, so more tiles in flight hide more of it:
// push rounds 7% faster on the 4096 scene (32x16 tiles, H200; docs/benchmarks.md). Other grids
// would spill 70-120 bytes a thread: the compiler's choice. (2048 threads an SM: sm_80 and sm_90.)
template <int KIND, int TX, int TY, int TZ>
constexpr int PushMinBlocks() {
  return KIND == pr::kKindGrid4 ? 2048 / (TX * TY * TZ) : 1;
}

// KEEP_MASKS: PushTile's keep_masks, compiled apart: as a run-time flag its code made ptxas spill
// more in the 32-register push loop of fresh solves, which never keep the masks.
template <int KIND, int TX, int TY, int TZ, bool WAVE, bool KEEP_MASKS>
__global__ void __launch_bounds__(TX* TY* TZ, PushMinBlocks<KIND, TX, TY, TZ>())
    PushTilesKernel(DeviceState s, int colour, int counter, Gate gate, int iterations) {
  if (!Open(s, gate)) return;  // decided the same way by every block: nothing to do costs one launch
  int tx, ty, tz;
  if (!s.layout.ColourTile(colour, blockIdx.x, blockIdx.y, blockIdx.z, &tx, &ty, &tz)) return;
  PushTile<KIND, TX, TY, TZ, WAVE>(s, tx, ty, tz, iterations, &s.counters[counter], false, KEEP_MASKS);
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

template <int KIND, int TX, int TY, int TZ, bool WAVE>
__global__ void __launch_bounds__(TX* TY* TZ)
    BfsTilesKernel(DeviceState s, int counter, Gate gate, const std::uint8_t* dirty_in, std::uint8_t* dirty_out,
                   bool start) {
  if (!Open(s, gate)) return;
  BfsTile<KIND, TX, TY, TZ, WAVE>(s, blockIdx.x, blockIdx.y, blockIdx.z, dirty_in, dirty_out, start,
                                  &s.counters[counter]);
}

template <int KIND, int TX, int TY, int TZ, bool WAVE>
__global__ void __launch_bounds__(TX* TY* TZ)
    KillTilesKernel(DeviceState s, int counter, Gate gate, const std::uint8_t* dirty_in, std::uint8_t* dirty_out,
                    bool refresh_masks) {
  if (!Open(s, gate)) return;
  KillTile<KIND, TX, TY, TZ, WAVE>(s, blockIdx.x, blockIdx.y, blockIdx.z, dirty_in, dirty_out, refresh_masks,
                                   &s.counters[counter]);
}

template <int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ / kCensusNodesPerThread) CensusKernel(DeviceState s, Gate gate) {
  if (!Open(s, gate)) return;  // the host runs more BFS rounds first
  CensusTileNodes<TX, TY, TZ, kCensusNodesPerThread>(s, blockIdx.x, blockIdx.y, blockIdx.z);
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

// Thread i also flags tile i active where it is flagged touched (the only tiles whose residual
// bitmasks may be stale), so that the push rounds after it, which keep the masks, visit and refresh
// every one of them (a launch of its own cost 7 us at 4096, H200).
__global__ void ApplyNodeDeltasKernel(DeviceState s, const NodeDelta* deltas, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < s.layout.num_tiles() && s.touched[i]) s.active[i] = 1;
  if (i >= count) return;
  s.x[deltas[i].node] += deltas[i].delta;  // nodes are distinct
  s.active[s.layout.TileOfNode(deltas[i].node)] = 1;
  s.touched[s.layout.TileOfNode(deltas[i].node)] = 1;
}

// The cut, a bit per node (bit i % 32 of word i / 32 is node i's side), for a download an eighth
// the size of the byte per node the kernels write: 2 instead of 16 MB at 4096 x 4096. A thread per
// word, its 32 labels in two 16-byte loads: a thread per label spent its time scheduling blocks.
__global__ void PackCutKernel(const std::uint8_t* labels, std::int64_t n, std::uint32_t* bits) {
  const std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, first = 32 * w;
  if (first >= n) return;
  std::uint32_t word = 0;
  if (first + 32 <= n) {
    const uint4* in = reinterpret_cast<const uint4*>(labels + first);  // 32-byte aligned: cudaMalloc's base
    const uint4 a = in[0], b = in[1];
    const std::uint32_t quads[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int q = 0; q < 8; ++q)
#pragma unroll
      for (int j = 0; j < 4; ++j) word |= (((quads[q] >> (8 * j)) & 0xffu) != 0 ? 1u : 0u) << (4 * q + j);
  } else {
    for (std::int64_t i = first; i < n; ++i) word |= (labels[i] != 0 ? 1u : 0u) << (i - first);
  }
  bits[w] = word;
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

// ---- Local re-solve (backends/common/push_relabel_local.h) --------------------------------------

constexpr int kRepairBlockThreads = 64;

// A thread per group of one colour, its changes in order (without groups, a thread per change);
// repairs that give up are counted (local_resolve = 1 then skips the certificate). The working
// threads stand `lanes` apart: every group's repairs take their own path through the code, and
// threads of one warp that diverge wait for each other.
template <int KIND>
__global__ void RepairGroupsKernel(DeviceState s, const NodeDelta* deltas, const std::int32_t* group_start, int groups,
                                   bool dead_only, int lanes) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t % lanes != 0) return;
  const int g = t / lanes;
  if (g >= groups) return;
  const pr::LocalState state{s.x, s.h, s.r, s.touched, s.active, s.layout};
  unsigned long long failed = 0;
  const int begin = group_start ? group_start[g] : g, end = group_start ? group_start[g + 1] : g + 1;
  for (int i = begin; i < end; ++i)
    failed += pr::RepairNode<KIND, DeviceLocalOps>(state, deltas[i].node, dead_only) ? 0 : 1;
  if (failed) atomicAdd(&s.totals[kLocalFailures], failed);
}

// Settling before the certificate (local_resolve = 3), one tile's visit in a colour's pass (the
// tiles flagged in `near_flags` or next to one: SettleTilesKernel): the tile rises by SettleStep
// hop by hop to its local fixpoint (the halo as read; the other colours are idle), at most
// max_hops hops (the tuning's settle_hops); where that did not settle it or
// excess is left, the regions cut off from the sink inside the tile (AliveStep) take inf and it
// settles again. `settled`: whether the visit changed the tile. The same steps as tbb-pr's.
// `masks_fresh` (passes after the first, and the first after push rounds that kept the masks): s.mask
// holds every node's residual bitmask, so the visit reads a byte a node instead of the residuals' 16
// (4-connected).
template <int KIND, int TX, int TY, int TZ>
__device__ __forceinline__ void SettleTile(const DeviceState& s, int tx, int ty, int tz, std::uint8_t* settled,
                                           bool masks_fresh, int max_hops) {
  constexpr int D = KindTraits<KIND>::D, ZP = KindTraits<KIND>::ZP;
  constexpr int HX = TX + 2, HY = TY + 2, HZ = TZ + 2 * ZP;
  __shared__ int sh_h[HX * HY * HZ];
  const TileLayout& L = s.layout;
  const int tile = L.TileIndex(tx, ty, tz);
  const int tid = threadIdx.x;
  const int lx = tid % TX, ly = (tid / TX) % TY, lz = tid / (TX * TY);
  const int gx = tx * TX + lx, gy = ty * TY + ly, gz = tz * TZ + lz;
  const bool in_grid = L.InGrid(gx, gy, gz);
  const std::int64_t N = L.num_nodes, v = in_grid ? L.Node(gx, gy, gz) : 0;
  const int inf = L.inf;
  int h = inf;
  std::int64_t x = 0;
  std::uint8_t mask = 0;
  if (in_grid) {
    h = s.h[v];
    x = s.x[v];
    if (masks_fresh) {
      mask = s.mask[v];
    } else {
      std::uint32_t r[D];
#pragma unroll
      for (int d = 0; d < D; ++d) r[d] = s.r[d * N + v];
      mask = pr::ResidualMask<D>(r);
    }
  }
  const int hc = (lx + 1) + HX * ((ly + 1) + HY * (lz + ZP));
  LoadHaloRing<KIND, TX, TY, TZ>(s, tx, ty, tz, sh_h);
  // Stored after the halo's loads: a byte store may alias them, so before them it would make the
  // halo wait for this node's loads (two trips to memory instead of one). Fresh from here on for
  // the later passes, the certificate and the relabels after a failed certificate.
  if (in_grid && !masks_fresh) s.mask[v] = mask;
  sh_h[hc] = h;
  __syncthreads();
  const int first_h = h;
  // Returns true when the tile still changed after max_hops hops.
  auto settle = [&] {
    bool unsettled = false;
    HopsToFixpoint<KIND, HX, HY>(
        h, sh_h, hc, [&](const auto& nh) { return pr::SettleStep<D>(x, h, inf, mask, nh); }, &unsettled, max_hops);
    return unsettled;
  };
  const bool unsettled = settle();
  if (__syncthreads_or(unsettled || pr::IsActive(x, h, inf))) {
    // Regions of the tile cut off from the sink (pr::AliveStep) take inf; then settle again.
    __shared__ bool sh_alive[HX * HY * HZ];
    for (int i = tid; i < HX * HY * HZ; i += TX * TY * TZ) sh_alive[i] = sh_h[i] < inf;  // the halo's part counts
    __syncthreads();
    bool alive = in_grid && x < 0;
    sh_alive[hc] = alive;
    __syncthreads();
    for (;;) {
      bool alive_nh[D];
#pragma unroll
      for (int d = 0; d < D; ++d) alive_nh[d] = sh_alive[hc + HaloOffset<KIND, HX, HY>(d)];
      const bool changed = pr::AliveStep<D>(alive, mask, alive_nh) != alive;
      __syncthreads();  // every thread has read sh_alive
      if (changed) {
        alive = true;
        sh_alive[hc] = true;
      }
      if (!__syncthreads_or(changed)) break;
    }
    if (!alive && h < inf) {
      h = inf;
      sh_h[hc] = inf;
    }
    __syncthreads();
    settle();
  }
  if (in_grid && h != first_h) s.h[v] = h;
  const bool changed = __syncthreads_or(h != first_h);
  if (tid == 0) {
    settled[tile] = changed ? 1 : 0;
    if (changed) s.touched[tile] = 1;
  }
}

// Positions of a colour's launch that a block of a launch over flagged tiles takes at a time.
constexpr int kTilesPerGrab = 8;

// A launch over the tiles of one colour flagged in `flags` or next to one, by blocks that stay:
// each block takes the next kTilesPerGrab of the colour's launch positions from *work (zero at the
// start), tests them at once (FlaggedNear), gives each tile left out 0 in `unvisited`, visits
// visit(tx, ty, tz) the flagged ones one after another, and takes more until none are left. In
// place of a block per tile, most of which would read the flags and return: at 4096 x 4096
// (16384 tiles a colour) those took settling's second pass some 45 microseconds a colour when
// under 2000 tiles had work (H200). Small takes keep the blocks busy alike where a few tiles take
// long (with every position dealt out in advance, the first pass took 16% longer). `unvisited`
// may be `flags`: a tile's own flag is read by the thread that writes it, and no tile of the
// colour borders another.
template <int KIND, class Visit>
__device__ __forceinline__ void VisitFlaggedColourTiles(const TileLayout& L, int colour, const std::uint8_t* flags,
                                                        std::uint8_t* unvisited, std::uint32_t* work, Visit visit) {
  __shared__ int listed[kTilesPerGrab];
  __shared__ int count, first;
  const int px = L.ColourGridX(), py = L.ColourGridY();
  const int positions = px * py * L.ColourGridZ();  // (at most the tile count, an int)
  auto tile_at = [&](int j, int* tx, int* ty, int* tz) {
    return L.ColourTile(colour, j % px, j / px % py, j / px / py, tx, ty, tz);
  };
  for (;;) {
    if (threadIdx.x == 0) {
      first = static_cast<int>(atomicAdd(work, 1u)) * kTilesPerGrab;
      count = 0;
    }
    __syncthreads();
    if (first >= positions) return;
    const int j = first + threadIdx.x;
    int tx, ty, tz;
    if (threadIdx.x < kTilesPerGrab && j < positions && tile_at(j, &tx, &ty, &tz)) {
      if (FlaggedNear<KIND>(L, flags, tx, ty, tz)) listed[atomicAdd(&count, 1)] = j;
      else unvisited[L.TileIndex(tx, ty, tz)] = 0;
    }
    __syncthreads();
    const int n = count;
    for (int i = 0; i < n; ++i) {  // (in the order the atomics gave: tiles of one colour are independent)
      tile_at(listed[i], &tx, &ty, &tz);
      visit(tx, ty, tz);
      __syncthreads();  // the visit's shared memory is free again
    }
    __syncthreads();  // every thread has read `first` and `count`
  }
}

// A full SM of resident threads (32 registers): as many as the launch per tile had.
template <int KIND, int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ, 2048 / (TX * TY * TZ))
    SettleTilesKernel(DeviceState s, int colour, const std::uint8_t* near_flags, std::uint8_t* settled,
                      bool masks_fresh, int max_hops, std::uint32_t* work) {
  VisitFlaggedColourTiles<KIND>(s.layout, colour, near_flags, settled, work, [&](int tx, int ty, int tz) {
    SettleTile<KIND, TX, TY, TZ>(s, tx, ty, tz, settled, masks_fresh, max_hops);
  });
}

// Whether node (gx, gy, gz) of the grid has a neighbour in direction d: only the axes that d moves
// along are tested (d is a constant once unrolled).
template <int KIND>
__device__ __forceinline__ bool HasNeighbour(const TileLayout& L, int gx, int gy, int gz, int d) {
  const int dx = pr::DirX(KIND, d), dy = pr::DirY(KIND, d), dz = pr::DirZ(KIND, d);
  return (dx == 0 || (dx < 0 ? gx > 0 : gx < L.width - 1)) && (dy == 0 || (dy < 0 ? gy > 0 : gy < L.height - 1)) &&
         (dz == 0 || (dz < 0 ? gz > 0 : gz < L.depth - 1));
}

// The certificate (pr::CertifiedNode) with the cut and the sink residual, a block per tile and
// kCertifyNodesPerThread nodes per thread, each thread's loads issued before its checks: a thread
// per node spends its short life waiting on two loads. With q.near_touched, only the tiles flagged
// `touched` and their neighbours: after repairs of the nodes that failed the certificate, every node
// a repair changed lies in a touched tile (pr::RepairNode flags each node it changes), and so does
// every node that failed the last check; anywhere else neither a node nor a neighbour of it changed
// since it passed, so it still does. The sink residual then changes only in the tiles checked, by
// what they count now against what they counted last (q.tile_residual). (A tile flagged by this
// launch may be read either way by its neighbours' blocks: their nodes are among those still passing.)
template <int KIND, int TX, int TY, int TZ>
__global__ void __launch_bounds__(TX* TY* TZ / kCertifyNodesPerThread) CertifyTilesKernel(DeviceState s, CertifyRequest q) {
  constexpr int D = KindTraits<KIND>::D, K = kCertifyNodesPerThread;
  // After repairs that gave up, the fallback needs no check, but one that flags tiles always runs.
  if (!q.failed_tiles && s.totals[kLocalFailures] != 0) return;
  const TileLayout& L = s.layout;
  const int tid = threadIdx.x, tx = blockIdx.x, ty = blockIdx.y, tz = blockIdx.z;
  if (q.near_touched && !__syncthreads_or(tid == 0 && FlaggedNear<KIND>(L, s.touched, tx, ty, tz))) return;
  const std::int64_t N = L.num_nodes;
  const int inf = L.inf;
  TileNodes<TX, TY, TZ, K> n;
  n.Load(s, tx, ty, tz);
  int nh[K][D];
  std::uint32_t r[K][D];  // only whether each is 0 matters: a mask bit stands for it where masks are fresh
  std::uint8_t mask[K];
#pragma unroll
  for (int k = 0; k < K; ++k) mask[k] = q.masks_fresh && n.in_grid[k] ? s.mask[n.v[k]] : 0;
  // The kernel is bound by its instructions (ncu), so each neighbour costs a compare per axis it
  // moves along and an add to the node's address, not the grid test and index of its coordinates.
  const std::int64_t row = L.width, plane = row * L.height;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int* const h_at = s.h + n.v[k];
    const std::uint32_t* const r_at = s.r + n.v[k];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const bool neighbour = n.in_grid[k] && HasNeighbour<KIND>(L, n.gx[k], n.gy[k], n.gz[k], d);
      if (q.masks_fresh) r[k][d] = (mask[k] >> d) & 1u;
      else r[k][d] = n.in_grid[k] ? r_at[d * N] : 0;
      nh[k][d] = neighbour ? h_at[pr::DirX(KIND, d) + row * pr::DirY(KIND, d) + plane * pr::DirZ(KIND, d)] : inf;
    }
  }
  unsigned long long residual = 0, bad = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!n.in_grid[k]) continue;
    const bool certified = pr::CertifiedNode<D>(n.x[k], n.h[k], inf, r[k], nh[k]);
    s.labels[n.v[k]] = pr::CutSide(n.h[k], inf);
    residual += n.x[k] < 0 ? static_cast<unsigned long long>(-n.x[k]) : 0ull;
    if (certified) continue;
    ++bad;
    if (!q.failed_nodes) continue;
    const unsigned long long at = atomicAdd(&s.totals[kFailedListed], 1ull);
    if (at < static_cast<unsigned long long>(q.capacity)) q.failed_nodes[at] = NodeDelta{n.v[k], 0};
  }
  residual = BlockSum(residual);
  bad = BlockSum(bad);
  if (tid == 0) {
    const int tile = L.TileIndex(tx, ty, tz);
    const unsigned long long before = q.near_touched ? q.tile_residual[tile] : 0ull;
    q.tile_residual[tile] = residual;
    if (residual != before) atomicAdd(&s.totals[kSinkResidual], residual - before);  // wraps round when it fell
    if (bad) {
      atomicAdd(&s.totals[kLocalViolations], bad);
      if (q.failed_tiles) q.failed_tiles[tile] = 1;
    }
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

// (Dispatched through WithWave, as the BFS and kill rounds: wave pushes where the tile shape has them.)
struct PushColourLaunch {
  const DeviceState& s;
  int colour, counter;
  Gate gate;
  int iterations;
  bool keep_masks;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z, bool W>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    const dim3 grid(L.ColourGridX(), L.ColourGridY(), L.ColourGridZ());
    cudaGetLastError();
    if (keep_masks)
      PushTilesKernel<K, X, Y, Z, W, true><<<grid, X * Y * Z, 0, stream>>>(s, colour, counter, gate, iterations);
    else
      PushTilesKernel<K, X, Y, Z, W, false><<<grid, X * Y * Z, 0, stream>>>(s, colour, counter, gate, iterations);
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

// (Dispatched through WithWave: the wave instantiation only where the tile shape has one.)
struct BfsRoundLaunch {
  const DeviceState& s;
  int counter;
  Gate gate;
  const std::uint8_t* dirty_in;
  std::uint8_t* dirty_out;
  bool start;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z, bool W>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    BfsTilesKernel<K, X, Y, Z, W><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z, 0, stream>>>(
        s, counter, gate, dirty_in, dirty_out, start);
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
  template <int K, int X, int Y, int Z, bool W>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    KillTilesKernel<K, X, Y, Z, W><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z, 0, stream>>>(
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
    CensusKernel<X, Y, Z><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z / kCensusNodesPerThread, 0, stream>>>(
        s, gate);
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

cudaError_t LaunchPushColour(const DeviceState& s, int colour, int counter, Gate gate, int local_iterations, bool wave,
                             bool keep_masks, cudaStream_t stream) {
  const PushColourLaunch launch{s, colour, counter, gate, local_iterations, keep_masks, stream};
  return Dispatch(s.layout, WithWave<PushColourLaunch>{launch, wave});
}

cudaError_t LaunchBfsInit(const DeviceState& s, cudaStream_t stream) {
  return DispatchKind(s.layout.kind, BfsInitLaunch{s, stream});
}

cudaError_t LaunchBfsRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                           std::uint8_t* dirty_out, bool start, bool wave, cudaStream_t stream) {
  const BfsRoundLaunch launch{s, counter, gate, dirty_in, dirty_out, start, stream};
  return Dispatch(s.layout, WithWave<BfsRoundLaunch>{launch, wave});
}

cudaError_t LaunchKillRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                            std::uint8_t* dirty_out, bool refresh_masks, bool wave, cudaStream_t stream) {
  const KillRoundLaunch launch{s, counter, gate, dirty_in, dirty_out, refresh_masks, stream};
  return Dispatch(s.layout, WithWave<KillRoundLaunch>{launch, wave});
}

cudaError_t LaunchCensus(const DeviceState& s, Gate gate, cudaStream_t stream) {
  return Dispatch(s.layout, CensusLaunch{s, gate, stream});
}

cudaError_t LaunchPackCut(const DeviceState& s, std::uint32_t* bits, cudaStream_t stream) {
  const std::int64_t n = s.layout.num_nodes;
  if (n == 0) return cudaSuccess;
  cudaGetLastError();
  const std::int64_t words = PackedCutWords(n);
  PackCutKernel<<<static_cast<unsigned>((words + 255) / 256), 256, 0, stream>>>(s.labels, n, bits);
  return cudaGetLastError();
}

cudaError_t LaunchApplyNodeDeltas(const DeviceState& s, const NodeDelta* deltas, int count, cudaStream_t stream) {
  const int threads = std::max(count, s.layout.num_tiles());
  cudaGetLastError();
  ApplyNodeDeltasKernel<<<(threads + 255) / 256, 256, 0, stream>>>(s, deltas, count);
  return cudaGetLastError();
}

// Threads per repair group, one of them working: a warp to each group while the device could
// hold them all at once by its thread count (measured on the 1024 scene, H100: a colour's repairs
// 2.4x faster than 32 groups sharing a warp), fewer when there are more groups. The count ignores
// the kernel's occupancy on purpose: sized by the occupancy calculator, fewer lanes came out at
// 4096 and local_resolve=1 measured 6.4 against 5.5 ms there (32 lanes always: 5.5 ms too).
int LanesPerRepairGroup(int groups) {
  int device = 0, sms = 0, threads = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  const long long resident = static_cast<long long>(sms) * threads;
  int lanes = 32;
  while (lanes > 1 && static_cast<long long>(groups) * lanes > resident) lanes /= 2;
  return lanes;
}

struct RepairGroupsLaunch {
  DeviceState s;
  const NodeDelta* deltas;
  const std::int32_t* group_start;
  int groups;
  bool dead_only;
  cudaStream_t stream;
  template <int KIND>
  cudaError_t operator()() const {
    const int lanes = LanesPerRepairGroup(groups);
    const int threads = groups * lanes;  // at most max(groups, resident threads)
    RepairGroupsKernel<KIND><<<(threads + kRepairBlockThreads - 1) / kRepairBlockThreads, kRepairBlockThreads, 0,
                               stream>>>(s, deltas, group_start, groups, dead_only, lanes);
    return cudaGetLastError();
  }
};

// Blocks of `kernel` (of `threads` threads) the device holds at once, at most `work` (at least 1).
template <class Kernel>
cudaError_t ResidentBlocks(Kernel kernel, int threads, std::int64_t work, int* blocks) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (status == cudaSuccess) status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
  const std::int64_t resident = static_cast<std::int64_t>(sms) * std::max(per_sm, 1);
  *blocks = static_cast<int>(std::max<std::int64_t>(1, std::min(resident, work)));
  return status;
}

struct SettleColourLaunch {
  const DeviceState& s;
  int colour;
  const std::uint8_t* near_flags;
  std::uint8_t* settled;
  bool masks_fresh;
  int max_hops;
  std::uint32_t* work;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    cudaGetLastError();
    int blocks = 0;
    const cudaError_t status =
        ResidentBlocks(SettleTilesKernel<K, X, Y, Z>, X * Y * Z,
                       static_cast<std::int64_t>(L.ColourGridX()) * L.ColourGridY() * L.ColourGridZ(), &blocks);
    if (status != cudaSuccess) return status;
    if (const cudaError_t cleared = cudaMemsetAsync(work, 0, sizeof(std::uint32_t), stream); cleared != cudaSuccess)
      return cleared;
    SettleTilesKernel<K, X, Y, Z><<<blocks, X * Y * Z, 0, stream>>>(s, colour, near_flags, settled, masks_fresh, max_hops,
                                                                        work);
    return cudaGetLastError();
  }
};

cudaError_t LaunchSettleColour(const DeviceState& s, int colour, const std::uint8_t* near_flags,
                               std::uint8_t* settled, bool masks_fresh, int max_hops, std::uint32_t* work,
                               cudaStream_t stream) {
  return Dispatch(s.layout, SettleColourLaunch{s, colour, near_flags, settled, masks_fresh, max_hops, work, stream});
}

struct CertifyLaunch {
  const DeviceState& s;
  const CertifyRequest& q;
  cudaStream_t stream;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    const TileLayout& L = s.layout;
    CertifyTilesKernel<K, X, Y, Z><<<dim3(L.tiles_x, L.tiles_y, L.tiles_z), X * Y * Z / kCertifyNodesPerThread, 0,
                                     stream>>>(s, q);
    return cudaGetLastError();
  }
};

cudaError_t LaunchRepairGroups(const DeviceState& s, const NodeDelta* deltas, const std::int32_t* group_start,
                               int groups, bool dead_only, cudaStream_t stream) {
  if (groups <= 0) return cudaSuccess;
  cudaGetLastError();
  return DispatchKind(s.layout.kind, RepairGroupsLaunch{s, deltas, group_start, groups, dead_only, stream});
}

cudaError_t LaunchCertify(const DeviceState& s, const CertifyRequest& request, cudaStream_t stream) {
  cudaGetLastError();
  return Dispatch(s.layout, CertifyLaunch{s, request, stream});
}

cudaError_t LaunchApplyEdgeUpdates(const DeviceState& s, const EdgeUpdate* updates, int count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return DispatchKind(s.layout.kind, EdgeUpdatesLaunch{s, updates, count, stream});
}

cudaError_t RepairStackBytes(int kind, std::size_t* bytes) {
  return kind == pr::kKindGrid4   ? cuda_stack::FrameBytes(RepairGroupsKernel<pr::kKindGrid4>, bytes)
         : kind == pr::kKindGrid8 ? cuda_stack::FrameBytes(RepairGroupsKernel<pr::kKindGrid8>, bytes)
                                  : cuda_stack::FrameBytes(RepairGroupsKernel<pr::kKindGrid3D6>, bytes);
}

}  // namespace mrf::cuda_pr
