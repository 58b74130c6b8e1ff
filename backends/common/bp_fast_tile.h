#pragma once
/// @file bp_fast_tile.h
/// @brief The fast tile visit of the CUDA tiled BP schedule, written once for the GPU kernel and for a
/// host emulation that tests run on the CPU.
///
/// The fast visit runs one message chain per thread with all labels in registers, two labels packed
/// per 32-bit word as signed 16-bit halves (Hopper's DPX instructions min.s16x2 / add-min work on both
/// halves at once). It applies to 2..32 labels, Potts, truncated linear and short-window truncated
/// quadratic terms, and to problems whose costs keep every sum below 2^15 (FastSupport()); other problems
/// take the general kernel. Its messages are the ones ComputeMessage() gives, bit for bit.
///
/// A visit is a sequence of *phases* separated by block barriers; inside a phase no thread reads what
/// another writes, so the host emulation may run a phase's threads one after the other. Every function
/// here is MRF_HD; device-only details (vector loads, cp.async, flags) stay in backends/cuda/bp_cuda.cu.

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/common/bp_message.h"

#if defined(__CUDACC__)
/// Asks nvcc to unroll the next loop (register arrays must be indexed by constants); nothing elsewhere.
#define MRF_UNROLL _Pragma("unroll")
#else
/// Asks nvcc to unroll the next loop (register arrays must be indexed by constants); nothing elsewhere.
#define MRF_UNROLL
#endif

namespace mrf::bp::fast {

/// Two labels: the even one in the low half, the odd one in the high half (signed 16 bits each).
using Word = std::uint32_t;

/// Largest value any packed sum may reach.
constexpr int kMaxPacked = 32767;

// ---- Packed arithmetic (no half ever overflows: FastSupport() checks the bound) --------------------

/// Both halves set to v (0 <= |v| <= kMaxPacked).
MRF_HD Word Splat(int v) { return (static_cast<Word>(v) & 0xFFFFu) | (static_cast<Word>(v) << 16); }
/// The low (even-label) half.
MRF_HD int Lo(Word w) { return static_cast<int>(static_cast<std::int16_t>(static_cast<std::uint16_t>(w & 0xFFFFu))); }
/// The high (odd-label) half.
MRF_HD int Hi(Word w) { return static_cast<int>(static_cast<std::int16_t>(static_cast<std::uint16_t>(w >> 16))); }
/// A word from two values.
MRF_HD Word Pack(int lo, int hi) { return (static_cast<Word>(lo) & 0xFFFFu) | (static_cast<Word>(hi) << 16); }

/// Halfwise minimum.
MRF_HD Word Min2(Word a, Word b) {
#if defined(__CUDA_ARCH__)
  Word r;
  asm("min.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return Pack(Lo(a) < Lo(b) ? Lo(a) : Lo(b), Hi(a) < Hi(b) ? Hi(a) : Hi(b));
#endif
}

/// Halfwise minimum of three.
MRF_HD Word Min3(Word a, Word b, Word c) {
#if defined(__CUDA_ARCH__)
  return __vimin3_s16x2(a, b, c);
#else
  return Min2(Min2(a, b), c);
#endif
}

/// Halfwise min(a + b, c).
MRF_HD Word AddMin(Word a, Word b, Word c) {
#if defined(__CUDA_ARCH__)
  return __viaddmin_s16x2(a, b, c);
#else
  return Min2(Pack(Lo(a) + Lo(b), Hi(a) + Hi(b)), c);
#endif
}

/// (a's high half, b's low half): the labels one below b's.
MRF_HD Word Funnel(Word a, Word b) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, 0x5432);
#else
  return (a >> 16) | (b << 16);
#endif
}

/// Word i of v, or `pad` outside [0, NW) (i is a compile-time constant once loops are unrolled).
template <int NW>
MRF_HD Word WordAt(const Word (&v)[NW], int i, Word pad) {
  return i >= 0 && i < NW ? v[i] : pad;
}

/// The word holding labels (2w - d, 2w + 1 - d) of v (`pad` outside the array).
template <int NW>
MRF_HD Word ShiftDown(const Word (&v)[NW], int w, int d, Word pad) {
  if (d % 2 == 0) return WordAt(v, w - d / 2, pad);
  return Funnel(WordAt(v, w - (d + 1) / 2, pad), WordAt(v, w - (d - 1) / 2, pad));
}

