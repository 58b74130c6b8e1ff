#include "energies/colour_model.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include "mrf/types.h"

namespace mrf {

namespace {

void CheckChannels(int channels, const char* what) {
  if (channels != 1 && channels != 3)
    throw Error(std::string(what) + ": colour models take 1 (grey) or 3 (RGB) channels, not " +
                std::to_string(channels));
}

void CheckMask(const Image& image, const std::vector<std::uint8_t>& mask, int channels, const char* what) {
  if (image.channels != channels)
    throw Error(std::string(what) + ": image has " + std::to_string(image.channels) + " channels, the model " +
                std::to_string(channels));
  if (!mask.empty() && mask.size() != image.size())
    throw Error(std::string(what) + ": mask has " + std::to_string(mask.size()) + " values for " +
                std::to_string(image.size()) + " pixels");
}

}  // namespace

// ---- Histogram ------------------------------------------------------------------------------------

ColourHistogram::ColourHistogram(int channels, int bins, double prior)
    : channels_(channels), bins_(bins), prior_(prior) {
  CheckChannels(channels, "histogram");
  if (bins < 1 || bins > 256) throw Error("histogram bins must be in 1..256 (got " + std::to_string(bins) + ")");
  if (!(prior > 0) || !std::isfinite(prior))
    throw Error("histogram prior (pseudo-count) must be positive (got " + std::to_string(prior) + ")");
  std::size_t cells = 1;
  for (int c = 0; c < channels; ++c) cells *= static_cast<std::size_t>(bins);
  if (cells > (std::size_t{1} << 21))
    throw Error("histogram of " + std::to_string(bins) + " bins per channel has " + std::to_string(cells) +
                " cells (at most 2^21: use at most 128 bins for colour images)");
  counts_.assign(cells, 0);
}

std::size_t ColourHistogram::Cell(const std::uint8_t* pixel) const {
  std::size_t cell = 0;
  for (int c = channels_ - 1; c >= 0; --c) cell = cell * bins_ + static_cast<std::size_t>(pixel[c]) * bins_ / 256;
  return cell;
}

void ColourHistogram::Add(const std::uint8_t* pixel) {
  ++counts_[Cell(pixel)];
  ++samples_;
}

void ColourHistogram::AddPixels(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value) {
  CheckMask(image, mask, channels_, "histogram");
  auto count = [&](std::size_t begin, std::size_t end, std::vector<std::int64_t>* counts) {
    for (std::size_t p = begin; p < end; ++p)
      if (mask.empty() || mask[p] == value) ++(*counts)[Cell(&image.pixels[p * channels_])];
  };
  // Large images with histograms of few cells: blocks of pixels on all cores, their integer counts
  // added up (the same histogram; one core took about 80 ms a pass over a 4096 x 4096 image).
  constexpr std::size_t kBlock = std::size_t{1} << 18;
  std::vector<std::int64_t> added(counts_.size(), 0);
  if (image.size() < 2 * kBlock || counts_.size() > (std::size_t{1} << 16)) {
    count(0, image.size(), &added);
  } else {
    added = tbb::parallel_reduce(
        tbb::blocked_range<std::size_t>(0, image.size(), kBlock), added,
        [&](const tbb::blocked_range<std::size_t>& r, std::vector<std::int64_t> counts) {
          count(r.begin(), r.end(), &counts);
          return counts;
        },
        [](std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
          for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
          return a;
        });
  }
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    counts_[i] += added[i];
    samples_ += added[i];
  }
}

void ColourHistogram::AddRectangle(const Image& image, int x0, int y0, int w, int h) {
  CheckMask(image, {}, channels_, "histogram");
  for (int y = std::max(0, y0); y < std::min(image.height, y0 + h); ++y)
    for (int x = std::max(0, x0); x < std::min(image.width, x0 + w); ++x) Add(&image.pixels[(static_cast<std::size_t>(y) * image.width + x) * channels_]);
}

double ColourHistogram::NegLogProbability(const std::uint8_t* pixel) const {
  const double total = static_cast<double>(samples_) + prior_ * static_cast<double>(counts_.size());
  return -std::log((static_cast<double>(counts_[Cell(pixel)]) + prior_) / total);
}

std::string ColourHistogram::Describe() const {
  std::ostringstream out;
  out << "histogram " << bins_ << (channels_ == 3 ? "^3" : "") << " bins, " << samples_ << " samples";
  return out.str();
}

// ---- Gaussian mixture -----------------------------------------------------------------------------

