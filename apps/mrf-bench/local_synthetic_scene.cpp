#include "mrf-bench/local_synthetic_scene.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace mrf::bench {
namespace {

using Rgb = std::array<int, 3>;

struct Mixture {
  std::array<double, 3> weight;
  std::array<std::array<double, 3>, 3> mean;  // [component][channel]
  std::array<double, 3> sigma;                // per component, isotropic
};

Mixture RandomMixture(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mean(30, 225), sigma(10, 30), weight(0.2, 1.0);
  Mixture m;
  double total = 0;
  for (int c = 0; c < 3; ++c) {
    m.weight[c] = weight(rng);
    total += m.weight[c];
    for (int ch = 0; ch < 3; ++ch) m.mean[c][ch] = mean(rng);
    m.sigma[c] = sigma(rng);
  }
  for (double& w : m.weight) w /= total;
  return m;
}

Rgb Sample(const Mixture& m, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  double u = unit(rng);
  int c = 0;
  while (c < 2 && u > m.weight[c]) u -= m.weight[c++];
  Rgb rgb;
  for (int ch = 0; ch < 3; ++ch)
    rgb[ch] = std::clamp(static_cast<int>(std::lround(m.mean[c][ch] + m.sigma[c] * normal(rng))), 0, 255);
  return rgb;
}

constexpr int kBinsPerChannel = 16;
constexpr int kBins = kBinsPerChannel * kBinsPerChannel * kBinsPerChannel;
constexpr double kPseudoCount = 0.1;  // keeps -log p finite for colours the patch never showed
constexpr int kPatch = 32;
constexpr double kScale = 100;           // capacities = real costs x 100
constexpr double kPairwiseWeight = 2.5;
constexpr double kSigma = 50;

int Bin(const Rgb& c) {
  const int q = 256 / kBinsPerChannel;
  return (c[0] / q * kBinsPerChannel + c[1] / q) * kBinsPerChannel + c[2] / q;
}

// -log probability of each colour bin under the histogram of one patch.
std::vector<double> NegLogHistogram(const std::vector<Rgb>& image, int side, int x0, int y0) {
  std::vector<double> count(kBins, 0);
  int total = 0;
  for (int y = y0; y < std::min(side, y0 + kPatch); ++y)
    for (int x = x0; x < std::min(side, x0 + kPatch); ++x, ++total) count[Bin(image[static_cast<std::size_t>(y) * side + x])] += 1;
  std::vector<double> cost(kBins);
  for (int b = 0; b < kBins; ++b) cost[b] = -std::log((count[b] + kPseudoCount) / (total + kPseudoCount * kBins));
  return cost;
}

}  // namespace

StGraph LocalSyntheticSegmentationGraph(int side, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Foreground mask: a union of random ellipses, then the two forced patches.
  std::vector<std::uint8_t> foreground(static_cast<std::size_t>(side) * side, 0);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int k = 0; k < 12; ++k) {
    const double cx = unit(rng) * side, cy = unit(rng) * side;
    const double a = side * (0.05 + 0.15 * unit(rng)), b = side * (0.05 + 0.15 * unit(rng));
    const double angle = unit(rng) * 3.14159265358979;
    const double ca = std::cos(angle), sa = std::sin(angle);
    for (int y = 0; y < side; ++y)
      for (int x = 0; x < side; ++x) {
        const double dx = x - cx, dy = y - cy;
        const double u = (dx * ca + dy * sa) / a, v = (-dx * sa + dy * ca) / b;
        if (u * u + v * v <= 1) foreground[static_cast<std::size_t>(y) * side + x] = 1;
      }
  }
  const int centre = side / 2 - kPatch / 2;
  for (int y = 0; y < std::min(side, kPatch); ++y)
    for (int x = 0; x < std::min(side, kPatch); ++x) {
      foreground[static_cast<std::size_t>(y) * side + x] = 0;
      foreground[static_cast<std::size_t>(std::max(0, centre) + y) * side + std::max(0, centre) + x] = 1;
    }
  // Colours from the two mixtures.
  const Mixture fg = RandomMixture(rng), bg = RandomMixture(rng);
  std::vector<Rgb> image(foreground.size());
  for (std::size_t p = 0; p < image.size(); ++p) image[p] = Sample(foreground[p] ? fg : bg, rng);
  // Data costs from the patch histograms; the source side is the foreground, so a pixel cut to the
  // sink side pays its background cost on its source edge.
  const std::vector<double> cost_fg = NegLogHistogram(image, side, std::max(0, centre), std::max(0, centre));
  const std::vector<double> cost_bg = NegLogHistogram(image, side, 0, 0);
  StGraph graph(Topology::Grid2D(side, side, 4));
  for (NodeId p = 0; p < graph.num_nodes(); ++p) {
    const int bin = Bin(image[p]);
    graph.add_tweights(p, std::llround(kScale * cost_bg[bin]), std::llround(kScale * cost_fg[bin]));
  }
  graph.topology().ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
    double d2 = 0;
    for (int ch = 0; ch < 3; ++ch) d2 += double(image[p][ch] - image[q][ch]) * (image[p][ch] - image[q][ch]);
    const auto w = static_cast<Cost>(std::lround(kScale * kPairwiseWeight * std::exp(-d2 / (2 * kSigma * kSigma))));
    graph.add_to_edge_slot(slot, w, w);
  });
  return graph;
}

}  // namespace mrf::bench