/// The word holding labels (2w + d, 2w + 1 + d) of v (`pad` outside the array).
template <int NW>
MRF_HD Word ShiftUp(const Word (&v)[NW], int w, int d, Word pad) {
  if (d % 2 == 0) return WordAt(v, w + d / 2, pad);
  return Funnel(WordAt(v, w + (d - 1) / 2, pad), WordAt(v, w + (d + 1) / 2, pad));
}

/// Halfwise minimum of v[first .. first + N) as a tree of three-way minima.
template <int N, int First, int NW>
MRF_HD Word MinTree(const Word (&v)[NW]) {
  if constexpr (N == 1) {
    return v[First];
  } else if constexpr (N == 2) {
    return Min2(v[First], v[First + 1]);
  } else if constexpr (N == 3) {
    return Min3(v[First], v[First + 1], v[First + 2]);
  } else {
    constexpr int a = N / 3, b = N / 3, c = N - 2 * (N / 3);
    return Min3(MinTree<a, First, NW>(v), MinTree<b, First + a, NW>(v), MinTree<c, First + a + b, NW>(v));
  }
}

// ---- One message ------------------------------------------------------------------------------------

/// How the message of a pairwise family is formed from the clamped values f = min(h - min h, cap).
enum Form : int {
  kFormClamp = 0,       ///< f itself (Potts, linear truncated at 1, quadratic with window 0).
  kFormNeighbour = 1,   ///< min(f[b], f[b +- 1] + slope): linear truncated at 2.
  kFormLinearDT = 2,    ///< min_a f[a] + slope |a - b| by doubling steps (linear, any truncation).
  kFormQuadWindow = 3,  ///< min over |d| <= r of f[b + d] + scale d^2, r < 8 (quadratic window).
};

/// What a kernel needs about the pairwise family, besides its Form.
struct FormParams {
  int max_distance = 0;  ///< cap = scale * max_distance (MaxFamilyDistance()).
  int window = 0;        ///< kFormQuadWindow: r.
};

/// The message from packed sums h (padded labels hold a value at least min h + cap): out equals
/// ComputeMessage() on the real labels; padded labels get values in [0, cap].
template <int NW, int F>
MRF_HD void Message(const Word (&h)[NW], int scale, const FormParams& fp, Word (&out)[NW]) {
  const Word m2 = MinTree<NW, 0, NW>(h);
  const int mn = Lo(m2) < Hi(m2) ? Lo(m2) : Hi(m2);
  const int cap = scale * fp.max_distance;
  const Word cap2 = Splat(cap), neg2 = Splat(-mn);
  Word f[NW];
MRF_UNROLL
  for (int w = 0; w < NW; ++w) f[w] = AddMin(h[w], neg2, cap2);  // min(h - mn, cap)
  if constexpr (F == kFormClamp) {
MRF_UNROLL
    for (int w = 0; w < NW; ++w) out[w] = f[w];
  } else if constexpr (F == kFormNeighbour) {
    const Word slope2 = Splat(scale < cap ? scale : cap);
    Word below[NW + 1];  // below[w]: labels (2w - 1, 2w); below[w + 1] holds the neighbours above
MRF_UNROLL
    for (int w = 0; w <= NW; ++w) below[w] = Funnel(w > 0 ? f[w - 1] : cap2, w < NW ? f[w] : cap2);
MRF_UNROLL
    for (int w = 0; w < NW; ++w) out[w] = AddMin(Min2(below[w], below[w + 1]), slope2, f[w]);
  } else if constexpr (F == kFormLinearDT) {
    // Doubling steps of length k = 1, 2, 4, ...: after them g[b] = min over a <= b of f[a] + slope (b - a),
    // then the same upwards. A step longer than the cap is clamped to it: g >= 0 and f <= cap, so such a
    // term never wins either way.
    const int slope = scale < cap ? scale : cap;
MRF_UNROLL
    for (int w = 0; w < NW; ++w) out[w] = f[w];
MRF_UNROLL
    for (int k = 1; k < 2 * NW; k *= 2) {
      const int step = slope * k < cap ? slope * k : cap;
      const Word step2 = Splat(step);
MRF_UNROLL
      for (int w = NW - 1; w >= 0; --w) out[w] = AddMin(ShiftDown(out, w, k, cap2), step2, out[w]);
    }
MRF_UNROLL
    for (int k = 1; k < 2 * NW; k *= 2) {
      const int step = slope * k < cap ? slope * k : cap;
      const Word step2 = Splat(step);
MRF_UNROLL
      for (int w = 0; w < NW; ++w) out[w] = AddMin(ShiftUp(out, w, k, cap2), step2, out[w]);
    }
  } else {
MRF_UNROLL
    for (int w = 0; w < NW; ++w) out[w] = f[w];
MRF_UNROLL
    for (int d = 1; d < 8; ++d) {
      if (d > fp.window) break;
      const Word step2 = Splat(scale * d * d);  // < cap for d <= r
MRF_UNROLL
      for (int w = 0; w < NW; ++w) {
        out[w] = AddMin(ShiftDown(f, w, d, cap2), step2, out[w]);
        out[w] = AddMin(ShiftUp(f, w, d, cap2), step2, out[w]);
      }
    }
  }
}

