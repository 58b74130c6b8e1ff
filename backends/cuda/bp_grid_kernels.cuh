#pragma once
/// @file bp_grid_kernels.cuh
/// @brief cuda-bp's kernels over the whole grid: the synchronous schedule, labels, energy, the coarse-to-fine
/// start, and the preparation of a level's unary costs. Included only by bp_cuda.cu: cuda-bp is one translation
/// unit, so its kernels need no host wrappers.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"
#include "backends/cuda/bp_tile_kernels.cuh"  // TileParams

namespace mrf::bp {

namespace {

// ---- Synchronous schedule, labels, energy, coarse-to-fine -------------------------------------------

struct GridParams {
  const Cost* unary;  // N x Lp
  const Cost* scale_right;
  const Cost* scale_down;
  PairwiseParams pw;
  int width, height, L, Lp;
  int scratch_stride;  // ints of message scratch per thread (MessageScratchNeeded)
};

// Messages by receiver, N x Lp each: 0 from the left, 1 from the right, 2 from above, 3 from below.
struct Messages {
  Cost* m[4];
};

// One thread per (node, direction): every message from the previous iteration's messages. With
// `skip_if_zero` pointing at the previous iteration's change flag, an iteration after one that changed
// nothing does nothing: both message generations then hold the same messages, so the result equals
// stopping there (as the CPU does) without a round trip to the host.
__global__ void SyncKernel(GridParams P, Messages old_m, Messages new_m, Cost* hbuf, int* scratch, int* changed,
                           const int* skip_if_zero) {
  if (skip_if_zero && *skip_if_zero == 0) return;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t n = static_cast<std::int64_t>(P.width) * P.height;
  if (t >= 4 * n) return;
  const int dir = static_cast<int>(t % 4);
  const int node = static_cast<int>(t / 4), x = node % P.width, y = node / P.width;
  int target, from, scale_node;
  bool reverse;
  switch (dir) {
    case 0: if (x + 1 >= P.width) return; target = node + 1; from = 0; scale_node = node; reverse = false; break;
    case 1: if (x == 0) return; target = node - 1; from = 1; scale_node = node - 1; reverse = true; break;
    case 2: if (y + 1 >= P.height) return; target = node + P.width; from = 2; scale_node = node; reverse = false; break;
    default: if (y == 0) return; target = node - P.width; from = 3; scale_node = node - P.width; reverse = true; break;
  }
  // h excludes the message from the receiver: sending right excludes "from the right", and so on.
  const int exclude = from ^ 1;
  const std::size_t base = static_cast<std::size_t>(node) * P.Lp;
  Cost* h = hbuf + t * P.Lp;
  for (int l = 0; l < P.L; ++l) {
    Cost v = P.unary[base + l];
    for (int k = 0; k < 4; ++k)
      if (k != exclude) v += old_m.m[k][base + l];
    h[l] = v;
  }
  const Cost scale = dir < 2 ? P.scale_right[scale_node] : P.scale_down[scale_node];
  Cost* out = new_m.m[from] + static_cast<std::size_t>(target) * P.Lp;
  ComputeMessage(P.pw, scale, reverse, h, out, scratch ? scratch + t * P.scratch_stride : nullptr);
  const Cost* before = old_m.m[from] + static_cast<std::size_t>(target) * P.Lp;
  for (int l = 0; l < P.L; ++l)
    if (out[l] != before[l]) {
      *changed = 1;
      break;
    }
}

__global__ void GridLabelsKernel(GridParams P, Messages m, Label* labels) {
  const int node = blockIdx.x * blockDim.x + threadIdx.x;
  if (node >= P.width * P.height) return;
  const std::size_t base = static_cast<std::size_t>(node) * P.Lp;
  Cost best = kInfiniteCost;
  int best_label = 0;
  for (int l = 0; l < P.L; ++l) {
    const Cost v = P.unary[base + l] + m.m[0][base + l] + m.m[1][base + l] + m.m[2][base + l] + m.m[3][base + l];
    if (v < best) best = v, best_label = l;
  }
  labels[node] = best_label;
}

// Sum of shifted unary and pairwise terms (the offset is added on the host): the reference evaluator's
// arithmetic, exact in 64 bits (unsigned wrap-around adds signed values correctly).
__global__ void EnergyKernel(GridParams P, const Label* labels, unsigned long long* sum) {
  const int node = blockIdx.x * blockDim.x + threadIdx.x;
  std::int64_t e = 0;
  if (node < P.width * P.height) {
    const int x = node % P.width, y = node / P.width, a = labels[node];
    e = P.unary[static_cast<std::size_t>(node) * P.Lp + a];
    if (x + 1 < P.width) e += PairwiseCost(P.pw, P.scale_right[node], a, labels[node + 1]);
    if (y + 1 < P.height) e += PairwiseCost(P.pw, P.scale_down[node], a, labels[node + P.width]);
  }
  for (int offset = 16; offset > 0; offset >>= 1) e += __shfl_xor_sync(0xffffffffu, e, offset);
  if ((threadIdx.x & 31) == 0 && e != 0) atomicAdd(sum, static_cast<unsigned long long>(e));
}

// A fine node receives from each direction what its coarse parent receives (0 where it has no
// neighbour in that direction). Every padded label is written too (the parent's, 0), so that the
// fine level's first generation is written whole.
__global__ void UpsampleKernel(Messages coarse, int coarse_width, Messages fine, int width, int height, int Lp) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= static_cast<std::int64_t>(width) * height * Lp) return;
  const int l = static_cast<int>(t % Lp);
  const int node = static_cast<int>(t / Lp), x = node % width, y = node / width;
  const std::size_t dst = static_cast<std::size_t>(node) * Lp + l;
  const std::size_t src = (static_cast<std::size_t>(y / 2) * coarse_width + x / 2) * Lp + l;
  fine.m[0][dst] = x > 0 ? coarse.m[0][src] : 0;
  fine.m[1][dst] = x + 1 < width ? coarse.m[1][src] : 0;
  fine.m[2][dst] = y > 0 ? coarse.m[2][src] : 0;
  fine.m[3][dst] = y + 1 < height ? coarse.m[3][src] : 0;
}

