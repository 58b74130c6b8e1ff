#pragma once
/// @file segmentation.h
/// @brief Binary (foreground/background) segmentation energies in the style of Boykov and Jolly,
/// with GrabCut's re-estimation loop.
///
/// The energy of a mask x (label 1 = foreground, 0 = background) is
///
///   E(x) = sum_p D_p(x_p) + sum_{pq} w_pq [x_p != x_q]
///
/// with D_p(1) = -log P(I_p | foreground model), D_p(0) = -log P(I_p | background model) (nats),
/// and the contrast-sensitive weight
///
///   w_pq = lambda * exp(-||I_p - I_q||^2 / (2 sigma^2)) / dist(p, q),
///
/// where ||.|| sums over the colour channels and dist is 1 for 4-neighbours, sqrt 2 for diagonals.
/// Every real cost is multiplied by `cost_scale` and rounded to an integer (mrf::QuantizeCost);
/// the model's cost_scale records it. In the mrf::Model the pairwise term is Potts with lambda 1 and
/// the weights w_pq live in `edge_weights`.
///
/// Histogram costs are -log of a cell's probability mass, Gaussian-mixture costs -log of a density
/// (per unit intensity^channels): the two scales differ, so compare energies only between runs
/// with the same kind of colour model.
///
/// Seeds (scribbles or the outside of a rectangle) are hard constraints: a seeded pixel costs 0
/// with its seed label and K with the other, K = 1 + the largest sum of pairwise weights at any
/// one pixel, so flipping a seeded pixel to its seed label always lowers the energy and every
/// minimum respects every seed.
///
/// @code
///   mrf::Image image = mrf::LoadImage("photo.png", 3);
///   mrf::Seeds seeds = mrf::SeedsFromRectangle(image.width, image.height, mrf::ParseRect("40,30,200,150"));
///   mrf::SegmentationOptions options;
///   options.colour_model = mrf::ColourModelKind::kGmm;
///   options.iterations = 5;                      // GrabCut: re-fit the models and cut again
///   mrf::Segmentation s = mrf::SegmentImage(image, seeds, options);
///   // s.mask (1 = foreground), s.result (the last cut: energy, flow, backend, times), s.rounds
/// @endcode

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "energies/colour_model.h"
#include "mrf/io/image.h"
#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// The pairwise (contrast) part of a segmentation energy and the integer scale.
struct ContrastOptions {
  double lambda = 2.5;    ///< Pairwise weight in nats (the weight of an edge between equal colours).
  /// Contrast scale in intensity units. 0 estimates it from the image as GrabCut does:
  /// sigma^2 = mean of ||I_p - I_q||^2 over the edges.
  double sigma = 50.0;
  int connectivity = 4;   ///< 4 or 8 neighbours (diagonal weights are divided by sqrt 2).
  double cost_scale = 100.0;  ///< Integer costs = real costs x cost_scale.
};

/// The sigma that sigma = 0 stands for: sqrt of the mean squared colour difference over the edges
/// of the grid (1 if the image is flat).
double EstimateContrastSigma(const Image& image, int connectivity);

/// Quantised contrast weights, one per edge slot of `grid` (a 2-D grid of the image's size):
/// QuantizeCost(w_pq, cost_scale). Throws mrf::Error for bad options or a size mismatch.
std::vector<Cost> ContrastWeights(const Image& image, const Topology& grid, const ContrastOptions& options);

/// What a seed says about a pixel.
enum class SeedLabel : std::uint8_t {
  kUnknown = 0,     ///< No constraint.
  kForeground = 1,  ///< Must be foreground (label 1).
  kBackground = 2,  ///< Must be background (label 0).
};

/// Per-pixel seeds of an image (row-major, one SeedLabel value per pixel).
struct Seeds {
  int width = 0;   ///< Must equal the image width.
  int height = 0;  ///< Must equal the image height.
  std::vector<std::uint8_t> labels;  ///< SeedLabel values: hard constraints.
  /// Optional soft labels (SeedLabel values) the first colour models are fitted to, without
  /// constraining the cut (the synthetic scene's patches). Empty: fit to `labels`, where a
  /// rectangle's inside (no foreground seed at all) counts as foreground.
  std::vector<std::uint8_t> training;

  /// Seeds of the given size, all unknown.
  static Seeds Unknown(int width, int height);
  /// Number of pixels with this seed label.
  std::int64_t Count(SeedLabel label) const;
};

/// Reads seeds from a scribble image of size width x height (`path` names it in errors).
/// Colours: red (R >= 200, G <= 60, B <= 60; pure red 255,0,0 is the intended one) = foreground,
/// blue (B >= 200, R <= 60, G <= 60; pure 0,0,255) = background, anything else = unknown. A grey
/// scribble image reads white (>= 200) as foreground, black (<= 55) as background.
/// Throws mrf::Error if the sizes differ or there is no foreground or no background scribble.
Seeds SeedsFromScribbles(const Image& scribbles, int width, int height, const std::string& path = "scribbles");

/// A rectangle of pixels.
struct Rect {
  int x = 0, y = 0, width = 0, height = 0;  ///< Top-left corner and size.
};
/// Parses "x,y,w,h" (integers, w and h positive); throws mrf::Error naming the text.
Rect ParseRect(const std::string& text);
/// GrabCut seeds: everything outside `rect` is background, the inside unknown. Throws mrf::Error
/// if the rectangle is empty, leaves the image, or covers all of it (no background to learn from).
Seeds SeedsFromRectangle(int width, int height, const Rect& rect);