// ---- Applicability ----------------------------------------------------------------------------------

/// Whether and how the fast visit takes a problem.
struct Support {
  bool ok = false;       ///< The fast visit applies.
  std::string why;       ///< Why not (for reports), when !ok.
  int words = 0;         ///< NW: words per pixel, 2, 4, 8 or 16 (labels padded to 2 NW).
  int form = kFormClamp; ///< Form.
  FormParams params;     ///< Its parameters.
  int pad_cost = 0;      ///< Unary cost of padded labels: never the least, never overflowing.
};

/// Decides whether the fast visit takes a problem (and how), from its family and cost bounds: 2..32
/// labels; Potts, truncated linear or quadratic with a window below 8; non-negative edge scales; and
/// unary spread + 8 x pairwise spread + 1 <= 32767 so that packed sums cannot overflow.
Support FastSupport(int num_labels, int kind, Cost truncation, Cost max_unary_spread, Cost max_message,
                    Cost min_scale);

// ---- Tile geometry and shared arrays -----------------------------------------------------------------

/// Everything a visit reads or writes outside the block's shared memory.
struct Params {
  const Word* unary = nullptr;        ///< N x NW packed, padded labels hold Support::pad_cost.
  const Cost* scale_right = nullptr;  ///< N (as bp::Problem).
  const Cost* scale_down = nullptr;   ///< N.
  Cost* border_right = nullptr;       ///< Border messages (bp::BorderMessages layout, Lp = 2 NW ints each).
  Cost* border_left = nullptr;
  Cost* border_down = nullptr;
  Cost* border_up = nullptr;
  Label* labels = nullptr;            ///< N.
  int* changed = nullptr;             ///< Set to 1 when an outgoing border message changes.
  int* tile_done = nullptr;           ///< Pipeline: sweeps completed per tile (device only).
  int* error = nullptr;               ///< Pipeline: set when a wait timed out (device only).
  FormParams form;                    ///< Family parameters.
  int width = 0, height = 0, L = 0, Lp = 0;
  int tile = 0, tiles_x = 0, tiles_y = 0;
  int row_stride = 0;                 ///< Words between tile rows in the shared arrays.
  int inner = 1;                      ///< Inner iterations per visit.
};

/// Words per 16-byte (or narrower) vector of a pixel: min(4, NW).
MRF_HD int VectorWords(int words) { return words < 4 ? words : 4; }

/// Row stride of the shared tile arrays: tile x NW words, plus one vector when the row would span an
/// even number of vectors, so that the eight threads of a quarter warp reading one column of eight rows
/// hit eight different 16-byte bank groups.
MRF_HD int RowStride(int tile, int words) {
  const int vw = VectorWords(words);
  const int stride = tile * words;
  return (stride / vw) % 2 == 0 ? stride + vw : stride;
}

/// Which vector slot of pixel x holds vector j: rotated with x so that eight threads reading one row of
/// eight neighbouring pixels hit eight different bank groups.
MRF_HD int Slot(int x, int j, int words) {
  const int vectors = words / VectorWords(words);
  if (vectors < 2) return j;
  return j ^ ((x / (8 / vectors)) % vectors);
}

/// Word offset of vector j of tile pixel (x, y) in a shared tile array.
MRF_HD int PixelOffset(int x, int y, int j, int words, int row_stride) {
  return y * row_stride + x * words + VectorWords(words) * Slot(x, j, words);
}

/// The four edges of a tile in the staging buffers, T x NW words each.
enum Edge : int { kEdgeLeft = 0, kEdgeRight = 1, kEdgeTop = 2, kEdgeBottom = 3 };

