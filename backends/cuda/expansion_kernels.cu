// cuda-expansion and cuda-swap kernels: a thread per node runs the steps of
// backends/common/expansion_steps.h for the move in progress (its kind, labels and key are in
// MoveControl); the loop's bookkeeping runs in one thread (MoveStart) or in the last block of a node
// kernel (Build, Commit), so the host never has to look at a move.
#include <cuda_runtime.h>

#include "backends/cuda/expansion_kernels.h"
#include "backends/cuda/device_stack.h"
#include "backends/common/push_relabel_local.h"
#include "backends/cuda/push_relabel_tiles.cuh"

namespace mrf::cuda_xp {
namespace {

using cuda_pr::DeviceState;
using pr::TileLayout;

constexpr int kThreads = 256;

__device__ __forceinline__ std::int64_t Now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<std::int64_t>(t);
}

// Sum over the block, valid in thread 0. Every thread of the block must call it.
__device__ long long BlockSum(long long v) {
  __shared__ long long warp_sums[kThreads / 32];
  __syncthreads();  // a previous call's readers are done
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// True in every thread of the block that finishes last (the counter is reset by that block).
__device__ bool LastBlock(unsigned int* counter) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence();
    *counter = 0;
  }
  return last;
}

__device__ __forceinline__ void AtomicAddSigned(std::int64_t* target, long long value) {
  atomicAdd(reinterpret_cast<unsigned long long*>(target), static_cast<unsigned long long>(value));
}

template <int KIND>
struct Dirs {
  static constexpr int D = pr::NumDirs(KIND);
  static constexpr int F = D / 2;
};

// The neighbours of node v in direction order (-1 outside the grid).
template <int KIND>
__device__ __forceinline__ void Neighbours(const TileLayout& L, std::int64_t v, std::int64_t (&q)[Dirs<KIND>::D]) {
  const int x = static_cast<int>(v % L.width);
  const std::int64_t rest = v / L.width;
  const int y = static_cast<int>(rest % L.height), z = static_cast<int>(rest / L.height);
#pragma unroll
  for (int d = 0; d < Dirs<KIND>::D; ++d) {
    const int nx = x + pr::DirX(KIND, d), ny = y + pr::DirY(KIND, d), nz = z + pr::DirZ(KIND, d);
    q[d] = L.InGrid(nx, ny, nz) ? L.Node(nx, ny, nz) : -1;
  }
}

// Labels and edge weights around node v (weights 0 outside the grid).
template <int KIND>
__device__ __forceinline__ void Gather(const DeviceExpansion& e, std::int64_t N, std::int64_t v,
                                       const std::int64_t (&q)[Dirs<KIND>::D], const std::int32_t* labels,
                                       int (&nl)[Dirs<KIND>::D], std::int32_t (&w)[Dirs<KIND>::D]) {
  constexpr int D = Dirs<KIND>::D, F = Dirs<KIND>::F;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    if (q[d] < 0) {
      nl[d] = 0;
      w[d] = 0;
      continue;
    }
    nl[d] = labels[q[d]];
    if (!e.weights) w[d] = 1;
    else w[d] = d < F ? e.weights[d * N + v] : e.weights[(d - F) * N + q[d]];
  }
}

__device__ __forceinline__ std::int64_t Unary(const DeviceExpansion& e, std::int64_t N, int label, std::int64_t v) {
  return e.unary_t[static_cast<std::int64_t>(label) * N + v];
}

// The move in progress.
__device__ __forceinline__ xp::Move MoveOf(const xp::MoveControl& c) {
  return xp::Move{static_cast<int>(c.kind), static_cast<int>(c.alpha), static_cast<int>(c.beta)};
}

__device__ __forceinline__ std::int64_t FirstNode() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::int64_t NodeStride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// ---- Kernels ----------------------------------------------------------------------------------

// Node-major to label-major, 32 x 32 tiles through shared memory; tiles of nodes from `node_first`.
__global__ void TransposeKernel(const std::int32_t* in, std::int32_t* out, std::int64_t n, std::int64_t node_first,
                                int labels) {
  __shared__ std::int32_t tile[32][33];
  const std::int64_t node0 = node_first + static_cast<std::int64_t>(blockIdx.y) * 32;
  const int label0 = blockIdx.x * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const std::int64_t node = node0 + i;
    const int label = label0 + threadIdx.x;
    if (node < n && label < labels) tile[i][threadIdx.x] = in[node * labels + label];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int label = label0 + i;
    const std::int64_t node = node0 + threadIdx.x;
    if (node < n && label < labels) out[static_cast<std::int64_t>(label) * n + node] = tile[threadIdx.x][i];
  }
}

template <int KIND>
__global__ void __launch_bounds__(kThreads) EnergyKernel(DeviceExpansion e, DeviceState s) {
  constexpr int D = Dirs<KIND>::D;
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  const xp::MoveCosts costs{e.table, e.num_labels};
  long long sum = 0;
  for (std::int64_t v = FirstNode(); v < N; v += NodeStride()) {
    std::int64_t q[D];
    int nl[D];
    std::int32_t w[D];
    Neighbours<KIND>(L, v, q);
    Gather<KIND>(e, N, v, q, e.labels, nl, w);
    const int lp = e.labels[v];
    sum += xp::NodeEnergy<D>(costs, lp, Unary(e, N, lp, v), nl, w);
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) AtomicAddSigned(&e.ctl->energy, sum);
}