/// Builds the two-label model: unaries from the two colour models (hard constraints where `seeds`
/// say so; `seeds` may be null), contrast weights from `contrast`. Label 1 = foreground.
Model BuildSegmentationModel(const Image& image, const ColourModel& foreground, const ColourModel& background,
                             const Seeds* seeds, const ContrastOptions& contrast);
/// Replaces the unary costs of a model made by BuildSegmentationModel (same image and seeds) with
/// the costs of new colour models; the pairwise part is kept.
void SetSegmentationUnaries(Model* model, const Image& image, const ColourModel& foreground,
                            const ColourModel& background, const Seeds* seeds);
/// The hard-constraint cost K for a model's weights: 1 + the largest sum of weights at a pixel.
Cost HardConstraintCost(const Model& model);

/// Percentage of pixels where mask and truth differ.
double MaskErrorPercent(const Labeling& mask, const Labeling& truth);

/// Colour model families.
enum class ColourModelKind {
  kHistogram,  ///< ColourHistogram (Boykov and Jolly).
  kGmm,        ///< GaussianMixture (GrabCut).
};
/// "histogram" or "gmm".
const char* ToString(ColourModelKind kind);
/// Parses histogram|gmm; throws mrf::Error naming the value.
ColourModelKind ParseColourModelKind(const std::string& name);

/// Everything SegmentImage() can be told.
struct SegmentationOptions {
  ColourModelKind colour_model = ColourModelKind::kHistogram;  ///< Family of the colour models.
  int histogram_bins = 16;      ///< Histogram bins per channel.
  double histogram_prior = 1.0; ///< Histogram pseudo-count per cell.
  GmmFitOptions gmm;            ///< Gaussian-mixture settings (components, EM iterations...).
  ContrastOptions contrast;     ///< Pairwise weights and the integer scale.
  /// Number of graph cuts. 1 = Boykov-Jolly (models from the seeds, one cut); K > 1 = GrabCut:
  /// after each cut the models are re-fitted to the current mask and the image is cut again.
  int iterations = 1;
  /// Stop re-estimating early when a cut changes no pixel.
  bool stop_when_converged = true;
  /// GrabCut: cut rounds after the first on the first round's s-t graph, re-solving from its residual
  /// graph when the max-flow engine can (only the unary costs change; SolveOptions::kept_cut).
  bool keep_graph = true;

  /// True when every field is in range; otherwise writes a message naming the field.
  bool IsValid(std::string* error) const;
};

/// One cut of SegmentImage().
struct SegmentationRound {
  int round = 0;                ///< 1-based.
  /// Energy of the previous mask under this round's (re-fitted) models; -1 in round 1.
  /// energy_before >= energy always (the cut is optimal); the models' re-fit may raise or lower it
  /// relative to the previous round's energy.
  Energy energy_before = -1;
  Energy energy = -1;           ///< Energy of this round's cut under this round's models.
  std::int64_t changed = 0;     ///< Pixels whose label changed (round 1: pixels labelled foreground).
  std::int64_t foreground = 0;  ///< Foreground pixels after the cut.
  double model_ms = 0;          ///< Fitting the colour models and building the unaries.
  double solve_ms = 0;          ///< mrf::Solve (total).
  std::string foreground_model; ///< Describe() of the foreground model used.
  std::string background_model; ///< Describe() of the background model used.
};

/// What SegmentImage() produced.
struct Segmentation {
  Labeling mask;                       ///< One label per pixel, 1 = foreground.
  Result result;                       ///< The last cut (energy, flow, backend, timings).
  Model model;                         ///< The model of the last cut.
  std::vector<SegmentationRound> rounds;  ///< One entry per cut.
  double setup_ms = 0;                 ///< Weights and first models, before the first solve.
};

/// Host memory SegmentImage() takes for a width x height image with the max-flow `backend` (a solver
/// name or "auto"), about: peaks measured on the synthetic scene at 2048 x 2048 were 162 bytes a pixel
/// with cpu-bk, 124 with tbb-pr and 728 with boost-bk; other backends count as cpu-bk.
double SegmentationBytes(int width, int height, const std::string& backend);
/// Throws mrf::Error ("the image, models and graph of WxH pixels need about X GiB of memory, more
/// than ...", see MemoryShortfall()) when SegmentationBytes() do not fit. SegmentImage() checks it
/// first; a program can check it before making or loading its image.
void CheckSegmentationFits(int width, int height, const std::string& backend);

/// Segments `image` (1 or 3 channels; other counts are rejected) from `seeds`: fits the colour
/// models to the seeds (or to seeds.training; a rectangle's inside counts as foreground), cuts, and,
/// for options.iterations > 1, re-fits the models to the mask and cuts again. `solve` picks the
/// max-flow backend (solver name or "auto"); its algorithm is forced to max-flow. `progress`, when
/// given, is called after every round. Throws mrf::Error for bad input or a failed solve.
Segmentation SegmentImage(const Image& image, const Seeds& seeds, const SegmentationOptions& options,
                          const SolveOptions& solve = {},
                          const std::function<void(const SegmentationRound&)>& progress = {});

}  // namespace mrf