/// A block's shared arrays (or their host copies in the emulation).
struct Buffers {
  Word* unary[2];  ///< Unary costs of the current and the next tile, T x row_stride.
  Word* fl;        ///< Messages into each tile pixel from the left, T x row_stride.
  Word* fr;        ///< From the right.
  Word* fu;        ///< From above.
  Word* fd;        ///< From below.
  Cost* sr[2];     ///< sr[y (T + 1) + x + 1]: scale of the edge (x, y) -> (x + 1, y), x >= -1.
  Cost* sd[2];     ///< sd[(y + 1) T + x]: scale of the edge (x, y) -> (x, y + 1), y >= -1.
  Word* stage[2];  ///< Messages entering the tile, [edge][i][word] (Edge order), T x NW per edge.
  // Buffer `buf` of a pair, chosen without indexing by a run-time value (which would put the
  // pointers in local memory on the GPU).
  MRF_HD Word* Unary(int buf) const { return buf ? unary[1] : unary[0]; }  ///< Unary costs of buffer buf.
  MRF_HD Cost* Sr(int buf) const { return buf ? sr[1] : sr[0]; }           ///< Horizontal scales of buffer buf.
  MRF_HD Cost* Sd(int buf) const { return buf ? sd[1] : sd[0]; }           ///< Vertical scales of buffer buf.
  MRF_HD Word* Stage(int buf) const { return buf ? stage[1] : stage[0]; }  ///< Staging buffer buf.
};

/// Multiple of 4 at least n (16-byte alignment of every array).
MRF_HD std::size_t RoundUp4(std::size_t n) { return (n + 3) / 4 * 4; }

/// 32-bit words of shared memory one block needs.
MRF_HD std::size_t SharedWords(int tile, int words) {
  const std::size_t T = static_cast<std::size_t>(tile);
  const std::size_t array = RoundUp4(T * RowStride(tile, words));
  const std::size_t scales = RoundUp4(T * (T + 1));
  const std::size_t stage = RoundUp4(4 * T * words);
  return 6 * array + 4 * scales + 2 * stage;
}

/// Cuts `base` (SharedWords() words, 16-byte aligned) into a block's arrays.
MRF_HD Buffers Carve(Word* base, int tile, int words) {
  const std::size_t T = static_cast<std::size_t>(tile);
  const std::size_t array = RoundUp4(T * RowStride(tile, words));
  const std::size_t scales = RoundUp4(T * (T + 1));
  const std::size_t stage = RoundUp4(4 * T * words);
  Buffers b;
  Word* p = base;
  b.unary[0] = p, p += array;
  b.unary[1] = p, p += array;
  b.fl = p, p += array;
  b.fr = p, p += array;
  b.fu = p, p += array;
  b.fd = p, p += array;
  b.sr[0] = reinterpret_cast<Cost*>(p), p += scales;
  b.sr[1] = reinterpret_cast<Cost*>(p), p += scales;
  b.sd[0] = reinterpret_cast<Cost*>(p), p += scales;
  b.sd[1] = reinterpret_cast<Cost*>(p), p += scales;
  b.stage[0] = p, p += stage;
  b.stage[1] = p;
  return b;
}

/// One tile's place in the grid.
struct Tile {
  int tx = 0, ty = 0;    ///< Tile coordinates.
  int x0 = 0, y0 = 0;    ///< First pixel.
  int tw = 0, th = 0;    ///< Size (smaller at the right and bottom edges).
  bool has_left = false, has_right = false, has_up = false, has_down = false;  ///< Neighbouring tiles.
};

/// Tile (tx, ty) of the grid.
MRF_HD Tile MakeTile(const Params& P, int tx, int ty) {
  Tile t;
  t.tx = tx, t.ty = ty;
  t.x0 = tx * P.tile, t.y0 = ty * P.tile;
  t.tw = P.width - t.x0 < P.tile ? P.width - t.x0 : P.tile;
  t.th = P.height - t.y0 < P.tile ? P.height - t.y0 : P.tile;
  t.has_left = tx > 0, t.has_right = tx + 1 < P.tiles_x, t.has_up = ty > 0, t.has_down = ty + 1 < P.tiles_y;
  return t;
}

// ---- The pipeline plan: which tiles a block visits, in which order -------------------------------------

/// One visit of a pipeline block.
struct Visit {
  int tx = 0, ty = 0;
  int sweep = 0;             ///< 0: raster, 1: reverse raster (within the outer iteration).
  bool carried = false;      ///< Its entering left (raster) or right (reverse) edge comes from the block's
                             ///< previous visit, through shared memory.
  bool carry_next = false;   ///< Its next visit takes the edge it sends right (raster) or left (reverse).
};