namespace {

using Matrix = Eigen::MatrixXd;
constexpr double kLog2Pi = 1.8378770664093453;

// A uniform double in [0, 1) from the top 53 bits: the same on every standard library.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Samples as real values, `d` per sample, an evenly strided subset when there are more than max_samples.
struct Samples {
  int d = 0;
  std::int64_t n = 0;
  std::vector<double> x;  // n * d
  const double* at(std::int64_t i) const { return &x[static_cast<std::size_t>(i) * d]; }
};

Samples CollectSamples(int channels, const std::uint8_t* samples, std::int64_t count, std::int64_t max_samples) {
  Samples out;
  out.d = channels;
  out.n = max_samples > 0 && count > max_samples ? max_samples : count;
  out.x.resize(static_cast<std::size_t>(out.n) * channels);
  for (std::int64_t i = 0; i < out.n; ++i) {
    const std::int64_t src = out.n == count ? i : i * count / out.n;
    for (int c = 0; c < channels; ++c) out.x[static_cast<std::size_t>(i) * channels + c] = samples[src * channels + c];
  }
  return out;
}

std::vector<std::uint8_t> MaskedPixels(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value,
                                       std::int64_t* count) {
  std::vector<std::uint8_t> out;
  *count = 0;
  for (std::size_t p = 0; p < image.size(); ++p)
    if (mask.empty() || mask[p] == value) {
      out.insert(out.end(), &image.pixels[p * image.channels], &image.pixels[(p + 1) * image.channels]);
      ++*count;
    }
  return out;
}

// Weighted sufficient statistics of one component: total weight, sums of x and of x x^T.
struct Moments {
  double weight = 0;
  double sum[3] = {0, 0, 0};
  double outer[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  void Add(const double* x, int d, double r) {
    weight += r;
    for (int i = 0; i < d; ++i) {
      sum[i] += r * x[i];
      for (int j = 0; j < d; ++j) outer[i * d + j] += r * x[i] * x[j];
    }
  }
};

// Maximum-likelihood components from moments; empty components are dropped.
std::vector<GaussianMixture::Component> ComponentsFrom(const std::vector<Moments>& moments, int d, double n) {
  std::vector<GaussianMixture::Component> out;
  for (const Moments& m : moments) {
    if (m.weight < 1e-6 * n || m.weight < 1e-9) continue;
    GaussianMixture::Component c;
    c.weight = m.weight / n;
    c.mean.resize(d);
    for (int i = 0; i < d; ++i) c.mean[i] = m.sum[i] / m.weight;
    c.covariance.resize(static_cast<std::size_t>(d) * d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) {
        const double second = 0.5 * (m.outer[i * d + j] + m.outer[j * d + i]) / m.weight;
        c.covariance[static_cast<std::size_t>(i) * d + j] = std::max(i == j ? 0.0 : -1e300, second - c.mean[i] * c.mean[j]);
      }
    out.push_back(std::move(c));
  }
  return out;
}

// EM iterations from the given mixture; returns the refitted one. Each pass computes the
// responsibilities (E-step) and accumulates the moments of the M-step at once.
GaussianMixture RunEm(const Samples& x, GaussianMixture mixture, const GmmFitOptions& options) {
  for (int it = 0; it < options.em_iterations; ++it) {
    const int k_count = static_cast<int>(mixture.components().size());
    std::vector<Moments> moments(k_count);
    double log_p[GaussianMixture::kMaxComponents];
    for (std::int64_t i = 0; i < x.n; ++i) {
      const double* point = x.at(i);
      mixture.ComponentLogTerms(point, log_p);
      double best = -std::numeric_limits<double>::infinity();
      for (int k = 0; k < k_count; ++k) best = std::max(best, log_p[k]);
      double sum = 0;
      for (int k = 0; k < k_count; ++k) sum += (log_p[k] = std::exp(log_p[k] - best));
      for (int k = 0; k < k_count; ++k) moments[k].Add(point, x.d, log_p[k] / sum);
    }
    mixture = GaussianMixture(x.d, ComponentsFrom(moments, x.d, static_cast<double>(x.n)), options.regularization,
                              options.max_cost);
  }
  return mixture;
}

void CheckFitOptions(const GmmFitOptions& o) {
  if (o.components < 1 || o.components > GaussianMixture::kMaxComponents)
    throw Error("GMM components must be in 1.." + std::to_string(GaussianMixture::kMaxComponents) + " (got " +
                std::to_string(o.components) + ")");
  if (o.em_iterations < 0 || o.kmeans_iterations < 0) throw Error("GMM iteration counts must be >= 0");
  if (!(o.regularization >= 0) || !std::isfinite(o.regularization))
    throw Error("GMM covariance regularisation must be >= 0 (got " + std::to_string(o.regularization) + ")");
  if (!(o.max_cost > 0)) throw Error("GMM cost cap must be positive (got " + std::to_string(o.max_cost) + ")");
}

}  // namespace

GaussianMixture::GaussianMixture(int channels, std::vector<Component> components, double regularization,
                                 double max_cost)
    : channels_(channels), components_(std::move(components)), max_cost_(max_cost) {
  CheckChannels(channels, "Gaussian mixture");
  if (components_.empty()) throw Error("Gaussian mixture has no components");
  if (components_.size() > static_cast<std::size_t>(kMaxComponents))
    throw Error("Gaussian mixture has " + std::to_string(components_.size()) + " components (at most " +
                std::to_string(kMaxComponents) + ")");
  double total = 0;
  for (std::size_t k = 0; k < components_.size(); ++k) {
    Component& c = components_[k];
    const std::string name = "Gaussian mixture component " + std::to_string(k);
    if (static_cast<int>(c.mean.size()) != channels ||
        static_cast<int>(c.covariance.size()) != channels * channels)
      throw Error(name + ": mean or covariance has the wrong size for " + std::to_string(channels) + " channels");
    if (!(c.weight >= 0) || !std::isfinite(c.weight)) throw Error(name + ": weight must be >= 0");
    for (int i = 0; i < channels; ++i) c.covariance[static_cast<std::size_t>(i) * channels + i] += regularization;
    total += c.weight;
  }
  if (!(total > 0)) throw Error("Gaussian mixture weights sum to zero");
  for (Component& c : components_) c.weight /= total;
  Prepare();
}

void GaussianMixture::Prepare() {
  inverse_.clear();
  log_norm_.clear();
  const int d = channels_;
  for (std::size_t k = 0; k < components_.size(); ++k) {
    Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> cov(
        components_[k].covariance.data(), d, d);
    const Matrix covariance = cov;
    const Eigen::LLT<Matrix> llt(covariance);
    if (llt.info() != Eigen::Success || !(Matrix(llt.matrixL()).diagonal().minCoeff() > 0))
      throw Error("Gaussian mixture component " + std::to_string(k) + ": covariance is not positive definite");
    const Matrix inv = llt.solve(Matrix::Identity(d, d));
    std::vector<double> flat(static_cast<std::size_t>(d) * d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) flat[static_cast<std::size_t>(i) * d + j] = inv(i, j);
    inverse_.push_back(std::move(flat));
    const double log_det = 2.0 * Matrix(llt.matrixL()).diagonal().array().log().sum();
    const double w = components_[k].weight;
    log_norm_.push_back((w > 0 ? std::log(w) : -std::numeric_limits<double>::infinity()) -
                        0.5 * (d * kLog2Pi + log_det));
  }
}

void GaussianMixture::ComponentLogTerms(const double* point, double* out) const {
  const int d = channels_;
  for (std::size_t k = 0; k < components_.size(); ++k) {
    double diff[3];
    for (int i = 0; i < d; ++i) diff[i] = point[i] - components_[k].mean[i];
    double maha = 0;
    const std::vector<double>& inv = inverse_[k];
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) maha += diff[i] * inv[static_cast<std::size_t>(i) * d + j] * diff[j];
    out[k] = log_norm_[k] - 0.5 * maha;
  }
}