// Tiled start of coarse-to-fine: each border message is what the receiver's coarse parent receives
// (every padded label too: the parent's, 0, so that the border messages are written whole).
__global__ void BordersFromCoarseKernel(Messages coarse, int coarse_width, TileParams P) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const int Lp = P.Lp, W = P.width, H = P.height, T = P.tile;
  const std::int64_t vertical = static_cast<std::int64_t>(P.tiles_x - 1) * H * Lp;
  const std::int64_t horizontal = static_cast<std::int64_t>(P.tiles_y - 1) * W * Lp;
  auto parent = [&](int x, int y) { return (static_cast<std::size_t>(y / 2) * coarse_width + x / 2) * Lp; };
  if (t < vertical) {
    const int l = static_cast<int>(t % Lp);
    const std::int64_t slot = t / Lp;
    const int border = static_cast<int>(slot / H) + 1, y = static_cast<int>(slot % H);
    P.border_right[slot * Lp + l] = coarse.m[0][parent(border * T, y) + l];
    P.border_left[slot * Lp + l] = coarse.m[1][parent(border * T - 1, y) + l];
  } else if (t < vertical + horizontal) {
    const std::int64_t u = t - vertical;
    const int l = static_cast<int>(u % Lp);
    const std::int64_t slot = u / Lp;
    const int border = static_cast<int>(slot / W) + 1, x = static_cast<int>(slot % W);
    P.border_down[slot * Lp + l] = coarse.m[2][parent(x, border * T) + l];
    P.border_up[slot * Lp + l] = coarse.m[3][parent(x, border * T - 1) + l];
  }
}

// ---- A level's unary costs: shifted, padded, coarsened, packed -------------------------------------