/// Tile rows block b of nb handles: b, b + nb, ...
MRF_HD int RowsOfBlock(int b, int nb, int tiles_y) { return b < tiles_y ? (tiles_y - 1 - b) / nb + 1 : 0; }

/// Visits block b of nb makes in one outer iteration.
MRF_HD int VisitsOfBlock(int b, int nb, int tiles_x, int tiles_y) { return 2 * RowsOfBlock(b, nb, tiles_y) * tiles_x; }

/// Visit n of block b of nb: the raster sweep over its rows top-down, then the reverse sweep bottom-up.
/// Every block visits its tiles in the serial raster (reverse raster) order, so a block only ever waits
/// for the tile above (below) it, in the same sweep.
MRF_HD Visit VisitOfBlock(int b, int nb, int tiles_x, int tiles_y, int n) {
  const int rows = RowsOfBlock(b, nb, tiles_y);
  const int per_sweep = rows * tiles_x;
  Visit v;
  v.sweep = n < per_sweep ? 0 : 1;
  const int k = n - v.sweep * per_sweep;
  const int row = k / tiles_x, i = k - row * tiles_x;
  if (v.sweep == 0) {
    v.ty = b + row * nb;
    v.tx = i;
  } else {
    v.ty = b + (rows - 1 - row) * nb;
    v.tx = tiles_x - 1 - i;
  }
  v.carried = i > 0;
  v.carry_next = i + 1 < tiles_x;
  return v;
}

// ---- Phases of a visit (thread tid of n) ----------------------------------------------------------

/// Loads vector j of a pixel's words (VW of them) from shared memory into v[j VW ...].
template <int NW>
MRF_HD void LoadPixel(Word (&v)[NW], const Word* array, int x, int y, int row_stride) {
  constexpr int VW = NW < 4 ? NW : 4;
MRF_UNROLL
  for (int j = 0; j < NW / VW; ++j) {
    const Word* p = array + PixelOffset(x, y, j, NW, row_stride);
#if defined(__CUDA_ARCH__)
    if constexpr (VW == 4) {
      const uint4 t = *reinterpret_cast<const uint4*>(p);
      v[4 * j] = t.x, v[4 * j + 1] = t.y, v[4 * j + 2] = t.z, v[4 * j + 3] = t.w;
    } else {
      const uint2 t = *reinterpret_cast<const uint2*>(p);
      v[2 * j] = t.x, v[2 * j + 1] = t.y;
    }
#else
    for (int k = 0; k < VW; ++k) v[VW * j + k] = p[k];
#endif
  }
}

/// Stores a pixel's words (see LoadPixel).
template <int NW>
MRF_HD void StorePixel(Word* array, int x, int y, int row_stride, const Word (&v)[NW]) {
  constexpr int VW = NW < 4 ? NW : 4;
MRF_UNROLL
  for (int j = 0; j < NW / VW; ++j) {
    Word* p = array + PixelOffset(x, y, j, NW, row_stride);
#if defined(__CUDA_ARCH__)
    if constexpr (VW == 4) {
      *reinterpret_cast<uint4*>(p) = make_uint4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(v[2 * j], v[2 * j + 1]);
    }
#else
    for (int k = 0; k < VW; ++k) p[k] = v[VW * j + k];
#endif
  }
}

/// Reads 2 NW border ints (global memory written by other blocks: L2 only on the GPU) as packed words.
template <int NW>
MRF_HD void LoadBorder(Word (&v)[NW], const Cost* src) {
MRF_UNROLL
  for (int q = 0; q < NW / 2; ++q) {
#if defined(__CUDA_ARCH__)
    const int4 t = __ldcg(reinterpret_cast<const int4*>(src) + q);
    v[2 * q] = Pack(t.x, t.y), v[2 * q + 1] = Pack(t.z, t.w);
#else
    v[2 * q] = Pack(src[4 * q], src[4 * q + 1]), v[2 * q + 1] = Pack(src[4 * q + 2], src[4 * q + 3]);
#endif
  }
}

