#include "energies/stereo.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "energies/smoothness_check.h"
#include "energies/synthetic_random.h"
#include "mrf/memory.h"

namespace mrf {

using synthetic::Normal;
using synthetic::Uniform;

const char* ToString(StereoCost cost) { return cost == StereoCost::kSquared ? "squared" : "absolute"; }

StereoCost ParseStereoCost(const std::string& name) {
  if (name == "absolute") return StereoCost::kAbsolute;
  if (name == "squared") return StereoCost::kSquared;
  throw Error("unknown data cost '" + name + "' (expected absolute or squared)");
}

StereoParams StereoParams::Preset(const std::string& name) {
  StereoParams p;
  p.require_colour = true;
  p.preset = name;
  p.birchfield_tomasi = true;
  if (name == "tsukuba") {
    p.num_labels = 16;
    p.cost = StereoCost::kAbsolute;
    p.truncation = 0;
    p.smoothness = {PairwiseKind::kTruncatedLinear, 20, 2, {}};
    p.gradient_threshold = 8;
    p.gradient_penalty = 2;
  } else if (name == "venus") {
    p.num_labels = 20;
    p.cost = StereoCost::kSquared;
    p.truncation = 16;
    p.smoothness = {PairwiseKind::kTruncatedQuadratic, 50, 7, {}};
    p.gradient_threshold = 0;
    p.gradient_penalty = 1;
  } else if (name == "teddy") {
    p.num_labels = 60;
    p.cost = StereoCost::kAbsolute;
    p.truncation = 16;
    p.smoothness = {PairwiseKind::kPotts, 10, 1, {}};
    p.gradient_threshold = 10;
    p.gradient_penalty = 3;
  } else {
    throw Error("unknown stereo preset '" + name + "' (expected " + PresetNames() + ")");
  }
  return p;
}

std::string StereoParams::PresetNames() { return "tsukuba|venus|teddy"; }

void StereoParams::Validate() const {
  if (num_labels < 1)
    throw Error("stereo: number of labels must be at least 1 (got " + std::to_string(num_labels) + ")");
  if (truncation < 0)
    throw Error("stereo: data truncation must be 0 (none) or positive (got " + std::to_string(truncation) + ")");
  if (truncation > 46340)  // T*T must fit a 32-bit cost
    throw Error("stereo: data truncation " + std::to_string(truncation) + " is too large (at most 46340)");
  if (gradient_threshold < 0)
    throw Error("stereo: gradient threshold must be 0 (none) or positive (got " + std::to_string(gradient_threshold) +
                ")");
  if (gradient_threshold > 26000)  // 3*g*g must fit 32 bits
    throw Error("stereo: gradient threshold " + std::to_string(gradient_threshold) + " is too large (at most 26000)");
  if (gradient_penalty < 0)
    throw Error("stereo: gradient penalty must be non-negative (got " + std::to_string(gradient_penalty) + ")");
  ValidateSmoothness(smoothness, num_labels, "stereo");
}

std::string StereoParams::Describe() const {
  std::ostringstream out;
  if (!preset.empty()) out << preset << ": ";
  out << num_labels << " labels, " << (birchfield_tomasi ? "BT " : "") << ToString(cost) << ", ";
  if (truncation > 0)
    out << "truncated at T=" << truncation;
  else
    out << "no truncation";
  out << "; " << ToString(smoothness.kind) << " lambda=" << smoothness.lambda;
  if (smoothness.kind == PairwiseKind::kTruncatedLinear || smoothness.kind == PairwiseKind::kTruncatedQuadratic)
    out << " Vmax=" << smoothness.truncation;
  if (gradient_threshold > 0)
    out << "; gradient g=" << gradient_threshold << " penalty " << gradient_penalty;
  else
    out << "; no gradient weights";
  return out.str();
}

namespace {

// Colour channels of an image: an alpha channel (grey+alpha, RGBA) is not compared.
int ColourChannels(const Image& image) { return image.channels == 2 ? 1 : image.channels == 4 ? 3 : image.channels; }

void CheckImage(const Image& image, const char* which) { CheckImageShape(image, std::string(which) + " image"); }

void CheckPair(const Image& left, const Image& right, const StereoParams& params) {
  params.Validate();
  CheckImage(left, "left");
  CheckImage(right, "right");
  if (left.width != right.width || left.height != right.height)
    throw Error("left and right images differ in size: left is " + std::to_string(left.width) + "x" +
                std::to_string(left.height) + ", right is " + std::to_string(right.width) + "x" +
                std::to_string(right.height));
  if (ColourChannels(left) != ColourChannels(right))
    throw Error("left and right images differ in colour: left is " + left.Describe() + ", right is " +
                right.Describe());
  if (params.require_colour && ColourChannels(left) != 3)
    throw Error("stereo preset '" + params.preset + "' is defined on colour (RGB) images, but the images are grey (" +
                left.Describe() + ")");
  if (params.num_labels > left.width)
    throw Error("stereo: " + std::to_string(params.num_labels) + " disparity labels but the images are only " +
                std::to_string(left.width) + " pixels wide (labels must not exceed the width)");
}

}  // namespace

BtRange ComputeBtRange(const Image& image) {
  CheckImage(image, "Birchfield-Tomasi");
  const int w = image.width, h = image.height, nc = image.channels;
  BtRange range;
  range.low.resize(image.pixels.size());
  range.high.resize(image.pixels.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < nc; ++c) {
        const int value = image.at(x, y, c);
        const int left = x > 0 ? image.at(x - 1, y, c) : value;
        const int right = x + 1 < w ? image.at(x + 1, y, c) : value;
        const int half_left = (value + left) / 2, half_right = (value + right) / 2;
        const std::size_t i = (static_cast<std::size_t>(y) * w + x) * nc + c;
        range.low[i] = static_cast<std::uint8_t>(std::min({value, half_left, half_right}));
        range.high[i] = static_cast<std::uint8_t>(std::max({value, half_left, half_right}));
      }
  return range;
}

std::vector<Cost> ComputeStereoDataCosts(const Image& left, const Image& right, const StereoParams& params) {
  CheckPair(left, right, params);
  // Each image is read with its own stride: one may carry an alpha channel the other lacks.
  const int w = left.width, h = left.height, colours = ColourChannels(left);
  const int left_stride = left.channels, right_stride = right.channels;
  const Label labels = params.num_labels;
  const bool squared = params.cost == StereoCost::kSquared;
  // Worst possible sum, and the cap that truncation puts on any sum.
  const Cost worst = colours * (squared ? 255 * 255 : 255);
  const Cost cap = params.truncation > 0 ? std::min<Cost>(worst, squared ? params.truncation * params.truncation
                                                                         : colours * params.truncation)
                                         : worst;
  const Cost outside = std::min(worst, cap);

  BtRange left_range, right_range;
  if (params.birchfield_tomasi) {
    left_range = ComputeBtRange(left);
    right_range = ComputeBtRange(right);
  }
  const std::size_t count = static_cast<std::size_t>(w) * h * labels;
  CheckFitsInMemory(static_cast<double>(count) * sizeof(Cost), "the data costs of " + std::to_string(w) + "x" +
                                                                   std::to_string(h) + " pixels x " + std::to_string(labels) + " labels");
  std::vector<Cost> costs(count);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      Cost* out = &costs[(static_cast<std::size_t>(y) * w + x) * labels];
      const std::size_t p1 = (static_cast<std::size_t>(y) * w + x) * left_stride;
      for (Label d = 0; d < labels; ++d) {
        if (x - d < 0) {
          out[d] = outside;
          continue;
        }
        const std::size_t p2 = (static_cast<std::size_t>(y) * w + (x - d)) * right_stride;
        Cost sum = 0;
        for (int c = 0; c < colours; ++c) {
          const int c1 = left.pixels[p1 + c], c2 = right.pixels[p2 + c];
          int diff;
          if (params.birchfield_tomasi) {
            const int dis1 = std::max({0, c1 - right_range.high[p2 + c], right_range.low[p2 + c] - c1});
            const int dis2 = std::max({0, c2 - left_range.high[p1 + c], left_range.low[p1 + c] - c2});
            diff = std::min(dis1, dis2);
          } else {
            diff = c1 > c2 ? c1 - c2 : c2 - c1;
          }
          sum += squared ? diff * diff : diff;
        }
        out[d] = std::min(sum, cap);
      }
    }
  return costs;
}