// The kernels below give each node a warp whose lanes take its labels in turn, so that a warp's loads are
// consecutive (a thread per node strided Lp costs apart cost Aloe's start 42 ms more: docs/bp.md).
__device__ __forceinline__ std::int64_t NodeOfWarp() {
  return (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
}

// The fine level's costs as the model has them, shifted in place so that each node's minimum is 0 (the
// host measured the minima's sum and the spreads: PrepareProblemWithoutCosts).
__global__ void ShiftUnaryKernel(Cost* unary, std::int64_t nodes, int L, int Lp) {
  const std::int64_t node = NodeOfWarp();
  if (node >= nodes) return;  // the whole warp: one node per warp
  const int lane = threadIdx.x % 32;
  Cost* u = unary + node * Lp;
  Cost lo = kMaxCost;
  for (int l = lane; l < L; l += 32) lo = min(lo, u[l]);
  for (int offset = 16; offset > 0; offset /= 2) lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
  for (int l = lane; l < L; l += 32) u[l] -= lo;
}

// `slots` padded costs from their unpadded pieces: a node's L costs, then zeros up to Lp. A thread per slot,
// so that reads and writes are both consecutive.
__global__ void PadUnaryKernel(const Cost* costs, std::int64_t slots, int L, int Lp, Cost* padded) {
  const std::int64_t slot = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (slot >= slots) return;
  const std::int64_t node = slot / Lp;
  const int l = static_cast<int>(slot % Lp);
  padded[slot] = l < L ? costs[node * L + l] : 0;
}

// A coarse level's unary costs from the finer level's, as CoarsenProblem sums them on the host: a coarse
// node adds its (up to) 2 x 2 children's costs and V(a, a) of the edges inside its block (tables only),
// then shifts its minimum to 0; padded labels get 0. Summing here spares the host's pass and the upload of
// every coarser level (docs/bp.md).
__global__ void CoarsenUnaryKernel(const Cost* fine, const Cost* fine_right, const Cost* fine_down, int W, int H,
                                   int CW, int CH, int L, int Lp, int kind, const Cost* table, Cost* coarse) {
  const std::int64_t node = NodeOfWarp();
  if (node >= static_cast<std::int64_t>(CW) * CH) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  const int cx = static_cast<int>(node % CW), cy = static_cast<int>(node / CW);
  const int x1 = min(2 * cx + 2, W), y1 = min(2 * cy + 2, H);
  auto raw = [&](int l) {
    std::int64_t sum = 0;
    for (int y = 2 * cy; y < y1; ++y)
      for (int x = 2 * cx; x < x1; ++x) sum += fine[(static_cast<std::int64_t>(y) * W + x) * Lp + l];
    if (kind == kTableMessage) {
      const std::int64_t self = table[static_cast<std::int64_t>(l) * L + l];
      if (2 * cx + 1 < W)  // the block's horizontal edges
        for (int y = 2 * cy; y < y1; ++y) sum += self * fine_right[static_cast<std::int64_t>(y) * W + 2 * cx];
      if (2 * cy + 1 < H)  // its vertical edges
        for (int x = 2 * cx; x < x1; ++x) sum += self * fine_down[static_cast<std::int64_t>(2 * cy) * W + x];
    }
    return sum;
  };
  std::int64_t lo = INT64_MAX;
  for (int l = lane; l < L; l += 32) lo = min(lo, raw(l));
  for (int offset = 16; offset > 0; offset /= 2) lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
  Cost* out = coarse + node * Lp;
  for (int l = lane; l < Lp; l += 32) out[l] = l < L ? static_cast<Cost>(raw(l) - lo) : 0;
}

// The fast kernel's unary costs, two labels per word, from the level's padded 32-bit ones (Lp = 2 x words);
// padded labels take `pad_cost`. Packed on the device: on the host it was a pass over every cost and a
// second upload.
__global__ void PackUnaryKernel(const Cost* unary, int L, int words, int pad_cost, std::int64_t count,
                                fast::Word* packed) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= count) return;
  const std::int64_t node = t / words;
  const int w = static_cast<int>(t % words);
  const Cost* u = unary + node * 2 * words;
  packed[t] = fast::Pack(2 * w < L ? u[2 * w] : pad_cost, 2 * w + 1 < L ? u[2 * w + 1] : pad_cost);
}

}  // namespace

}  // namespace mrf::bp