/// Writes a message as 2 NW border ints, 0 at padded labels; returns whether a real label changed.
template <int NW>
MRF_HD bool StoreBorder(Cost* dst, const Word (&v)[NW], const Word (&old)[NW], int L) {
  bool changed = false;
MRF_UNROLL
  for (int q = 0; q < NW / 2; ++q) {
    int x[4];
MRF_UNROLL
    for (int k = 0; k < 2; ++k) {
      const int label = 4 * q + 2 * k;
      x[2 * k] = label < L ? Lo(v[2 * q + k]) : 0;
      x[2 * k + 1] = label + 1 < L ? Hi(v[2 * q + k]) : 0;
      changed |= Pack(x[2 * k], x[2 * k + 1]) != old[2 * q + k];
    }
#if defined(__CUDA_ARCH__)
    __stcg(reinterpret_cast<int4*>(dst) + q, make_int4(x[0], x[1], x[2], x[3]));
#else
    for (int k = 0; k < 4; ++k) dst[4 * q + k] = x[k];
#endif
  }
  return changed;
}

/// Where a tile edge's entering messages come from in global memory (null when there is no neighbour).
MRF_HD const Cost* EnteringBorder(const Params& P, const Tile& t, int edge, int i) {
  const std::size_t Lp = static_cast<std::size_t>(P.Lp);
  switch (edge) {
    case kEdgeLeft:
      return t.has_left ? P.border_right + ((static_cast<std::size_t>(t.tx) - 1) * P.height + t.y0 + i) * Lp : nullptr;
    case kEdgeRight:
      return t.has_right ? P.border_left + (static_cast<std::size_t>(t.tx) * P.height + t.y0 + i) * Lp : nullptr;
    case kEdgeTop:
      return t.has_up ? P.border_down + ((static_cast<std::size_t>(t.ty) - 1) * P.width + t.x0 + i) * Lp : nullptr;
    default:
      return t.has_down ? P.border_up + (static_cast<std::size_t>(t.ty) * P.width + t.x0 + i) * Lp : nullptr;
  }
}

/// Fills the staging buffer with the messages entering a tile (zero where it has no neighbour), except
/// the edge `skip` (-1: none) that the block's previous visit left there. Thread tid of n.
template <int NW>
MRF_HD void FillStage(const Params& P, const Tile& t, Word* stage, int skip, int tid, int n) {
  const int T = P.tile;
  const int items = 2 * t.th + 2 * t.tw;
  for (int item = tid; item < items; item += n) {
    int edge, i;
    if (item < 2 * t.th) {
      edge = item < t.th ? kEdgeLeft : kEdgeRight;
      i = item < t.th ? item : item - t.th;
    } else {
      const int k = item - 2 * t.th;
      edge = k < t.tw ? kEdgeTop : kEdgeBottom;
      i = k < t.tw ? k : k - t.tw;
    }
    if (edge == skip) continue;
    Word v[NW];
    const Cost* src = EnteringBorder(P, t, edge, i);
    if (src) {
      LoadBorder<NW>(v, src);
    } else {
MRF_UNROLL
      for (int w = 0; w < NW; ++w) v[w] = 0;
    }
    Word* dst = stage + (static_cast<std::size_t>(edge) * T + i) * NW;
MRF_UNROLL
    for (int w = 0; w < NW; ++w) dst[w] = v[w];
  }
}

/// Copies of a tile's unary costs and edge scales into the block's buffers: `copy(dst, src, words)`
/// moves `words` 32-bit words (a vector of the pixel, or one scale). Thread tid of n.
template <int NW, class Copy>
MRF_HD void LoadTileInputs(const Params& P, const Tile& t, Word* unary, Cost* sr, Cost* sd, int tid, int n,
                           Copy& copy) {
  constexpr int VW = NW < 4 ? NW : 4;
  constexpr int vectors = NW / VW;
  const int T = P.tile, W = P.width;
  for (int i = tid; i < t.tw * t.th * vectors; i += n) {
    const int pixel = i / vectors, j = i - pixel * vectors;
    const int y = pixel / t.tw, x = pixel - y * t.tw;
    copy(unary + PixelOffset(x, y, j, NW, P.row_stride),
         P.unary + (static_cast<std::size_t>(t.y0 + y) * W + t.x0 + x) * NW + VW * j, VW);
  }
  for (int i = tid; i < t.th * (t.tw + 1); i += n) {
    const int y = i / (t.tw + 1), x = i - y * (t.tw + 1) - 1;
    Cost* dst = sr + y * (T + 1) + x + 1;
    if (t.x0 + x >= 0)
      copy(reinterpret_cast<Word*>(dst),
           reinterpret_cast<const Word*>(P.scale_right + static_cast<std::size_t>(t.y0 + y) * W + t.x0 + x), 1);
    else
      *dst = 0;
  }
  for (int i = tid; i < (t.th + 1) * t.tw; i += n) {
    const int y = i / t.tw - 1, x = i - (y + 1) * t.tw;
    Cost* dst = sd + (y + 1) * T + x;
    if (t.y0 + y >= 0)
      copy(reinterpret_cast<Word*>(dst),
           reinterpret_cast<const Word*>(P.scale_down + static_cast<std::size_t>(t.y0 + y) * W + t.x0 + x), 1);
    else
      *dst = 0;
  }
}