std::vector<Cost> ComputeGradientWeights(const Image& image, const StereoParams& params) {
  params.Validate();
  CheckImage(image, "gradient");
  if (params.gradient_threshold <= 0) return {};
  const int w = image.width, h = image.height, colours = ColourChannels(image);
  const std::int64_t threshold = std::int64_t{colours} * params.gradient_threshold * params.gradient_threshold;
  const std::size_t n = image.size();
  std::vector<Cost> weights(2 * n);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      // The neighbour beyond the last column/row is the pixel itself (difference 0).
      const int xr = x + 1 < w ? x + 1 : x, yd = y + 1 < h ? y + 1 : y;
      std::int64_t horizontal = 0, vertical = 0;
      for (int c = 0; c < colours; ++c) {
        const int v = image.at(x, y, c);
        const int dh = v - image.at(xr, y, c), dv = v - image.at(x, yd, c);
        horizontal += dh * dh;
        vertical += dv * dv;
      }
      const std::size_t p = static_cast<std::size_t>(y) * w + x;
      weights[p] = horizontal < threshold ? params.gradient_penalty : 1;
      weights[n + p] = vertical < threshold ? params.gradient_penalty : 1;
    }
  return weights;
}

Model BuildStereoModel(const Image& left, const Image& right, const StereoParams& params) {
  Model model;
  model.unary = ComputeStereoDataCosts(left, right, params);
  model.topology = Topology::Grid2D(left.width, left.height, 4);
  model.num_labels = params.num_labels;
  model.pairwise = params.smoothness;
  model.edge_weights = ComputeGradientWeights(left, params);
  model.cost_scale = 1.0;
  model.ValidateOrThrow();
  return model;
}