__global__ void CycleStartKernel(DeviceExpansion e) {
  if (threadIdx.x == 0 && blockIdx.x == 0) e.ctl->move_index = 0;
}

__global__ void MoveStartKernel(DeviceExpansion e, Steering steer) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  xp::MoveControl& c = *e.ctl;
  xp::BeginMove(c, e.order, e.book, e.records, e.reuse != 0);
  e.sync->arrive[0][0] = 0;  // the solve kernel's barrier starts from zero
  e.sync->arrive[1][0] = 0;
  e.sync->pending[0] = 0;
  const std::int64_t now = Now();
  c.stamp_start = c.stamp_built = c.stamp_solved = now;
  if (steer.graph) cudaGraphSetConditional(steer.moves, c.move_index < c.num_moves ? 1u : 0u);
}

template <int KIND>
__global__ void __launch_bounds__(kThreads) BuildKernel(DeviceExpansion e, DeviceState s) {
  constexpr int D = Dirs<KIND>::D;
  xp::MoveControl* c = e.ctl;
  if (!c->run) return;  // the same in every block
  const xp::Move move = MoveOf(*c);
  const std::int64_t key = c->key;
  const bool resolve = c->resolve != 0;
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  const xp::MoveCosts costs{e.table, e.num_labels};
  long long truncated = 0;
  for (std::int64_t v = FirstNode(); v < N; v += NodeStride()) {
    std::int64_t q[D];
    int nl[D];
    std::int32_t w[D];
    std::uint32_t r[D];
    Neighbours<KIND>(L, v, q);
    Gather<KIND>(e, N, v, q, e.labels, nl, w);
    const int lp = e.labels[v];
    // A node's unary slope: U(sink label) - U(source label), 0 (and no loads) when it takes no part.
    auto slope = [&](int l) {
      return move.Free(l) ? Unary(e, N, move.Sink(l), v) - Unary(e, N, move.Source(l), v) : std::int64_t{0};
    };
    std::int64_t x = 0;
    if (!resolve) {
      const std::int64_t u = slope(lp);  // as u_sink - u_source with u_source = 0
      truncated += xp::BuildNode<D>(costs, move, lp, 0, u, nl, w, &x, r);
    } else {
      const std::int64_t base = key * N;
      const std::int32_t* built = e.slot_built + base;
      const int op = built[v];
      int onl[D];
#pragma unroll
      for (int d = 0; d < D; ++d) onl[d] = q[d] >= 0 ? built[q[d]] : 0;
      x = e.slot_x[base + v];
#pragma unroll
      for (int d = 0; d < D; ++d) r[d] = e.slot_r[(key * D + d) * N + v];
      int truncated_change = 0;
      const bool relabelled = op != lp;  // the unary costs matter only then
      const bool changed = xp::UpdateNode<D>(costs, move, op, lp, relabelled ? slope(op) : 0,
                                             relabelled ? slope(lp) : 0, onl, nl, w, &x, r, &truncated_change);
      truncated += truncated_change;
      s.h[v] = e.slot_h[base + v];
      s.mask[v] = e.slot_mask[base + v];
      if (changed) {
        const int tile = L.TileOfNode(v);
        s.active[tile] = 1;
        s.touched[tile] = 1;
      }
      // The list of the local path: one atomic per warp (a cycle's early re-solves change thousands).
      if (e.changed_nodes) {
        const unsigned here = __activemask();
        const unsigned lanes = __ballot_sync(here, changed);
        if (lanes) {
          const int lane = threadIdx.x % 32, leader = __ffs(lanes) - 1;
          unsigned long long first = 0;
          if (lane == leader)
            first = atomicAdd(reinterpret_cast<unsigned long long*>(&c->listed), static_cast<unsigned long long>(__popc(lanes)));
          first = __shfl_sync(here, first, leader);
          const auto at = static_cast<std::int64_t>(first) + __popc(lanes & ((1u << lane) - 1u));
          if (changed && at < e.changed_capacity) e.changed_nodes[at] = v;
        }
      }
    }
    s.x[v] = x;
#pragma unroll
    for (int d = 0; d < D; ++d) s.r[d * N + v] = r[d];
  }
  truncated = BlockSum(truncated);
  if (threadIdx.x == 0 && truncated != 0) AtomicAddSigned(&c->truncated, truncated);
  if (LastBlock(&c->blocks_done[kBuildBlocks]) && threadIdx.x == 0) c->stamp_built = Now();
}

// ---- A re-solve's local path (LaunchLocalRepairs, LaunchLocalCertificate) -------------------------

// Whether the move in progress takes the local path: a re-solve whose changes were all listed.
__device__ __forceinline__ bool TakesLocalPath(const xp::MoveControl& c, const SolveConfig& cfg) {
  return c.run && c.resolve && cfg.local_changes > 0 && c.listed <= cfg.local_changes;
}

