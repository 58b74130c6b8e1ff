// Min-sum belief propagation on CUDA: the tiled schedule (a tile per block in shared memory, BP-M inside,
// border messages in global memory, tile diagonals as a wavefront) and a plain synchronous schedule.
// Results equal the TBB engine bit for bit (integer messages); docs/bp.md describes the schedule.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"
#include "backends/cuda/staged_upload.h"
#include "mrf/device.h"
#include "mrf/memory.h"

namespace cg = cooperative_groups;

namespace mrf::bp {

namespace {

// ---- Error handling --------------------------------------------------------------------------------

void Check(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that a CPU fallback starts clean
  throw Error(std::string("cuda-bp: ") + what + " failed: " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
}
#define MRF_CUDA_CHECK(call) Check((call), #call, __FILE__, __LINE__)

bool DebugSync() {
#ifdef MRF_CUDA_DEBUG_SYNC
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("MRF_CUDA_DEBUG_SYNC");
    return v && std::string(v) == "1";  // other values are refused when a runner starts
  }();
  return on;
#endif
}

// After every launch: the launch error, and with MRF_CUDA_DEBUG_SYNC the kernel's own error.
void CheckLaunch(const char* kernel, cudaStream_t stream, bool capturing, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw Error(std::string("cuda-bp: kernel launch failed (") + kernel + "): " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
  if (DebugSync() && !capturing) Check(cudaStreamSynchronize(stream), kernel, file, line);
}

#define MRF_CHECK_LAUNCH(name, stream, capturing) CheckLaunch(name, stream, capturing, __FILE__, __LINE__)

// One cudaMalloc for all of a runner's buffers, handed out in 256-byte aligned pieces: the 68 separate
// allocations and frees of a coarse-to-fine run cost about 3 ms on Venus (docs/bp.md). Where the reserve
// runs out (or could not be made), buffers fall back to their own cudaMalloc.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    if (base_) cudaFree(base_);
  }
  // Reserves `bytes`; false (and no reserve) when the device has no such block free.
  bool Reserve(std::size_t bytes) {
    if (cudaMalloc(&base_, bytes) != cudaSuccess) {
      cudaGetLastError();
      base_ = nullptr;
      return false;
    }
    size_ = bytes;
    return true;
  }
  // A piece of `bytes`, or null when the reserve cannot hold it.
  void* Take(std::size_t bytes) {
    const std::size_t at = (used_ + 255) / 256 * 256;
    if (!base_ || at > size_ || bytes > size_ - at) return nullptr;
    used_ = at + bytes;
    return static_cast<char*>(base_) + at;
  }

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0, used_ = 0;
};

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_), owned_(o.owned_) {
    o.ptr_ = nullptr, o.size_ = 0, o.owned_ = false;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~DeviceBuffer() { Release(); }
  // `count` elements from `arena` when it has room (the arena must outlive the buffer), else cudaMalloc.
  void Allocate(std::size_t count, const char* what, DeviceArena* arena = nullptr) {
    Release();
    if (count == 0) return;
    if (arena && (ptr_ = static_cast<T*>(arena->Take(count * sizeof(T))))) {
      size_ = count;
      return;
    }
    const cudaError_t status = cudaMalloc(&ptr_, count * sizeof(T));
    if (status != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      std::size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      throw Error(std::string("cuda-bp: out of GPU memory: ") + what + " needs " + MiB(count * sizeof(T)) + ", " +
                  MiB(free_bytes) + " of " + MiB(total_bytes) + " free (" + cudaGetErrorString(status) + ")");
    }
    size_ = count;
    owned_ = true;
  }
  void Upload(const std::vector<T>& host, cudaStream_t s) {
    if (!host.empty())
      MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(ptr_, host.data(), host.size() * sizeof(T), s));
  }
  void Download(std::vector<T>& host, cudaStream_t s) const {
    host.resize(size_);
    if (size_) MRF_CUDA_CHECK(cudaMemcpyAsync(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost, s));
  }
  void Zero(cudaStream_t s) {
    if (size_) MRF_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, size_ * sizeof(T), s));
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Release() {
    if (ptr_ && owned_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    owned_ = false;
  }

  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  bool owned_ = false;  // from cudaMalloc, not from an arena
};

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

// ---- Kernel selection ------------------------------------------------------------------------------

using DiagonalKernel = void (*)(TileParams, int, int);
using CooperativeKernel = void (*)(TileParams);

template <int C>
void PickKernels(int kind, DiagonalKernel* d, CooperativeKernel* c) {
  switch (kind) {
    case kPottsMessage: *d = TileDiagonalKernel<C, kPottsMessage>, *c = TileCooperativeKernel<C, kPottsMessage>; break;
    case kLinearMessage: *d = TileDiagonalKernel<C, kLinearMessage>, *c = TileCooperativeKernel<C, kLinearMessage>; break;
    case kQuadraticMessage:
      *d = TileDiagonalKernel<C, kQuadraticMessage>, *c = TileCooperativeKernel<C, kQuadraticMessage>;
      break;
    default: *d = TileDiagonalKernel<C, kTableMessage>, *c = TileCooperativeKernel<C, kTableMessage>; break;
  }
}

unsigned Blocks(std::int64_t threads, int per_block) {
  return static_cast<unsigned>((threads + per_block - 1) / per_block);
}

// One problem (the fine one or a coarse level) on the device, with synchronous-schedule buffers.
struct Level {
  int width = 0, height = 0;
  Energy unary_offset = 0;
  DeviceBuffer<Cost> unary, scale_right, scale_down;
  DeviceBuffer<Cost> messages[2][4];  // two generations for the synchronous schedule
  DeviceBuffer<Cost> hbuf;
  DeviceBuffer<int> scratch;
  int current = 0;  // which generation holds the latest messages

  std::size_t nodes() const { return static_cast<std::size_t>(width) * height; }
  Messages Get(int generation) const {
    return Messages{{messages[generation][0].get(), messages[generation][1].get(), messages[generation][2].get(),
                     messages[generation][3].get()}};
  }
};

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

// ---- The runner -----------------------------------------------------------------------------------

