#pragma once
/// @file stereo.h
/// @brief Stereo matching energies: the data costs and smoothness terms of the Middlebury MRF benchmark.
///
/// The energy of a disparity labelling d is
///   E(d) = sum_p D_p(d_p) + sum_{4-connected edges pq} w_pq * lambda * distance(d_p, d_q),
/// where D_p(d) compares left pixel (x, y) with right pixel (x - d, y). The definitions follow
/// BENCHMARKS.md section 1 exactly (integer arithmetic throughout), so the benchmark problems built
/// here score labellings to the unit as the reference implementation does.

#include <cstdint>
#include <string>
#include <vector>

#include "mrf/io/image.h"
#include "mrf/model.h"

namespace mrf {

/// How the per-channel differences of a stereo match are summed.
enum class StereoCost {
  kAbsolute,  ///< sum over channels of |difference|
  kSquared,   ///< sum over channels of difference^2
};

/// Name of a stereo cost as used on command lines: absolute, squared.
const char* ToString(StereoCost cost);
/// Parses absolute|squared; throws mrf::Error naming the bad value.
StereoCost ParseStereoCost(const std::string& name);

/// Everything that defines a stereo energy. The defaults are the Tsukuba benchmark problem.
struct StereoParams {
  /// Number of disparities: labels 0..num_labels-1. At most the image width.
  Label num_labels = 16;
  /// Use the Birchfield-Tomasi sampling-insensitive difference (else the plain difference).
  bool birchfield_tomasi = true;
  /// Absolute or squared channel differences.
  StereoCost cost = StereoCost::kAbsolute;
  /// Truncation T of the data cost, 0 = none. Absolute sums are capped at channels*T (3T for RGB),
  /// squared sums at T*T.
  int truncation = 0;
  /// The smoothness term: kind, lambda, Vmax (the pairwise truncation) and, for kTable, the table.
  /// V_pq(a, b) = lambda * min(|a-b|^k, Vmax) * w_pq is kTruncatedLinear (k = 1) or
  /// kTruncatedQuadratic (k = 2) with truncation Vmax.
  Pairwise smoothness{PairwiseKind::kTruncatedLinear, 20, 2, {}};
  /// Gradient threshold g, 0 = no gradient weights (every w_pq = 1). When the sum over channels of
  /// the squared difference across an edge is below channels*g*g (3*g*g for RGB), w_pq = penalty.
  int gradient_threshold = 8;
  /// Edge weight used for low-gradient edges.
  Cost gradient_penalty = 2;
  /// True when the data must be colour (the presets, whose energies are defined on RGB images).
  bool require_colour = false;
  /// Name of the preset these came from, or "" for hand-set parameters.
  std::string preset;

  /// The benchmark problems of BENCHMARKS.md: "tsukuba", "venus" or "teddy". Throws mrf::Error
  /// listing the known names for any other.
  static StereoParams Preset(const std::string& name);
  /// Names accepted by Preset(), e.g. "tsukuba|venus|teddy".
  static std::string PresetNames();

  /// Throws mrf::Error with a one-line message naming the first field out of range.
  void Validate() const;
  /// One line, e.g. "16 labels, BT absolute, no truncation; linear lambda=20 Vmax=2; gradient g=8 penalty 2".
  std::string Describe() const;
};

/// Per-channel [min, max] of the half-pixel interpolated values around each pixel, as Birchfield and
/// Tomasi define them: for value c at x with neighbours left and right, l = (c + left) / 2 and
/// r = (c + right) / 2 (integer division; at the image border the neighbour is the pixel itself), and
/// the range is min/max over {c, l, r}. Index: (y * width + x) * channels + channel.
struct BtRange {
  std::vector<std::uint8_t> low;   ///< min over {c, l, r}
  std::vector<std::uint8_t> high;  ///< max over {c, l, r}
};
/// Computes the Birchfield-Tomasi ranges of every pixel and channel of an image.
BtRange ComputeBtRange(const Image& image);

/// The data costs D_p(d), node-major (costs[(y * width + x) * num_labels + d]), for left and right
/// images of the same size. Alpha channels are ignored. Throws mrf::Error for images of different
/// sizes or channel counts, more labels than the image is wide, grey images when
/// params.require_colour is set, or parameters out of range.
std::vector<Cost> ComputeStereoDataCosts(const Image& left, const Image& right, const StereoParams& params);

/// The gradient weights w_pq of a width x height 4-connected grid, one per edge slot
/// (slot = direction * num_nodes + node; direction 0 is +x, 1 is +y), computed from `image` at the
/// left/top pixel of each edge. Empty when params.gradient_threshold is 0.
std::vector<Cost> ComputeGradientWeights(const Image& image, const StereoParams& params);

/// The whole stereo model: a 4-connected grid over the left image, num_labels disparities,
/// data costs, smoothness and gradient weights. Throws mrf::Error for bad input (see
/// ComputeStereoDataCosts).
Model BuildStereoModel(const Image& left, const Image& right, const StereoParams& params);

/// Percentage of pixels with known ground truth (value > 0 in the first channel) whose disparity
/// differs from value / gt_scale by more than `threshold`. `ground_truth` holds one pixel per label
/// of `disparities`, row-major. Throws mrf::Error for mismatched sizes or a non-positive scale;
/// returns 0 when no pixel has ground truth.
double BadPixelPercent(const Labeling& disparities, const Image& ground_truth, double gt_scale, double threshold = 1.0);

/// Shrinks an image by an integer factor with a box filter (rounded means of factor x factor blocks;
/// a last partial block is dropped). Factor 1 returns the image unchanged. Throws mrf::Error for a
/// factor below 1 or one that leaves no pixel.
Image ShrinkImage(const Image& image, int factor);
/// Shrinks a ground-truth disparity image by an integer factor, keeping the value at each block's
/// first pixel (0 stays "unknown"): the values still count full-resolution pixels, so divide them by
/// gt_scale * factor. Throws like ShrinkImage().
Image ShrinkGroundTruth(const Image& ground_truth, int factor);

/// A stereo pair with known disparities, made up of textured fronto-parallel layers.
struct SyntheticStereo {
  Image left;                          ///< Left view (RGB).
  Image right;                         ///< Right view (RGB).
  Labeling disparity;                  ///< True integer disparity of every left pixel.
  std::vector<std::uint8_t> occluded;  ///< 1 where the left pixel is hidden in the right view or falls outside it.
  Label num_labels = 0;                ///< Disparities lie in 0..num_labels-1.
};

/// Generates a synthetic stereo pair: a textured background at a small disparity and several
/// textured rectangles and discs at larger integer disparities in front of it. The same seed gives
/// the same pair. `noise` is the standard deviation of Gaussian noise added to both views
/// (0 = none: then every pixel visible in both views matches exactly).
SyntheticStereo MakeSyntheticStereo(int width, int height, Label num_labels, std::uint64_t seed, double noise = 0.0);

/// A disparity map as a grey image: value = disparity * scale (clamped to 255).
Image DisparityToImage(const Labeling& disparities, int width, int height, int scale);
/// A disparity map as a colour image (blue = far, red = near), disparities 0..num_labels-1.
Image DisparityToColour(const Labeling& disparities, int width, int height, Label num_labels);

}  // namespace mrf
