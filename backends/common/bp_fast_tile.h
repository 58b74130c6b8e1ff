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
/// A visit is a sequence of *phases* separated by block barriers; inside a phase no chain reads what
/// another writes, so the host emulation may run a phase's chains one after the other. On the GPU a chain
/// of a local form (8 labels or more) is split over a pair of lanes that exchange words by shuffles every
/// step (LaneGroup, ChainLanes()); the host holds each chain whole, with the same arithmetic. Every
/// function here is MRF_HD; device-only details (vector loads, cp.async, flags) stay in
/// backends/cuda/bp_fast_kernels.cuh.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

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

/// Both halves set to the lesser half of w.
MRF_HD Word SplatMin(Word w) {
#if defined(__CUDA_ARCH__)
  return Min2(w, __byte_perm(w, 0, 0x1032));
#else
  return Min2(w, (w >> 16) | (w << 16));
#endif
}

/// Whether a form's message needs, besides a label's own sum, only the sums of the labels next to it:
/// then a chain's labels can be split over lanes that exchange one word per step (ChainLanes()).
MRF_HD constexpr bool LocalForm(int form) { return form == kFormClamp || form == kFormNeighbour; }

/// Lanes one chain is split over on the GPU: two (each holding half of the words) for the local forms
/// from 8 labels up, one otherwise. A step costs what one lane issues (one warp per scheduler, each
/// instruction waiting on the last); four lanes were measured slower than two on Tsukuba (docs/bp.md):
/// their per-step overhead does not shrink and six warps share four schedulers. The host emulation always
/// holds a chain in one lane.
MRF_HD constexpr int ChainLanes(int words, int form) { return LocalForm(form) && words >= 4 ? 2 : 1; }

/// The lane exchange of a chain held whole by one thread: nothing to combine; below the first label
/// and above the last there is no label, so each stands in for its missing neighbour (s >= 0 keeps
/// min(h[b], h[b] + s) = h[b]).
struct WholeChain {
  MRF_HD Word Min(Word local) const { return local; }
  /// `lower`: a word whose high half is the sum of the label below first's low label; `upper`: one whose
  /// low half is the sum of the label above last's high label.
  MRF_HD void Edges(Word first, Word last, Word* lower, Word* upper) const {
    *lower = first << 16;
    *upper = last >> 16;
  }
};

/// The message of a local form (LocalForm()) from the HW words of packed sums h this lane holds:
/// m(b) = min(h[b], h[b +- 1] + slope, min h + cap) - min h (the window on the unclamped sums, the clamp
/// folded into the last minimum: equal to the window on min(h - min h, cap), with a shorter dependency
/// chain). `lanes` combines the minimum over the chain's lanes and supplies the neighbouring sums
/// across lane boundaries (WholeChain, or the GPU's pair of lanes). No half overflows: h + slope <=
/// unary spread + 8 R + 1 (FastSupport()), and every half of the result lies in [0, cap].
template <int HW, int F, class Lanes>
MRF_HD void LocalMessage(const Word (&h)[HW], int scale, const FormParams& fp, const Lanes& lanes, Word (&out)[HW]) {
  static_assert(LocalForm(F), "LocalMessage takes the clamp and neighbour forms");
  // Both halves of cap = scale x max_distance and of the slope min(scale, cap), by one multiplication
  // each (0 <= scale x max_distance <= R < 2^15: no carry into the high half).
  const Word cap2 = static_cast<Word>(scale) * (0x10001u * static_cast<Word>(fp.max_distance));
  Word g[HW];
  if constexpr (F == kFormNeighbour) {
    const Word slope2 = static_cast<Word>(scale) * (fp.max_distance > 0 ? 0x10001u : 0u);
    Word lower, upper;
    lanes.Edges(h[0], h[HW - 1], &lower, &upper);
MRF_UNROLL
    for (int w = 0; w < HW; ++w) {
      const Word below = Funnel(w > 0 ? h[w - 1] : lower, h[w]);       // labels (2w - 1, 2w)
      const Word above = Funnel(h[w], w + 1 < HW ? h[w + 1] : upper);  // labels (2w + 1, 2w + 2)
      g[w] = AddMin(Min2(below, above), slope2, h[w]);
    }
  } else {
MRF_UNROLL
    for (int w = 0; w < HW; ++w) g[w] = h[w];
  }
  const Word mn2 = SplatMin(lanes.Min(MinTree<HW, 0, HW>(h)));
MRF_UNROLL
  for (int w = 0; w < HW; ++w) out[w] = AddMin(mn2, cap2, g[w]) - mn2;  // halves >= min h: no borrow
}