struct CudaRunner::Impl {
  DeviceArena arena;  // first: it holds the buffers below, so it is released after them
  Problem problem;  // the fine problem (host copy: energies, sizes)
  Config config;
  CudaTuning tuning;
  int C = 4, Lp = 0, G = 1, tile = 0, threads = 0, window = 0, scratch_stride = 0;
  bool envelope = false;
  std::size_t shared_bytes = 0;
  std::string note;  // e.g. a tile reduced to fit shared memory
  std::string inject;  // MRF_INJECT_CUDA_FAULT
  bool inject_launch_pending = false;
  CudaLaunch launch = CudaLaunch::kPerDiagonal;
  PairwiseParams pw{};
  DeviceBuffer<Cost> table;
  DeviceBuffer<Cost> upload_staging;  // padded uploads go up through it (part of the arena: kept)
  std::vector<Level> levels;  // [0] fine, then coarser
  std::vector<Problem> coarse;  // host copies of the coarser levels (coarse-to-fine)
  TileGrid grid;
  DeviceBuffer<Cost> borders[4];
  DeviceBuffer<Label> labels, best_labels;
  DeviceBuffer<unsigned long long> energy_sum;
  DeviceBuffer<int> changed;
  DeviceBuffer<int> coarse_changed;  // one flag per coarse-level iteration (device-side early stop)
  unsigned long long* host_energy = nullptr;  // pinned
  int* host_changed = nullptr;                // pinned
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraphExec_t graph = nullptr;
  DiagonalKernel diagonal_kernel = nullptr;
  CooperativeKernel cooperative_kernel = nullptr;
  int cooperative_blocks = 0;
  bool capturing = false;
  // Fast kernel.
  bool use_fast = false;
  fast::Support fast_support;
  std::string fast_why;  // why the general kernel runs (auto)
  fastk::Kernel fast_kernel = nullptr;
  DeviceBuffer<fast::Word> fast_unary;
  DeviceBuffer<int> tile_done, fast_error;
  DeviceBuffer<std::uint64_t> mailbox;  // pipeline by tile columns (fast::Mail); stamps as tile_done's counts
  int pipeline_blocks = 0;
  int sweep_base = 0;  // pipeline: sweeps run since the tile counters were cleared (they only grow)
  bool fresh_pending = false;  // pipeline: the next launch starts from zero messages without clearing them
  static constexpr int kMaxSweepBase = 1 << 30;  // tile counters are cleared before they pass this
  static constexpr std::size_t kArenaPieces = 128;  // buffers a runner allocates: at most 5 levels x 13, and 15
  std::size_t estimated = 0;

  ~Impl() {
    if (graph) cudaGraphExecDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
    if (host_energy) cudaFreeHost(host_energy);
    if (host_changed) cudaFreeHost(host_changed);
    cudaGetLastError();  // leave no error behind for the next CUDA user of this thread
  }

  GridParams Params(const Level& level) const {
    return GridParams{level.unary.get(), level.scale_right.get(), level.scale_down.get(), pw,
                      level.width, level.height, problem.num_labels, Lp, scratch_stride};
  }

  TileParams Tiles() const {
    TileParams P{};
    const Level& f = levels[0];
    P.unary = f.unary.get();
    P.scale_right = f.scale_right.get();
    P.scale_down = f.scale_down.get();
    P.pw = pw;
    P.width = f.width;
    P.height = f.height;
    P.L = problem.num_labels;
    P.Lp = Lp;
    P.G = G;
    P.tile = tile;
    P.tiles_x = grid.tiles_x;
    P.tiles_y = grid.tiles_y;
    P.row_stride = TileRowStride(tile, Lp);
    P.inner = config.inner_iterations;
    P.envelope = envelope;
    P.window = window;
    P.scratch_per_chain = problem.kind == kTableMessage || problem.kind == kLinearMessage
                              ? Lp
                              : problem.kind == kQuadraticMessage ? (envelope ? 4 * Lp : Lp) : 0;
    P.linear_window = UseLinearWindow(pw) ? LinearWindow(problem.truncation, problem.num_labels) : -1;
    P.border_right = borders[0].get();
    P.border_left = borders[1].get();
    P.border_down = borders[2].get();
    P.border_up = borders[3].get();
    P.labels = labels.get();
    P.changed = changed.get();
    return P;
  }

  fast::Params FastParams() const {
    fast::Params P;
    P.unary = fast_unary.get();
    P.scale_right = levels[0].scale_right.get();
    P.scale_down = levels[0].scale_down.get();
    P.border_right = borders[0].get();
    P.border_left = borders[1].get();
    P.border_down = borders[2].get();
    P.border_up = borders[3].get();
    P.labels = labels.get();
    P.changed = changed.get();
    P.tile_done = tile_done.get();
    P.mailbox = mailbox.get();  // null: the tile counters hand messages over
    P.error = fast_error.get();
    P.form = fast_support.params;
    P.width = problem.width;
    P.height = problem.height;
    P.L = problem.num_labels;
    P.Lp = Lp;
    P.tile = tile;
    P.tiles_x = grid.tiles_x;
    P.tiles_y = grid.tiles_y;
    P.row_stride = fast::RowStride(tile, fast_support.words, FastLanes());
    P.inner = config.inner_iterations;
    return P;
  }

  // Uploads a level. Its unary costs come from p.unary, or (the fine level, `raw`) from the model's own
  // costs, shifted on the device, or (a coarse level of CoarseShapes, without costs) are summed from
  // `finer`'s.
  void UploadLevel(Level& level, const Problem& p, const Level* finer = nullptr, const Cost* raw = nullptr) {
    level.width = p.width;
    level.height = p.height;
    level.unary_offset = p.unary_offset;
    const std::size_t n = level.nodes();
    const int L = p.num_labels;
    level.unary.Allocate(n * Lp, "the unary costs", &arena);
    const Cost* host = raw ? raw : p.unary.data();
    if (p.unary.empty() && !raw) {  // a level of CoarseShapes
      if (!finer)  // a fine level without costs: PrepareProblemWithoutCosts is for CudaRunner(const Model&)
        throw Error("cuda-bp: the problem has no unary costs (prepare it with PrepareProblem, or pass the model)");
      CoarsenUnaryKernel<<<Blocks(32 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(
          finer->unary.get(), finer->scale_right.get(), finer->scale_down.get(), finer->width, finer->height,
          p.width, p.height, L, Lp, p.kind, table.get(), level.unary.get());
      MRF_CHECK_LAUNCH("coarse unary kernel", stream, false);
    } else if (Lp == L) {  // nothing to pad: upload the costs as they are
      MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(level.unary.get(), host, n * L * sizeof(Cost), stream));
    } else if (!tuning.host_setup) {
      // Padded on the device: the costs go up in contiguous pieces through a staging buffer, and a kernel
      // spreads each node's L costs over its Lp slots. A pitched copy straight from pageable memory (below)
      // moved Aloe's 1.3 GB at 1.7 GB/s (docs/bp.md).
      const std::size_t piece = StagingNodes(n, L);
      if (upload_staging.size() < piece * L) upload_staging.Allocate(piece * L, "the upload staging buffer", &arena);
      for (std::size_t first = 0; first < n; first += piece) {
        const std::size_t count = std::min(piece, n - first);
        MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(upload_staging.get(), host + first * L, count * L * sizeof(Cost),
                                                      stream, n * L * sizeof(Cost)));
        const std::int64_t slots = static_cast<std::int64_t>(count) * Lp;
        PadUnaryKernel<<<Blocks(slots, 256), 256, 0, stream>>>(upload_staging.get(), slots, L, Lp,
                                                              level.unary.get() + first * Lp);
        MRF_CHECK_LAUNCH("unary padding kernel", stream, false);
      }
    } else {
      // Padded on the way: a pitched copy puts each node's L costs at the start of its Lp slots and a
      // pitched memset zeroes the rest (Venus's 13 MB: 1.6-2.4 ms on an H100 machine, against 4.3-19 ms
      // for padding a fresh host copy first and uploading that).
      const std::size_t row = static_cast<std::size_t>(L) * sizeof(Cost);
      const std::size_t pitch = static_cast<std::size_t>(Lp) * sizeof(Cost);
      MRF_CUDA_CHECK(cudaMemcpy2DAsync(level.unary.get(), pitch, host, row, row, n, cudaMemcpyHostToDevice, stream));
      MRF_CUDA_CHECK(cudaMemset2DAsync(level.unary.get() + L, pitch, 0, pitch - row, n, stream));
    }
    if (raw) {
      ShiftUnaryKernel<<<Blocks(32 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(level.unary.get(), n, L, Lp);
      MRF_CHECK_LAUNCH("unary shift kernel", stream, false);
    }
    level.scale_right.Allocate(n, "the edge scales", &arena);
    level.scale_right.Upload(p.scale_right, stream);
    level.scale_down.Allocate(n, "the edge scales", &arena);
    level.scale_down.Upload(p.scale_down, stream);
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the costs are in place before the first run
  }