// The listed nodes' repairs, a warp's first lane each: every repair takes its own path through the
// code, and lanes of one warp that diverge wait for each other.
template <int KIND>
__global__ void __launch_bounds__(kThreads) LocalRepairKernel(DeviceExpansion e, DeviceState s, SolveConfig cfg) {
  xp::MoveControl* c = e.ctl;
  if (!TakesLocalPath(*c, cfg)) return;
  if (threadIdx.x % 32 != 0) return;
  const pr::LocalState state{s.x, s.h, s.r, s.touched, s.active, s.layout};
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  unsigned long long failed = 0, moved = 0;
  for (std::int64_t i = (blockIdx.x * blockDim.x + threadIdx.x) / 32; i < c->listed; i += warps) {
    // Whether the repairs (this one or a neighbour's) changed the node: counted so that tests can
    // tell certified re-solves that needed their repairs from those that did not.
    const std::int64_t v = e.changed_nodes[i];
    const volatile std::int64_t* x = s.x;
    const volatile std::int32_t* h = s.h;
    const std::int64_t x0 = x[v];
    const std::int32_t h0 = h[v];
    failed += pr::RepairNode<KIND, cuda_pr::DeviceLocalOps>(state, v) ? 0 : 1;
    moved += x[v] != x0 || h[v] != h0 ? 1 : 0;
  }
  if (failed) atomicAdd(reinterpret_cast<unsigned long long*>(&c->local_failures), failed);
  if (moved) atomicAdd(reinterpret_cast<unsigned long long*>(&c->local_moved), moved);
}

// The certificate where the update or the repairs changed something (the tiles flagged touched and
// their neighbours; elsewhere the kept graph's solved state is as it was), the cut of every node
// (sink side: finite height), and fresh bitmasks in the tiles checked, which the kept graph takes.
template <int KIND>
__global__ void __launch_bounds__(kThreads) LocalCertificateKernel(DeviceExpansion e, DeviceState s, SolveConfig cfg) {
  constexpr int D = Dirs<KIND>::D;
  xp::MoveControl* c = e.ctl;
  if (!TakesLocalPath(*c, cfg) || c->local_failures != 0) return;
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  long long bad = 0;
  for (std::int64_t v = FirstNode(); v < N; v += NodeStride()) {
    const int h = s.h[v];
    s.labels[v] = pr::CutSide(h, L.inf);
    const std::int64_t row = v / L.width, plane = row / L.height;
    const int tx = static_cast<int>(v - row * L.width) / L.tile_x, ty = static_cast<int>(row - plane * L.height) / L.tile_y,
              tz = static_cast<int>(plane) / L.tile_z;
    if (!cuda_pr::FlaggedNear<KIND>(L, s.touched, tx, ty, tz)) continue;
    std::uint32_t r[D];
#pragma unroll
    for (int d = 0; d < D; ++d) r[d] = s.r[d * N + v];
    s.mask[v] = pr::ResidualMask<D>(r);
    bad += pr::CertifiedAt<KIND>(s.x, s.h, s.r, L, v) ? 0 : 1;
  }
  bad = BlockSum(bad);
  if (threadIdx.x == 0 && bad) AtomicAddSigned(&c->local_bad, bad);
}

// ---- The persistent solve kernel ----------------------------------------------------------------

// The grid-wide barrier of one block (its state lives in registers; thread 0's is the one used).
struct Grid {
  GridSync* g;
  unsigned long long seen[2] = {0, 0};  // each counter's value when its last barrier completed
  int parity = 0;
};

// Device-scope relaxed loads for polling (a plain load may hit a stale L1 line; a volatile one is a
// system-scope load on Hopper).
__device__ __forceinline__ unsigned long long LoadRelaxed(const unsigned long long* p) {
  unsigned long long value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(p) : "memory");
  return value;
}
__device__ __forceinline__ unsigned int LoadRelaxed(const unsigned int* p) {
  unsigned int value;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(p) : "memory");
  return value;
}

// Ends every block's wait, at a grid barrier (whichever counter it polls) or in an asynchronous
// phase: some block is not running, or a phase went wrong. The kernel then leaves and the host reports
// it. Only the first call releases the barriers (2^56 more arrivals, which no count can reach).
__device__ void AbortGrid(GridSync* g) {
  if (atomicExch(&g->abort, 1u) != 0u) return;
  atomicAdd(&g->arrive[0][0], 1ull << 56);
  atomicAdd(&g->arrive[1][0], 1ull << 56);
}

// Every block of the grid waits here for all others (they must all be resident: the grid is sized
// by occupancy), handing in *block_count (then zeroed); *total receives the sum over all blocks.
// One atomic per block and polling of one counter: the round's counts ride on the arrival. Returns
// false in every block when a barrier timed out (some block never came): the kernel then leaves and
// the host reports it, rather than hanging.
__device__ bool Sync(Grid& grid, unsigned int* block_count, unsigned long long* total) {
  __shared__ unsigned long long sum;
  __shared__ int good;
  __syncthreads();
  if (threadIdx.x == 0) {
    const int p = grid.parity;
    unsigned long long* counter = &grid.g->arrive[p][0];
    const unsigned long long mine = *block_count;
    *block_count = 0;
    const unsigned long long need = static_cast<unsigned long long>(gridDim.x) << 32;
    __threadfence();  // this block's writes before the barrier are seen by every block after it
    atomicAdd(counter, (1ull << 32) + mine);
    // Polled with relaxed loads; the fence after the wait orders what follows.
    unsigned long long v = LoadRelaxed(counter);
    std::int64_t start = 0;  // the clock is read only when the wait is long
    for (unsigned int spin = 1; v - grid.seen[p] < need; ++spin) {
      if ((spin & 1023u) == 0 && start == 0) start = Now();
      if ((spin & 1023u) == 0 && Now() - start > 5000000000ll) AbortGrid(grid.g);  // 5 s: a block is not running
      v = LoadRelaxed(counter);
    }
    __threadfence();
    const unsigned long long d = v - grid.seen[p];
    good = d < need + (1ull << 32);  // exactly gridDim.x arrivals (a timeout adds 2^56)
    sum = d - need;
    grid.seen[p] = v;
  }
  __syncthreads();
  grid.parity ^= 1;
  *total = sum;
  return good != 0;
}