/// The message from packed sums h (padded labels hold a value at least min h + cap): out equals
/// ComputeMessage() on the real labels; padded labels get values in [0, cap].
template <int NW, int F>
MRF_HD void Message(const Word (&h)[NW], int scale, const FormParams& fp, Word (&out)[NW]) {
  if constexpr (LocalForm(F)) {
    LocalMessage<NW, F>(h, scale, fp, WholeChain{}, out);
  } else {
    const Word m2 = MinTree<NW, 0, NW>(h);
    const int mn = Lo(m2) < Hi(m2) ? Lo(m2) : Hi(m2);
    const int cap = scale * fp.max_distance;
    const Word cap2 = Splat(cap), neg2 = Splat(-mn);
    Word f[NW];
MRF_UNROLL
    for (int w = 0; w < NW; ++w) f[w] = AddMin(h[w], neg2, cap2);  // min(h - mn, cap)
    if constexpr (F == kFormLinearDT) {
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
  int* tile_done = nullptr;           ///< Pipeline: sweeps completed per tile (device only; unused with `mailbox`).
  int* error = nullptr;               ///< Pipeline: set when a wait timed out (device only).
  std::uint64_t* mailbox = nullptr;   ///< Pipeline by tile columns: the messages crossing vertical tile edges,
                                      ///< each word beside its sweep stamp (MailSlot()); null: not used.
  FormParams form;                    ///< Family parameters.
  int width = 0, height = 0, L = 0, Lp = 0;
  int tile = 0, tiles_x = 0, tiles_y = 0;
  int row_stride = 0;                 ///< Words between tile rows in the shared arrays.
  int inner = 1;                      ///< Inner iterations per visit.
  int fresh = 0;                      ///< Pipeline: 1 in the first outer iteration of a run from zero messages,
                                      ///< whose border messages are not cleared first (FreshVisit()).
};

/// Words per 16-byte (or narrower) vector of a pixel: min(4, NW).
MRF_HD constexpr int VectorWords(int words) { return words < 4 ? words : 4; }

/// The most accesses that meet in one 4-byte bank in the first wavefront of a horizontal chain phase
/// (1: conflict-free): consecutive chains on consecutive rows, `lanes` threads each, every lane reading
/// its words of pixel x in accesses of up to 16 bytes (a 16-byte access serves 8 threads per wavefront,
/// an 8-byte one 16, a 4-byte one 32). Later accesses and other pixels shift every thread alike.
MRF_HD constexpr int BankWays(int stride, int words, int lanes) {
  const int vw = VectorWords(words), hw = words / lanes, cw = hw < vw ? hw : vw;
  int count[32] = {};
  int ways = 0;
  for (int t = 0; t < 32 / cw; ++t) {
    const int row = t / lanes, word = t % lanes * hw;
    const int address = row * stride + vw * (word / vw) + word % vw;
    for (int i = 0; i < cw; ++i) {
      const int n = ++count[(address + i) % 32];
      ways = n > ways ? n : ways;
    }
  }
  return ways;
}

/// Row stride of the shared tile arrays: tile x NW words, plus the fewest vectors that make the
/// horizontal chains' accesses meet least (BankWays(); one lane per chain: rows an odd number of vectors
/// apart; 32 labels on two lanes keep two-way conflicts, as every stride does). The vertical chains read
/// one row, where the slot rotation (Slot()) spreads them.
MRF_HD constexpr int RowStride(int tile, int words, int lanes) {
  const int vw = VectorWords(words);
  int best = tile * words, best_ways = 33;
  for (int extra = 0; extra < 32; extra += vw) {
    const int ways = BankWays(tile * words + extra, words, lanes);
    if (ways < best_ways) best = tile * words + extra, best_ways = ways;
  }
  return best;
}

/// Which vector slot of pixel x holds vector j: rotated with x so that eight threads reading one row of
/// eight neighbouring pixels hit eight different bank groups.
MRF_HD int Slot(int x, int j, int words) {
  const unsigned vectors = static_cast<unsigned>(words / VectorWords(words));  // a power of two
  if (vectors < 2) return j;
  return j ^ static_cast<int>((static_cast<unsigned>(x) / (8 / vectors)) & (vectors - 1));  // x >= 0: shifts
}

/// Word offset of vector j of tile pixel (x, y) in a shared tile array.
MRF_HD int PixelOffset(int x, int y, int j, int words, int row_stride) {
  return y * row_stride + x * words + VectorWords(words) * Slot(x, j, words);
}

/// The four edges of a tile in the staging buffers, T x NW words each.
enum Edge : int { kEdgeLeft = 0, kEdgeRight = 1, kEdgeTop = 2, kEdgeBottom = 3 };
/// Edge e in a mask of edges (-1: none).
MRF_HD constexpr unsigned EdgeBit(int e) { return e < 0 ? 0u : 1u << e; }
constexpr unsigned kAllEdges = 0xFu;

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
MRF_HD constexpr std::size_t RoundUp4(std::size_t n) { return (n + 3) / 4 * 4; }

/// A pipeline block's shared arrays: `sets` sets of the inputs its loaders fill (unary costs,
/// scales, staging), so that it can fill later visits' while the compute threads work on earlier ones,
/// and `hsets` sets of the horizontal messages (fl, fr; two when the vertical chains of one visit run
/// while the horizontal chains of the next one do: the split launch).
struct PipelineBuffers {
  Word* unary;             ///< `sets` arrays.
  Word* fl;                ///< `hsets` arrays.
  Word* fr;                ///< `hsets` arrays.
  Word* fu;
  Word* fd;
  Cost* sr;                ///< `sets` scale arrays.
  Cost* sd;                ///< `sets` scale arrays.
  Word* stage;             ///< `sets` staging buffers.
  int sets, hsets;
  std::size_t array, scales, stage_words;  ///< Words per array, scale array, staging buffer.
  /// The arrays of visit n: set 0 holds its inputs, set 1 the next visit's (whose staging buffer receives
  /// the edge this visit carries over), and fl / fr its horizontal messages.
  MRF_HD Buffers View(int n) const {
    const int k = n % sets, k1 = (n + 1) % sets, j = n % hsets;
    Buffers b;
    b.unary[0] = unary + k * array, b.unary[1] = unary + k1 * array;
    b.fl = fl + j * array, b.fr = fr + j * array, b.fu = fu, b.fd = fd;
    b.sr[0] = sr + k * scales, b.sr[1] = sr + k1 * scales;
    b.sd[0] = sd + k * scales, b.sd[1] = sd + k1 * scales;
    b.stage[0] = stage + k * stage_words, b.stage[1] = stage + k1 * stage_words;
    return b;
  }
};

/// Words of one shared tile array (unary costs or messages; rows `row_stride` words apart: RowStride()),
/// one scale array and one staging buffer.
MRF_HD constexpr std::size_t ArrayWords(int tile, int row_stride) {
  return RoundUp4(static_cast<std::size_t>(tile) * row_stride);
}
MRF_HD constexpr std::size_t ScaleWords(int tile) {
  return RoundUp4(static_cast<std::size_t>(tile) * (static_cast<std::size_t>(tile) + 1));
}
MRF_HD constexpr std::size_t StageWords(int tile, int words) {
  return RoundUp4(4 * static_cast<std::size_t>(tile) * words);
}

/// 32-bit words of shared memory one block needs (chains on `lanes` threads: ChainLanes()), with `sets`
/// sets of the loader's inputs and `hsets` of the horizontal messages (PipelineBuffers).
MRF_HD constexpr std::size_t SharedWords(int tile, int words, int lanes, int sets = 2, int hsets = 1) {
  return (sets + 2 * hsets + 2) * ArrayWords(tile, RowStride(tile, words, lanes)) + 2 * sets * ScaleWords(tile) +
         sets * StageWords(tile, words);
}

/// Cuts `base` (SharedWords() words with the same sets, 16-byte aligned) into a block's arrays, whose rows
/// lie `row_stride` words apart (Params::row_stride: RowStride() is computed once on the host; on the GPU its
/// search, with a bank count in local memory, took each warp some 14 microseconds before its first visit).
MRF_HD PipelineBuffers CarvePipeline(Word* base, int tile, int words, int row_stride, int sets, int hsets) {
  PipelineBuffers b;
  b.sets = sets, b.hsets = hsets;
  b.array = ArrayWords(tile, row_stride);
  b.scales = ScaleWords(tile);
  b.stage_words = StageWords(tile, words);
  Word* p = base;
  b.unary = p, p += sets * b.array;
  b.fl = p, p += hsets * b.array;
  b.fr = p, p += hsets * b.array;
  b.fu = p, p += b.array;
  b.fd = p, p += b.array;
  b.sr = reinterpret_cast<Cost*>(p), p += sets * b.scales;
  b.sd = reinterpret_cast<Cost*>(p), p += sets * b.scales;
  b.stage = p;
  return b;
}

/// Cuts `base` (SharedWords() words, 16-byte aligned) into a block's arrays: two sets of inputs.
MRF_HD Buffers Carve(Word* base, int tile, int words, int row_stride) {
  return CarvePipeline(base, tile, words, row_stride, 2, 1).View(0);
}

/// One tile's place in the grid.
struct Tile {
  int tx = 0, ty = 0;    ///< Tile coordinates.
  int x0 = 0, y0 = 0;    ///< First pixel.
  int tw = 0, th = 0;    ///< Size (smaller at the right and bottom edges).
  bool has_left = false, has_right = false, has_up = false, has_down = false;  ///< Neighbouring tiles.
};

/// Pixels along edge `edge` of tile t: its rows for the left and right edges, its columns for the others.
MRF_HD int EdgeLines(const Tile& t, int edge) { return edge == kEdgeLeft || edge == kEdgeRight ? t.th : t.tw; }

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

/// How pipeline blocks share the tiles. A visit's horizontal chains write the message its right (left)
/// neighbour needs; its vertical chains, after them, the one for the tile below (above). So when blocks walk
/// tile rows, a block waits for the whole visit of the tile above (two phases a tile row), and when they walk
/// tile columns, only for the horizontal chains of the tile on the left (one phase a tile column): a sweep's
/// critical path is about 2 W + 2 H chain steps by rows against 2 H + W by columns (docs/bp.md).
enum class Walk : int { kRows = 0, kColumns = 1 };

/// One visit of a pipeline block.
struct Visit {
  int tx = 0, ty = 0;
  int sweep = 0;          ///< 0: raster, 1: reverse raster (within the outer iteration).
  int carried_edge = -1;  ///< The entering edge the block's previous visit left in this visit's staging
                          ///< buffer (through shared memory); -1: none.
  int carry_edge = -1;    ///< The edge of the next visit's staging buffer this visit's chains write; -1: none.
};

/// Tile lines (rows or columns, `lines` of them) block b of nb handles: b, b + nb, ...
MRF_HD int LinesOfBlock(int b, int nb, int lines) { return b < lines ? (lines - 1 - b) / nb + 1 : 0; }

/// Visits block b of nb makes in one outer iteration.
MRF_HD int VisitsOfBlock(Walk walk, int b, int nb, int tiles_x, int tiles_y) {
  return walk == Walk::kRows ? 2 * LinesOfBlock(b, nb, tiles_y) * tiles_x : 2 * LinesOfBlock(b, nb, tiles_x) * tiles_y;
}

/// Visit n of block b of nb: the raster sweep over its lines (tile rows top-down, each left to right; or
/// tile columns left to right, each top-down), then the reverse sweep in the opposite order. Both orders
/// give every tile the same neighbours' messages as the serial raster order (above and left already
/// visited in this sweep, below and right not yet), so the results are those of the serial schedule; a
/// block waits only for the tile above (below) it, or on its left (right), in the same sweep.
MRF_HD Visit VisitOfBlock(Walk walk, int b, int nb, int tiles_x, int tiles_y, int n) {
  const bool rows = walk == Walk::kRows;
  const int along = rows ? tiles_x : tiles_y;  // tiles in one line
  const int lines = LinesOfBlock(b, nb, rows ? tiles_y : tiles_x);
  const int per_sweep = lines * along;
  Visit v;
  v.sweep = n < per_sweep ? 0 : 1;
  const int k = n - v.sweep * per_sweep;
  const int line_k = k / along, i = k - line_k * along;
  const int line = v.sweep == 0 ? b + line_k * nb : b + (lines - 1 - line_k) * nb;
  const int pos = v.sweep == 0 ? i : along - 1 - i;
  v.tx = rows ? pos : line;
  v.ty = rows ? line : pos;
  // The next visit (raster: right or below) takes the message this one sends there on its entering edge.
  const int edge = rows ? (v.sweep == 0 ? kEdgeLeft : kEdgeRight) : (v.sweep == 0 ? kEdgeTop : kEdgeBottom);
  v.carried_edge = i > 0 ? edge : -1;
  v.carry_edge = i + 1 < along ? edge : -1;
  return v;
}

/// Whether visit v starts from zero messages that were not cleared: the raster sweep of a run's first outer
/// iteration when Params::fresh is set. Its border messages from the right and from below are then the previous
/// run's (this run writes them later), so its loader reads them as 0 (FillStage()) and clears the border
/// messages the visit replaces (ClearOutgoing()), against which the visit counts its changes. This spares a run
/// the clearing of every border message before its launch; the reverse sweep reads and replaces what the raster
/// sweep wrote (every visit writes all its outgoing border messages).
MRF_HD bool FreshVisit(const Params& P, const Visit& v) { return P.fresh != 0 && v.sweep == 0; }

/// What a visit's chains post in the mailbox (MailSlot()).
struct Mail {
  int edge = -1;  ///< The outgoing edge whose messages they post (-1: none).
  int stamp = 0;  ///< The stamp the slots carry.
};

/// The stamp on the mail of a visit of sweep `sweep` (0: raster, 1: reverse) of a launch run after
/// `sweep_base` sweeps: the sweeps finished once it is posted. The poster (MailOf()) and the loader that
/// takes the mail (MailedEdges()) both use it.
MRF_HD int MailStamp(int sweep_base, int sweep) { return sweep_base + sweep + 1; }

/// The mail a visit posts (`sweep_base`: the sweeps run before its launch): by tile columns with a
/// mailbox, the horizontal chains' last messages towards the next tile column of its sweep. None otherwise.
MRF_HD Mail MailOf(Walk walk, const Params& P, const Visit& v, int sweep_base) {
  Mail mail;
  if (walk == Walk::kColumns && P.mailbox)
    mail.edge = v.sweep == 0 ? kEdgeRight : kEdgeLeft, mail.stamp = MailStamp(sweep_base, v.sweep);
  return mail;
}

/// The edges whose entering messages visit v's loader takes from the mailbox (a mask of EdgeBit()s): by tile
/// columns with a mailbox, those from the tile columns on either side that this launch's sweeps wrote (the
/// raster visit on the left; in the reverse sweep also the reverse visit on the right), each with the stamp
/// `stamps[edge]` it must carry. The loader reads the visit's other edges from the border arrays.
MRF_HD unsigned MailedEdges(Walk walk, const Params& P, const Visit& v, const Tile& t, int sweep_base,
                            int (&stamps)[4]) {
  unsigned mailed = 0;
  if (walk != Walk::kColumns || !P.mailbox) return mailed;
  if (t.has_left) mailed |= EdgeBit(kEdgeLeft), stamps[kEdgeLeft] = MailStamp(sweep_base, 0);
  if (v.sweep == 1 && t.has_right) mailed |= EdgeBit(kEdgeRight), stamps[kEdgeRight] = MailStamp(sweep_base, 1);
  return mailed;
}

/// A tile a pipeline loader waits for before it reads the border messages that tile sends into a visit's
/// tile: its index (ty tiles_x + tx), how many sweeps of this outer iteration it must have finished (1: the
/// raster sweep, 2: both; by tile columns a tile counts as done once its horizontal chains are:
/// PublishesEarly()), and the entering edge those messages arrive by. The visit's other edges need no wait.
struct LoaderWait {
  int tile = -1;
  int sweeps = 0;
  int edge = -1;
};

/// Whether a visit publishes its tile after its last horizontal chains (tile columns: the neighbour waiting
/// for it reads nothing else) rather than at its end.
MRF_HD constexpr bool PublishesEarly(Walk walk) { return walk == Walk::kColumns; }

/// The waits of visit v of tile t (returns how many, at most two). By tile rows: the tile above (raster
/// sweep) or below (reverse sweep), whose border messages come from another block or an earlier visit;
/// with `sets` > 2 (the split launch, whose loader may run two visits ahead of the horizontal chains) also,
/// in the reverse sweep, the raster visit of the tile on the left, whose message this block wrote. By tile
/// columns: the tile on the left (raster) or right (reverse). The reverse visit's other entering messages
/// come from this block's own visits, or from the raster visit of the tile on the left, which the block's
/// raster visit of the same row already waited for.
MRF_HD int LoaderWaits(Walk walk, const Params& P, const Visit& v, const Tile& t, int sets, LoaderWait (&waits)[2]) {
  int n = 0;
  if (walk == Walk::kColumns) {
    if (v.sweep == 0 && t.has_left) waits[n++] = {v.ty * P.tiles_x + v.tx - 1, 1, kEdgeLeft};
    if (v.sweep == 1 && t.has_right) waits[n++] = {v.ty * P.tiles_x + v.tx + 1, 2, kEdgeRight};
    return n;
  }
  if (v.sweep == 0 && t.has_up) waits[n++] = {(v.ty - 1) * P.tiles_x + v.tx, 1, kEdgeTop};
  if (v.sweep == 1 && t.has_down) waits[n++] = {(v.ty + 1) * P.tiles_x + v.tx, 2, kEdgeBottom};
  if (v.sweep == 1 && t.has_left && sets > 2) waits[n++] = {v.ty * P.tiles_x + v.tx - 1, 1, kEdgeLeft};
  return n;
}

// ---- Phases of a visit (thread tid of n) ----------------------------------------------------------

/// Loads words [first, first + HW) of a pixel's NW words from a shared tile array into v, in accesses of
/// CW = min(HW, 4) words (`first` is a multiple of HW, so a lane's words never straddle a vector). The
/// address is formed on a pointer to CW-word vectors: nvcc then keeps the accesses 8 or 16 bytes wide.
template <int HW, int NW>
MRF_HD void LoadWords(Word (&v)[HW], const Word* array, int x, int y, int row_stride, int first) {
  constexpr int VW = NW < 4 ? NW : 4;    // words per vector of the pixel
  constexpr int CW = HW < VW ? HW : VW;  // words per access
MRF_UNROLL
  for (int k = 0; k < HW / CW; ++k) {
    const int word = first + k * CW;
    const Word* vector = array + PixelOffset(x, y, word / VW, NW, row_stride);
#if defined(__CUDA_ARCH__)
    if constexpr (CW == 4) {
      const uint4 t = *reinterpret_cast<const uint4*>(vector);
      v[4 * k] = t.x, v[4 * k + 1] = t.y, v[4 * k + 2] = t.z, v[4 * k + 3] = t.w;
    } else if constexpr (CW == 2) {
      const uint2 t = reinterpret_cast<const uint2*>(vector)[word % VW / 2];
      v[2 * k] = t.x, v[2 * k + 1] = t.y;
    } else {
      v[k] = vector[word % VW];
    }
#else
    for (int i = 0; i < CW; ++i) v[CW * k + i] = vector[word % VW + i];
#endif
  }
}

/// Stores words [first, first + HW) of a pixel (see LoadWords): the host emulation's; the GPU's step loop
/// stores through a SharedArray (below).
template <int HW, int NW>
MRF_HD void StoreWords(Word* array, int x, int y, int row_stride, int first, const Word (&v)[HW]) {
  constexpr int VW = NW < 4 ? NW : 4;
  for (int w = 0; w < HW; ++w) {
    const int word = first + w;
    array[PixelOffset(x, y, word / VW, NW, row_stride) + word % VW] = v[w];
  }
}

#if defined(__CUDA_ARCH__)
/// A shared tile array by its 32-bit address in the block's shared window, taken once before a step loop.
/// Through a generic pointer nvcc 13.0 re-derived the window (S2R SR_CgaCtaId) at every access of the
/// vertical step loop: two reads a step, each stalling the in-order warp before the message (Nsight
/// Compute on Tsukuba, 2026-11-24).
struct SharedArray {
  unsigned address;
};
__device__ inline SharedArray InShared(const Word* array) {
  return {static_cast<unsigned>(__cvta_generic_to_shared(array))};
}

/// The shared address of word `word` of tile pixel (x, y) in `array` (see PixelOffset()).
template <int NW>
__device__ unsigned WordAddress(SharedArray array, int x, int y, int row_stride, int word) {
  constexpr int VW = NW < 4 ? NW : 4;
  return array.address + 4u * static_cast<unsigned>(PixelOffset(x, y, word / VW, NW, row_stride) + word % VW);
}

/// LoadWords on a SharedArray, in accesses of CW words as LoadWords. Volatile: never merged with a load of
/// another phase or moved across the barriers (volatile too) that separate the phases.
template <int HW, int NW>
__device__ void LoadWords(Word (&v)[HW], SharedArray array, int x, int y, int row_stride, int first) {
  constexpr int CW = HW < VectorWords(NW) ? HW : VectorWords(NW);  // words per access, as LoadWords
MRF_UNROLL
  for (int k = 0; k < HW / CW; ++k) {
    const unsigned at = WordAddress<NW>(array, x, y, row_stride, first + k * CW);
    if constexpr (CW == 4) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[4 * k]), "=r"(v[4 * k + 1]), "=r"(v[4 * k + 2]), "=r"(v[4 * k + 3])
                   : "r"(at));
    } else if constexpr (CW == 2) {
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v[2 * k]), "=r"(v[2 * k + 1]) : "r"(at));
    } else {
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v[k]) : "r"(at));
    }
  }
}

