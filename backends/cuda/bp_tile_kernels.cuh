#pragma once
/// @file bp_tile_kernels.cuh
/// @brief cuda-bp's general tile kernel (docs/bp.md, "The general kernel"): vector access of C labels, a message
/// on the G lanes of a group, a chain, a tile visit in shared memory, and the diagonal and cooperative launches.
/// Included only by bp_cuda.cu: cuda-bp is one translation unit, so its kernels need no host wrappers.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/common/bp_engine.h"

namespace cg = cooperative_groups;

namespace mrf::bp {

namespace {

// ---- Vector access of C consecutive labels ---------------------------------------------------------

template <int C>
__device__ __forceinline__ void Load(Cost (&v)[C], const Cost* p) {
  p = static_cast<const Cost*>(__builtin_assume_aligned(p, 4 * (C < 4 ? C : 4)));
  if constexpr (C == 2) {
    const int2 t = *reinterpret_cast<const int2*>(p);
    v[0] = t.x, v[1] = t.y;
  } else {
#pragma unroll
    for (int k = 0; k < C; k += 4) {
      const int4 t = *reinterpret_cast<const int4*>(p + k);
      v[k] = t.x, v[k + 1] = t.y, v[k + 2] = t.z, v[k + 3] = t.w;
    }
  }
}

template <int C>
__device__ __forceinline__ void Store(Cost* p, const Cost (&v)[C]) {
  p = static_cast<Cost*>(__builtin_assume_aligned(p, 4 * (C < 4 ? C : 4)));
  if constexpr (C == 2) {
    *reinterpret_cast<int2*>(p) = make_int2(v[0], v[1]);
  } else {
#pragma unroll
    for (int k = 0; k < C; k += 4) *reinterpret_cast<int4*>(p + k) = make_int4(v[k], v[k + 1], v[k + 2], v[k + 3]);
  }
}

// Loads C ints from global memory written by other blocks of the same kernel: L2 only (no stale L1).
template <int C>
__device__ __forceinline__ void LoadCoherent(Cost (&v)[C], const Cost* p) {
  if constexpr (C == 2) {
    const int2 t = __ldcg(reinterpret_cast<const int2*>(p));
    v[0] = t.x, v[1] = t.y;
  } else {
#pragma unroll
    for (int k = 0; k < C; k += 4) {
      const int4 t = __ldcg(reinterpret_cast<const int4*>(p + k));
      v[k] = t.x, v[k + 1] = t.y, v[k + 2] = t.z, v[k + 3] = t.w;
    }
  }
}

// ---- The tiled kernel ------------------------------------------------------------------------------

struct TileParams {
  const Cost* unary;        // N x Lp, padded labels hold 0
  const Cost* scale_right;  // N
  const Cost* scale_down;   // N
  PairwiseParams pw;        // table points to device memory
  int width, height, L, Lp, G;
  int tile, tiles_x, tiles_y, row_stride, inner;
  int envelope, window, scratch_per_chain;
  int linear_window;  // truncated linear: window radius r (< 8) or -1 for the distance transform
  Cost* border_right;  // border messages, Lp per message (layout of BorderMessages)
  Cost* border_left;
  Cost* border_down;
  Cost* border_up;
  Label* labels;
  int* changed;
};

// Every lane of a warp runs every chain step (idle groups predicated), so warp primitives name the
// whole warp: lanes with different masks in one warp would split it into separately issued groups.
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ Cost GroupMin(Cost v, unsigned mask, int G) {
  for (int offset = 1; offset < G; offset <<= 1) v = min(v, __shfl_xor_sync(mask, v, offset, G));
  return v;
}

__device__ __forceinline__ Cost ClampedStep(Cost slope, int distance, Cost cap) {
  return static_cast<Cost>(Min64(static_cast<std::int64_t>(slope) * distance, cap));
}

// One message of a chain, computed by the G lanes of a group, C labels each. `h` holds the sender's
// sums (kInfiniteCost at padded labels); `out` receives the normalised message (padded labels: junk).
// Equal to ComputeMessage() (bp_message.h), which the quadratic envelope calls directly. Idle groups
// (`active` false, the same for all lanes of a group) take part in the warp's shuffles and barriers but
// never touch their scratch.
template <int C, int Kind>
__device__ __forceinline__ void MessageStep(const TileParams& P, const int G, const int L, const Cost (&h)[C],
                                            Cost scale, bool reverse, Cost (&out)[C], Cost* scratch, bool active,
                                            int lane) {
  constexpr unsigned mask = kFullWarp;
  Cost mn = h[0];
#pragma unroll
  for (int c = 1; c < C; ++c) mn = min(mn, h[c]);
  mn = GroupMin(mn, mask, G);
  if constexpr (Kind == kTableMessage) {
    if (active) {
#pragma unroll
      for (int c = 0; c < C; ++c) scratch[lane * C + c] = h[c] - mn;
    }
    __syncwarp(mask);
    Cost lowest = kInfiniteCost;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int b = lane * C + c;
      out[c] = kInfiniteCost;
      if (active && b < L) {
        std::int64_t best = INT64_MAX;
        for (int a = 0; a < L; ++a) {
          const Cost d = reverse ? __ldg(&P.pw.table[b * L + a]) : __ldg(&P.pw.table[a * L + b]);
          best = Min64(best, static_cast<std::int64_t>(scratch[a]) + static_cast<std::int64_t>(scale) * d);
        }
        out[c] = static_cast<Cost>(best);
      }
      lowest = min(lowest, out[c]);
    }
    lowest = GroupMin(lowest, mask, G);
#pragma unroll
    for (int c = 0; c < C; ++c) out[c] -= lowest;
    __syncwarp(mask);  // the scratch is rewritten by the next step
    return;
  }
  const Cost cap = MessageCap(P.pw, scale);
#pragma unroll
  for (int c = 0; c < C; ++c) out[c] = min(h[c] - mn, cap);
  if constexpr (Kind == kPottsMessage) return;
  // No early return when cap == 0 (a zero-weight edge, an idle group): the warp's shuffles below need
  // every lane; with cap 0 every path below leaves the zeros unchanged.
  if constexpr (Kind == kLinearMessage) {
    const Cost slope = min(scale, cap);
    const int r = P.linear_window;
    if (r == 0) return;  // truncation 1: the clamped values are the message
    if (r == 1) {        // truncation 2: each label looks at its two neighbours (the last lane's come by shuffle)
      const Cost before = __shfl_up_sync(mask, out[C - 1], 1, G);
      const Cost after = __shfl_down_sync(mask, out[0], 1, G);
      Cost f[C];
#pragma unroll
      for (int c = 0; c < C; ++c) f[c] = out[c];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const Cost left = c > 0 ? f[c - 1] : (lane > 0 ? before : cap);
        const Cost right = c + 1 < C ? f[c + 1] : (lane + 1 < G ? after : cap);
        out[c] = min(f[c], min(left, right) + slope);
      }
      return;
    }
    if (r > 1) {  // a short window through the chain's scratch
      if (active) {
#pragma unroll
        for (int c = 0; c < C; ++c) scratch[lane * C + c] = out[c];
      }
      __syncwarp(mask);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int b = lane * C + c;
        if (b >= L || !active) continue;
        Cost best = out[c];
        for (int d = 1; d <= r; ++d) {
          if (b - d >= 0) best = min(best, scratch[b - d] + slope * d);
          if (b + d < L) best = min(best, scratch[b + d] + slope * d);
        }
        out[c] = best;
      }
      __syncwarp(mask);
      return;
    }
    // Forward: inside the lane, then a min-plus scan of lane tails across the group, then the carry.
#pragma unroll
    for (int c = 1; c < C; ++c) out[c] = min(out[c], out[c - 1] + slope);
    Cost tail = out[C - 1];
    for (int d = 1; d < G; d <<= 1) {
      const Cost other = __shfl_up_sync(mask, tail, d, G);
      if (lane >= d) tail = min(tail, other + ClampedStep(slope, C * d, cap));
    }
    Cost carry = __shfl_up_sync(mask, tail, 1, G);
    if (lane >= 1) {
      out[0] = min(out[0], carry + slope);
#pragma unroll
      for (int c = 1; c < C; ++c) out[c] = min(out[c], out[c - 1] + slope);
    }
    // Backward, mirrored.
#pragma unroll
    for (int c = C - 2; c >= 0; --c) out[c] = min(out[c], out[c + 1] + slope);
    Cost head = out[0];
    for (int d = 1; d < G; d <<= 1) {
      const Cost other = __shfl_down_sync(mask, head, d, G);
      if (lane + d < G) head = min(head, other + ClampedStep(slope, C * d, cap));
    }
    carry = __shfl_down_sync(mask, head, 1, G);
    if (lane + 1 < G) {
      out[C - 1] = min(out[C - 1], carry + slope);
#pragma unroll
      for (int c = C - 2; c >= 0; --c) out[c] = min(out[c], out[c + 1] + slope);
    }
    return;
  }
  if constexpr (Kind == kQuadraticMessage) {
    const int Lp = P.Lp;
    if (active) {
#pragma unroll
      for (int c = 0; c < C; ++c) scratch[lane * C + c] = out[c];
    }
    __syncwarp(mask);
    if (!P.envelope) {
      const int r = P.window;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int b = lane * C + c;
        if (b >= L || !active) continue;
        Cost best = out[c];
        for (int d = 1; d <= r; ++d) {
          const Cost step = static_cast<Cost>(static_cast<std::int64_t>(scale) * d * d);
          if (b - d >= 0) best = min(best, scratch[b - d] + step);
          if (b + d < L) best = min(best, scratch[b + d] + step);
        }
        out[c] = best;
      }
    } else {
      if (active && lane == 0 && cap > 0)  // cap 0: scale 0, the message is the zeros already in out
        QuadraticEnvelope(scratch, scratch + 3 * Lp, L, scale, cap, scratch + Lp, scratch + 2 * Lp);
      __syncwarp(mask);
      if (active && cap > 0) {
#pragma unroll
        for (int c = 0; c < C; ++c) out[c] = scratch[3 * Lp + lane * C + c];
      }
    }
    __syncwarp(mask);
  }
}