  // Message buffers start at 0; messages from outside the grid and at padded labels are never written
  // afterwards (the kernels write 0 there or skip them), so Reset() clears only what a run reads first.
  void AllocateSync(Level& level) {
    const std::size_t n = level.nodes();
    for (auto& generation : level.messages)
      for (auto& m : generation) {
        m.Allocate(n * Lp, "the BP messages", &arena);
        m.Zero(stream);
      }
    level.hbuf.Allocate(4 * n * Lp, "the BP message sums", &arena);
    if (scratch_stride > 0) level.scratch.Allocate(4 * n * scratch_stride, "the message scratch", &arena);
  }

  // Nodes per piece of a padded upload: 32 MB of costs (or what the tuning asks), or all of them.
  std::size_t StagingNodes(std::size_t nodes, int L) const {
    const std::size_t costs = tuning.upload_piece_costs > 0 ? tuning.upload_piece_costs : std::size_t{8} << 20;
    return std::min(nodes, std::max<std::size_t>(1, costs / static_cast<std::size_t>(L)));
  }

  // Bytes of device memory Setup() allocates (the buffers below, in the same order).
  std::size_t EstimateBytes() const {
    const std::size_t L = problem.num_labels, lp = Lp, ints = sizeof(Cost);
    auto level_bytes = [&](std::size_t n) { return n * lp * ints + 2 * n * ints; };
    auto sync_bytes = [&](std::size_t n) {
      return 8 * n * lp * ints + 4 * n * lp * ints + 4 * n * static_cast<std::size_t>(scratch_stride) * ints;
    };
    const std::size_t n = static_cast<std::size_t>(problem.num_nodes());
    std::size_t bytes = problem.table.size() * ints + level_bytes(n);
    if (lp != L && !tuning.host_setup) bytes += StagingNodes(n, problem.num_labels) * L * ints;  // upload_staging
    for (const Problem& c : coarse) {
      const std::size_t cn = static_cast<std::size_t>(c.num_nodes());
      bytes += level_bytes(cn) + sync_bytes(cn);
    }
    if (config.schedule == Schedule::kSync) bytes += sync_bytes(n);
    bytes += 2 * n * sizeof(Label) + sizeof(unsigned long long) + sizeof(int);
    if (!coarse.empty()) bytes += coarse.size() * static_cast<std::size_t>(config.iterations) * sizeof(int);
    if (config.schedule == Schedule::kTiled) {
      const TileGrid g = TileGrid::Make(problem.width, problem.height, tile);
      const std::size_t vertical = static_cast<std::size_t>(g.tiles_x - 1) * problem.height * lp;
      const std::size_t horizontal = static_cast<std::size_t>(g.tiles_y - 1) * problem.width * lp;
      bytes += 2 * (vertical + horizontal) * ints;
      if (use_fast)
        bytes += n * static_cast<std::size_t>(fast_support.words) * sizeof(fast::Word) +
                 static_cast<std::size_t>(g.tiles_x) * g.tiles_y * sizeof(int) + sizeof(int) +
                 MailboxSlots(g) * sizeof(std::uint64_t);
    }
    return bytes;
  }

  // Slots of the mailbox (fast::Mail): messages of both directions across the tiles_x - 1 boundaries between
  // tile columns, a slot per word. Only the fast kernel's pipeline by tile columns (also the automatic
  // launch) uses one, unless CudaTuning::mailbox is off; 0 also when int cannot index the slots
  // (fast::MailIndex): the tile counters then hand the messages over.
  std::size_t MailboxSlots(const TileGrid& g) const {
    const bool columns = tuning.launch == CudaLaunch::kAuto || tuning.launch == CudaLaunch::kPipeline;
    if (!use_fast || !tuning.mailbox || !columns || g.tiles_x < 2) return 0;
    const std::size_t slots = static_cast<std::size_t>(g.tiles_x - 1) * 2 * problem.height * fast_support.words;
    return slots <= static_cast<std::size_t>(std::numeric_limits<int>::max()) ? slots : 0;
  }

  std::size_t AllocatedBytes() const {
    std::size_t bytes = table.bytes() + upload_staging.bytes() + labels.bytes() + best_labels.bytes() +
                        energy_sum.bytes() + changed.bytes() + coarse_changed.bytes() + fast_unary.bytes() +
                        tile_done.bytes() + fast_error.bytes() + mailbox.bytes();
    for (const auto& b : borders) bytes += b.bytes();
    for (const Level& level : levels) {
      bytes += level.unary.bytes() + level.scale_right.bytes() + level.scale_down.bytes() + level.hbuf.bytes() +
               level.scratch.bytes();
      for (const auto& generation : level.messages)
        for (const auto& m : generation) bytes += m.bytes();
    }
    return bytes;
  }

  // The largest message spread the fine level's tile kernel meets: its own, and (coarse-to-fine) that of
  // the level just above, whose messages become its border messages. The coarser levels only start
  // that level, on the 32-bit synchronous kernels, so their larger spreads (coarse edge scales double
  // per level) do not bound the fast kernel's 16-bit sums.
  Cost LargestMessage() const {
    Cost r = problem.max_message;
    if (!coarse.empty()) r = std::max(r, coarse.front().max_message);
    return r;
  }