double GaussianMixture::NegLogDensity(const double* point) const {
  double terms[kMaxComponents];
  const std::size_t k_count = components_.size();
  ComponentLogTerms(point, terms);
  double best = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < k_count; ++k) best = std::max(best, terms[k]);
  if (!std::isfinite(best)) return std::numeric_limits<double>::infinity();
  double sum = 0;
  for (std::size_t k = 0; k < k_count; ++k) sum += std::exp(terms[k] - best);
  return -(best + std::log(sum));
}

double GaussianMixture::NegLogProbability(const std::uint8_t* pixel) const {
  double point[3];
  for (int c = 0; c < channels_; ++c) point[c] = pixel[c];
  const double cost = NegLogDensity(point);
  // A density above 1 (possible without regularisation) would give a negative cost: clamp to 0.
  return std::clamp(std::isnan(cost) ? max_cost_ : cost, 0.0, max_cost_);
}

std::string GaussianMixture::Describe() const {
  std::ostringstream out;
  out << "Gaussian mixture, " << components_.size() << " components";
  return out.str();
}

GaussianMixture GaussianMixture::Fit(int channels, const std::uint8_t* samples, std::int64_t count,
                                     const GmmFitOptions& options) {
  CheckChannels(channels, "Gaussian mixture");
  CheckFitOptions(options);
  if (count <= 0) throw Error("cannot fit a Gaussian mixture to zero pixels");
  const Samples x = CollectSamples(channels, samples, count, options.max_samples);
  const std::int64_t n = x.n;
  const int d = channels;
  auto distance2 = [d](const double* a, const double* b) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += (a[c] - b[c]) * (a[c] - b[c]);
    return s;
  };

  // k-means++ seeding: each new centre drawn with probability proportional to the squared
  // distance to the nearest centre so far. Fewer distinct colours than K give fewer centres.
  std::mt19937_64 rng(options.seed);
  std::vector<double> centres;  // k * d
  const std::int64_t first = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
  centres.insert(centres.end(), x.at(first), x.at(first) + d);
  std::vector<double> dist2(static_cast<std::size_t>(n), std::numeric_limits<double>::infinity());
  while (static_cast<int>(centres.size()) / d < options.components) {
    const double* newest = &centres[centres.size() - d];
    double total = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      dist2[i] = std::min(dist2[i], distance2(x.at(i), newest));
      total += dist2[i];
    }
    if (!(total > 0)) break;
    double target = Uniform(rng) * total;
    std::int64_t pick = -1;
    for (std::int64_t i = 0; i < n && pick < 0; ++i) {
      target -= dist2[i];
      if (target < 0 && dist2[i] > 0) pick = i;
    }
    if (pick < 0)  // rounding left the target unspent: take the last sample not yet a centre
      for (std::int64_t i = n - 1; i >= 0 && pick < 0; --i)
        if (dist2[i] > 0) pick = i;
    centres.insert(centres.end(), x.at(pick), x.at(pick) + d);
  }
  // Lloyd iterations; the final assignment gives the starting moments.
  const int k_count = static_cast<int>(centres.size()) / d;
  std::vector<int> assign(static_cast<std::size_t>(n), 0);
  for (int it = 0; it <= options.kmeans_iterations; ++it) {
    for (std::int64_t i = 0; i < n; ++i) {
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < k_count; ++k) {
        const double d2 = distance2(x.at(i), &centres[static_cast<std::size_t>(k) * d]);
        if (d2 < best) {
          best = d2;
          assign[i] = k;
        }
      }
    }
    if (it == options.kmeans_iterations) break;
    std::vector<double> sums(centres.size(), 0.0);
    std::vector<std::int64_t> sizes(k_count, 0);
    for (std::int64_t i = 0; i < n; ++i) {
      for (int c = 0; c < d; ++c) sums[static_cast<std::size_t>(assign[i]) * d + c] += x.at(i)[c];
      ++sizes[assign[i]];
    }
    for (int k = 0; k < k_count; ++k)
      if (sizes[k] > 0)
        for (int c = 0; c < d; ++c)
          centres[static_cast<std::size_t>(k) * d + c] = sums[static_cast<std::size_t>(k) * d + c] / sizes[k];
  }
  std::vector<Moments> moments(k_count);
  for (std::int64_t i = 0; i < n; ++i) moments[assign[i]].Add(x.at(i), d, 1.0);
  GaussianMixture start(channels, ComponentsFrom(moments, d, static_cast<double>(n)), options.regularization,
                        options.max_cost);
  return RunEm(x, std::move(start), options);
}

