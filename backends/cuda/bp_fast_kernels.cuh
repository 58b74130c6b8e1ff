#pragma once
/// @file bp_fast_kernels.cuh
/// @brief cuda-bp's fast tile kernel (namespace fastk): the device side of backends/common/bp_fast_tile.h
/// (asynchronous copies, barriers, the mailbox; the diagonal, cooperative, pipeline and split launches) and
/// fastk::Pick, which picks its instantiation. Included only by bp_cuda.cu: cuda-bp is one translation unit,
/// so its kernels need no host wrappers.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"

namespace cg = cooperative_groups;

namespace mrf::bp {

namespace {

// ---- The fast tile kernel (backends/common/bp_fast_tile.h) ------------------------------------------
//
// A block visits tiles with 2 T compute threads, one chain each (right then left chains of the tile rows,
// down then up chains of the columns), labels packed in 16-bit pairs in registers. The phases of a visit
// are in bp_fast_tile.h; this part adds what only the GPU has: asynchronous copies, the block barrier of
// the compute threads, and the four ways of stepping between tiles:
// - diagonal (and graph): one launch per tile diagonal, a block per tile;
// - cooperative: one launch per outer iteration, blocks loop over the tiles of a diagonal, a grid barrier
//   between diagonals;
// - pipeline: one cooperative launch per outer iteration, block b takes tile columns b, b + nb, ... (or,
//   pipeline-rows, tile rows) in an order equivalent to the serial one (bp::fast::VisitOfBlock). A tile then
//   depends on other blocks only through the tile on its left (raster sweep) or right (reverse sweep; rows:
//   above or below): it waits for that tile's sweep counter in global memory (release / acquire), nothing
//   else. By columns a tile publishes its counter once its horizontal chains, which write all its
//   neighbour reads, are done, so neighbouring columns lag by one phase (rows: by a whole visit). By
//   columns there is no counter at all when the mailbox is on (the default; bp::fast::Mail): the chains
//   post the messages crossing a vertical tile edge beside a sweep stamp, so the handoff needs no fence.
//   Loader warps (kPipelineLoaders threads) fetch the next tile's unary costs and scales (cp.async) and
//   entering border messages while the compute threads work on the current tile (double buffers handed
//   over through named barriers); the border the block's previous tile sends to this one stays in shared
//   memory.
// - split (one inner iteration only): the pipeline with two crews of compute threads. Then a visit's
//   horizontal chains need nothing from its vertical ones, nor from the previous visit's: the horizontal
//   crew runs visit n + 1's horizontal chains while the vertical crew runs visit n's vertical chains (and
//   labels), so a step to the right costs a tile's horizontal phase only. Three sets of the loader's
//   buffers and two of the horizontal messages (bp::fast::PipelineBuffers).

namespace fastk {

using fast::Word;

enum Mode : int { kDiagonal = 0, kCooperative = 1, kPipelineRows = 2, kSplit = 3, kPipelineColumns = 4 };

__host__ __device__ constexpr fast::Walk WalkOf(int mode) {
  return mode == kPipelineColumns ? fast::Walk::kColumns : fast::Walk::kRows;
}

// Compute threads of a fast block for tile side T: 2 T chains of `lanes` threads, whole warps.
__host__ __device__ constexpr int ComputeThreads(int tile, int lanes) { return (2 * tile * lanes + 31) / 32 * 32; }

// The largest tile side (at most 64) whose shared arrays fit one block of a Hopper GPU (227 KB).
__host__ __device__ constexpr int MaxSide(int words, int lanes) {
  int side = 64;
  while (side > 1 && fast::SharedWords(side, words, lanes) * sizeof(Word) > 232448) --side;
  return side;
}

// Loader threads of a split block: a visit's loads must keep pace with one phase of chain steps, not two.
constexpr int kSplitLoaders = 128;
// Loader threads of a pipeline block: enough that each polls at most one 16-byte pair of mail slots of a
// tile-24 edge of 16 labels (24 lines of 4 pairs; more labels or a larger tile: two or more each). On
// Tsukuba 1 x 1 three warps took 0.224-0.226 ms against one warp's 0.271-0.274 (H200, docs/bp.md).
constexpr int kPipelineLoaders = 96;

// The most threads a fast block has: the chains of the largest tile and the loaders; split: two crews
// and the loaders. The kernels' launch bounds, so that the compiler's register budget fits the largest
// block (the split kernel is a kernel of its own, so that its larger block leaves the others' budget).
__host__ __device__ constexpr int MaxThreads(int words, int lanes) {
  return ComputeThreads(MaxSide(words, lanes), lanes) + kPipelineLoaders;
}
__host__ __device__ constexpr int MaxSplitThreads(int words, int lanes) {
  return 2 * ComputeThreads(MaxSide(words, lanes), lanes) + kSplitLoaders;
}
// A wait longer than this many cycles (about a second) means a bug: report it instead of hanging.
constexpr long long kSpinLimit = 2000000000LL;

struct AsyncCopy {
  __device__ __forceinline__ void operator()(Word* dst, const Word* src, int words) const {
    __pipeline_memcpy_async(dst, src, 4 * words);
  }
};

// Named barriers. 1: the compute threads only (the loaders never take part; split: the vertical
// crew). 2 + set: the loader's buffer set `set` is loaded (the loader arrives, the compute threads or the
// horizontal crew wait). 5 + set: set `set` is free again (the compute threads or the vertical crew
// arrive, the loader waits). A barrier per set keeps the loader, which may run ahead, from arriving twice
// at one barrier before the other side waited there. 8 (split): both crews, once per visit.
constexpr int kBarCompute = 1, kBarReady = 2, kBarEmpty = 5, kBarCrews = 8;

__device__ __forceinline__ void BarSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void BarArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void ComputeBarrier(int threads) { BarSync(kBarCompute, threads); }

__device__ __forceinline__ int LoadAcquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreRelease(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Spins until a global counter reaches `target`; flags an error after kSpinLimit cycles.
__device__ void WaitGlobal(const int* counter, int target, int* error) {
  const long long start = clock64();
  while (LoadAcquire(counter) < target) {
    if (clock64() - start > kSpinLimit) {
      atomicExch(error, 1);
      return;
    }
  }
}

// Inputs of a tile loaded by all compute threads (diagonal and cooperative modes).
template <int NW>
__device__ void LoadAll(const fast::Params& P, const fast::Buffers& B, const fast::Tile& t, int tid, int threads) {
  AsyncCopy copy;
  fast::LoadTileInputs<NW>(P, t, B.Unary(0), B.Sr(0), B.Sd(0), tid, threads, copy);
  __pipeline_commit();
  fast::FillStage<NW>(P, t, B.Stage(0), fast::kAllEdges, tid, threads);
  __pipeline_wait_prior(0);
  ComputeBarrier(threads);
}

struct NoHook {
  __device__ void operator()() const {}
};

// The inner iterations of one visit (every compute thread; a chain on fast::ChainLanes() threads).
// `rows_done` runs after the last horizontal chains and the barrier that follows them.
template <int NW, int F, class Hook = NoHook>
__device__ void Compute(const fast::Params& P, const fast::Buffers& B, const fast::Tile& t, int buf, Word* carry_stage,
                        int carry_edge, int tid, int threads, Hook rows_done = {}, fast::Mail mail = {}) {
  constexpr int kLanes = fast::ChainLanes(NW, F);
  for (int it = 0; it < P.inner; ++it) {
    const bool first = it == 0, last = it + 1 == P.inner;
    fast::ChainPhase<NW, F, kLanes>(P, t, B, buf, false, first, last, carry_stage, carry_edge, tid, mail);
    ComputeBarrier(threads);
    if (last) rows_done();
    fast::ChainPhase<NW, F, kLanes>(P, t, B, buf, true, first, last, carry_stage, carry_edge, tid);
    ComputeBarrier(threads);
  }
}

// Copies the message entering tile t by edge `edge` (left or right) from the mailbox into the staging buffer
// (thread lane of n) once each of its slots carries `stamp`: a thread polls one 16-byte pair of slots at a
// time. Polling several pairs per thread in one trip to L2 made the compiler schedule the compute threads'
// step loops worse (docs/bp.md); instead the block has loaders enough for one pair each on a tile-24 edge.
template <int NW>
__device__ void TakeMail(const fast::Params& P, const fast::Tile& t, Word* stage, int edge, int stamp, int lane,
                         int n) {
  constexpr int kPairs = NW / 2;
  const int pairs = fast::EdgeLines(t, edge) * kPairs;
  const long long start = clock64();
  for (int item = lane; item < pairs; item += n) {
    const int i = item / kPairs, q = item - i * kPairs;
    const std::uint64_t* slot = fast::MailSlot(P, t, edge, i, false) + 2 * q;
    std::uint64_t a, b;
    while (true) {
      asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(slot) : "memory");
      if (static_cast<int>(a >> 32) >= stamp && static_cast<int>(b >> 32) >= stamp) break;
      if (clock64() - start > kSpinLimit) {
        atomicExch(P.error, 1);
        break;
      }
    }
    Word* dst = stage + (static_cast<std::size_t>(edge) * P.tile + i) * NW + 2 * q;
    dst[0] = static_cast<Word>(a), dst[1] = static_cast<Word>(b);
  }
}

// The loader warps of a pipeline block (`loaders` threads; this one is `lane` of them): for visit n, once
// the compute threads freed its buffer set (after visit n - sets), the tile's unary costs and scales,
// then, once the neighbouring tile it depends on is done, the entering border messages (by tile columns with
// a mailbox: the mailed edges once their mail is posted, TakeMail); then they tell the compute threads
// (`all`: the threads of the Ready and Empty barriers).
template <int NW>
__device__ void LoaderWarps(fast::Walk walk, const fast::Params& P, const fast::PipelineBuffers& PB, int sweep_base,
                            int lane, int loaders, int all) {
  AsyncCopy copy;
  const int visits = fast::VisitsOfBlock(walk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y);
  for (int n = 0; n < visits; ++n) {
    const fast::Visit v = fast::VisitOfBlock(walk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y, n);
    const fast::Tile t = fast::MakeTile(P, v.tx, v.ty);
    const fast::Buffers B = PB.View(n);
    const int set = n % PB.sets;
    if (n >= PB.sets) BarSync(kBarEmpty + set, all);
    fast::LoadTileInputs<NW>(P, t, B.Unary(0), B.Sr(0), B.Sd(0), lane, loaders, copy);
    __pipeline_commit();
    const bool fresh = fast::FreshVisit(P, v);
    const unsigned edges = fast::kAllEdges & ~fast::EdgeBit(v.carried_edge);
    if (walk == fast::Walk::kColumns && P.mailbox) {
      // No tile counters: the edges from the border arrays first; then the mail, the left edge (posted
      // earlier) first.
      int stamps[4];
      const unsigned mailed = fast::MailedEdges(walk, P, v, t, sweep_base, stamps);
      fast::FillStage<NW>(P, t, B.Stage(0), edges & ~mailed, lane, loaders, fresh);
      if (fresh) fast::ClearOutgoing(P, t, lane, loaders);
      for (int e : {fast::kEdgeLeft, fast::kEdgeRight})
        if (mailed & fast::EdgeBit(e)) TakeMail<NW>(P, t, B.Stage(0), e, stamps[e], lane, loaders);
      __pipeline_wait_prior(0);
      __threadfence_block();
      BarArrive(kBarReady + set, all);
      continue;
    }
    // The edges that need no wait first, so that after the wait only the waited edges' loads remain.
    fast::LoaderWait waits[2];
    const int count = fast::LoaderWaits(walk, P, v, t, PB.sets, waits);
    unsigned waited = 0;
    for (int i = 0; i < count; ++i) waited |= fast::EdgeBit(waits[i].edge);
    fast::FillStage<NW>(P, t, B.Stage(0), edges & ~waited, lane, loaders, fresh);
    if (fresh) fast::ClearOutgoing(P, t, lane, loaders);
    if (lane % 32 == 0)  // each warp waits for itself
      for (int i = 0; i < count; ++i) WaitGlobal(&P.tile_done[waits[i].tile], sweep_base + waits[i].sweeps, P.error);
    __syncwarp();
    fast::FillStage<NW>(P, t, B.Stage(0), edges & waited, lane, loaders, fresh);
    __pipeline_wait_prior(0);
    __threadfence_block();
    BarArrive(kBarReady + set, all);
  }
}

// Every border message its neighbour reads is written (the caller's barrier): publish the tile's progress. The
// release store alone suffices: the barrier orders the other threads' border stores before this thread's
// store, and PTX release is cumulative (causality order is transitive), so a block that acquires the
// counter sees them. (A __threadfence() here relied on the same cumulativity, and cost a second fence.)
__device__ __forceinline__ void PublishTile(const fast::Params& P, const fast::Visit& v, int sweep_base) {
  StoreRelease(&P.tile_done[v.ty * P.tiles_x + v.tx], sweep_base + v.sweep + 1);
}

// The compute threads of a split block: crew 0 (threads [0, compute)) runs every visit's horizontal
// chains, crew 1 ([compute, 2 compute)) its vertical chains, tile counter and labels, one visit behind.
// The crews meet at one barrier per visit: crew 0 after visit n's horizontal chains, crew 1 after visit
// n - 1's vertical chains and labels; so crew 1 reads visit n's horizontal messages after they are
// written, and crew 0 overwrites a set of them (visit n + 1's) only after crew 1 read it (visit n - 1).
// Both crews reach that barrier at the same instruction (bar.sync is the aligned form: synccheck
// rejects it from two places, and the unaligned barrier.sync measured slower).
template <int NW, int F>
__device__ void SplitCrews(const fast::Params& P, const fast::PipelineBuffers& PB, int sweep_base, int compute) {
  constexpr int kLanes = fast::ChainLanes(NW, F);
  const bool vertical = threadIdx.x >= compute;
  const int tid = vertical ? threadIdx.x - compute : threadIdx.x;
  constexpr fast::Walk kWalk = fast::Walk::kRows;
  const int visits = fast::VisitsOfBlock(kWalk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y);
  for (int n = 0; n <= visits; ++n) {
    const int m = vertical ? n - 1 : n;  // the visit this crew works on
    if (m >= 0 && m < visits) {
      const fast::Visit v = fast::VisitOfBlock(kWalk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y, m);
      const fast::Tile t = fast::MakeTile(P, v.tx, v.ty);
      const fast::Buffers B = PB.View(m);
      const int set = m % PB.sets;
      if (!vertical) {
        BarSync(kBarReady + set, compute + kSplitLoaders);
        // The chains of one row read and write only their own words (the carried edge included), so the
        // crew needs no barrier of its own between visits.
        fast::ChainPhase<NW, F, kLanes>(P, t, B, 0, false, true, true, B.Stage(1), v.carry_edge, tid);
      } else {
        fast::ChainPhase<NW, F, kLanes>(P, t, B, 0, true, true, true, nullptr, -1, tid);
        ComputeBarrier(compute);
        if (tid == 0) PublishTile(P, v, sweep_base);
        if (v.sweep == 1) {
          fast::LabelPhase<NW>(P, t, B, 0, tid, compute);
          ComputeBarrier(compute);  // the next visit's vertical chains overwrite what the labels read
        }
        if (m + PB.sets < visits) BarArrive(kBarEmpty + set, compute + kSplitLoaders);
      }
    }
    if (n < visits) BarSync(kBarCrews, 2 * compute);
  }
}

template <int NW, int F>
__global__ void __launch_bounds__(MaxThreads(NW, fast::ChainLanes(NW, F)), 1)
    FastTileKernel(fast::Params P, int mode, int arg0, int arg1) {
  constexpr int kLanes = fast::ChainLanes(NW, F);
  extern __shared__ int4 shared_words[];
  const fast::Buffers B = fast::Carve(reinterpret_cast<Word*>(shared_words), P.tile, NW, P.row_stride);
  const int compute = ComputeThreads(P.tile, kLanes);
  const int tid = threadIdx.x;

  if (mode == kPipelineRows || mode == kPipelineColumns) {
    const fast::Walk walk = WalkOf(mode);
    const int sweep_base = arg0, all = compute + kPipelineLoaders;
    const fast::PipelineBuffers PB = fast::CarvePipeline(reinterpret_cast<Word*>(shared_words), P.tile, NW, P.row_stride, 2, 1);
    if (tid >= compute) {
      LoaderWarps<NW>(walk, P, PB, sweep_base, tid - compute, kPipelineLoaders, all);
      return;
    }
    const bool early = fast::PublishesEarly(walk);
    const int visits = fast::VisitsOfBlock(walk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y);
    for (int n = 0; n < visits; ++n) {
      const fast::Visit v = fast::VisitOfBlock(walk, blockIdx.x, gridDim.x, P.tiles_x, P.tiles_y, n);
      const fast::Tile t = fast::MakeTile(P, v.tx, v.ty);
      const fast::Buffers B = PB.View(n);
      const int set = n % PB.sets;
      BarSync(kBarReady + set, all);
      // With a mailbox no loader waits for the tile counters: the chains' mail is the handoff.
      const fast::Mail mail = fast::MailOf(walk, P, v, sweep_base);
      auto publish = [&] {
        if (tid == 0 && mail.edge < 0) PublishTile(P, v, sweep_base);
      };
      auto publish_early = [&] {
        if (early) publish();
      };
      Compute<NW, F>(P, B, t, 0, B.Stage(1), v.carry_edge, tid, compute, publish_early, mail);
      if (!early) publish();
      if (v.sweep == 1) fast::LabelPhase<NW>(P, t, B, 0, tid, compute);
      ComputeBarrier(compute);
      if (n + PB.sets < visits) BarArrive(kBarEmpty + set, all);
    }
    return;
  }

  const int diagonals = P.tiles_x + P.tiles_y - 1;
  const int steps = mode == kDiagonal ? 1 : 2 * diagonals;
  for (int step = 0; step < steps; ++step) {
    int d = arg0;
    bool labels = arg1 != 0;
    if (mode == kCooperative) {
      d = step < diagonals ? step : 2 * diagonals - 1 - step;
      labels = step >= diagonals;
    }
    const int begin = max(0, d - (P.tiles_y - 1)), end = min(d, P.tiles_x - 1) + 1;
    for (int tx = begin + blockIdx.x; tx < end; tx += gridDim.x) {
      const fast::Tile t = fast::MakeTile(P, tx, d - tx);
      LoadAll<NW>(P, B, t, tid, compute);
      Compute<NW, F>(P, B, t, 0, nullptr, -1, tid, compute);
      if (labels) {
        fast::LabelPhase<NW>(P, t, B, 0, tid, compute);
        ComputeBarrier(compute);
      }
    }
    if (mode == kCooperative) cg::this_grid().sync();
  }
}

// The split launch (mode kSplit; arg0: the sweeps run before; arg1 unused).
template <int NW, int F>
__global__ void __launch_bounds__(MaxSplitThreads(NW, fast::ChainLanes(NW, F)), 1)
    FastSplitKernel(fast::Params P, int mode, int arg0, int arg1) {
  constexpr int kLanes = fast::ChainLanes(NW, F);
  extern __shared__ int4 shared_words[];
  const int compute = ComputeThreads(P.tile, kLanes);
  const fast::PipelineBuffers PB = fast::CarvePipeline(reinterpret_cast<Word*>(shared_words), P.tile, NW, P.row_stride, 3, 2);
  if (threadIdx.x >= 2 * compute)
    LoaderWarps<NW>(fast::Walk::kRows, P, PB, arg0, threadIdx.x - 2 * compute, kSplitLoaders, compute + kSplitLoaders);
  else
    SplitCrews<NW, F>(P, PB, arg0, compute);
}

using Kernel = void (*)(fast::Params, int, int, int);

template <int NW, int F>
Kernel PickKernel(bool split) {
  return split ? FastSplitKernel<NW, F> : FastTileKernel<NW, F>;
}

template <int NW>
Kernel PickForm(int form, bool split) {
  switch (form) {
    case fast::kFormClamp: return PickKernel<NW, fast::kFormClamp>(split);
    case fast::kFormNeighbour: return PickKernel<NW, fast::kFormNeighbour>(split);
    case fast::kFormLinearDT: return PickKernel<NW, fast::kFormLinearDT>(split);
    default: return PickKernel<NW, fast::kFormQuadWindow>(split);
  }
}

// The fast kernel for `words` words per pixel and a form: the split launch's own kernel, or the one of
// every other launch.
Kernel Pick(int words, int form, bool split) {
  switch (words) {
    case 2: return PickForm<2>(form, split);
    case 4: return PickForm<4>(form, split);
    case 8: return PickForm<8>(form, split);
    default: return PickForm<16>(form, split);
  }
}

}  // namespace fastk

}  // namespace

}  // namespace mrf::bp