  // Threads a chain of the fast kernel is split over (fast::ChainLanes()).
  int FastLanes() const { return fast::ChainLanes(fast_support.words, fast_support.form); }

  void ChooseKernel() {
    use_fast = false;
    if (config.schedule != Schedule::kTiled || tuning.kernel == CudaKernel::kGeneral) return;
    Cost min_scale = 0;
    for (Cost s : problem.scale_right) min_scale = std::min(min_scale, s);
    for (Cost s : problem.scale_down) min_scale = std::min(min_scale, s);
    fast_support = fast::FastSupport(problem.num_labels, problem.kind, problem.truncation, problem.max_unary_spread,
                                     LargestMessage(), min_scale);
    std::string why = fast_support.why;
    if (fast_support.ok) {
      const int asked = RequestedTileSize(config.tile_size, problem.width, problem.height);
      const int t = asked > 0 ? asked : AutoTileSize(problem.num_labels, problem.kind);
      const int lanes = FastLanes();
      const std::size_t bytes = fast::SharedWords(t, fast_support.words, lanes) * sizeof(fast::Word);
      if (bytes > CudaMaxSharedBytesPerBlock() ||
          fastk::ComputeThreads(t, lanes) + fastk::kPipelineLoaders > fastk::MaxThreads(fast_support.words, lanes))
        why = "a tile of side " + std::to_string(t) + " does not fit the fast kernel (" + std::to_string(bytes) +
              " bytes of shared memory, " + std::to_string(2 * t) + " chains)";
      else
        use_fast = true;
    }
    if (!use_fast && tuning.kernel == CudaKernel::kFast) throw Error("cuda-bp: the fast kernel cannot run this problem: " + why);
    if (!use_fast) fast_why = why;
  }

  // `raw`: the model's unary costs when `given` has none (PrepareProblemWithoutCosts); `shapes`: the
  // coarse levels when the caller has them already (CoarseShapes).
  void Setup(Problem&& given, const Config& c, const CudaTuning& t, const Cost* raw = nullptr,
             std::vector<Problem> shapes = {}) {
    problem = std::move(given);  // moved, not copied: the unary costs alone are megabytes
    const Problem& p = problem;
    config = c;
    tuning = t;
    CheckConfig(p, c);
    if (c.schedule == Schedule::kBpm)
      throw Error("cuda-bp runs the tiled and sync schedules; bpm runs on the CPU (tbb-bp)");
    CudaDebugSyncRequested("cuda-bp");  // a bad value is refused here; DebugSync() caches the switch
    if (const char* v = std::getenv("MRF_INJECT_CUDA_FAULT")) inject = v;
    if (!inject.empty() && inject != "oom" && inject != "launch" && inject != "nodevice")
      throw Error("cuda-bp: MRF_INJECT_CUDA_FAULT must be 'nodevice', 'oom' or 'launch' (got '" + inject + "')");
    if (inject == "nodevice") throw Error("cuda-bp: no CUDA device found (injected by MRF_INJECT_CUDA_FAULT=nodevice)");
    const std::string why_not = CudaUnavailableReason();
    if (!why_not.empty()) throw Error("cuda-bp: " + why_not);
    cudaGetLastError();  // an error left by other code must not be reported as ours
    const int L = p.num_labels;
    if (c.coarse_to_fine) {
      // The coarser levels' costs are summed on the device when a bound rules out overflow; otherwise (and
      // when a test asks) the host builds them, checking every sum.
      coarse = std::move(shapes);
      if (coarse.empty() && CanCoarsen(p)) {
        if (!t.host_setup) coarse = CoarseShapes(p);
        if (coarse.empty()) coarse = CoarseLevels(p);  // needs the host's costs: the caller gave them
      }
    }
    ChooseKernel();
    if (use_fast) {
      Lp = 2 * fast_support.words;
    } else {
      C = t.labels_per_lane ? t.labels_per_lane : DefaultLabelsPerLane(L);
      if (C != 2 && C != 4 && C != 8 && C != 16)
        throw Error("cuda-bp: labels per lane must be 2, 4, 8 or 16 (got " + std::to_string(C) + ")");
      Lp = PaddedLabels(L, C);
      if (Lp == 0)
        throw Error("cuda-bp takes at most " + std::to_string(32 * C) + " labels with " + std::to_string(C) +
                    " labels per lane (got " + std::to_string(L) + "); use tbb-bp for more");
      G = Lp / C;
    }
    pw = p.params();
    envelope = p.kind == kQuadraticMessage && !UseQuadraticWindow(pw);
    window = p.kind == kQuadraticMessage ? QuadraticWindow(p.truncation, L) : 0;
    scratch_stride = MessageScratchNeeded(p.params());

    MRF_CUDA_CHECK(cudaSetDevice(0));
    if (c.schedule == Schedule::kTiled) ChooseTile();

    // Refuse what cannot fit before allocating anything.
    estimated = EstimateBytes();
    std::size_t free_bytes = 0, total_bytes = 0;
    MRF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (t.free_bytes_override) free_bytes = t.free_bytes_override;
    if (estimated > free_bytes)
      throw Error("cuda-bp: out of GPU memory: this problem needs " + MiB(estimated) + " of GPU memory, " +
                  MiB(free_bytes) + " of " + MiB(total_bytes) + " are free (" + std::to_string(p.width) + "x" +
                  std::to_string(p.height) + ", " + std::to_string(L) + " labels); use tbb-bp");

    // One block for the buffers below: EstimateBytes() counts them, and each piece rounds up to 256 bytes.
    if (!t.host_setup) arena.Reserve(estimated + 256 * kArenaPieces);
    MRF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MRF_CUDA_CHECK(cudaEventCreate(&start));
    MRF_CUDA_CHECK(cudaEventCreate(&stop));
    MRF_CUDA_CHECK(cudaMallocHost(&host_energy, sizeof(unsigned long long)));
    MRF_CUDA_CHECK(cudaMallocHost(&host_changed, sizeof(int)));
    if (inject == "oom") {
      DeviceBuffer<char> impossible;
      impossible.Allocate(std::size_t{1} << 50, "fault injection (MRF_INJECT_CUDA_FAULT=oom)");
    }
    inject_launch_pending = inject == "launch";

    MRF_CUDA_CHECK(cudaEventRecord(start, stream));
    if (!p.table.empty()) {
      table.Allocate(p.table.size(), "the pairwise table", &arena);
      table.Upload(p.table, stream);
      pw.table = table.get();
    }
    levels.resize(1);
    UploadLevel(levels[0], p, nullptr, raw);
    if (c.coarse_to_fine) {
      levels.resize(1 + coarse.size());
      for (std::size_t i = 0; i < coarse.size(); ++i) {
        UploadLevel(levels[i + 1], coarse[i], &levels[i]);
        AllocateSync(levels[i + 1]);
      }
    }
    if (c.schedule == Schedule::kSync) AllocateSync(levels[0]);
    const std::size_t n = levels[0].nodes();
    labels.Allocate(n, "the labels", &arena);
    best_labels.Allocate(n, "the labels", &arena);
    labels.Zero(stream);
    energy_sum.Allocate(1, "the energy", &arena);
    changed.Allocate(1, "the flags", &arena);
    if (!coarse.empty()) coarse_changed.Allocate(coarse.size() * static_cast<std::size_t>(c.iterations), "the flags", &arena);
    if (c.schedule == Schedule::kTiled) {
      grid = TileGrid::Make(p.width, p.height, tile);
      const std::size_t vertical = static_cast<std::size_t>(grid.tiles_x - 1) * p.height * Lp;
      const std::size_t horizontal = static_cast<std::size_t>(grid.tiles_y - 1) * p.width * Lp;
      borders[0].Allocate(vertical, "the border messages", &arena);
      borders[1].Allocate(vertical, "the border messages", &arena);
      borders[2].Allocate(horizontal, "the border messages", &arena);
      borders[3].Allocate(horizontal, "the border messages", &arena);
      for (auto& b : borders) b.Zero(stream);
      if (use_fast) UploadFast();
      ChooseLaunch();
    }
    MRF_CUDA_CHECK(cudaEventRecord(stop, stream));
    MRF_CUDA_CHECK(cudaEventSynchronize(stop));
  }