// One chain: `steps` messages along a tile row or column. The chain's own incoming messages live in
// `own` (it carries the latest in registers), `o1` and `o2` hold the two crossing directions.
struct Chain {
  Cost* own;
  const Cost* o1;
  const Cost* o2;
  int offset, stride;          // first pixel and step between pixels, in ints of the tile arrays
  int length, steps;           // pixels of the tile line; messages to send (length or length - 1)
  const Cost* scale;           // scale of the first message, in shared memory
  int scale_stride;
  bool reverse;                // receiver is the edge's first node
  Cost* border;                // where the message leaving the tile goes (when steps == length)
};

// Every group of the block runs `trips` steps (the tile's line length, the same for all groups) so
// that warps stay converged; a group works only while it has a chain and a message left to send.
template <int C, int Kind>
__device__ __forceinline__ void RunChain(const TileParams& P, const int G, const int L, const Cost* unary,
                                         const Chain& ch, bool has_chain, int trips, bool write_border,
                                         Cost* scratch, int lane) {
  const int first = lane * C;
  Cost m[C], d[C], a[C], b[C];
#pragma unroll
  for (int c = 0; c < C; ++c) m[c] = d[c] = a[c] = b[c] = 0;
  if (has_chain) Load<C>(m, ch.own + ch.offset + first);
  int offset = ch.offset;
  const Cost* scale = ch.scale;
  if (has_chain && ch.steps > 0) {
    Load<C>(d, unary + offset + first);
    Load<C>(a, ch.o1 + offset + first);
    Load<C>(b, ch.o2 + offset + first);
  }
  for (int i = 0; i < trips; ++i) {
    const bool active = has_chain && i < ch.steps;
    Cost h[C], out[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const Cost base = d[c] + a[c] + b[c];  // independent of the chain: off the critical path
      h[c] = !active ? 0 : first + c < L ? base + m[c] : kInfiniteCost;
    }
    const Cost s = active ? *scale : 0;
    // The next pixel's inputs do not depend on this message (other arrays): load them now.
    if (active && i + 1 < ch.steps) {
      const int next = offset + ch.stride + first;
      Load<C>(d, unary + next);
      Load<C>(a, ch.o1 + next);
      Load<C>(b, ch.o2 + next);
    }
    MessageStep<C, Kind>(P, G, L, h, s, ch.reverse, out, scratch, active, lane);
    if (active) {
      if (i + 1 < ch.length) {
        Store<C>(ch.own + offset + ch.stride + first, out);
#pragma unroll
        for (int c = 0; c < C; ++c) m[c] = out[c];
      } else if (write_border) {
        bool differs = false;
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (first + c < L) {
            differs |= __ldcg(ch.border + first + c) != out[c];
            __stcg(ch.border + first + c, out[c]);
          }
        if (differs) *P.changed = 1;
      }
    }
    offset += ch.stride;
    scale += ch.scale_stride;
  }
}