/// StoreWords on a SharedArray. Inline PTX: nvcc 13.0 split a plain uint4 store into four 4-byte stores,
/// and a store through a uint4 index measured 4-9% slower on Tsukuba. Volatile: never dropped or moved; no
/// other access of the phase touches the words.
template <int HW, int NW>
__device__ void StoreWords(SharedArray array, int x, int y, int row_stride, int first, const Word (&v)[HW]) {
  constexpr int CW = HW < VectorWords(NW) ? HW : VectorWords(NW);  // words per access, as LoadWords
MRF_UNROLL
  for (int k = 0; k < HW / CW; ++k) {
    const unsigned at = WordAddress<NW>(array, x, y, row_stride, first + k * CW);
    if constexpr (CW == 4) {
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(at), "r"(v[4 * k]), "r"(v[4 * k + 1]),
                   "r"(v[4 * k + 2]), "r"(v[4 * k + 3]));
    } else if constexpr (CW == 2) {
      asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(at), "r"(v[2 * k]), "r"(v[2 * k + 1]));
    } else {
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(at), "r"(v[k]));
    }
  }
}
#endif

/// Copies HW consecutive words (16-byte aligned for HW >= 4, 8-byte for HW == 2) in vectors on the GPU.
template <int HW>
MRF_HD void CopyWords(Word (&v)[HW], const Word* src) {
#if defined(__CUDA_ARCH__)
  if constexpr (HW % 4 == 0) {
MRF_UNROLL
    for (int q = 0; q < HW / 4; ++q) {
      const uint4 t = reinterpret_cast<const uint4*>(src)[q];
      v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
    }
  } else {
    static_assert(HW == 2, "HW is a power of two");
    const uint2 t = *reinterpret_cast<const uint2*>(src);
    v[0] = t.x, v[1] = t.y;
  }
#else
  for (int w = 0; w < HW; ++w) v[w] = src[w];
#endif
}