  // The fast kernel's packed unary costs (padded labels cost fast_support.pad_cost) and counters.
  void UploadFast() {
    const int words = fast_support.words;
    const std::int64_t count = static_cast<std::int64_t>(problem.num_nodes()) * words;
    fast_unary.Allocate(static_cast<std::size_t>(count), "the packed unary costs", &arena);
    PackUnaryKernel<<<Blocks(count, 256), 256, 0, stream>>>(levels[0].unary.get(), problem.num_labels, words,
                                                            fast_support.pad_cost, count, fast_unary.get());
    MRF_CHECK_LAUNCH("unary packing kernel", stream, false);
    tile_done.Allocate(static_cast<std::size_t>(grid.tiles_x) * grid.tiles_y, "the tile counters", &arena);
    fast_error.Allocate(1, "the flags", &arena);
    mailbox.Allocate(MailboxSlots(grid), "the mailbox", &arena);
    tile_done.Zero(stream);
    mailbox.Zero(stream);
    fast_error.Zero(stream);
    fast_kernel = fastk::Pick(words, fast_support.form, false);
  }

  void ChooseTile() {
    const int L = problem.num_labels;
    const int asked = RequestedTileSize(config.tile_size, problem.width, problem.height);
    const std::size_t limit = CudaMaxSharedBytesPerBlock();
    if (use_fast) {
      tile = asked > 0 ? asked : AutoTileSize(L, problem.kind);  // fits (ChooseKernel)
      const int lanes = FastLanes();
      shared_bytes = fast::SharedWords(tile, fast_support.words, lanes) * sizeof(fast::Word);
      threads = fastk::ComputeThreads(tile, lanes);
      return;
    }
    auto fits = [&](int t) {
      return TileSharedBytes(t, Lp, problem.kind, envelope) <= limit && 2 * t * G <= kMaxTileThreads;
    };
    if (asked > 0) {
      tile = asked;
      if (!fits(tile)) {
        int largest = 0;
        for (int t = 1; t <= tile; ++t)
          if (fits(t)) largest = t;
        throw Error("cuda-bp: a tile of side " + std::to_string(tile) + " for " + std::to_string(L) + " labels needs " +
                    std::to_string(TileSharedBytes(tile, Lp, problem.kind, envelope)) + " bytes of shared memory and " +
                    std::to_string(2 * tile * G) + " threads; this GPU allows " + std::to_string(limit) + " bytes and " +
                    std::to_string(kMaxTileThreads) + " threads per block: use a tile size of at most " +
                    std::to_string(largest));
      }
    } else {
      tile = AutoTileSize(L, problem.kind);
      const int wanted = tile;
      while (tile > 1 && !fits(tile)) --tile;
      if (!fits(tile))
        throw Error("cuda-bp: " + std::to_string(L) + " labels do not fit one pixel per tile in " +
                    std::to_string(limit) + " bytes of shared memory");
      if (tile != wanted)
        note = "tile reduced from " + std::to_string(wanted) + " to " + std::to_string(tile) +
               " to fit this GPU's shared memory (the CPU's automatic tile differs: give --tile-size to compare)";
    }
    threads = (2 * tile * G + 31) / 32 * 32;  // whole warps: every lane takes part in the warp shuffles
    shared_bytes = TileSharedBytes(tile, Lp, problem.kind, envelope);
    switch (C) {
      case 2: PickKernels<2>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      case 4: PickKernels<4>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      case 8: PickKernels<8>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      default: PickKernels<16>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
    }
  }

  // The launches with a loader warp (or warps) and blocks that walk tile rows or columns.
  static bool Pipelined(CudaLaunch l) {
    return l == CudaLaunch::kPipeline || l == CudaLaunch::kPipelineRows || l == CudaLaunch::kSplit;
  }
  static int KernelMode(CudaLaunch l) {
    return l == CudaLaunch::kSplit          ? fastk::kSplit
           : l == CudaLaunch::kPipelineRows ? fastk::kPipelineRows
                                            : fastk::kPipelineColumns;
  }

  // Threads of a fast-kernel block in launch `l`: the compute threads, the split's second crew, the loaders.
  int FastBlockThreads(CudaLaunch l) const {
    if (l == CudaLaunch::kSplit) return 2 * threads + fastk::kSplitLoaders;
    return l == CudaLaunch::kPipeline || l == CudaLaunch::kPipelineRows ? threads + fastk::kPipelineLoaders : threads;
  }