// Tile t's coordinates.
__device__ __forceinline__ void TileCoords(const TileLayout& L, int t, int* tx, int* ty, int* tz) {
  *tx = t % L.tiles_x;
  *ty = (t / L.tiles_x) % L.tiles_y;
  *tz = t / (L.tiles_x * L.tiles_y);
}

// Flags for another visit the tiles next to tile t in the directions of `sides` (bit d: direction d,
// cuda_pr::HaloSides), and adds to *pending the flags this call set, less `release` (the caller's
// finished work, counted until then). The count goes up before any flag is set: an owner may take a
// flag, visit and release it at once, and must not bring *pending down to the end of the phase while
// this call's flags are still to be counted. The fence also publishes the caller's writes (the
// tile's heights) before the flags and the release.
template <int KIND>
__device__ void FlagNeighbours(const TileLayout& L, unsigned int* need, int t, std::uint32_t sides,
                               unsigned long long* pending, unsigned long long release) {
  constexpr int D = cuda_pr::KindTraits<KIND>::D;
  int tx, ty, tz;
  TileCoords(L, t, &tx, &ty, &tz);
  int next[D];
  unsigned long long candidates = 0;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const int nx = tx + pr::DirX(KIND, d), ny = ty + pr::DirY(KIND, d), nz = tz + pr::DirZ(KIND, d);
    const bool flag = (sides >> d & 1u) && nx >= 0 && ny >= 0 && nz >= 0 && nx < L.tiles_x && ny < L.tiles_y &&
                      nz < L.tiles_z;
    next[d] = flag ? L.TileIndex(nx, ny, nz) : -1;
    candidates += flag ? 1 : 0;
  }
  if (candidates) atomicAdd(pending, candidates);
  __threadfence();
  unsigned long long set = 0;  // a flag already set is counted by whoever set it
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (next[d] >= 0) set += atomicExch(need + next[d], 1u) == 0u ? 1 : 0;
  if (set != candidates + release) atomicAdd(pending, set - candidates - release);  // modulo 2^64
}

// Resident blocks per SM the compiler must allow: 3 for 4-connected tiles of 256 nodes (80 registers,
// what the hop-by-hop kernel reached by itself; the wave one would take 96), else 2 up to 512 nodes.
template <int KIND, int TX, int TY, int TZ>
constexpr int SolveMinBlocks() {
  return KIND == pr::kKindGrid4 && TX * TY * TZ <= 256 ? 3 : TX * TY * TZ <= 512 ? 2 : 1;
}