/// Loads all NW words of a pixel.
template <int NW>
MRF_HD void LoadPixel(Word (&v)[NW], const Word* array, int x, int y, int row_stride) {
  LoadWords<NW, NW>(v, array, x, y, row_stride, 0);
}

/// Reads HW packed words (2 HW border ints: global memory written by other blocks, L2 only on the GPU).
template <int HW>
MRF_HD void LoadBorder(Word (&v)[HW], const Cost* src) {
  static_assert(HW % 2 == 0, "border messages move in 16-byte vectors");
MRF_UNROLL
  for (int q = 0; q < HW / 2; ++q) {
#if defined(__CUDA_ARCH__)
    const int4 t = __ldcg(reinterpret_cast<const int4*>(src) + q);
    v[2 * q] = Pack(t.x, t.y), v[2 * q + 1] = Pack(t.z, t.w);
#else
    v[2 * q] = Pack(src[4 * q], src[4 * q + 1]), v[2 * q + 1] = Pack(src[4 * q + 2], src[4 * q + 3]);
#endif
  }
}

/// Reads 2 HW border ints as they are stored, for StoreBorder() to compare with at the end of a phase. Not
/// packed here: a use right after the load made every chain wait for the L2 round trip before its first
/// step (Nsight Compute: the stall before the step loop); unpacked, nothing waits for it until the end.
template <int HW>
MRF_HD void LoadBorderAsStored(Cost (&v)[2 * HW], const Cost* src) {
  static_assert(HW % 2 == 0, "border messages move in 16-byte vectors");
MRF_UNROLL
  for (int q = 0; q < HW / 2; ++q) {
#if defined(__CUDA_ARCH__)
    const int4 t = __ldcg(reinterpret_cast<const int4*>(src) + q);
    v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
#else
    for (int k = 0; k < 4; ++k) v[4 * q + k] = src[4 * q + k];
#endif
  }
}

