#pragma once
/// @file synthetic_scene.h
/// @brief The synthetic segmentation benchmark of Hussein, Varshney and Davis ("On implementing
/// graph cuts on CUDA"), as described in BENCHMARKS.md section 2, generated at any size.
///
/// The scene, for a given (width, height, seed):
/// - Ground truth: foreground is the union of 3..8 random ellipses (centres anywhere in the image,
///   semi-axes 5%..20% of the shorter side, any orientation); then the s x s patch at the centre
///   is set to foreground and the s x s patch at the top-left corner to background, s = min(32,
///   min(width, height) / 4) (32 for any image of 128 pixels or more a side).
/// - Image: 8-bit grey. Each pixel's intensity is drawn from the foreground or background
///   3-component Gaussian mixture of its ground-truth label, rounded and clamped to 0..255
///   (by default kForegroundMixture and kBackgroundMixture).
/// - Data costs: colour histograms (histogram_bins equal bins over 0..255, pseudo-count 1) of the
///   centre patch (foreground) and the top-left patch (background); D_p(label) = data_weight x
///   -log P(I_p | label's histogram). The patches are foreground/background in the distribution
///   only: they are not hard constraints.
/// - Pairwise: pairwise_weight x exp(-(I_p - I_q)^2 / (2 sigma^2)), 4-connected.
/// - Integers: every cost times cost_scale (100), rounded (mrf::QuantizeCost).
///
/// Deterministic for a seed: std::mt19937_64 drives everything and the distributions are this
/// file's own code (std:: distributions differ between standard libraries).
///
/// @code
///   mrf::SyntheticScene scene = mrf::MakeSyntheticScene(1024, 1024, 7);
///   mrf::Result r = mrf::Solve(scene.model);                      // one exact cut
///   double error = mrf::MaskErrorPercent(r.labels, scene.truth);
///   mrf::Energy offset = 0;                                          // or, for max-flow benchmarks:
///   mrf::StGraph graph = mrf::SyntheticSceneGraph(scene, &offset);  // grid-shaped s-t graph
/// @endcode

#include <array>
#include <cstdint>

#include "energies/segmentation.h"
#include "mrf/io/image.h"
#include "mrf/model.h"
#include "mrf/st_graph.h"

namespace mrf {

/// A 1-D Gaussian mixture of three components (the intensity distributions of the scene).
struct IntensityMixture {
  std::array<double, 3> weight;  ///< Mixing weights (sum 1).
  std::array<double, 3> mean;    ///< Means, intensity units.
  std::array<double, 3> stddev;  ///< Standard deviations, intensity units.
};

/// Foreground intensities of the synthetic scene. With kBackgroundMixture they overlap enough that
/// labelling each pixel by its cheaper data cost alone gets about 20-25% of a 512x512 scene wrong,
/// while the minimum cut gets about 1-2% wrong (seeds 1-6, measured when these values were chosen).
constexpr IntensityMixture kForegroundMixture{{0.40, 0.35, 0.25}, {110.0, 165.0, 220.0}, {18.0, 18.0, 14.0}};
/// Background intensities of the synthetic scene.
constexpr IntensityMixture kBackgroundMixture{{0.45, 0.35, 0.20}, {30.0, 80.0, 130.0}, {16.0, 20.0, 18.0}};

/// Parameters of the synthetic scene (defaults are the benchmark's).
struct SyntheticSceneOptions {
  int width = 512;               ///< Columns (>= 4).
  int height = 512;              ///< Rows (>= 4).
  std::uint64_t seed = 1;        ///< Same seed, same scene.
  int histogram_bins = 32;       ///< Histogram bins over 0..255.
  double data_weight = 1.0;      ///< Multiplies the -log probabilities.
  double pairwise_weight = 2.5;  ///< lambda of the contrast-sensitive weights.
  double sigma = 50.0;           ///< Contrast scale (the noise level).
  double cost_scale = 100.0;     ///< Integer costs = real costs x cost_scale.
  int patch_size = 32;           ///< Side of the two patches (shrunk for small images, see above).
  IntensityMixture foreground = kForegroundMixture;  ///< Foreground intensity distribution.
  IntensityMixture background = kBackgroundMixture;  ///< Background intensity distribution.
  /// Also build scene.model (contrast weights and data costs). Programs that segment the image with
  /// SegmentImage(), which builds the same model, can leave it out.
  bool with_model = true;
};

/// A generated scene.
struct SyntheticScene {
  Image image;      ///< Grey image, width x height.
  Labeling truth;   ///< Ground truth, one label per pixel, 1 = foreground.
  Model model;      ///< The two-label model (label 1 = foreground); model.cost_scale = cost_scale. Empty without with_model.
  int patch_size = 0;  ///< Side of the two patches actually used.
  int num_ellipses = 0;  ///< How many ellipses make the foreground.
};

/// Generates the scene. Throws mrf::Error for sizes below 4x4 or out-of-range options.
SyntheticScene MakeSyntheticScene(const SyntheticSceneOptions& options);
/// MakeSyntheticScene() with the benchmark's defaults at the given size and seed.
SyntheticScene MakeSyntheticScene(int width, int height, std::uint64_t seed);
/// Seeds that reproduce the scene with SegmentImage(): no hard constraint, and training labels
/// marking the centre patch foreground and the top-left patch background.
Seeds SyntheticSceneSeeds(const SyntheticScene& scene);
/// SegmentImage() options that give the scene's model (histograms with the scene's bins and
/// pseudo-count 1, its contrast settings, 4-connected, one cut). SegmentImage() has no data weight:
/// throws mrf::Error unless options.data_weight is 1.
SegmentationOptions SyntheticSceneSegmentationOptions(const SyntheticSceneOptions& options);

/// The grid-shaped s-t graph of the scene's model (mrf::BuildBinaryGraph): for every mask x,
/// E(x) = cut capacity + *energy_offset, label 0 (background) on the source side.
StGraph SyntheticSceneGraph(const SyntheticScene& scene, Energy* energy_offset);

}  // namespace mrf