// WAVE: BFS and kill visits relax by waves (SolveConfig::wave_relabel); WAVE_PUSH: push visits push
// by waves (SolveConfig::wave_push); both compiled where HasWave.
template <int KIND, int TX, int TY, int TZ, bool WAVE, bool WAVE_PUSH>
__global__ void __launch_bounds__(TX* TY* TZ, SolveMinBlocks<KIND, TX, TY, TZ>())
    SolveKernel(DeviceExpansion e, DeviceState s, SolveConfig cfg) {
  xp::MoveControl* c = e.ctl;
  if (!c->run) return;  // the same in every block
  const TileLayout& L = s.layout;
  const int T = L.num_tiles();
  const bool resolve = c->resolve != 0;
  const bool lead = blockIdx.x == 0 && threadIdx.x == 0;
  if (TakesLocalPath(*c, cfg) && c->local_failures == 0 && c->local_bad == 0) {
    // Certified after the local repairs: no active node is left, and no relabel follows to clear the
    // tile flags, as the solve's last one does otherwise.
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < T; t += gridDim.x * blockDim.x) {
      s.touched[t] = 0;
      s.active[t] = 0;
    }
    if (lead) {
      c->certified = 1;
      c->stamp_solved = Now();
    }
    return;
  }
  const std::int64_t max_rounds = c->max_rounds;
  const std::int64_t stop_active = c->stop_active;  // 0: solve to the maximum flow
  std::uint8_t* const a = s.dirty;
  std::uint8_t* const b = s.dirty + T;
  std::uint8_t* const kill_a = s.dirty + 2 * T;
  std::uint8_t* const kill_b = s.dirty + 3 * T;
  __shared__ unsigned int block_count;  // this block's count in the current round
  __shared__ std::uint32_t async_sides;  // the sides of the visited tile whose border heights changed
  __shared__ int async_pick[2];          // thread 0's choice in an asynchronous phase, by turn parity
  constexpr int kAsyncNothing = -1, kAsyncDone = -2, kAsyncFailed = -3;
  if (threadIdx.x == 0) block_count = 0;
  Grid grid{e.sync};
  bool ok = true;
  std::int64_t relabels = 0, push_rounds = 0, bfs_rounds = 0;
  unsigned long long pending_end = 0;  // e.sync->pending at the end of the asynchronous phase

  // The rest of a BFS or kill phase without rounds (SolveConfig::async_relabel): a block visits one
  // of its tiles whenever a neighbouring tile changed heights that its halo holds, instead of
  // waiting for the slowest tile of each round. Heights only fall in a BFS; in a kill phase each
  // changes at most once (to inf, or to 1 for a node that gained sink capacity); and each visit
  // relaxes its tile to the fixpoint of the halo it read, so the phase ends where the rounds end.
  // A visit flags only the neighbours next to the sides where border heights changed.
  // `first` flags the tiles the phase's first (synchronous) round changed, `seeds` counts them (they
  // flag all their neighbours). e.sync->pending counts, less `seeds`, the flags set, the visits in
  // progress and the seeds not yet released, or more (FlagNeighbours counts before it flags): the
  // phase is over when it reads pending_end, the same value in every block. visit(tx, ty, tz)
  // relaxes a tile and leaves its changed sides in async_sides. Returns false when the phase failed:
  // 5 s without work while it was not over, another block's abort, or a flag left at the end.
  auto relax_async = [&](const std::uint8_t* first, unsigned long long seeds, auto visit) {
    unsigned long long* const pending = e.sync->pending;
    pending_end -= seeds;
    ++bfs_rounds;  // the asynchronous rest counts as one round
    if (threadIdx.x == 0)
      for (int t = blockIdx.x; t < T; t += gridDim.x)
        if (first[t]) FlagNeighbours<KIND>(L, e.need, t, ~0u, pending, 1);
    std::int64_t idle_since = 0;  // the clock is read only when the block waits long
    for (unsigned int spin = 0;; ++spin) {
      // Thread 0 picks a flagged tile of this block (its fence then makes the heights of the tile
      // that set the flag visible), or sees the phase over (its fence: every tile's heights), and
      // tells the block through a slot of its own per parity (one barrier per turn).
      if (threadIdx.x == 0) {
        const unsigned long long left = LoadRelaxed(pending);  // read first: then no flag is left
        int pick = kAsyncNothing;
        for (int t = blockIdx.x; t < T && pick == kAsyncNothing; t += gridDim.x)
          if (atomicExch(e.need + t, 0u) != 0u) pick = t;
        if (pick == kAsyncNothing && left == pending_end) {
          pick = kAsyncDone;
          for (int t = blockIdx.x; t < T; t += gridDim.x) {  // a flag now would be one the count missed
            if (LoadRelaxed(e.need + t) != 0u) {
              atomicExch(&e.sync->async_left, 1u);
              pick = kAsyncFailed;
            }
          }
        }
        if (pick == kAsyncNothing && (spin & 1023u) == 1023u) {
          if (idle_since == 0) idle_since = Now();
          if (Now() - idle_since > 5000000000ll || LoadRelaxed(&e.sync->abort) != 0u) pick = kAsyncFailed;
        }
        if (pick >= 0) idle_since = 0;
        if (pick == kAsyncFailed) AbortGrid(e.sync);
        if (pick != kAsyncNothing) __threadfence();
        async_pick[spin & 1] = pick;
        async_sides = 0;
      }
      __syncthreads();
      const int t = async_pick[spin & 1];
      if (t == kAsyncDone) return true;
      if (t == kAsyncFailed) return false;
      if (t == kAsyncNothing) continue;
      int tx, ty, tz;
      TileCoords(L, t, &tx, &ty, &tz);
      visit(tx, ty, tz);
      if (threadIdx.x == 0) FlagNeighbours<KIND>(L, e.need, t, async_sides, pending, 1);
    }
  };

  // One push round: the tiles of each colour in turn (flow leaving a tile goes to idle tiles).
  // census: every tile is visited and also takes the census (PushTile); *work then counts the active
  // nodes that the visits found, which is zero exactly when the relabel left none.
  auto push_round = [&](unsigned long long* work, bool census) {
    *work = 0;
    const int gx = L.ColourGridX(), gy = L.ColourGridY(), gz = L.ColourGridZ(), positions = gx * gy * gz;
    for (int colour = 0; colour < L.num_colours(); ++colour) {
      for (int i = blockIdx.x; i < positions; i += gridDim.x) {
        int tx, ty, tz;
        if (!L.ColourTile(colour, i % gx, (i / gx) % gy, i / (gx * gy), &tx, &ty, &tz)) continue;
        __syncthreads();  // the previous visit's shared memory is free
        cuda_pr::PushTile<KIND, TX, TY, TZ, WAVE_PUSH>(s, tx, ty, tz, cfg.local_iterations, &block_count, census);
      }
      unsigned long long tiles = 0;
      if (!Sync(grid, &block_count, &tiles)) return false;
      *work += tiles;
    }
    ++push_rounds;
    return true;
  };

  // A global relabel: exact distances to the sink (from scratch, or incrementally from the kept
  // heights around the tiles touched since the last one), then the census (cut, tile flags, active
  // nodes) unless the next push round takes it (SolveConfig::fused_census).
  auto relabel = [&](bool incremental, unsigned long long* active) {
    unsigned long long changed = 0;
    const std::uint8_t* start = e.all_tiles;  // a relabel from scratch visits every tile first
    if (incremental) {
      // Kill rounds from the tiles touched since the last relabel; the seed tiles (touched or
      // changed here) are where the BFS starts.
      const std::uint8_t* in = s.touched;
      std::uint8_t* out = kill_a;
      for (int k = 0;; ++k) {
        for (int t = blockIdx.x; t < T; t += gridDim.x) {
          int tx, ty, tz;
          TileCoords(L, t, &tx, &ty, &tz);
          __syncthreads();
          if (k == 0 && threadIdx.x == 0) s.seed[t] = s.touched[t];
          cuda_pr::KillTile<KIND, TX, TY, TZ, WAVE>(s, tx, ty, tz, in, out, k == 0, &block_count);
        }
        if (!Sync(grid, &block_count, &changed)) return false;
        ++bfs_rounds;
        if (changed == 0) break;
        if (cfg.async_relabel) {
          if (!relax_async(out, changed, [&](int tx, int ty, int tz) {
                cuda_pr::KillTile<KIND, TX, TY, TZ, WAVE>(s, tx, ty, tz, e.all_tiles, kill_b, false, nullptr,
                                                          &async_sides);
              }))
            return false;
          break;
        }
        if (k > max_rounds) return false;
        in = out;
        out = out == kill_a ? kill_b : kill_a;
      }
      start = s.seed;
    }
    const std::uint8_t* in = start;
    std::uint8_t* out = b;
    for (int k = 0;; ++k) {
      for (int t = blockIdx.x; t < T; t += gridDim.x) {
        int tx, ty, tz;
        TileCoords(L, t, &tx, &ty, &tz);
        __syncthreads();
        if (k == 0 && threadIdx.x == 0) s.touched[t] = 0;  // (read only by kill rounds, all done)
        cuda_pr::BfsTile<KIND, TX, TY, TZ, WAVE>(s, tx, ty, tz, in, out, !incremental && k == 0, &block_count);
      }
      if (!Sync(grid, &block_count, &changed)) return false;
      ++bfs_rounds;
      if (changed == 0) break;
      if (cfg.async_relabel) {
        if (!relax_async(out, changed, [&](int tx, int ty, int tz) {
              cuda_pr::BfsTile<KIND, TX, TY, TZ, WAVE>(s, tx, ty, tz, e.all_tiles, a, false, nullptr,
                                                       &async_sides);
            }))
          return false;
        break;
      }
      if (k > max_rounds) return false;
      in = out;
      out = out == b ? a : b;
    }
    ++relabels;
    // The next push round may start at once: an asynchronous phase ended in every block with every
    // visit finished and fenced, and otherwise the last round's grid barrier did.
    if (cfg.fused_census) return push_round(active, true);
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
      int tx, ty, tz;
      TileCoords(L, t, &tx, &ty, &tz);
      __syncthreads();
      const int n = cuda_pr::CensusTile<TX, TY, TZ>(s, tx, ty, tz);
      if (threadIdx.x == 0) block_count += static_cast<unsigned int>(n);
    }
    return Sync(grid, &block_count, active);
  };

  unsigned long long work = 0, active = 0;
  if (ok && resolve)
    for (int k = 0; k < cfg.resolve_push_rounds; ++k) {
      ok = push_round(&work, false);
      if (!ok || work == 0) break;
    }
  // A fresh graph's heights mean nothing: its first relabel starts from scratch.
  bool incremental = resolve && cfg.incremental_relabel != 0;
  bool stopped = false;
  while (ok) {
    ok = relabel(incremental, &active);
    if (!ok || active == 0) break;
    // Early stop: the census has just written the cut of exact distances (nodes that reach the sink
    // take the sink's side), whose capacity exceeds the minimum by at most the active nodes' excess.
    if (static_cast<std::int64_t>(active) <= stop_active) {
      stopped = true;
      break;
    }
    for (int k = cfg.fused_census ? 1 : 0; k < cfg.push_rounds; ++k) {  // (the fused census was round 1)
      ok = push_round(&work, false);
      if (!ok || work == 0) break;
    }
    incremental = resolve ? cfg.incremental_relabel != 0 : cfg.incremental_relabel == 2;
    if (relabels > max_rounds) ok = false;
  }
  if (lead) {
    c->relabels = relabels;
    c->push_rounds = push_rounds;
    c->bfs_rounds = bfs_rounds;
    c->stopped = stopped ? 1 : 0;
    c->stamp_solved = Now();
    if (!ok) c->error = e.sync->async_left ? 3 : e.sync->abort ? 2 : 1;
  }
}