/// Writes HW packed words as 2 HW border ints, labels first_label.. on; 0 at padded labels (L and up).
/// Returns whether a real label changed from `old` (LoadBorderAsStored(), compared as packed halves).
template <int HW>
MRF_HD bool StoreBorder(Cost* dst, const Word (&v)[HW], const Cost (&old)[2 * HW], int first_label, int L) {
  static_assert(HW % 2 == 0, "border messages move in 16-byte vectors");
  bool changed = false;
  int x[2 * HW];
MRF_UNROLL
  for (int w = 0; w < HW; ++w) {
    const int label = first_label + 2 * w;
    x[2 * w] = label < L ? Lo(v[w]) : 0;
    x[2 * w + 1] = label + 1 < L ? Hi(v[w]) : 0;
    changed |= Pack(x[2 * w], x[2 * w + 1]) != Pack(old[2 * w], old[2 * w + 1]);
  }
MRF_UNROLL
  for (int q = 0; q < HW / 2; ++q) {
#if defined(__CUDA_ARCH__)
    __stcg(reinterpret_cast<int4*>(dst) + q, make_int4(x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]));
#else
    for (int k = 0; k < 4; ++k) dst[4 * q + k] = x[4 * q + k];
#endif
  }
  return changed;
}

/// The border messages crossing edge `edge` of tile t at its line i, in global memory (null when there is no
/// neighbour): the one leaving the tile (`leaving`) or the one entering it. Both sides of a border share its
/// position; the direction picks the array.
MRF_HD Cost* BorderMessage(const Params& P, const Tile& t, int edge, int i, bool leaving) {
  const std::size_t Lp = static_cast<std::size_t>(P.Lp);
  switch (edge) {
    case kEdgeLeft:
      return t.has_left ? (leaving ? P.border_left : P.border_right) +
                              ((static_cast<std::size_t>(t.tx) - 1) * P.height + t.y0 + i) * Lp
                        : nullptr;
    case kEdgeRight:
      return t.has_right ? (leaving ? P.border_right : P.border_left) +
                               (static_cast<std::size_t>(t.tx) * P.height + t.y0 + i) * Lp
                         : nullptr;
    case kEdgeTop:
      return t.has_up ? (leaving ? P.border_up : P.border_down) +
                            ((static_cast<std::size_t>(t.ty) - 1) * P.width + t.x0 + i) * Lp
                      : nullptr;
    default:
      return t.has_down ? (leaving ? P.border_down : P.border_up) +
                              (static_cast<std::size_t>(t.ty) * P.width + t.x0 + i) * Lp
                        : nullptr;
  }
}