double BadPixelPercent(const Labeling& disparities, const Image& ground_truth, double gt_scale, double threshold) {
  if (!(gt_scale > 0)) throw Error("ground-truth scale must be positive (got " + mrf::NumberText(gt_scale) + ")");
  CheckImage(ground_truth, "ground-truth");
  if (disparities.size() != ground_truth.size())
    throw Error("ground truth is " + ground_truth.Describe() + " (" + std::to_string(ground_truth.size()) +
                " pixels) but the disparity map has " + std::to_string(disparities.size()) + " pixels");
  std::int64_t known = 0, bad = 0;
  for (std::size_t p = 0; p < disparities.size(); ++p) {
    const int value = ground_truth.pixels[p * ground_truth.channels];
    if (value == 0) continue;
    ++known;
    if (std::fabs(disparities[p] - value / gt_scale) > threshold) ++bad;
  }
  return known == 0 ? 0.0 : 100.0 * static_cast<double>(bad) / static_cast<double>(known);
}

namespace {
void CheckShrink(const Image& image, int factor) {
  CheckImageShape(image, "the image to shrink");
  if (factor < 1) throw Error("shrink factor must be at least 1 (got " + std::to_string(factor) + ")");
  if (image.width / factor < 1 || image.height / factor < 1)
    throw Error("shrinking by " + std::to_string(factor) + " leaves nothing of a " + image.Describe() + " image");
}
}  // namespace

Image ShrinkImage(const Image& image, int factor) {
  CheckShrink(image, factor);
  if (factor == 1) return image;
  Image out = Image::Filled(image.width / factor, image.height / factor, image.channels);
  const int area = factor * factor;
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x)
      for (int c = 0; c < image.channels; ++c) {
        int sum = 0;
        for (int dy = 0; dy < factor; ++dy)
          for (int dx = 0; dx < factor; ++dx) sum += image.at(x * factor + dx, y * factor + dy, c);
        out.at(x, y, c) = static_cast<std::uint8_t>((sum + area / 2) / area);
      }
  return out;
}