template <int KIND>
__global__ void __launch_bounds__(kThreads) DeltaKernel(DeviceExpansion e, DeviceState s) {
  constexpr int D = Dirs<KIND>::D, F = Dirs<KIND>::F;
  xp::MoveControl* c = e.ctl;
  if (!c->run) return;
  const xp::Move move = MoveOf(*c);
  const TileLayout& L = s.layout;
  const std::int64_t N = L.num_nodes;
  const xp::MoveCosts costs{e.table, e.num_labels};
  long long delta = 0, moved_count = 0, to_alpha = 0;
  for (std::int64_t v = FirstNode(); v < N; v += NodeStride()) {
    const int lp = e.labels[v];
    const int np = move.NewLabel(lp, s.labels[v] != 0);
    const bool moved = np != lp;
    std::int64_t q[D];
    int nl[D], nnl[D];
    std::int32_t w[D];
    Neighbours<KIND>(L, v, q);
    bool any = moved;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      nl[d] = nnl[d] = 0;
      w[d] = 0;
      if (d < F && q[d] >= 0) {
        nl[d] = e.labels[q[d]];
        nnl[d] = move.NewLabel(nl[d], s.labels[q[d]] != 0);
        w[d] = e.weights ? e.weights[d * N + v] : 1;
        any |= nnl[d] != nl[d];
      }
    }
    if (!any) continue;
    const std::int64_t u_label = moved ? Unary(e, N, lp, v) : 0, u_new = moved ? Unary(e, N, np, v) : 0;
    delta += xp::DeltaNode<D>(costs, lp, np, u_label, u_new, nl, nnl, w);
    moved_count += moved;
    to_alpha += moved && np == move.alpha;
  }
  delta = BlockSum(delta);
  moved_count = BlockSum(moved_count);
  to_alpha = BlockSum(to_alpha);
  if (threadIdx.x == 0) {
    if (delta) AtomicAddSigned(&c->delta, delta);
    if (moved_count) AtomicAddSigned(&c->moved, moved_count);
    if (to_alpha) AtomicAddSigned(&c->to_alpha, to_alpha);
  }
}