/// Where a tile edge's entering messages come from in global memory (null when there is no neighbour).
MRF_HD const Cost* EnteringBorder(const Params& P, const Tile& t, int edge, int i) {
  return BorderMessage(P, t, edge, i, false);
}

/// Where the message leaving tile t across its edge `edge` from its line i goes (null when there is no neighbour).
MRF_HD Cost* OutgoingBorder(const Params& P, const Tile& t, int edge, int i) { return BorderMessage(P, t, edge, i, true); }

// ---- The mailbox: handoffs between tile columns ---------------------------------------------------------

/// By tile columns, blocks hand each other only the messages crossing vertical tile edges. Besides its
/// border array, such a message goes into a mailbox: word w of line i in one 8-byte slot with the sweep
/// stamp above it, written and read as single 8-byte accesses. A loader that sees the stamp therefore has
/// the word, with no tile counter to acquire and no second read: the handoff costs one trip to L2 each way.
/// Stamps only grow (sweeps run since the counters were cleared, plus one), so a slot from an earlier sweep
/// never passes for a later one. MailOf() says what a visit posts, MailedEdges() what its loader takes.

/// Where the NW slots of the message crossing edge `edge` (left or right) of tile t at line i lie in the
/// mailbox: the one leaving the tile (`leaving`) or the one entering it. Messages moving right and moving
/// left across one boundary have separate slots.
MRF_HD int MailIndex(const Params& P, const Tile& t, int edge, int i, bool leaving) {
  const int boundary = edge == kEdgeRight ? t.tx : t.tx - 1;  // between tile columns boundary and boundary + 1
  const bool rightward = (edge == kEdgeRight) == leaving;
  return (((rightward ? 0 : 1) * (P.tiles_x - 1) + boundary) * P.height + t.y0 + i) * (P.Lp / 2);
}
/// The slot of word `first_word` of that message. The index stays an int: a 64-bit one put a truncation
/// into the horizontal step loop, where the chains post (ChainPhase()).
MRF_HD std::uint64_t* MailSlot(const Params& P, const Tile& t, int edge, int i, bool leaving, int first_word = 0) {
  return P.mailbox + (MailIndex(P, t, edge, i, leaving) + first_word);
}

/// A mailbox slot: the word in the low half, the stamp in the high half.
MRF_HD std::uint64_t MailWord(Word w, int stamp) {
  return static_cast<std::uint64_t>(w) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(stamp)) << 32;
}

/// Word w of a message as StoreBorder() stores it, labels first_label.. on: 0 at padded labels (L and up).
MRF_HD Word RealLabels(Word w, int first_label, int L) {
  return Pack(first_label < L ? Lo(w) : 0, first_label + 1 < L ? Hi(w) : 0);
}

/// Posts HW words (HW even; labels first_label.. on, padded ones as 0) into consecutive slots with `stamp`:
/// single 8-byte stores, two per 16-byte access.
template <int HW>
MRF_HD void PostMail(std::uint64_t* slots, const Word (&v)[HW], int first_label, int L, int stamp) {
  static_assert(HW % 2 == 0, "slots move in pairs");
MRF_UNROLL
  for (int q = 0; q < HW / 2; ++q) {
    const std::uint64_t a = MailWord(RealLabels(v[2 * q], first_label + 4 * q, L), stamp);
    const std::uint64_t b = MailWord(RealLabels(v[2 * q + 1], first_label + 4 * q + 2, L), stamp);
#if defined(__CUDA_ARCH__)
    asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(slots + 2 * q), "l"(a), "l"(b) : "memory");
#else
    slots[2 * q] = a, slots[2 * q + 1] = b;
#endif
  }
}