/// Phase 1 of a visit: inner messages start at 0, the entering ones come from the staging buffer.
template <int NW>
MRF_HD void InitPhase(const Params& P, const Tile& t, const Buffers& B, int buf, int tid, int n) {
  const int rs = P.row_stride, T = P.tile;
  const Word* stage = B.Stage(buf);
  for (int i = tid; i < t.tw * t.th; i += n) {
    const int y = i / t.tw, x = i - y * t.tw;
    Word up[NW], down[NW];
MRF_UNROLL
    for (int w = 0; w < NW; ++w) {
      up[w] = y == 0 ? stage[(static_cast<std::size_t>(kEdgeTop) * T + x) * NW + w] : 0;
      down[w] = y == t.th - 1 ? stage[(static_cast<std::size_t>(kEdgeBottom) * T + x) * NW + w] : 0;
    }
    StorePixel<NW>(B.fu, x, y, rs, up);
    StorePixel<NW>(B.fd, x, y, rs, down);
  }
  for (int i = tid; i < 2 * t.th; i += n) {
    const bool left = i < t.th;
    const int y = left ? i : i - t.th;
    Word v[NW];
    const Word* src = stage + (static_cast<std::size_t>(left ? kEdgeLeft : kEdgeRight) * T + y) * NW;
MRF_UNROLL
    for (int w = 0; w < NW; ++w) v[w] = src[w];
    if (left)
      StorePixel<NW>(B.fl, 0, y, rs, v);
    else
      StorePixel<NW>(B.fr, t.tw - 1, y, rs, v);
  }
}