  void ChooseLaunch() {
    int cooperative = 0, sms = 0, per_sm = 0;
    MRF_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
    MRF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int widest = std::min(grid.tiles_x, grid.tiles_y);
    launch = tuning.launch;
    // Each kernel may take as much shared memory as a block can have: the attribute belongs to the kernel,
    // not to this runner, so a smaller value would fail the launches of other runners of the same kernel.
    const int max_shared = static_cast<int>(CudaMaxSharedBytesPerBlock());
    if (use_fast) {
      const int lanes = FastLanes();
      const std::size_t split_bytes = fast::SharedWords(tile, fast_support.words, lanes, 3, 2) * sizeof(fast::Word);
      const bool split_fits = split_bytes <= CudaMaxSharedBytesPerBlock() &&
                              FastBlockThreads(CudaLaunch::kSplit) <= fastk::MaxSplitThreads(fast_support.words, lanes);
      // Measured fastest (docs/bp.md): since the step loops address shared memory directly, the pipeline beats
      // the split launch at the automatic tile (Tsukuba, tile 24: 0.37 against 0.40 ms on an H100).
      if (launch == CudaLaunch::kAuto) launch = CudaLaunch::kPipeline;
      if (launch == CudaLaunch::kSplit) {
        if (config.inner_iterations != 1)
          throw Error("cuda-bp: the split launch runs one inner iteration per visit, not " +
                      std::to_string(config.inner_iterations) + " (use pipeline)");
        if (!split_fits)
          throw Error("cuda-bp: the split launch needs " + std::to_string(split_bytes) +
                      " bytes of shared memory for a tile of side " + std::to_string(tile) + ", more than a block has " +
                      "(use pipeline or a smaller tile)");
        shared_bytes = split_bytes;
        fast_kernel = fastk::Pick(fast_support.words, fast_support.form, true);
      }
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fast_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fast_kernel, FastBlockThreads(launch), shared_bytes));
      cooperative_blocks = std::min(widest, per_sm * sms);
      // A block per tile column (pipeline) or row (the others), as many as can be resident.
      pipeline_blocks = std::min(launch == CudaLaunch::kPipeline ? grid.tiles_x : grid.tiles_y, per_sm * sms);
      if (tuning.pipeline_blocks > 0) pipeline_blocks = std::min(pipeline_blocks, tuning.pipeline_blocks);
    } else {
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(diagonal_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(cooperative_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cooperative_kernel, threads, shared_bytes));
      cooperative_blocks = std::min(widest, per_sm * sms);
      if (launch == CudaLaunch::kAuto) launch = CudaLaunch::kGraph;  // measured fastest (docs/bp.md)
      if (Pipelined(launch))
        throw Error(std::string("cuda-bp: the ") + ToString(launch) + " launch needs the fast kernel, " +
                    (fast_why.empty() ? std::string("and the general kernel was asked for")
                                      : "which cannot run this problem (" + fast_why + ")") +
                    "; use diagonal, graph or cooperative");
    }
    if ((launch == CudaLaunch::kCooperative && (!cooperative || cooperative_blocks < 1)) ||
        (Pipelined(launch) && (!cooperative || pipeline_blocks < 1)))
      throw Error(std::string("cuda-bp: this GPU cannot run the ") + ToString(launch) + " launch (use diagonal or graph)");
  }

  // Fault injection: a real launch with more threads than a block may have.
  void InjectLaunchFault() {
    inject_launch_pending = false;
    SyncKernel<<<1, 4096, 0, stream>>>(Params(levels[0]), Messages{}, Messages{}, nullptr, nullptr, nullptr, nullptr);
    MRF_CHECK_LAUNCH("tile kernel (fault injected by MRF_INJECT_CUDA_FAULT=launch)", stream, false);
  }

  void LaunchDiagonal(int d, bool write_labels) {
    int begin = std::max(0, d - (grid.tiles_y - 1)), end = std::min(d, grid.tiles_x - 1) + 1;
    if (use_fast) {
      fast_kernel<<<end - begin, threads, shared_bytes, stream>>>(FastParams(), fastk::kDiagonal, d, write_labels ? 1 : 0);
      MRF_CHECK_LAUNCH("fast tile diagonal kernel", stream, capturing);
      return;
    }
    diagonal_kernel<<<end - begin, threads, shared_bytes, stream>>>(Tiles(), d, write_labels ? 1 : 0);
    MRF_CHECK_LAUNCH("tile diagonal kernel", stream, capturing);
  }

  void EnqueueOuterByDiagonals() {
    const int diagonals = grid.num_diagonals();
    for (int d = 0; d < diagonals; ++d) LaunchDiagonal(d, false);
    for (int d = diagonals - 1; d >= 0; --d) LaunchDiagonal(d, true);
  }

  void LaunchFastCooperative(int mode, int blocks, int block_threads, int arg0) {
    fast::Params P = FastParams();
    P.fresh = fresh_pending ? 1 : 0;
    fresh_pending = false;
    int arg1 = 0;
    void* args[] = {&P, &mode, &arg0, &arg1};
    MRF_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fast_kernel), dim3(blocks),
                                               dim3(block_threads), args, shared_bytes, stream));
    MRF_CHECK_LAUNCH(mode == fastk::kSplit      ? "fast tile split pipeline kernel"
                     : mode == fastk::kPipelineColumns || mode == fastk::kPipelineRows ? "fast tile pipeline kernel"
                                                : "fast tile cooperative kernel",
                     stream, false);
  }

  void EnqueueOuter() {
    if (inject_launch_pending) InjectLaunchFault();
    if (use_fast && Pipelined(launch)) {
      LaunchFastCooperative(KernelMode(launch), pipeline_blocks,
                            FastBlockThreads(launch), sweep_base);
      sweep_base += 2;
      return;
    }
    switch (launch) {
      case CudaLaunch::kCooperative: {
        if (use_fast) {
          LaunchFastCooperative(fastk::kCooperative, cooperative_blocks, threads, 0);
          break;
        }
        TileParams P = Tiles();
        void* args[] = {&P};
        MRF_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(cooperative_kernel),
                                                   dim3(cooperative_blocks), dim3(threads), args, shared_bytes, stream));
        MRF_CHECK_LAUNCH("cooperative tile kernel", stream, false);
        break;
      }
      case CudaLaunch::kGraph: {
        if (!graph) {
          cudaGraph_t g = nullptr;
          MRF_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          capturing = true;
          try {
            EnqueueOuterByDiagonals();
          } catch (...) {
            capturing = false;
            cudaStreamEndCapture(stream, &g);
            if (g) cudaGraphDestroy(g);
            throw;
          }
          capturing = false;
          MRF_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
          const cudaError_t status = cudaGraphInstantiate(&graph, g, 0);
          cudaGraphDestroy(g);
          MRF_CUDA_CHECK(status);
        }
        MRF_CUDA_CHECK(cudaGraphLaunch(graph, stream));
        MRF_CHECK_LAUNCH("tile graph", stream, false);
        break;
      }
      default: EnqueueOuterByDiagonals(); break;
    }
  }

  // One sync iteration on one level from its current messages. `skip_if_zero`: the previous iteration's
  // change flag (coarse levels), or null.
  void EnqueueSync(Level& level, bool labels_too, Label* out_labels, int* changed_flag, const int* skip_if_zero) {
    const std::size_t n = level.nodes();
    SyncKernel<<<Blocks(4 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(
        Params(level), level.Get(level.current), level.Get(1 - level.current), level.hbuf.get(), level.scratch.get(),
        changed_flag, skip_if_zero);
    MRF_CHECK_LAUNCH("sync kernel", stream, false);
    level.current = 1 - level.current;
    if (labels_too) {
      GridLabelsKernel<<<Blocks(static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(Params(level), level.Get(level.current),
                                                                                      out_labels);
      MRF_CHECK_LAUNCH("labels kernel", stream, false);
    }
  }

  // Start state: zero messages, or the coarse-to-fine start (coarse levels run on the device, each
  // stopping early, as on the CPU, once an iteration changed nothing).
  // (Only what a run reads before writing it is cleared: each memset is a few microseconds of a
  // millisecond-long run.)
  void Reset() {
    for (Level& level : levels) level.current = 0;
    // A run enqueues as little as it can before its first launch: every call here is a stream operation the
    // run's time includes. The pipeline's tile counters only grow (a wait is for this run's sweeps), so
    // they are cleared only before they could overflow.
    if (sweep_base > kMaxSweepBase) {
      tile_done.Zero(stream);
      mailbox.Zero(stream);
      sweep_base = 0;
    }
    coarse_changed.Zero(stream);
    const bool c2f = config.coarse_to_fine && levels.size() >= 2;
    fresh_pending = false;
    if (!c2f) {  // zero messages: the border messages (tiled) or the fine level's first generation (sync)
      if (use_fast && Pipelined(launch))
        fresh_pending = true;  // the first launch reads them as 0 (fast::FreshVisit())
      else
        for (auto& b : borders) b.Zero(stream);
      for (auto& m : levels[0].messages[0]) m.Zero(stream);
      return;
    }
    // Coarse-to-fine: the coarsest level starts from zero messages; every finer level's first generation
    // and (tiled) every border message are then written whole by the upsampling kernels.
    for (auto& m : levels.back().messages[0]) m.Zero(stream);
    for (std::size_t i = levels.size() - 1; i >= 1; --i) {
      Level& level = levels[i];
      int* flags = coarse_changed.get() + (i - 1) * static_cast<std::size_t>(config.iterations);
      for (int it = 0; it < config.iterations; ++it)
        EnqueueSync(level, false, nullptr, flags + it, it > 0 ? flags + it - 1 : nullptr);
      const Messages coarse_messages = level.Get(level.current);
      if (i > 1 || config.schedule == Schedule::kSync) {
        Level& finer = levels[i - 1];
        const std::int64_t count = static_cast<std::int64_t>(finer.nodes()) * Lp;
        UpsampleKernel<<<Blocks(count, 256), 256, 0, stream>>>(coarse_messages, level.width, finer.Get(finer.current),
                                                               finer.width, finer.height, Lp);
        MRF_CHECK_LAUNCH("upsample kernel", stream, false);
      } else {
        const std::int64_t count =
            (static_cast<std::int64_t>(grid.tiles_x - 1) * problem.height +
             static_cast<std::int64_t>(grid.tiles_y - 1) * problem.width) * Lp;
        if (count > 0) {
          BordersFromCoarseKernel<<<Blocks(count, 256), 256, 0, stream>>>(coarse_messages, level.width, Tiles());
          MRF_CHECK_LAUNCH("borders kernel", stream, false);
        }
      }
    }
  }

  void EnqueueIteration() {
    if (config.schedule == Schedule::kTiled) {
      EnqueueOuter();
    } else {
      if (inject_launch_pending) InjectLaunchFault();
      EnqueueSync(levels[0], true, labels.get(), changed.get(), nullptr);
    }
  }

  // A fast-kernel wait that timed out is a bug: say so rather than return wrong labels.
  void CheckPipeline() {
    if (!use_fast) return;
    int error = 0;
    MRF_CUDA_CHECK(cudaMemcpyAsync(&error, fast_error.get(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (error) {
      fast_error.Zero(stream);  // a later run starts clean
      tile_done.Zero(stream);
      mailbox.Zero(stream);
      sweep_base = 0;
      throw Error("cuda-bp: the tile pipeline stalled waiting for a neighbouring tile (internal error " +
                  std::to_string(error) + ")");
    }
  }

  Energy EnergyOf(const Label* device_labels) {
    MRF_CUDA_CHECK(cudaMemsetAsync(energy_sum.get(), 0, sizeof(unsigned long long), stream));
    const std::int64_t n = static_cast<std::int64_t>(levels[0].nodes());
    EnergyKernel<<<Blocks(n, 256), 256, 0, stream>>>(Params(levels[0]), device_labels, energy_sum.get());
    MRF_CHECK_LAUNCH("energy kernel", stream, false);
    MRF_CUDA_CHECK(cudaMemcpyAsync(host_energy, energy_sum.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return static_cast<Energy>(*host_energy) + levels[0].unary_offset;
  }

  // Border messages (or grid messages) back to the host, without the padded labels.
  std::vector<Cost> Unpad(const DeviceBuffer<Cost>& buffer) {
    std::vector<Cost> padded;
    buffer.Download(padded, stream);
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int L = problem.num_labels;
    std::vector<Cost> out(padded.size() / Lp * L);
    for (std::size_t i = 0; i < padded.size() / Lp; ++i) std::copy_n(&padded[i * Lp], L, &out[i * L]);
    return out;
  }
};

CudaRunner::CudaRunner(Problem problem, const Config& config, const CudaTuning& tuning)
    : impl_(std::make_unique<Impl>()) {
  impl_->Setup(std::move(problem), config, tuning);
  ReadUploadTime();
}

CudaRunner::CudaRunner(const Model& model, const Config& config, const CudaTuning& tuning)
    : impl_(std::make_unique<Impl>()) {
  if (tuning.host_setup) {  // the old setup throughout: the costs shifted on the host
    impl_->Setup(PrepareProblem(model), config, tuning);
    ReadUploadTime();
    return;
  }
  Problem problem = PrepareProblemWithoutCosts(model);
  const Cost* raw = model.unary.data();
  std::vector<Problem> shapes;
  if (config.coarse_to_fine && CanCoarsen(problem)) {
    shapes = CoarseShapes(problem);
    if (shapes.empty()) {  // the bound gave up: the host builds the levels from its shifted costs
      problem = PrepareProblem(model);
      raw = nullptr;
    }
  }
  impl_->Setup(std::move(problem), config, tuning, raw, std::move(shapes));
  ReadUploadTime();
}

void CudaRunner::ReadUploadTime() {
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
  times_.upload_ms = ms;
}

std::vector<Cost> CudaRunner::LevelUnary(int level) {
  if (level < 0 || level >= static_cast<int>(impl_->levels.size()))
    throw Error("cuda-bp: no level " + std::to_string(level) + " (" + std::to_string(impl_->levels.size()) + " levels)");
  return impl_->Unpad(impl_->levels[static_cast<std::size_t>(level)].unary);
}

CudaRunner::~CudaRunner() = default;

RunOutput CudaRunner::Run(const IterationCallback& callback, bool per_iteration, bool download_messages) {
  Impl& m = *impl_;
  RunOutput out;
  out.grid = m.grid;
  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.Reset();
  Energy best = 0;
  bool have_best = false;
  for (int it = 1; it <= m.config.iterations; ++it) {
    MRF_CUDA_CHECK(cudaMemsetAsync(m.changed.get(), 0, sizeof(int), m.stream));
    m.EnqueueIteration();
    out.iterations = it;
    if (!per_iteration) continue;
    m.CheckPipeline();
    const Energy energy = m.EnergyOf(m.labels.get());  // synchronises
    MRF_CUDA_CHECK(cudaMemcpyAsync(m.host_changed, m.changed.get(), sizeof(int), cudaMemcpyDeviceToHost, m.stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    out.converged = *m.host_changed == 0;
    out.energies.push_back(energy);
    if (!have_best || energy < best) {
      best = energy;
      have_best = true;
      MRF_CUDA_CHECK(cudaMemcpyAsync(m.best_labels.get(), m.labels.get(), m.labels.size() * sizeof(Label),
                                     cudaMemcpyDeviceToDevice, m.stream));
    }
    if (callback && !callback(IterationState{it, energy, out.converged})) break;
    if (out.converged) break;
  }
  if (!per_iteration) {
    m.CheckPipeline();
    best = m.EnergyOf(m.labels.get());
    out.energies.push_back(best);
    MRF_CUDA_CHECK(cudaMemcpyAsync(m.best_labels.get(), m.labels.get(), m.labels.size() * sizeof(Label),
                                   cudaMemcpyDeviceToDevice, m.stream));
  }
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  times_.solve_ms = ms;

  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.labels.Download(out.labels, m.stream);
  m.best_labels.Download(out.best_labels, m.stream);
  MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  out.best_energy = best;
  if (download_messages) {
    if (m.config.schedule == Schedule::kTiled) {
      out.borders.right = m.Unpad(m.borders[0]);
      out.borders.left = m.Unpad(m.borders[1]);
      out.borders.down = m.Unpad(m.borders[2]);
      out.borders.up = m.Unpad(m.borders[3]);
    } else {
      Level& f = m.levels[0];
      out.messages.from_left = m.Unpad(f.messages[f.current][0]);
      out.messages.from_right = m.Unpad(f.messages[f.current][1]);
      out.messages.from_up = m.Unpad(f.messages[f.current][2]);
      out.messages.from_down = m.Unpad(f.messages[f.current][3]);
    }
  }
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  times_.download_ms = ms;
  return out;
}

double CudaRunner::TimeIterations(int iterations) {
  Impl& m = *impl_;
  MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.Reset();
  for (int it = 0; it < iterations; ++it) m.EnqueueIteration();
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  m.CheckPipeline();
  return ms;
}

Energy CudaRunner::DeviceEnergy() { return impl_->EnergyOf(impl_->labels.get()); }

Labeling CudaRunner::DeviceLabels() {
  Labeling out;
  impl_->labels.Download(out, impl_->stream);
  MRF_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  return out;
}

std::size_t CudaRunner::estimated_bytes() const { return impl_->estimated; }
std::size_t CudaRunner::allocated_bytes() const { return impl_->AllocatedBytes(); }
bool CudaRunner::uses_fast_kernel() const { return impl_->use_fast; }

std::string CudaRunner::Describe() const {
  const Impl& m = *impl_;
  std::string text = "GPU";
  if (m.config.schedule == Schedule::kTiled) {
    if (m.use_fast)
      text += " (tile " + std::to_string(m.tile) + ", fast kernel: a chain per " +
              (m.FastLanes() == 2 ? "pair of threads, " : "thread, ") +
              std::to_string(m.Lp) + " labels packed in 16 bits, " + ToString(m.launch) + " launch, " +
              (m.launch == CudaLaunch::kPipeline && m.mailbox.get() ? "mailbox handoff, " : "") +
              std::to_string(m.shared_bytes / 1024) + " KB shared)";
    else
      text += " (tile " + std::to_string(m.tile) + ", general kernel: " + std::to_string(m.C) + " labels x " +
              std::to_string(m.G) + " lanes per chain, " + ToString(m.launch) + " launch, " +
              std::to_string(m.shared_bytes / 1024) + " KB shared" +
              (m.fast_why.empty() ? std::string() : "; " + m.fast_why) + ")";
  }
  if (!m.note.empty()) text += "; " + m.note;
  return text;
}


namespace {
__global__ void ClockProbeKernel(long long cycles, unsigned long long* out) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  while (clock64() - c0 < cycles) {
  }
  const long long c1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}
}  // namespace

double CudaMeasureSmClockMHz() {
  DeviceBuffer<unsigned long long> out;
  out.Allocate(2, "the clock probe");
  std::vector<unsigned long long> host;
  double mhz = 0;
  for (int i = 0; i < 3; ++i) {  // the last of three (the first ones ramp the clock up)
    ClockProbeKernel<<<1, 1>>>(50000000LL, out.get());
    MRF_CHECK_LAUNCH("clock probe", nullptr, false);
    MRF_CUDA_CHECK(cudaDeviceSynchronize());
    out.Download(host, nullptr);
    MRF_CUDA_CHECK(cudaDeviceSynchronize());
    mhz = host[1] ? 1e3 * static_cast<double>(host[0]) / static_cast<double>(host[1]) : 0;
  }
  return mhz;
}

double CudaDeviceCopyGBs(std::size_t bytes, int repeats) {
  DeviceBuffer<unsigned char> a, b;
  a.Allocate(bytes, "the bandwidth probe");
  b.Allocate(bytes, "the bandwidth probe");
  MRF_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t start, stop;
  MRF_CUDA_CHECK(cudaEventCreate(&start));
  MRF_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < repeats + 2; ++i) {
    MRF_CUDA_CHECK(cudaEventRecord(start));
    MRF_CUDA_CHECK(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    MRF_CUDA_CHECK(cudaEventRecord(stop));
    MRF_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    MRF_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (i >= 2) ms.push_back(t);  // two warm-up copies
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;  // bytes read + written
}

std::size_t CudaMaxSharedBytesPerBlock() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return 0;
  }
  int bytes = 0;
  MRF_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  return static_cast<std::size_t>(bytes);
}

}  // namespace mrf::bp