template <int KIND>
__global__ void __launch_bounds__(kThreads) CommitKernel(DeviceExpansion e, DeviceState s) {
  constexpr int D = Dirs<KIND>::D;
  xp::MoveControl* c = e.ctl;
  if (!c->run) return;
  const xp::Move move = MoveOf(*c);
  const std::int64_t key = c->key;
  const bool accepted = c->delta < 0;
  const bool keep = key < c->num_slots;
  const std::int64_t N = s.layout.num_nodes;
  const std::int64_t base = key * N;
  for (std::int64_t v = FirstNode(); v < N; v += NodeStride()) {
    const int lp = e.labels[v];
    if (keep) {
      e.slot_x[base + v] = s.x[v];
      e.slot_h[base + v] = s.h[v];
      e.slot_mask[base + v] = s.mask[v];
#pragma unroll
      for (int d = 0; d < D; ++d) e.slot_r[(key * D + d) * N + v] = s.r[d * N + v];
      e.slot_built[base + v] = lp;
    }
    if (accepted) {
      const int np = move.NewLabel(lp, s.labels[v] != 0);
      if (np != lp) e.labels[v] = np;
    }
  }
  if (LastBlock(&c->blocks_done[kCommitBlocks]) && threadIdx.x == 0) {
    xp::EndMove(*c, e.book, e.records);
    e.records[c->move_index - 1].stamp_done = Now();
  }
}

// ---- Launchers --------------------------------------------------------------------------------

int NodeBlocks(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 16384 ? (blocks > 0 ? blocks : 1) : 16384);
}


template <template <int> class K, class... Args>
cudaError_t LaunchByKind(int kind, std::int64_t n, cudaStream_t stream, Args... args) {
  cudaGetLastError();  // report this launch's error only
  if (kind == pr::kKindGrid4) K<pr::kKindGrid4>::Launch(NodeBlocks(n), stream, args...);
  else if (kind == pr::kKindGrid8) K<pr::kKindGrid8>::Launch(NodeBlocks(n), stream, args...);
  else K<pr::kKindGrid3D6>::Launch(NodeBlocks(n), stream, args...);
  return cudaGetLastError();
}

template <int KIND>
struct EnergyLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s) {
    EnergyKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s);
  }
};
template <int KIND>
struct BuildLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s) {
    BuildKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s);
  }
};
template <int KIND>
struct LocalRepairLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s, SolveConfig cfg) {
    LocalRepairKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s, cfg);
  }
};
template <int KIND>
struct LocalCertificateLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s, SolveConfig cfg) {
    LocalCertificateKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s, cfg);
  }
};
template <int KIND>
struct DeltaLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s) {
    DeltaKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s);
  }
};
template <int KIND>
struct CommitLaunch {
  static void Launch(int blocks, cudaStream_t stream, DeviceExpansion e, DeviceState s) {
    CommitKernel<KIND><<<blocks, kThreads, 0, stream>>>(e, s);
  }
};

// Calls f.template operator()<KIND, TX, TY, TZ>() for the tile shape of the layout (the shapes
// cuda-pr compiles).
template <class F>
cudaError_t Dispatch(const TileLayout& L, const F& f) {
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

// For a tile-shape dispatch: calls f.template operator()<KIND, TX, TY, TZ, WAVE, WAVE_PUSH>() with the
// configuration's wave choices, true only where the tile shape has wave instantiations (HasWave), and
// wave pushes only on tiles of up to 512 nodes (32x32 tiles with both waves would need more than the
// 48 KiB of static shared memory a block may have).
template <class F>
struct WithWaves {
  const F& f;
  bool wave_relabel, wave_push;
  template <int K, int X, int Y, int Z>
  cudaError_t operator()() const {
    if constexpr (cuda_pr::HasWave<K, X, Z>()) {
      if constexpr (X * Y * Z <= 512) {
        if (wave_relabel && wave_push) return f.template operator()<K, X, Y, Z, true, true>();
        if (wave_push) return f.template operator()<K, X, Y, Z, false, true>();
      }
      if (wave_relabel) return f.template operator()<K, X, Y, Z, true, false>();
    }
    return f.template operator()<K, X, Y, Z, false, false>();
  }
};

struct SolveOccupancy {
  int* per_sm;
  template <int K, int X, int Y, int Z, bool W, bool WP>
  cudaError_t operator()() const {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, SolveKernel<K, X, Y, Z, W, WP>, X * Y * Z, 0);
  }
};

