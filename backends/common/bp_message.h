#pragma once
/// @file bp_message.h
/// @brief Min-sum belief-propagation message updates, written once for the CPU and the GPU.
///
/// Every function here is plain C++ marked `MRF_HD`: the TBB backend calls it from host code and the
/// CUDA backend from kernels (the Open3D pattern). Messages are 32-bit integers normalised after
/// each update so that their minimum is 0; CPU and GPU therefore compute bit-identical messages.
///
/// Bound: a normalised message of an edge lies in [0, R_e] where R_e is the spread of that edge's
/// pairwise costs (max - min over label pairs, at most R = max_e R_e). The sender's sum h is at most
/// Dr + 3R (Dr: the largest spread of one node's unary costs, which are shifted so that their minimum is
/// 0), a belief at most Dr + 4R, and an update adds at most R more. PrepareBpProblem() rejects models
/// with Dr + 5R > 2^31 - 1, so no intermediate value overflows.

#include <cstdint>

#include "mrf/types.h"

#if defined(__CUDACC__)
/// Marks a function for host and device compilation under nvcc, plain inline otherwise.
#define MRF_HD __host__ __device__ inline
#else
/// Marks a function for host and device compilation under nvcc, plain inline otherwise.
#define MRF_HD inline
#endif

namespace mrf::bp {

/// The pairwise families, numbered as mrf::PairwiseKind so kernels can take a plain int.
enum MessageKind : int {
  kPottsMessage = 0,      ///< [a != b]
  kLinearMessage = 1,     ///< min(|a - b|, truncation)
  kQuadraticMessage = 2,  ///< min((a - b)^2, truncation)
  kTableMessage = 3,      ///< table[a * L + b]
};

/// The pairwise term shared by all edges, as plain data a kernel can take by value.
/// The cost of edge e is scale_e * distance(a, b) where scale_e = weight_e * lambda.
struct PairwiseParams {
  int kind = kPottsMessage;     ///< A MessageKind.
  int num_labels = 0;           ///< L.
  Cost truncation = kMaxCost;   ///< Cap of the linear / quadratic distance.
  const Cost* table = nullptr;  ///< L x L distances (kTable), row = label of the edge's first node.
};

/// Larger than every value a message computation can meet (see the bound in the file comment).
constexpr Cost kInfiniteCost = 2147483647;

/// Smaller of two 32-bit costs.
MRF_HD Cost MinCost(Cost a, Cost b) { return a < b ? a : b; }

/// Smaller of two 64-bit values.
MRF_HD std::int64_t Min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

/// The largest distance an edge can charge for the three metric families (after truncation).
MRF_HD std::int64_t MaxFamilyDistance(const PairwiseParams& p) {
  const std::int64_t span = p.num_labels > 0 ? p.num_labels - 1 : 0;
  switch (p.kind) {
    case kPottsMessage: return span > 0 ? 1 : 0;
    case kLinearMessage: return Min64(span, p.truncation);
    case kQuadraticMessage: return Min64(span * span, p.truncation);
    default: return 0;
  }
}

/// Cap of a Potts / linear / quadratic message: scale * the largest distance. Validated models keep
/// it within 32 bits; a zero-distance family gives 0 whatever the scale.
MRF_HD Cost MessageCap(const PairwiseParams& p, Cost scale) {
  const std::int64_t d = MaxFamilyDistance(p);
  return d == 0 ? 0 : static_cast<Cost>(Min64(static_cast<std::int64_t>(scale) * d, kInfiniteCost));
}

/// The distance between labels a (first node of the edge) and b (second node), before scaling.
MRF_HD Cost Distance(const PairwiseParams& p, int a, int b) {
  switch (p.kind) {
    case kPottsMessage: return a != b;
    case kLinearMessage: {
      const Cost d = a > b ? a - b : b - a;
      return d < p.truncation ? d : p.truncation;
    }
    case kQuadraticMessage: {
      const std::int64_t d = static_cast<std::int64_t>(a - b) * (a - b);
      return d < p.truncation ? static_cast<Cost>(d) : p.truncation;
    }
    default: return p.table[static_cast<std::int64_t>(a) * p.num_labels + b];
  }
}

/// The pairwise cost scale * distance(a, b) of one edge; fits 32 bits in a validated model.
MRF_HD Cost PairwiseCost(const PairwiseParams& p, Cost scale, int a, int b) {
  return static_cast<Cost>(static_cast<std::int64_t>(scale) * Distance(p, a, b));
}

/// Largest |d| with d^2 < truncation (quadratic family): labels farther apart cost the cap.
MRF_HD int QuadraticWindow(Cost truncation, int num_labels) {
  int r = 0;
  while (r + 1 < num_labels && static_cast<std::int64_t>(r + 1) * (r + 1) < truncation) ++r;
  return r;
}

/// True when the quadratic message is computed by the windowed scan (O(L r)) rather than by the
/// Felzenszwalb-Huttenlocher lower envelope (O(L)); both give identical values.
MRF_HD bool UseQuadraticWindow(const PairwiseParams& p) {
  return 2 * QuadraticWindow(p.truncation, p.num_labels) + 1 <= 16 || p.num_labels > 4096;
}

/// Largest label distance a truncated linear term charges less than its cap: min(truncation, L) - 1.
MRF_HD int LinearWindow(Cost truncation, int num_labels) {
  return static_cast<int>(Min64(truncation, num_labels) - 1);
}

/// True when the truncated linear message is computed by a direct window of 2 r + 1 labels (r < 8)
/// rather than by the two-pass distance transform; both give identical values.
MRF_HD bool UseLinearWindow(const PairwiseParams& p) { return LinearWindow(p.truncation, p.num_labels) < 8; }

/// Integer ceiling of num / den for den > 0.
MRF_HD std::int64_t CeilDiv(std::int64_t num, std::int64_t den) {
  const std::int64_t q = num / den;
  return q * den < num ? q + 1 : q;
}

/// Exact lower envelope of the parabolas c (l - v)^2 + f(v) over integer l in [0, L):
/// out[l] = min(cap, min_v f(v) + c (l - v)^2), for c > 0 and f >= 0.
///
/// Felzenszwalb-Huttenlocher with integer breakpoints: z[k] is the first integer at which parabola
/// v[k] is at most its predecessor. Two parabolas of equal curvature cross once, so on integers that
/// breakpoint is exact and no rounding can pick a wrong parabola. 64-bit arithmetic; L <= 4096 keeps
/// c L^2 + f in range. `v` and `z` are scratch of L ints each.
MRF_HD void QuadraticEnvelope(const Cost* f, Cost* out, int L, Cost c, Cost cap, int* v, int* z) {
  const std::int64_t c64 = c;
  int k = 0;
  v[0] = 0;
  z[0] = -2147483647;  // parabola 0 is lowest from -infinity on (every breakpoint s is above this)
  for (int q = 1; q < L; ++q) {
    const std::int64_t fq = f[q] + c64 * q * q;
    std::int64_t s = 0;
    while (true) {
      const int w = v[k];
      s = CeilDiv(fq - (f[w] + c64 * w * w), 2 * c64 * (q - w));
      if (s > z[k]) break;
      --k;  // parabola v[k] is lowest at no integer any more
    }
    if (s >= L) continue;  // q is lowest at no integer inside [0, L)
    ++k;
    v[k] = q;
    z[k] = static_cast<int>(s);
  }
  int j = 0;
  for (int l = 0; l < L; ++l) {
    while (j < k && z[j + 1] <= l) ++j;
    const std::int64_t d = l - v[j];
    out[l] = static_cast<Cost>(Min64(c64 * d * d + f[v[j]], cap));
  }
}

/// Scratch ints ComputeMessage() needs for L labels, whatever the pairwise term (an upper bound).
MRF_HD int MessageScratchInts(int num_labels) { return 3 * num_labels; }

/// Scratch ints ComputeMessage() reads and writes for this pairwise term: L for the linear and
/// quadratic windows, 3 L for the quadratic envelope, none otherwise (scratch may then be null).
MRF_HD int MessageScratchNeeded(const PairwiseParams& p) {
  if (p.kind == kLinearMessage) return UseLinearWindow(p) ? p.num_labels : 0;
  if (p.kind == kQuadraticMessage) return UseQuadraticWindow(p) ? p.num_labels : 3 * p.num_labels;
  return 0;
}

/// One min-sum message: out[b] = min_a (h[a] + scale * distance(a, b)) - (its minimum over b).
///
/// `h` is the sender's unary plus its incoming messages except the one from the receiver; `reverse`
/// is true when the receiver is the edge's first node (left or upper), which only matters for tables.
/// `scratch` holds MessageScratchInts(L) ints. Potts, linear and quadratic updates take O(L)
/// (linear and quadratic with a short window: O(L r), r < 8); tables take O(L^2). `h` and `out` may not alias.
MRF_HD void ComputeMessage(const PairwiseParams& p, Cost scale, bool reverse, const Cost* h, Cost* out,
                           int* scratch) {
  const int L = p.num_labels;
  Cost mn = h[0];
  for (int l = 1; l < L; ++l) mn = MinCost(mn, h[l]);
  if (p.kind == kTableMessage) {
    Cost lowest = kInfiniteCost;
    for (int b = 0; b < L; ++b) {
      std::int64_t best = INT64_MAX;
      for (int a = 0; a < L; ++a) {
        const std::int64_t d = reverse ? p.table[static_cast<std::int64_t>(b) * L + a]
                                       : p.table[static_cast<std::int64_t>(a) * L + b];
        best = Min64(best, static_cast<std::int64_t>(h[a] - mn) + scale * d);
      }
      out[b] = static_cast<Cost>(best);  // within [min V, Dr + 3R + max V]: fits (file comment)
      lowest = MinCost(lowest, out[b]);
    }
    for (int b = 0; b < L; ++b) out[b] -= lowest;
    return;
  }
  // Metric families: values above mn + cap never matter, so clamp first; then every sum below stays
  // within 2 cap, and the result's minimum is already 0 (at the argmin of h).
  const Cost cap = MessageCap(p, scale);
  for (int l = 0; l < L; ++l) out[l] = MinCost(h[l] - mn, cap);
  if (p.kind == kPottsMessage || cap == 0) return;
  if (p.kind == kLinearMessage) {
    const Cost slope = MinCost(scale, cap);
    if (UseLinearWindow(p)) {  // labels at distance >= truncation cost the cap: a short window suffices
      const int r = LinearWindow(p.truncation, L);
      Cost* f = scratch;
      for (int l = 0; l < L; ++l) f[l] = out[l];
      for (int b = 0; b < L; ++b) {
        Cost best = f[b];
        for (int d = 1; d <= r; ++d) {
          if (b - d >= 0) best = MinCost(best, f[b - d] + slope * d);  // slope d < cap
          if (b + d < L) best = MinCost(best, f[b + d] + slope * d);
        }
        out[b] = best;
      }
      return;
    }
    for (int l = 1; l < L; ++l) out[l] = MinCost(out[l], out[l - 1] + slope);
    for (int l = L - 2; l >= 0; --l) out[l] = MinCost(out[l], out[l + 1] + slope);
    return;
  }
  // Quadratic: the clamped values f go aside, then the window or the envelope reads them.
  Cost* f = scratch;
  for (int l = 0; l < L; ++l) f[l] = out[l];
  if (UseQuadraticWindow(p)) {
    const int r = QuadraticWindow(p.truncation, L);
    for (int b = 0; b < L; ++b) {
      Cost best = f[b];
      for (int d = 1; d <= r; ++d) {
        const Cost step = static_cast<Cost>(static_cast<std::int64_t>(scale) * d * d);  // < cap
        if (b - d >= 0) best = MinCost(best, f[b - d] + step);
        if (b + d < L) best = MinCost(best, f[b + d] + step);
      }
      out[b] = best;
    }
    return;
  }
  QuadraticEnvelope(f, out, L, scale, cap, scratch + L, scratch + 2 * L);
}

/// The label of least belief (ties: the smallest label).
MRF_HD int ArgMin(const Cost* belief, int num_labels) {
  int best = 0;
  for (int l = 1; l < num_labels; ++l)
    if (belief[l] < belief[best]) best = l;
  return best;
}

}  // namespace mrf::bp