// Starts the asynchronous copies of a tile's unary costs and edge scales into shared memory (they do not
// depend on other tiles, so a block may issue them before waiting for the previous diagonal).
template <int C>
__device__ void IssueTileLoads(const TileParams& P, Cost* smem, int tx, int ty) {
  const int T = P.tile, W = P.width, H = P.height, Lp = P.Lp, rs = P.row_stride;
  const int x0 = tx * T, y0 = ty * T, tw = min(T, W - x0), th = min(T, H - y0);
  Cost* unary = smem;
  Cost* sr = smem + 5 * T * rs;
  Cost* sd = sr + T * (T + 1);
  constexpr int kUnit = C >= 4 ? 4 : 2;  // ints per copy: 16 or 8 bytes, aligned since Lp is a multiple of C
  const int units = Lp / kUnit;
  for (int i = threadIdx.x; i < tw * th * units; i += blockDim.x) {
    const int pixel = i / units, k = (i - pixel * units) * kUnit;
    const int y = pixel / tw, x = pixel - y * tw;
    __pipeline_memcpy_async(unary + y * rs + x * Lp + k,
                            P.unary + (static_cast<std::size_t>(y0 + y) * W + x0 + x) * Lp + k, kUnit * sizeof(Cost));
  }
  for (int i = threadIdx.x; i < th * (tw + 1); i += blockDim.x) {
    const int y = i / (tw + 1), x = i - y * (tw + 1) - 1;
    Cost* dst = sr + y * (T + 1) + x + 1;
    if (x0 + x >= 0)
      __pipeline_memcpy_async(dst, P.scale_right + static_cast<std::size_t>(y0 + y) * W + x0 + x, sizeof(Cost));
    else
      *dst = 0;
  }
  for (int i = threadIdx.x; i < (th + 1) * tw; i += blockDim.x) {
    const int y = i / tw - 1, x = i - (y + 1) * tw;
    Cost* dst = sd + (y + 1) * T + x;
    if (y0 + y >= 0)
      __pipeline_memcpy_async(dst, P.scale_down + static_cast<std::size_t>(y0 + y) * W + x0 + x, sizeof(Cost));
    else
      *dst = 0;
  }
  __pipeline_commit();
}