struct SolveLaunch {
  const DeviceExpansion& e;
  const DeviceState& s;
  const SolveConfig& config;
  int blocks;
  cudaStream_t stream;
  // SolveConfig::cooperative: the kernel's blocks start only when all of them can be resident at once,
  // so its software grid barrier cannot wait on a block that another kernel (another run's move, from
  // another thread of the process) keeps from starting.
  template <int K, int X, int Y, int Z, bool W, bool WP>
  cudaError_t operator()() const {
    cudaLaunchAttribute cooperative[1];
    cooperative[0].id = cudaLaunchAttributeCooperative;
    cooperative[0].val.cooperative = config.cooperative ? 1 : 0;
    cudaLaunchConfig_t launch = {};
    launch.gridDim = dim3(static_cast<unsigned>(blocks));
    launch.blockDim = dim3(X * Y * Z);
    launch.stream = stream;
    launch.attrs = cooperative;
    launch.numAttrs = 1;
    return cudaLaunchKernelEx(&launch, SolveKernel<K, X, Y, Z, W, WP>, e, s, config);
  }
};

}  // namespace

cudaError_t LaunchTransposeUnary(const std::int32_t* node_major, std::int32_t* label_major, std::int64_t n, int labels,
                                 cudaStream_t stream) {
  cudaGetLastError();
  const std::int64_t node_tiles = (n + 31) / 32;
  if (node_tiles > 2147483647) return cudaErrorInvalidValue;
  // Node tiles go along y (at most 65535 per launch): launch in chunks.
  for (std::int64_t first = 0; first < node_tiles; first += 65535) {
    const std::int64_t count = node_tiles - first < 65535 ? node_tiles - first : 65535;
    const dim3 grid((labels + 31) / 32, static_cast<unsigned>(count));
    TransposeKernel<<<grid, dim3(32, 8), 0, stream>>>(node_major, label_major, n, first * 32, labels);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

cudaError_t LaunchEnergy(const DeviceExpansion& e, const DeviceState& s, cudaStream_t stream) {
  return LaunchByKind<EnergyLaunch>(s.layout.kind, s.layout.num_nodes, stream, e, s);
}

cudaError_t LaunchCycleStart(const DeviceExpansion& e, cudaStream_t stream) {
  cudaGetLastError();
  CycleStartKernel<<<1, 32, 0, stream>>>(e);
  return cudaGetLastError();
}

cudaError_t LaunchMoveStart(const DeviceExpansion& e, const Steering& steer, cudaStream_t stream) {
  cudaGetLastError();
  MoveStartKernel<<<1, 32, 0, stream>>>(e, steer);
  return cudaGetLastError();
}

cudaError_t LaunchBuild(const DeviceExpansion& e, const DeviceState& s, cudaStream_t stream) {
  return LaunchByKind<BuildLaunch>(s.layout.kind, s.layout.num_nodes, stream, e, s);
}

int SolveBlocks(const DeviceState& s, const SolveConfig& config, cudaError_t* status) {
  int device = 0, sms = 0, per_sm = 0;
  *status = cudaGetDevice(&device);
  if (*status == cudaSuccess) *status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (*status != cudaSuccess) return 0;
  const TileLayout& L = s.layout;
  const SolveOccupancy probe{&per_sm};
  *status = Dispatch(L, WithWaves<SolveOccupancy>{probe, config.wave_relabel, config.wave_push});
  if (*status != cudaSuccess || per_sm <= 0) return 0;
  const int tiles = L.num_tiles();
  return tiles < per_sm * sms ? tiles : per_sm * sms;
}

cudaError_t LaunchSolve(const DeviceExpansion& e, const DeviceState& s, const SolveConfig& config, int blocks,
                        cudaStream_t stream) {
  cudaGetLastError();
  const SolveLaunch launch{e, s, config, blocks, stream};
  return Dispatch(s.layout, WithWaves<SolveLaunch>{launch, config.wave_relabel, config.wave_push});
}

cudaError_t LaunchLocalRepairs(const DeviceExpansion& e, const DeviceState& s, const SolveConfig& config,
                               cudaStream_t stream) {
  if (config.local_changes <= 0) return cudaSuccess;
  // A warp per listed node, at most a warp per 8 of them resident (further nodes wait their turn).
  const std::int64_t warps = (config.local_changes + 7) / 8;
  return LaunchByKind<LocalRepairLaunch>(s.layout.kind, warps * 32, stream, e, s, config);
}

cudaError_t LocalRepairStackBytes(int kind, std::size_t* bytes) {
  return kind == pr::kKindGrid4   ? cuda_stack::FrameBytes(LocalRepairKernel<pr::kKindGrid4>, bytes)
         : kind == pr::kKindGrid8 ? cuda_stack::FrameBytes(LocalRepairKernel<pr::kKindGrid8>, bytes)
                                  : cuda_stack::FrameBytes(LocalRepairKernel<pr::kKindGrid3D6>, bytes);
}

cudaError_t LaunchLocalCertificate(const DeviceExpansion& e, const DeviceState& s, const SolveConfig& config,
                                   cudaStream_t stream) {
  if (config.local_changes <= 0) return cudaSuccess;
  return LaunchByKind<LocalCertificateLaunch>(s.layout.kind, s.layout.num_nodes, stream, e, s, config);
}

cudaError_t LaunchDelta(const DeviceExpansion& e, const DeviceState& s, cudaStream_t stream) {
  return LaunchByKind<DeltaLaunch>(s.layout.kind, s.layout.num_nodes, stream, e, s);
}

cudaError_t LaunchCommit(const DeviceExpansion& e, const DeviceState& s, cudaStream_t stream) {
  return LaunchByKind<CommitLaunch>(s.layout.kind, s.layout.num_nodes, stream, e, s);
}

}  // namespace mrf::cuda_xp