/// Fills the staging buffer with the messages entering a tile (zero where it has no neighbour) on the
/// edges of the mask `edges` (bit e: edge e; kAllEdges). Thread tid of n: the items of the chosen edges are
/// numbered consecutively, so that one edge takes one pass of n >= T threads. `fresh` (FreshVisit()): the
/// messages from the right and from below are not written yet and count as 0.
template <int NW>
MRF_HD void FillStage(const Params& P, const Tile& t, Word* stage, unsigned edges, int tid, int n, bool fresh = false) {
  const int T = P.tile;
  int items = 0;
  for (int e = 0; e < 4; ++e)
    if (edges & EdgeBit(e)) items += EdgeLines(t, e);
  for (int item = tid; item < items; item += n) {
    int edge = 0, i = item;
    while (!(edges & EdgeBit(edge)) || i >= EdgeLines(t, edge)) {
      if (edges & EdgeBit(edge)) i -= EdgeLines(t, edge);
      ++edge;
    }
    Word v[NW];
    const Cost* src = fresh && (edge == kEdgeRight || edge == kEdgeBottom) ? nullptr : EnteringBorder(P, t, edge, i);
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

/// Clears the border messages tile t sends on its four edges (FreshVisit()). Thread tid of n.
MRF_HD void ClearOutgoing(const Params& P, const Tile& t, int tid, int n) {
  for (int e = 0; e < 4; ++e) {
    Cost* const border = OutgoingBorder(P, t, e, 0);
    if (!border) continue;
    const int count = EdgeLines(t, e) * P.Lp;  // the edge's lines, consecutive
    for (int i = tid; i < count; i += n) {
#if defined(__CUDA_ARCH__)
      __stcg(border + i, 0);
#else
      border[i] = 0;
#endif
    }
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

/// The group of LANES adjacent threads of one warp that holds one chain on the GPU (ChainLanes() > 1):
/// lane j holds words [j NW / LANES, (j + 1) NW / LANES).
template <int LANES>
struct LaneGroup {
  int lane;  ///< 0 .. LANES - 1.
#if defined(__CUDA_ARCH__)
  // Every thread of the warp takes part in every step (ChainPhase), so the shuffles name the whole warp.
  __device__ Word Min(Word local) const {
MRF_UNROLL
    for (int k = 1; k < LANES; k *= 2) local = Min2(local, __shfl_xor_sync(0xffffffffu, local, k));
    return local;
  }
  __device__ void Edges(Word first, Word last, Word* lower, Word* upper) const {
    const Word below = __shfl_up_sync(0xffffffffu, last, 1, LANES);
    const Word above = __shfl_down_sync(0xffffffffu, first, 1, LANES);
    *lower = lane > 0 ? below : first << 16;
    *upper = lane + 1 < LANES ? above : last >> 16;
  }
#else
  // Never run on the host (the emulation holds each chain in one lane); defined so that templates compile.
  Word Min(Word local) const { return local; }
  void Edges(Word first, Word last, Word* lower, Word* upper) const { WholeChain{}.Edges(first, last, lower, upper); }
#endif
};

/// Phase 1 or 2 of an inner iteration: chain `tid / LANES` (horizontal: right chains of the tile rows,
/// then left chains; vertical: down chains of the columns, then up chains), held by LANES threads, each
/// with NW / LANES of the words. In the last inner iteration a chain that leaves the tile writes the
/// border message; the chains whose messages the block's next visit takes (`carry_edge`, Visit::carry_edge:
/// the next visit's entering edge, -1: none) also write them into that visit's staging buffer `carry_stage`.
///
/// Chains leaving by `mail.edge` also post their last message in the mailbox (Mail).
///
/// In the first inner iteration (`first`) the messages between the tile's pixels are 0: a horizontal
/// chain then reads the vertical messages entering the tile (top and bottom rows) from the staging buffer
/// instead of the tile arrays, and every chain takes its first message, the one entering the tile, from
/// the staging buffer and copies it into its array, where later phases read it. Nothing else has to be
/// cleared before a visit.
template <int NW, int F, int LANES>
MRF_HD void ChainPhase(const Params& P, const Tile& t, const Buffers& B, int buf, bool vertical, bool first,
                       bool last, Word* carry_stage, int carry_edge, int tid, Mail mail = {}) {
  constexpr int HW = NW / LANES;
  static_assert(LANES == 1 || LocalForm(F), "only local forms split a chain over lanes");
  const int T = P.tile, rs = P.row_stride;
  const int lines = vertical ? t.tw : t.th, length = vertical ? t.th : t.tw;
  const int lane = tid % LANES, w0 = lane * HW;  // this lane's words: [w0, w0 + HW)
  // Lanes exchange words with full-warp shuffles, so every thread of a split phase runs the same number
  // of steps; a thread without a chain shadows chain 0 (in-bounds reads) and writes nothing.
  const bool idle = tid / LANES >= 2 * lines;
  if (LANES == 1 && idle) return;
  const int chain = idle ? 0 : tid / LANES;
  const bool forward = chain < lines;  // right or down
  const int line = forward ? chain : chain - lines;
  const Word* unary = B.Unary(buf);
  const Word* stage = B.Stage(buf);
  Word* own;
  const Word* o1 = vertical ? B.fl : B.fu;
  const Word* o2 = vertical ? B.fr : B.fd;
  int steps, pos, step_pos;  // messages to send; first pixel along the line; +-1
  const Cost* scale;
  int scale_step;
  Cost* border = nullptr;
  int edge = -1;  // the staging edge of the next tile this chain's last message enters
  int entering;   // the staging edge this chain's first message comes from
  int leaving;    // the edge its last message leaves by
  if (!vertical) {
    own = forward ? B.fl : B.fr;
    if (forward) {
      steps = t.x0 + t.tw < P.width ? t.tw : t.tw - 1;
      pos = 0, step_pos = 1;
      scale = B.Sr(buf) + line * (T + 1) + 1, scale_step = 1;
      border = OutgoingBorder(P, t, kEdgeRight, line);
      edge = kEdgeLeft, entering = kEdgeLeft, leaving = kEdgeRight;
    } else {
      steps = t.x0 > 0 ? t.tw : t.tw - 1;
      pos = t.tw - 1, step_pos = -1;
      scale = B.Sr(buf) + line * (T + 1) + t.tw - 1, scale_step = -1;
      border = OutgoingBorder(P, t, kEdgeLeft, line);
      edge = kEdgeRight, entering = kEdgeRight, leaving = kEdgeLeft;
    }
  } else {
    own = forward ? B.fu : B.fd;
    if (forward) {
      steps = t.y0 + t.th < P.height ? t.th : t.th - 1;
      pos = 0, step_pos = 1;
      scale = B.Sd(buf) + T + line, scale_step = T;
      border = OutgoingBorder(P, t, kEdgeBottom, line);
      edge = kEdgeTop, entering = kEdgeTop, leaving = kEdgeBottom;
    } else {
      steps = t.y0 > 0 ? t.th : t.th - 1;
      pos = t.th - 1, step_pos = -1;
      scale = B.Sd(buf) + (t.th - 1) * T + line, scale_step = -T;
      border = OutgoingBorder(P, t, kEdgeTop, line);
      edge = kEdgeBottom, entering = kEdgeBottom, leaving = kEdgeTop;
    }
  }
  if (!last && steps == length) --steps;  // the message leaving the tile counts only in the last iteration
  const bool leaves = vertical ? t.has_down || t.has_up : t.has_right || t.has_left;
  const int rounds = LANES == 1 ? steps : last && leaves ? length : length - 1;  // steps of the longest chain
  if (idle) steps = 0;
  const int x_line = vertical ? line : 0, y_line = vertical ? 0 : line;
  auto px = [&](int p) { return vertical ? x_line : p; };
  auto py = [&](int p) { return vertical ? p : y_line; };
  auto staged = [&](int e, int i) { return stage + (static_cast<std::size_t>(e) * T + i) * NW + w0; };
#if defined(__CUDA_ARCH__)
  const SharedArray own_at = InShared(own), unary_at = InShared(unary), o1_at = InShared(o1), o2_at = InShared(o2);
#else
  Word* const own_at = own;
  const Word *const unary_at = unary, *const o1_at = o1, *const o2_at = o2;
#endif

  Cost old[2 * HW];  // the border message this visit replaces (to report changes)
MRF_UNROLL
  for (int k = 0; k < 2 * HW; ++k) old[k] = 0;
  if (last && border && steps == length) LoadBorderAsStored<HW>(old, border + 2 * w0);

  Word m[HW];
  if (first) {
    CopyWords<HW>(m, staged(entering, line));
    if (!idle) StoreWords<HW, NW>(own_at, px(pos), py(pos), rs, w0, m);
  } else {
    LoadWords<HW, NW>(m, own_at, px(pos), py(pos), rs, w0);
  }
  // First iteration, horizontal chains: the vertical messages are 0 inside the tile, and at its top and
  // bottom rows the ones entering it.
  const bool flat = first && !vertical;
  const Word* top = flat && line == 0 ? staged(kEdgeTop, 0) : nullptr;
  const Word* bottom = flat && line == t.th - 1 ? staged(kEdgeBottom, 0) : nullptr;
  const int stored = steps < length ? steps : length - 1;  // messages to the chain's own pixels
  // The step loop, compiled once with the arrays' vertical messages and once with the staged ones.
  auto run = [&](auto flat_tag) {
    constexpr bool kFlat = decltype(flat_tag)::value;
    Word d[HW], a[HW], b[HW], pre[HW];  // pre: the sum at the next pixel of everything but the chain's message
    auto load = [&](int p) {
      LoadWords<HW, NW>(d, unary_at, px(p), py(p), rs, w0);
      if constexpr (kFlat) {
MRF_UNROLL
        for (int w = 0; w < HW; ++w) a[w] = b[w] = 0;
        if (top) CopyWords<HW>(a, top + p * NW);
        if (bottom) CopyWords<HW>(b, bottom + p * NW);
      } else {
        LoadWords<HW, NW>(a, o1_at, px(p), py(p), rs, w0);
        LoadWords<HW, NW>(b, o2_at, px(p), py(p), rs, w0);
      }
    };
    auto sum = [&] {
MRF_UNROLL
      for (int w = 0; w < HW; ++w) pre[w] = d[w] + a[w] + b[w];  // halves never carry (bound)
    };
    if (steps > 0) load(pos), sum();
    for (int i = 0; i < rounds; ++i) {  // (i >= steps: a step of the lanes' exchange only)
      Word h[HW];
MRF_UNROLL
      for (int w = 0; w < HW; ++w) h[w] = pre[w] + m[w];
      const int s = *scale;
      scale += scale_step;
      pos += step_pos;
      // The next pixel's inputs do not depend on this message. Past the chain's last step the loads repeat
      // the current pixel (in bounds, unused): a select instead of a branch around them.
      load(i + 1 < steps ? pos : pos - step_pos);
      if constexpr (LANES == 1)
        Message<NW, F>(h, s, P.form, m);
      else
        LocalMessage<HW, F>(h, s, P.form, LaneGroup<LANES>{lane}, m);
      sum();  // (after the message, so that the loads have landed)
      if (i < stored) StoreWords<HW, NW>(own_at, px(pos), py(pos), rs, w0, m);
    }
  };
  if (flat)
    run(std::true_type{});
  else
    run(std::false_type{});
  if (steps == length) {  // the last step's message leaves the tile (rounds == steps here)
    if (leaving == mail.edge) PostMail<HW>(MailSlot(P, t, leaving, line, true, w0), m, 2 * w0, P.L, mail.stamp);
    if (StoreBorder<HW>(border + 2 * w0, m, old, 2 * w0, P.L)) *P.changed = 1;
    if (carry_stage && edge >= 0 && edge == carry_edge) {
      Word* dst = carry_stage + (static_cast<std::size_t>(edge) * T + line) * NW + w0;
MRF_UNROLL
      for (int w = 0; w < HW; ++w) dst[w] = m[w];
    }
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