GaussianMixture GaussianMixture::FitPixels(const Image& image, const std::vector<std::uint8_t>& mask,
                                           std::uint8_t value, const GmmFitOptions& options) {
  CheckMask(image, mask, image.channels, "Gaussian mixture");
  std::int64_t count = 0;
  const std::vector<std::uint8_t> pixels = MaskedPixels(image, mask, value, &count);
  return Fit(image.channels, pixels.data(), count, options);
}

GaussianMixture GaussianMixture::Refit(const std::uint8_t* samples, std::int64_t count,
                                       const GmmFitOptions& options) const {
  CheckFitOptions(options);
  if (count <= 0) throw Error("cannot fit a Gaussian mixture to zero pixels");
  const Samples x = CollectSamples(channels_, samples, count, options.max_samples);
  GmmFitOptions o = options;
  o.em_iterations = std::max(1, options.em_iterations);
  return RunEm(x, *this, o);
}

GaussianMixture GaussianMixture::RefitPixels(const Image& image, const std::vector<std::uint8_t>& mask,
                                             std::uint8_t value, const GmmFitOptions& options) const {
  CheckMask(image, mask, channels_, "Gaussian mixture");
  std::int64_t count = 0;
  const std::vector<std::uint8_t> pixels = MaskedPixels(image, mask, value, &count);
  return Refit(pixels.data(), count, options);
}

}  // namespace mrf