// One visit of tile (tx, ty) by the whole block: load, inner BP-M iterations, borders out, labels.
template <int C, int Kind>
__device__ void VisitTile(const TileParams& P, Cost* smem, int tx, int ty, bool write_labels, bool loads_issued) {
  const int T = P.tile, W = P.width, H = P.height, Lp = P.Lp, L = P.L, rs = P.row_stride;
  const int x0 = tx * T, y0 = ty * T, tw = min(T, W - x0), th = min(T, H - y0);
  const int area = T * rs;
  Cost* unary = smem;
  Cost* fl = smem + area;  // messages into a tile pixel from the left, right, above, below
  Cost* fr = fl + area;
  Cost* fu = fr + area;
  Cost* fd = fu + area;
  Cost* sr = fd + area;           // sr[y (T + 1) + x + 1]: scale of the edge (x, y) -> (x + 1, y), x >= -1
  Cost* sd = sr + T * (T + 1);    // sd[(y + 1) T + x]: scale of the edge (x, y) -> (x, y + 1), y >= -1
  Cost* chain_scratch = sd + T * (T + 1);
  const bool has_left = tx > 0, has_right = tx + 1 < P.tiles_x, has_up = ty > 0, has_down = ty + 1 < P.tiles_y;

  // 1. Unary costs and scales arrive by asynchronous copies (issued here or before the last barrier).
  // Inner messages start at 0; messages entering the tile come from the neighbours' last visits.
  // Chains write every inner message from the left / right before it is read, so only the entering
  // column of those is set; the vertical arrays are read first and set entirely.
  if (!loads_issued) IssueTileLoads<C>(P, smem, tx, ty);
  const int chunks = Lp / C, items = tw * th * chunks;
  for (int i = threadIdx.x; i < items; i += blockDim.x) {
    const int pixel = i / chunks, label = (i - pixel * chunks) * C;
    const int y = pixel / tw, x = pixel - y * tw;
    const int s = y * rs + x * Lp + label;
    Cost up[C], down[C];
#pragma unroll
    for (int c = 0; c < C; ++c) up[c] = down[c] = 0;
    if (y == 0 && has_up)
      LoadCoherent<C>(up, P.border_down + (static_cast<std::size_t>(ty - 1) * W + x0 + x) * Lp + label);
    if (y == th - 1 && has_down)
      LoadCoherent<C>(down, P.border_up + (static_cast<std::size_t>(ty) * W + x0 + x) * Lp + label);
    Store<C>(fu + s, up);
    Store<C>(fd + s, down);
  }
  for (int i = threadIdx.x; i < 2 * th * chunks; i += blockDim.x) {
    const bool left_column = i < th * chunks;
    const int j = left_column ? i : i - th * chunks;
    const int y = j / chunks, label = (j - y * chunks) * C;
    Cost v[C];
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = 0;
    if (left_column) {
      if (has_left) LoadCoherent<C>(v, P.border_right + (static_cast<std::size_t>(tx - 1) * H + y0 + y) * Lp + label);
      Store<C>(fl + y * rs + label, v);
    } else {
      if (has_right) LoadCoherent<C>(v, P.border_left + (static_cast<std::size_t>(tx) * H + y0 + y) * Lp + label);
      Store<C>(fr + y * rs + (tw - 1) * Lp + label, v);
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();

  // 2. Inner iterations: right and left chains (independent), then down and up chains. Every group of
  // the block enters both phases (see RunChain); groups beyond the tile's lines stay idle.
  const int G = P.G, group = threadIdx.x / G, lane = threadIdx.x % G;
  Cost* scratch = chain_scratch + min(group, 2 * T - 1) * P.scratch_per_chain;  // idle groups never use it
  for (int it = 0; it < P.inner; ++it) {
    const bool last = it + 1 == P.inner;
    {
      const bool has_chain = group < 2 * th, right = group < th;
      const int y = right ? group : has_chain ? group - th : 0;
      Chain ch;
      ch.o1 = fu;
      ch.o2 = fd;
      ch.length = tw;
      ch.stride = right ? Lp : -Lp;
      ch.scale_stride = right ? 1 : -1;
      ch.reverse = !right;
      if (right) {
        ch.own = fl;
        ch.offset = y * rs;
        ch.steps = x0 + tw < W ? tw : tw - 1;
        ch.scale = sr + y * (T + 1) + 1;
        ch.border = P.border_right + (static_cast<std::size_t>(tx) * H + y0 + y) * Lp;
      } else {
        ch.own = fr;
        ch.offset = y * rs + (tw - 1) * Lp;
        ch.steps = x0 > 0 ? tw : tw - 1;
        ch.scale = sr + y * (T + 1) + tw - 1;
        ch.border = has_left ? P.border_left + (static_cast<std::size_t>(tx - 1) * H + y0 + y) * Lp : nullptr;
      }
      RunChain<C, Kind>(P, G, L, unary, ch, has_chain, tw, last, scratch, lane);
    }
    __syncthreads();
    {
      const bool has_chain = group < 2 * tw, down = group < tw;
      const int x = down ? group : has_chain ? group - tw : 0;
      Chain ch;
      ch.o1 = fl;
      ch.o2 = fr;
      ch.length = th;
      ch.stride = down ? rs : -rs;
      ch.scale_stride = down ? T : -T;
      ch.reverse = !down;
      if (down) {
        ch.own = fu;
        ch.offset = x * Lp;
        ch.steps = y0 + th < H ? th : th - 1;
        ch.scale = sd + T + x;
        ch.border = P.border_down + (static_cast<std::size_t>(ty) * W + x0 + x) * Lp;
      } else {
        ch.own = fd;
        ch.offset = (th - 1) * rs + x * Lp;
        ch.steps = y0 > 0 ? th : th - 1;
        ch.scale = sd + (th - 1) * T + x;
        ch.border = has_up ? P.border_up + (static_cast<std::size_t>(ty - 1) * W + x0 + x) * Lp : nullptr;
      }
      RunChain<C, Kind>(P, G, L, unary, ch, has_chain, th, last, scratch, lane);
    }
    __syncthreads();
  }

  // 3. Labels: the least belief, ties to the smallest label (all groups loop the same number of times).
  if (write_labels) {
    const int groups = blockDim.x / G;
    for (int base = 0; base < tw * th; base += groups) {
      const int pixel = base + group;
      const bool active = pixel < tw * th;
      const int y = active ? pixel / tw : 0, x = active ? pixel - y * tw : 0;
      const int s = y * rs + x * Lp + lane * C;
      Cost best = kInfiniteCost;
      int best_label = L;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int l = lane * C + c;
        if (active && l < L) {
          const Cost v = unary[s + c] + fl[s + c] + fr[s + c] + fu[s + c] + fd[s + c];
          if (v < best) best = v, best_label = l;
        }
      }
      for (int offset = 1; offset < G; offset <<= 1) {
        const Cost v = __shfl_xor_sync(kFullWarp, best, offset, G);
        const int l = __shfl_xor_sync(kFullWarp, best_label, offset, G);
        if (v < best || (v == best && l < best_label)) best = v, best_label = l;
      }
      if (active && lane == 0) P.labels[static_cast<std::size_t>(y0 + y) * W + x0 + x] = best_label;
    }
  }
  __syncthreads();  // the shared arrays are reused by the block's next tile
}

__device__ __forceinline__ void DiagonalRange(const TileParams& P, int d, int* begin, int* end) {
  *begin = max(0, d - (P.tiles_y - 1));
  *end = min(d, P.tiles_x - 1) + 1;
}

template <int C, int Kind>
__global__ void __launch_bounds__(kMaxTileThreads, 1) TileDiagonalKernel(TileParams P, int diagonal, int write_labels) {
  extern __shared__ int4 shared_words[];
  Cost* smem = reinterpret_cast<Cost*>(shared_words);
  int begin, end;
  DiagonalRange(P, diagonal, &begin, &end);
  for (int tx = begin + blockIdx.x; tx < end; tx += gridDim.x)
    VisitTile<C, Kind>(P, smem, tx, diagonal - tx, write_labels, false);
}

// One outer iteration in one launch: a grid barrier between diagonals (all blocks are resident).
template <int C, int Kind>
__global__ void __launch_bounds__(kMaxTileThreads, 1) TileCooperativeKernel(TileParams P) {
  extern __shared__ int4 shared_words[];
  Cost* smem = reinterpret_cast<Cost*>(shared_words);
  cg::grid_group grid = cg::this_grid();
  const int diagonals = P.tiles_x + P.tiles_y - 1;
  bool prefetched = false;
  for (int step = 0; step < 2 * diagonals; ++step) {  // forward sweep, then reverse sweep
    const int d = step < diagonals ? step : 2 * diagonals - 1 - step;
    int begin, end;
    DiagonalRange(P, d, &begin, &end);
    for (int tx = begin + blockIdx.x; tx < end; tx += gridDim.x) {
      VisitTile<C, Kind>(P, smem, tx, d - tx, step >= diagonals, prefetched);
      prefetched = false;
      // This block's next tile: its unary costs and scales load while the grid waits at the barrier.
      int next_tx = tx + static_cast<int>(gridDim.x), next_d = d;
      if (next_tx >= end && step + 1 < 2 * diagonals) {
        next_d = step + 1 < diagonals ? step + 1 : 2 * diagonals - 2 - step;
        int next_begin, next_end;
        DiagonalRange(P, next_d, &next_begin, &next_end);
        const int candidate = next_begin + static_cast<int>(blockIdx.x);
        next_tx = candidate < next_end ? candidate : -1;
      } else if (next_tx >= end) {
        next_tx = -1;
      }
      if (next_tx >= 0) {
        IssueTileLoads<C>(P, smem, next_tx, next_d - next_tx);
        prefetched = true;
      }
    }
    grid.sync();
  }
}

}  // namespace

}  // namespace mrf::bp
