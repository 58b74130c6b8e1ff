#include "energies/synthetic_scene.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include "energies/colour_model.h"
#include "energies/segmentation.h"
#include "mrf/binary_graph.h"
#include "mrf/memory.h"

namespace mrf {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Portable draws: std::mt19937_64 is specified exactly by the standard; the distributions below
// are ours, so a seed gives the same scene with any standard library.
double Uniform(std::uint64_t number) { return static_cast<double>(number >> 11) * 0x1.0p-53; }
double Uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * Uniform(rng()); }

// A pixel's intensity from three numbers of the stream, always three: the mixture component, then
// Box-Muller (whose second value is not kept) for the component's normal draw.
constexpr int kNumbersPerPixel = 3;
std::uint8_t IntensityFromNumbers(const std::uint64_t* numbers, const IntensityMixture& m) {
  const double u = Uniform(numbers[0]);
  int k = 0;
  double cumulative = m.weight[0];
  while (k < 2 && u >= cumulative) cumulative += m.weight[++k];
  const double u1 = 1.0 - Uniform(numbers[1]);  // in (0, 1]
  const double u2 = Uniform(numbers[2]);
  const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  const double value = std::round(m.mean[k] + m.stddev[k] * normal);
  return static_cast<std::uint8_t>(std::clamp(value, 0.0, 255.0));
}

struct Ellipse {
  double cx, cy, a, b, cos_t, sin_t;
  bool Contains(double x, double y) const {
    const double dx = x - cx, dy = y - cy;
    const double u = (dx * cos_t + dy * sin_t) / a, v = (-dx * sin_t + dy * cos_t) / b;
    return u * u + v * v <= 1.0;
  }
};

}  // namespace

SyntheticScene MakeSyntheticScene(const SyntheticSceneOptions& o) {
  if (o.width < 4 || o.height < 4)
    throw Error("synthetic scene size " + std::to_string(o.width) + "x" + std::to_string(o.height) +
                " is too small (at least 4x4)");
  if (std::int64_t{o.width} * o.height > (std::int64_t{1} << 30))
    throw Error("synthetic scene size " + std::to_string(o.width) + "x" + std::to_string(o.height) +
                " is too large (at most 2^30 pixels)");
  if (o.patch_size < 1) throw Error("synthetic scene patch size must be >= 1 (got " + std::to_string(o.patch_size) + ")");
  if (!(o.sigma > 0)) throw Error("synthetic scene sigma must be positive (got " + mrf::NumberText(o.sigma) + ")");
  if (!(o.data_weight >= 0) || !std::isfinite(o.data_weight))
    throw Error("synthetic scene data weight must be >= 0 (got " + std::to_string(o.data_weight) + ")");

  for (const IntensityMixture* m : {&o.foreground, &o.background}) {
    const char* which = m == &o.foreground ? "foreground" : "background";
    double sum = 0;
    for (int k = 0; k < 3; ++k) {
      if (!(m->weight[k] >= 0) || !(m->stddev[k] >= 0) || !std::isfinite(m->mean[k]) || !std::isfinite(m->stddev[k]))
        throw Error(std::string("synthetic scene ") + which + " mixture component " + std::to_string(k) +
                    ": weight and standard deviation must be >= 0 and finite");
      sum += m->weight[k];
    }
    if (std::fabs(sum - 1.0) > 1e-9)
      throw Error(std::string("synthetic scene ") + which + " mixture weights sum to " + std::to_string(sum) +
                  ", not 1");
  }

  SyntheticScene scene;
  const int w = o.width, h = o.height;
  const int s = std::max(1, std::min(o.patch_size, std::min(w, h) / 4));
  scene.patch_size = s;
  std::mt19937_64 rng(o.seed);

  // Ground truth: a union of ellipses, then the two patches.
  const double side = std::min(w, h);
  const int count = 3 + static_cast<int>(rng() % 6);
  std::vector<Ellipse> ellipses;
  for (int i = 0; i < count; ++i) {
    Ellipse e;
    e.cx = Uniform(rng, 0, w);
    e.cy = Uniform(rng, 0, h);
    e.a = std::max(1.0, Uniform(rng, 0.05, 0.20) * side);
    e.b = std::max(1.0, Uniform(rng, 0.05, 0.20) * side);
    const double angle = Uniform(rng, 0, kPi);
    e.cos_t = std::cos(angle);
    e.sin_t = std::sin(angle);
    ellipses.push_back(e);
  }
  scene.num_ellipses = count;
  const int cx0 = (w - s) / 2, cy0 = (h - s) / 2;
  scene.truth = NewLabeling(static_cast<std::size_t>(w) * h);
  tbb::parallel_for(0, h, [&](int y) {  // rows on all cores: each pixel depends on its position only
    for (int x = 0; x < w; ++x) {
      Label fg = 0;
      for (const Ellipse& e : ellipses)
        if (e.Contains(x + 0.5, y + 0.5)) {
          fg = 1;
          break;
        }
      if (x >= cx0 && x < cx0 + s && y >= cy0 && y < cy0 + s) fg = 1;
      if (x < s && y < s) fg = 0;
      scene.truth[static_cast<std::size_t>(y) * w + x] = fg;
    }
  });

  // Intensities, in raster order: pixel p takes numbers 3p, 3p + 1 and 3p + 2 of the stream after the
  // ellipses. The numbers are drawn in order on this thread, a chunk at a time, while the other cores
  // turn the previous chunk's numbers into intensities (the logarithm and cosine were most of a 4096 x
  // 4096 scene's 1.5-2.3 s on the GPU machine): the same image as drawing pixel by pixel.
  scene.image = Image::Filled(w, h, 1);
  const std::size_t n = scene.image.size();
  constexpr std::size_t kChunkPixels = std::size_t{1} << 18;
  std::vector<std::uint64_t> numbers[2];  // one chunk drawn while the other is turned into intensities
  tbb::task_group intensities;
  for (std::size_t begin = 0, chunk = 0; begin < n; begin += kChunkPixels, ++chunk) {
    const std::size_t end = std::min(n, begin + kChunkPixels);
    std::vector<std::uint64_t>& drawn = numbers[chunk % 2];
    drawn.resize(kNumbersPerPixel * (end - begin));
    for (std::uint64_t& number : drawn) number = rng();
    intensities.wait();  // the previous chunk, whose buffer the next one reuses
    intensities.run([&scene, &o, begin, end, first = drawn.data()] {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(begin, end, 4096), [&](const tbb::blocked_range<std::size_t>& r) {
        for (std::size_t p = r.begin(); p < r.end(); ++p)
          scene.image.pixels[p] = IntensityFromNumbers(first + kNumbersPerPixel * (p - begin),
                                                       scene.truth[p] ? o.foreground : o.background);
      });
    });
  }
  intensities.wait();
  if (!o.with_model) return scene;

  // Data costs from the patch histograms, pairwise from the contrast.
  ColourHistogram foreground(1, o.histogram_bins, 1.0), background(1, o.histogram_bins, 1.0);
  foreground.AddRectangle(scene.image, cx0, cy0, s, s);
  background.AddRectangle(scene.image, 0, 0, s, s);
  ContrastOptions contrast;
  contrast.lambda = o.pairwise_weight;
  contrast.sigma = o.sigma;
  contrast.connectivity = 4;
  contrast.cost_scale = o.cost_scale;

  Model& m = scene.model;
  m.topology = Topology::Grid2D(w, h, 4);
  m.num_labels = 2;
  m.cost_scale = o.cost_scale;
  m.pairwise.kind = PairwiseKind::kPotts;
  m.pairwise.lambda = 1;
  m.edge_weights = ContrastWeights(scene.image, m.topology, contrast);
  // A grey image has 256 values: quantise each value's cost once.
  Cost cost[2][256];
  for (int v = 0; v < 256; ++v) {
    const std::uint8_t value = static_cast<std::uint8_t>(v);
    cost[0][v] = QuantizeCost(o.data_weight * background.NegLogProbability(&value), o.cost_scale,
                              "background data cost of intensity " + std::to_string(v));
    cost[1][v] = QuantizeCost(o.data_weight * foreground.NegLogProbability(&value), o.cost_scale,
                              "foreground data cost of intensity " + std::to_string(v));
  }
  m.unary = NewZeroedVector<Cost>(n * 2);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 1 << 16), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t p = r.begin(); p < r.end(); ++p) {
      m.unary[2 * p] = cost[0][scene.image.pixels[p]];
      m.unary[2 * p + 1] = cost[1][scene.image.pixels[p]];
    }
  });
  m.ValidateOrThrow();
  return scene;
}