/// Phase 2 or 3 of an inner iteration: thread tid runs one chain (horizontal: right chains of the
/// tile rows, then left chains; vertical: down chains of the columns, then up chains). In the last
/// inner iteration a chain that leaves the tile writes the border message; the chains whose messages the
/// block's next visit takes (`carry_edge`: kEdgeLeft after a raster visit, kEdgeRight after a reverse one,
/// -1: none) also write them into that visit's staging buffer `carry_stage`.
template <int NW, int F>
MRF_HD void ChainPhase(const Params& P, const Tile& t, const Buffers& B, int buf, bool vertical, bool last,
                       Word* carry_stage, int carry_edge, int tid) {
  const int T = P.tile, rs = P.row_stride;
  const int lines = vertical ? t.tw : t.th, length = vertical ? t.th : t.tw;
  if (tid >= 2 * lines) return;
  const bool forward = tid < lines;  // right or down
  const int line = forward ? tid : tid - lines;
  const Word* unary = B.Unary(buf);
  Word* own;
  const Word* o1 = vertical ? B.fl : B.fu;
  const Word* o2 = vertical ? B.fr : B.fd;
  int steps, pos, step_pos;  // messages to send; first pixel along the line; +-1
  const Cost* scale;
  int scale_step;
  Cost* border = nullptr;
  int edge = -1;  // the staging edge of the next tile this chain's last message enters
  if (!vertical) {
    own = forward ? B.fl : B.fr;
    if (forward) {
      steps = t.x0 + t.tw < P.width ? t.tw : t.tw - 1;
      pos = 0, step_pos = 1;
      scale = B.Sr(buf) + line * (T + 1) + 1, scale_step = 1;
      if (t.has_right) border = P.border_right + (static_cast<std::size_t>(t.tx) * P.height + t.y0 + line) * P.Lp;
      edge = kEdgeLeft;
    } else {
      steps = t.x0 > 0 ? t.tw : t.tw - 1;
      pos = t.tw - 1, step_pos = -1;
      scale = B.Sr(buf) + line * (T + 1) + t.tw - 1, scale_step = -1;
      if (t.has_left) border = P.border_left + ((static_cast<std::size_t>(t.tx) - 1) * P.height + t.y0 + line) * P.Lp;
      edge = kEdgeRight;
    }
  } else {
    own = forward ? B.fu : B.fd;
    if (forward) {
      steps = t.y0 + t.th < P.height ? t.th : t.th - 1;
      pos = 0, step_pos = 1;
      scale = B.Sd(buf) + T + line, scale_step = T;
      if (t.has_down) border = P.border_down + (static_cast<std::size_t>(t.ty) * P.width + t.x0 + line) * P.Lp;
    } else {
      steps = t.y0 > 0 ? t.th : t.th - 1;
      pos = t.th - 1, step_pos = -1;
      scale = B.Sd(buf) + (t.th - 1) * T + line, scale_step = -T;
      if (t.has_up) border = P.border_up + ((static_cast<std::size_t>(t.ty) - 1) * P.width + t.x0 + line) * P.Lp;
    }
  }
  if (!last && steps == length) --steps;  // the message leaving the tile counts only in the last iteration
  const int x_line = vertical ? line : 0, y_line = vertical ? 0 : line;
  auto px = [&](int p) { return vertical ? x_line : p; };
  auto py = [&](int p) { return vertical ? p : y_line; };

  Word old[NW];  // the border message this visit replaces (to report changes)
MRF_UNROLL
  for (int w = 0; w < NW; ++w) old[w] = 0;
  if (last && border && steps == length) LoadBorder<NW>(old, border);

  Word m[NW], d[NW], a[NW], b[NW];
  LoadPixel<NW>(m, own, px(pos), py(pos), rs);
  if (steps > 0) {
    LoadPixel<NW>(d, unary, px(pos), py(pos), rs);
    LoadPixel<NW>(a, o1, px(pos), py(pos), rs);
    LoadPixel<NW>(b, o2, px(pos), py(pos), rs);
  }
  for (int i = 0; i < steps; ++i) {
    Word h[NW];
MRF_UNROLL
    for (int w = 0; w < NW; ++w) h[w] = d[w] + a[w] + b[w] + m[w];  // halves never carry (bound)
    const int s = *scale;
    const int next = pos + step_pos;
    if (i + 1 < steps) {  // the next pixel's inputs do not depend on this message
      LoadPixel<NW>(d, unary, px(next), py(next), rs);
      LoadPixel<NW>(a, o1, px(next), py(next), rs);
      LoadPixel<NW>(b, o2, px(next), py(next), rs);
    }
    Message<NW, F>(h, s, P.form, m);
    if (i + 1 < length) {
      StorePixel<NW>(own, px(next), py(next), rs, m);
    } else {
      if (StoreBorder<NW>(border, m, old, P.L)) *P.changed = 1;
      if (carry_stage && edge >= 0 && edge == carry_edge) {
        Word* dst = carry_stage + (static_cast<std::size_t>(edge) * T + line) * NW;
MRF_UNROLL
        for (int w = 0; w < NW; ++w) dst[w] = m[w];
      }
    }
    pos = next;
    scale += scale_step;
  }
}

/// Phase 4 of a reverse-sweep visit: the tile's labels, the least belief (ties: the smallest label).
template <int NW>
MRF_HD void LabelPhase(const Params& P, const Tile& t, const Buffers& B, int buf, int tid, int n) {
  const int rs = P.row_stride;
  for (int i = tid; i < t.tw * t.th; i += n) {
    const int y = i / t.tw, x = i - y * t.tw;
    Word u[NW], l[NW], r[NW], up[NW], dn[NW];
    LoadPixel<NW>(u, B.Unary(buf), x, y, rs);
    LoadPixel<NW>(l, B.fl, x, y, rs);
    LoadPixel<NW>(r, B.fr, x, y, rs);
    LoadPixel<NW>(up, B.fu, x, y, rs);
    LoadPixel<NW>(dn, B.fd, x, y, rs);
    int best = 2147483647, label = 0;
MRF_UNROLL
    for (int w = 0; w < NW; ++w) {
      const Word belief = u[w] + l[w] + r[w] + up[w] + dn[w];  // halves never carry (bound)
      if (2 * w < P.L && Lo(belief) < best) best = Lo(belief), label = 2 * w;
      if (2 * w + 1 < P.L && Hi(belief) < best) best = Hi(belief), label = 2 * w + 1;
    }
    P.labels[static_cast<std::size_t>(t.y0 + y) * P.width + t.x0 + x] = label;
  }
}

}  // namespace mrf::bp::fast