Image ShrinkGroundTruth(const Image& ground_truth, int factor) {
  CheckShrink(ground_truth, factor);
  Image out = Image::Filled(ground_truth.width / factor, ground_truth.height / factor, 1);
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) out.at(x, y) = ground_truth.at(x * factor, y * factor, 0);
  return out;
}

// ---- Synthetic stereo pair -----------------------------------------------------------------------

namespace {

// A well-mixed 64-bit hash (splitmix64 finaliser): textures must not depend on library RNG details.
std::uint64_t Mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
std::uint64_t Hash(std::uint64_t seed, std::int64_t a, std::int64_t b, std::int64_t c) {
  return Mix(Mix(Mix(seed ^ static_cast<std::uint64_t>(a)) ^ static_cast<std::uint64_t>(b)) ^
             static_cast<std::uint64_t>(c));
}

struct Layer {
  Label disparity = 0;
  bool disc = false;
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // rectangle, or the disc's bounding box
  int base[3] = {0, 0, 0};
  bool Contains(int u, int v) const {
    if (!disc) return u >= x0 && u < x1 && v >= y0 && v < y1;
    const double cx = 0.5 * (x0 + x1), cy = 0.5 * (y0 + y1), r = 0.5 * (x1 - x0);
    const double du = u + 0.5 - cx, dv = v + 0.5 - cy;
    return du * du + dv * dv <= r * r;
  }
};

std::uint8_t Clamp255(double v) { return static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

}  // namespace

SyntheticStereo MakeSyntheticStereo(int width, int height, Label num_labels, std::uint64_t seed, double noise) {
  if (width < 8 || height < 8)
    throw Error("synthetic stereo: image must be at least 8x8 (got " + std::to_string(width) + "x" +
                std::to_string(height) + ")");
  if (num_labels < 2 || num_labels > width / 2)
    throw Error("synthetic stereo: labels must be in 2.." + std::to_string(width / 2) + " for width " +
                std::to_string(width) + " (got " + std::to_string(num_labels) + ")");
  if (!(noise >= 0)) throw Error("synthetic stereo: noise must be non-negative (got " + mrf::NumberText(noise) + ")");
  std::mt19937_64 rng(seed);

  // Layers from far to near: a background plane, then rectangles and discs at larger disparities.
  std::vector<Layer> layers;
  Layer background;
  background.disparity = num_labels >= 8 ? num_labels / 8 : 0;
  background.x0 = std::numeric_limits<int>::min() / 2;
  background.y0 = std::numeric_limits<int>::min() / 2;
  background.x1 = std::numeric_limits<int>::max() / 2;
  background.y1 = std::numeric_limits<int>::max() / 2;
  layers.push_back(background);
  const int shapes = 5;
  for (int i = 0; i < shapes; ++i) {
    Layer layer;
    layer.disparity = Uniform(rng, background.disparity + 1, num_labels - 1);
    layer.disc = i % 2 == 1;
    const int side_w = Uniform(rng, std::max(2, width / 6), std::max(2, width / 3));
    const int side_h = layer.disc ? side_w : Uniform(rng, std::max(2, height / 6), std::max(2, height / 3));
    layer.x0 = Uniform(rng, 0, std::max(0, width - side_w));
    layer.y0 = Uniform(rng, 0, std::max(0, height - side_h));
    layer.x1 = layer.x0 + side_w;
    layer.y1 = layer.y0 + side_h;
    layers.push_back(layer);
  }
  for (std::size_t k = 0; k < layers.size(); ++k)
    for (int& b : layers[k].base) b = Uniform(rng, 40, 215);
  // Nearest first; equal disparities keep their order (stable), so the scene is well defined.
  std::vector<std::size_t> near_first(layers.size());
  for (std::size_t k = 0; k < layers.size(); ++k) near_first[k] = k;
  std::stable_sort(near_first.begin(), near_first.end(),
                   [&](std::size_t a, std::size_t b) { return layers[a].disparity > layers[b].disparity; });
  // The layer seen at column u of a view whose layer k appears shifted by shift(k).
  auto visible = [&](int y, auto&& left_x_of_layer) -> std::size_t {
    for (std::size_t k : near_first)
      if (layers[k].Contains(left_x_of_layer(layers[k]), y)) return k;
    return 0;
  };
  // Texture fixed to the layer's surface, in left-view coordinates: blocks plus per-pixel detail.
  auto texture = [&](std::size_t k, int u, int v, int c) -> int {
    const int coarse = static_cast<int>(Hash(seed, static_cast<std::int64_t>(k) * 8 + c, u >> 2, v >> 2) % 81) - 40;
    const int fine = static_cast<int>(Hash(seed ^ 0x5bd1e995ULL, static_cast<std::int64_t>(k) * 8 + c, u, v) % 49) - 24;
    return std::clamp(layers[k].base[c] + coarse + fine, 0, 255);
  };

  SyntheticStereo s;
  s.num_labels = num_labels;
  s.left = Image::Filled(width, height, 3);
  s.right = Image::Filled(width, height, 3);
  s.disparity.resize(static_cast<std::size_t>(width) * height);
  s.occluded.assign(static_cast<std::size_t>(width) * height, 0);
  std::vector<std::size_t> right_layer(static_cast<std::size_t>(width) * height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      // Right view: layer k's left-view point x + d_k appears at column x.
      const std::size_t k = visible(y, [&](const Layer& l) { return x + l.disparity; });
      right_layer[static_cast<std::size_t>(y) * width + x] = k;
      for (int c = 0; c < 3; ++c)
        s.right.at(x, y, c) = static_cast<std::uint8_t>(texture(k, x + layers[k].disparity, y, c));
    }
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const std::size_t k = visible(y, [&](const Layer&) { return x; });
      const std::size_t p = static_cast<std::size_t>(y) * width + x;
      s.disparity[p] = layers[k].disparity;
      const int xr = x - layers[k].disparity;
      s.occluded[p] = xr < 0 || right_layer[static_cast<std::size_t>(y) * width + xr] != k;
      for (int c = 0; c < 3; ++c) s.left.at(x, y, c) = static_cast<std::uint8_t>(texture(k, x, y, c));
    }
  if (noise > 0) {
    std::mt19937_64 noise_rng(Mix(seed ^ 0xa0761d6478bd642fULL));
    for (Image* view : {&s.left, &s.right})
      for (std::uint8_t& v : view->pixels) v = Clamp255(v + noise * Normal(noise_rng));
  }
  return s;
}

