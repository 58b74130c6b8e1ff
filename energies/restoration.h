#pragma once
/// @file restoration.h
/// @brief Image restoration (denoising and inpainting) energies on grey images.
///
/// Label l stands for the intensity LevelIntensity(l, L) = round(l * 255 / (L - 1)); with the default
/// 256 levels, label = intensity. The energy of a labelling is
///   E = sum_p D_p(l_p) + sum_{4-connected edges} lambda * distance(l_p, l_q),
/// with D_p(l) = min((LevelIntensity(l) - observed_p)^2, T) (T = data_truncation, 0 = none) and
/// D_p = 0 at missing pixels, whose value comes from the smoothness term alone.

#include <cstdint>
#include <string>

#include "mrf/io/image.h"
#include "mrf/model.h"

namespace mrf {

/// Everything that defines a restoration energy.
struct RestorationParams {
  /// Number of intensity levels L (2..256); label l means intensity round(l * 255 / (L - 1)).
  Label num_labels = 256;
  /// Cap T of the squared data difference, 0 = none.
  Cost data_truncation = 0;
  /// The smoothness term on label differences (any kind of the model). The default is a truncated
  /// quadratic, lambda 25, Vmax 200: smooth ramps stay smooth, edges cost at most 5000.
  Pairwise smoothness{PairwiseKind::kTruncatedQuadratic, 25, 200, {}};

  /// Throws mrf::Error with a one-line message naming the first field out of range.
  void Validate() const;
  /// One line, e.g. "256 levels, squared data cost, no truncation; quadratic lambda=25 Vmax=200".
  std::string Describe() const;
};

/// The intensity (0..255) that label `level` of `num_labels` levels stands for.
int LevelIntensity(Label level, Label num_labels);

/// True at pixels marked missing in `mask`: first-channel value 128 or more (white = hole). A per-pixel
/// accessor without checks: (x, y) must lie in a mask that passes CheckImageShape().
bool IsMissing(const Image& mask, int x, int y);

/// The restoration model of `observed` (colour images are converted to grey, ITU-R 601 luma).
/// `mask` may be empty (width 0: no missing pixels); otherwise it must have the image's size, and
/// pixels where IsMissing() holds get zero data cost. Throws mrf::Error for a mask of the wrong
/// size or parameters out of range.
Model BuildRestorationModel(const Image& observed, const Image& mask, const RestorationParams& params);

/// The restored grey image of a labelling (intensity of each pixel's level).
Image RestoredImage(const Labeling& labels, int width, int height, Label num_labels);

/// Root-mean-square difference between two grey images of the same size (colour ones are
/// converted to grey); throws mrf::Error for different sizes.
double RootMeanSquareError(const Image& a, const Image& b);

/// A test image for restoration: the clean picture, a noisy copy with holes, and the hole mask.
struct SyntheticRestoration {
  Image clean;  ///< Piecewise smooth grey picture: ramps, discs and bars.
  Image noisy;  ///< clean + Gaussian noise, with the holes filled with random values.
  Image mask;   ///< 255 where a pixel is missing, 0 elsewhere.
};

/// Most missing rectangles MakeSyntheticRestoration() paints (mrf-restore's --holes has the same range).
constexpr int kMaxSyntheticHoles = 1000;

/// Generates a grey test picture of the given size with Gaussian noise of standard deviation
/// `noise` and `holes` missing rectangles (0..kMaxSyntheticHoles). The same seed gives the same images.
SyntheticRestoration MakeSyntheticRestoration(int width, int height, std::uint64_t seed, double noise = 20.0,
                                              int holes = 6);

}  // namespace mrf
