#pragma once
// Test- and benchmark-only: the stereo energies of the Middlebury MRF benchmark (BENCHMARKS.md section 1),
// built here from the written definition until energies/stereo.h (helper `stereo`) is merged; then
// tests and benchmarks should use the shared builder instead.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "mrf/io/image.h"
#include "mrf/model.h"

namespace mrf::fixture {

/// One benchmark energy.
struct StereoSpec {
  int labels = 16;        // disparities 0 .. labels - 1
  bool squared = false;   // BT squared instead of absolute
  int truncation = 0;     // data truncation T (0: none)
  Cost lambda = 20;       // smoothness multiplier
  int power = 1;          // k: 1 linear, 2 quadratic
  Cost vmax = 2;          // truncation of |a - b|^k
  int gradient = 8;       // gradient threshold g (0: no weights)
  Cost penalty = 2;       // weight of low-gradient edges
};

/// Tsukuba: 16 labels, BT absolute untruncated, lambda 20, k 1, Vmax 2, g 8, penalty 2.
inline StereoSpec TsukubaSpec() { return StereoSpec{16, false, 0, 20, 1, 2, 8, 2}; }
/// Venus: 20 labels, BT squared T 16, lambda 50, k 2, Vmax 7, no weights.
inline StereoSpec VenusSpec() { return StereoSpec{20, true, 16, 50, 2, 7, 0, 1}; }

namespace detail {
// Per pixel and channel: the value and the min / max over it and its two half-pixel neighbours.
struct Ranges {
  std::vector<int> centre, lo, hi;
  explicit Ranges(const Image& im) {
    const std::size_t n = static_cast<std::size_t>(im.width) * im.height * 3;
    centre.resize(n), lo.resize(n), hi.resize(n);
    for (int y = 0; y < im.height; ++y)
      for (int x = 0; x < im.width; ++x)
        for (int c = 0; c < 3; ++c) {
          const int v = im.at(x, y, c);
          const int left = im.at(x > 0 ? x - 1 : x, y, c), right = im.at(x + 1 < im.width ? x + 1 : x, y, c);
          const int l = (v + left) / 2, r = (v + right) / 2;
          const std::size_t i = (static_cast<std::size_t>(y) * im.width + x) * 3 + c;
          centre[i] = v;
          lo[i] = std::min({v, l, r});
          hi[i] = std::max({v, l, r});
        }
  }
};
}  // namespace detail

/// The benchmark's model for a rectified RGB pair (left and right of equal size).
inline Model BuildStereoModel(const Image& left, const Image& right, const StereoSpec& s) {
  if (left.width != right.width || left.height != right.height || left.channels != 3 || right.channels != 3)
    throw Error("stereo fixture: the two images must be RGB of one size");
  const int W = left.width, H = left.height, L = s.labels;
  Model m;
  m.topology = Topology::Grid2D(W, H, 4);
  m.num_labels = L;
  m.unary.resize(static_cast<std::size_t>(W) * H * L);
  const int cap = s.truncation > 0 ? (s.squared ? s.truncation * s.truncation : 3 * s.truncation) : -1;
  const int worst = s.squared ? 3 * 255 * 255 : 3 * 255;
  const int unmatched = cap >= 0 ? std::min(worst, cap) : worst;
  const detail::Ranges a(left), b(right);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int d = 0; d < L; ++d) {
        int cost = 0;
        if (x - d < 0) {
          cost = unmatched;
        } else {
          const std::size_t i = (static_cast<std::size_t>(y) * W + x) * 3, j = i - 3 * static_cast<std::size_t>(d);
          for (int c = 0; c < 3; ++c) {
            const int c1 = a.centre[i + c], c2 = b.centre[j + c];
            const int dis1 = std::max({0, c1 - b.hi[j + c], b.lo[j + c] - c1});
            const int dis2 = std::max({0, c2 - a.hi[i + c], a.lo[i + c] - c2});
            const int diff = std::min(dis1, dis2);
            cost += s.squared ? diff * diff : diff;
          }
          if (cap >= 0) cost = std::min(cost, cap);
        }
        m.unary[(static_cast<std::size_t>(y) * W + x) * L + d] = cost;
      }
  m.pairwise.kind = s.power == 1 ? PairwiseKind::kTruncatedLinear : PairwiseKind::kTruncatedQuadratic;
  m.pairwise.lambda = s.lambda;
  m.pairwise.truncation = s.vmax;
  if (s.gradient > 0) {
    const std::size_t n = static_cast<std::size_t>(W) * H;
    m.edge_weights.assign(2 * n, 1);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        for (int dir = 0; dir < 2; ++dir) {
          const int qx = dir == 0 ? std::min(x + 1, W - 1) : x, qy = dir == 1 ? std::min(y + 1, H - 1) : y;
          int sum = 0;
          for (int c = 0; c < 3; ++c) {
            const int diff = left.at(x, y, c) - left.at(qx, qy, c);
            sum += diff * diff;
          }
          m.edge_weights[dir * n + static_cast<std::size_t>(y) * W + x] =
              sum < 3 * s.gradient * s.gradient ? s.penalty : 1;
        }
      }
  }
  return m;
}

/// Fraction of pixels with known ground truth (value > 0) whose disparity differs from truth / scale
/// by more than 1.
inline double BadPixelRate(const Labeling& labels, const Image& truth, double scale) {
  std::size_t known = 0, bad = 0;
  for (int y = 0; y < truth.height; ++y)
    for (int x = 0; x < truth.width; ++x) {
      const int v = truth.at(x, y, 0);
      if (v == 0) continue;
      ++known;
      if (std::fabs(labels[static_cast<std::size_t>(y) * truth.width + x] - v / scale) > 1.0) ++bad;
    }
  return known ? static_cast<double>(bad) / known : 0.0;
}

}  // namespace mrf::fixture