SyntheticScene MakeSyntheticScene(int width, int height, std::uint64_t seed) {
  SyntheticSceneOptions o;
  o.width = width;
  o.height = height;
  o.seed = seed;
  return MakeSyntheticScene(o);
}

Seeds SyntheticSceneSeeds(const SyntheticScene& scene) {
  const int w = scene.image.width, h = scene.image.height, s = scene.patch_size;
  Seeds seeds = Seeds::Unknown(w, h);
  seeds.training.assign(seeds.labels.size(), static_cast<std::uint8_t>(SeedLabel::kUnknown));
  const int cx0 = (w - s) / 2, cy0 = (h - s) / 2;
  for (int y = 0; y < s; ++y)
    for (int x = 0; x < s; ++x) {
      seeds.training[static_cast<std::size_t>(y) * w + x] = static_cast<std::uint8_t>(SeedLabel::kBackground);
      seeds.training[static_cast<std::size_t>(cy0 + y) * w + cx0 + x] =
          static_cast<std::uint8_t>(SeedLabel::kForeground);
    }
  return seeds;
}

SegmentationOptions SyntheticSceneSegmentationOptions(const SyntheticSceneOptions& o) {
  if (o.data_weight != 1.0)
    throw Error("segmentation options cannot express a data weight of " + std::to_string(o.data_weight) +
                " (only 1)");
  SegmentationOptions s;
  s.colour_model = ColourModelKind::kHistogram;
  s.histogram_bins = o.histogram_bins;
  s.histogram_prior = 1.0;
  s.contrast.lambda = o.pairwise_weight;
  s.contrast.sigma = o.sigma;
  s.contrast.connectivity = 4;
  s.contrast.cost_scale = o.cost_scale;
  s.iterations = 1;
  return s;
}

StGraph SyntheticSceneGraph(const SyntheticScene& scene, Energy* energy_offset) {
  return BuildBinaryGraph(scene.model, energy_offset);
}

}  // namespace mrf
