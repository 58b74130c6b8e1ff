#pragma once
/// @file colour_model.h
/// @brief Colour models for segmentation data terms: histograms and Gaussian mixtures.
///
/// A colour model gives, for an 8-bit pixel of 1 (grey) or 3 (RGB) channels, a cost
/// -log P(colour | model) in nats. Segmentation builders turn two such models (foreground and
/// background) into the two unary costs of every pixel.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mrf/io/image.h"

namespace mrf {

/// -log P(colour) for pixels of a fixed channel count.
class ColourModel {
 public:
  virtual ~ColourModel() = default;
  /// Values per pixel this model reads (1 or 3).
  virtual int channels() const = 0;
  /// -log P(colour) in nats; finite and non-negative for every 8-bit colour.
  virtual double NegLogProbability(const std::uint8_t* pixel) const = 0;
  /// A one-line description ("histogram 16^3 bins, 1204 samples").
  virtual std::string Describe() const = 0;
  /// A copy of this model.
  virtual std::unique_ptr<ColourModel> Clone() const = 0;
};

/// A joint histogram with `bins` equal bins per channel over 0..255, smoothed by a pseudo-count.
///
/// The probability of a colour is the smoothed probability of its cell,
/// P(cell) = (count(cell) + prior) / (samples + prior * bins^channels),
/// so the cost -log P(cell) is finite even for colours never seen. prior = 1 is Laplace's rule.
class ColourHistogram final : public ColourModel {
 public:
  /// An empty histogram (every cell equally likely). Throws mrf::Error for channels other than
  /// 1 or 3, bins outside 1..256, or a prior that is not positive and finite.
  ColourHistogram(int channels, int bins, double prior = 1.0);
  /// Adds one sample.
  void Add(const std::uint8_t* pixel);
  /// Adds the pixels of `image` (which must have channels() channels) where `mask` (one byte per
  /// pixel, or empty for all pixels) equals `value`.
  void AddPixels(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value);
  /// Adds the pixels of the rectangle [x0, x0 + w) x [y0, y0 + h) of `image` (clipped to it).
  void AddRectangle(const Image& image, int x0, int y0, int w, int h);

  int channels() const override { return channels_; }
  double NegLogProbability(const std::uint8_t* pixel) const override;
  std::string Describe() const override;
  std::unique_ptr<ColourModel> Clone() const override { return std::make_unique<ColourHistogram>(*this); }

  int bins() const { return bins_; }            ///< Bins per channel.
  double prior() const { return prior_; }       ///< Pseudo-count added to every cell.
  std::int64_t samples() const { return samples_; }  ///< Samples added so far.
  /// Cell index of a colour: sum_c bin(pixel[c]) * bins^c, bin(v) = v * bins / 256.
  std::size_t Cell(const std::uint8_t* pixel) const;
  /// Count of one cell.
  std::int64_t count(std::size_t cell) const { return counts_[cell]; }
  /// Number of cells, bins^channels.
  std::size_t num_cells() const { return counts_.size(); }

 private:
  int channels_, bins_;
  double prior_;
  std::vector<std::int64_t> counts_;
  std::int64_t samples_ = 0;
};

/// Settings of a Gaussian-mixture fit (k-means initialisation, then expectation-maximisation).
struct GmmFitOptions {
  int components = 5;        ///< K, the number of Gaussians.
  int em_iterations = 10;    ///< EM iterations after k-means.
  int kmeans_iterations = 10;  ///< Lloyd iterations of the initialisation.
  /// Added to the diagonal of every covariance (intensity units squared). 1 keeps covariances
  /// invertible for flat regions and every density below 1, so costs are never negative.
  double regularization = 1.0;
  /// Costs are capped here (nats): colours far from every component cost this much. 25 nats is a
  /// probability of about 1e-11, far below a uniform colour (-log 256^-3 = 16.6 nats).
  double max_cost = 25.0;
  /// At most this many samples are used (an evenly strided subset beyond it); 0 = all.
  std::int64_t max_samples = 200000;
  std::uint64_t seed = 0;    ///< Seed of the k-means++ initialisation (fits are deterministic).
};

/// A mixture of Gaussians with full covariances over 1 or 3 channels.
class GaussianMixture final : public ColourModel {
 public:
  /// One component: weight, mean (channels values) and covariance (channels x channels, row-major).
  struct Component {
    double weight = 0;
    std::vector<double> mean;
    std::vector<double> covariance;
  };

  /// A mixture with the given components (weights are normalised; covariances must be symmetric
  /// positive definite after `regularization`). Throws mrf::Error naming the bad component.
  GaussianMixture(int channels, std::vector<Component> components, double regularization = 0.0,
                  double max_cost = 25.0);
  /// Fits a mixture to samples (`count` pixels of `channels` values each, interleaved):
  /// k-means++ initialisation and Lloyd iterations, then EM. Deterministic for a seed.
  /// Throws mrf::Error if there are no samples.
  static GaussianMixture Fit(int channels, const std::uint8_t* samples, std::int64_t count,
                             const GmmFitOptions& options = {});
  /// Fits to the pixels of `image` where `mask` (one byte per pixel) equals `value`.
  static GaussianMixture FitPixels(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value,
                                   const GmmFitOptions& options = {});
  /// Re-fits by EM starting from this mixture's parameters (the GrabCut re-estimation step), at
  /// least one iteration. Throws mrf::Error if there are no samples.
  GaussianMixture Refit(const std::uint8_t* samples, std::int64_t count, const GmmFitOptions& options = {}) const;
  /// Refit() on the pixels of `image` where `mask` equals `value`.
  GaussianMixture RefitPixels(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value,
                              const GmmFitOptions& options = {}) const;

  int channels() const override { return channels_; }
  double NegLogProbability(const std::uint8_t* pixel) const override;
  std::string Describe() const override;
  std::unique_ptr<ColourModel> Clone() const override { return std::make_unique<GaussianMixture>(*this); }

  /// The components (covariances include the regularisation).
  const std::vector<Component>& components() const { return components_; }
  /// -log of the mixture density at a real-valued point (no cap): for tests and likelihoods.
  double NegLogDensity(const double* point) const;
  /// log(weight_k) + log N(point; mean_k, covariance_k) for every component k (out has one value
  /// per component): the terms whose log-sum-exp is -NegLogDensity().
  void ComponentLogTerms(const double* point, double* out) const;
  /// Most components a mixture may have.
  static constexpr int kMaxComponents = 64;

 private:
  void Prepare();  // inverse covariances and log normalisers

  int channels_;
  std::vector<Component> components_;
  double max_cost_;
  std::vector<std::vector<double>> inverse_;  // per component, row-major
  std::vector<double> log_norm_;              // log(weight) - 0.5 * (D log 2pi + log det)
};

}  // namespace mrf