Image DisparityToImage(const Labeling& disparities, int width, int height, int scale) {
  if (disparities.size() != static_cast<std::size_t>(width) * height)
    throw Error("disparity map has " + std::to_string(disparities.size()) + " values for a " + std::to_string(width) +
                "x" + std::to_string(height) + " image");
  Image image = Image::Filled(width, height, 1);
  for (std::size_t p = 0; p < disparities.size(); ++p)
    image.pixels[p] = static_cast<std::uint8_t>(std::clamp<std::int64_t>(std::int64_t{disparities[p]} * scale, 0, 255));
  return image;
}

Image DisparityToColour(const Labeling& disparities, int width, int height, Label num_labels) {
  if (disparities.size() != static_cast<std::size_t>(width) * height)
    throw Error("disparity map has " + std::to_string(disparities.size()) + " values for a " + std::to_string(width) +
                "x" + std::to_string(height) + " image");
  Image image = Image::Filled(width, height, 3);
  const double span = num_labels > 1 ? num_labels - 1 : 1;
  for (std::size_t p = 0; p < disparities.size(); ++p) {
    // Blue (far) -> cyan -> green -> yellow -> red (near): four linear ramps.
    const double t = std::clamp(disparities[p] / span, 0.0, 1.0) * 4.0;
    double r = 0, g = 0, b = 0;
    if (t < 1) {
      b = 1;
      g = t;
    } else if (t < 2) {
      g = 1;
      b = 2 - t;
    } else if (t < 3) {
      g = 1;
      r = t - 2;
    } else {
      r = 1;
      g = 4 - t;
    }
    image.pixels[3 * p] = Clamp255(255 * r);
    image.pixels[3 * p + 1] = Clamp255(255 * g);
    image.pixels[3 * p + 2] = Clamp255(255 * b);
  }
  return image;
}

}  // namespace mrf
