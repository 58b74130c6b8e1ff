#include "energies/restoration.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "energies/smoothness_check.h"
#include "energies/synthetic_random.h"
#include "mrf/memory.h"

namespace mrf {

void RestorationParams::Validate() const {
  if (num_labels < 2 || num_labels > 256)
    throw Error("restoration: number of levels must be in 2..256 (got " + std::to_string(num_labels) + ")");
  if (data_truncation < 0)
    throw Error("restoration: data truncation must be 0 (none) or positive (got " + std::to_string(data_truncation) +
                ")");
  ValidateSmoothness(smoothness, num_labels, "restoration");
}

std::string RestorationParams::Describe() const {
  std::ostringstream out;
  out << num_labels << " levels, squared data cost, ";
  if (data_truncation > 0)
    out << "truncated at " << data_truncation;
  else
    out << "no truncation";
  out << "; " << ToString(smoothness.kind) << " lambda=" << smoothness.lambda;
  if (smoothness.kind == PairwiseKind::kTruncatedLinear || smoothness.kind == PairwiseKind::kTruncatedQuadratic)
    out << " Vmax=" << smoothness.truncation;
  return out.str();
}

int LevelIntensity(Label level, Label num_labels) {
  return num_labels <= 1
             ? 0
             : static_cast<int>((std::int64_t{level} * 255 * 2 + (num_labels - 1)) / (2 * (num_labels - 1)));
}

bool IsMissing(const Image& mask, int x, int y) { return mask.at(x, y, 0) >= 128; }

Model BuildRestorationModel(const Image& observed, const Image& mask, const RestorationParams& params) {
  params.Validate();
  CheckImageShape(observed, "restoration: the image");  // "restoration: the image is empty (0x5)", ...
  const bool has_mask = mask.width > 0 || mask.height > 0;
  if (has_mask && (mask.width != observed.width || mask.height != observed.height))
    throw Error("restoration: the mask is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                " but the image is " + std::to_string(observed.width) + "x" + std::to_string(observed.height));
  if (has_mask) CheckImageShape(mask, "restoration: the mask");
  const Image grey = ToGrey(observed);
  const int w = grey.width, h = grey.height;
  const Label levels = params.num_labels;
  std::vector<int> intensity(levels);
  for (Label l = 0; l < levels; ++l) intensity[l] = LevelIntensity(l, levels);

  Model model;
  model.topology = Topology::Grid2D(w, h, 4);
  model.num_labels = levels;
  model.pairwise = params.smoothness;
  const std::size_t count = static_cast<std::size_t>(w) * h * levels;
  CheckFitsInMemory(static_cast<double>(count) * sizeof(Cost), "restoration: the data costs of " + std::to_string(w) +
                                                                   "x" + std::to_string(h) + " pixels x " +
                                                                   std::to_string(levels) + " levels");
  model.unary.assign(count, 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      if (has_mask && IsMissing(mask, x, y)) continue;
      const int value = grey.at(x, y);
      Cost* out = &model.unary[(static_cast<std::size_t>(y) * w + x) * levels];
      for (Label l = 0; l < levels; ++l) {
        const Cost d = intensity[l] - value;
        out[l] = params.data_truncation > 0 ? std::min(d * d, params.data_truncation) : d * d;
      }
    }
  model.ValidateOrThrow();
  return model;
}

Image RestoredImage(const Labeling& labels, int width, int height, Label num_labels) {
  if (num_labels < 1) throw Error("restored image: need at least 1 level (got " + std::to_string(num_labels) + ")");
  if (labels.size() != static_cast<std::size_t>(width) * height)
    throw Error("labelling has " + std::to_string(labels.size()) + " values for a " + std::to_string(width) + "x" +
                std::to_string(height) + " image");
  Image image = Image::Filled(width, height, 1);
  for (std::size_t p = 0; p < labels.size(); ++p)
    image.pixels[p] =
        static_cast<std::uint8_t>(LevelIntensity(std::clamp<Label>(labels[p], 0, num_labels - 1), num_labels));
  return image;
}

double RootMeanSquareError(const Image& a, const Image& b) {
  CheckImageShape(a, "the first image compared");
  CheckImageShape(b, "the second image compared");
  if (a.width != b.width || a.height != b.height)
    throw Error("cannot compare a " + std::to_string(a.width) + "x" + std::to_string(a.height) + " image with a " +
                std::to_string(b.width) + "x" + std::to_string(b.height) + " one");
  const Image ga = ToGrey(a), gb = ToGrey(b);
  double sum = 0;
  for (std::size_t p = 0; p < ga.pixels.size(); ++p) {
    const double d = static_cast<double>(ga.pixels[p]) - gb.pixels[p];
    sum += d * d;
  }
  return ga.pixels.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(ga.pixels.size()));
}

using synthetic::Normal;
using synthetic::Uniform;

SyntheticRestoration MakeSyntheticRestoration(int width, int height, std::uint64_t seed, double noise, int holes) {
  if (width < 8 || height < 8)
    throw Error("synthetic restoration: image must be at least 8x8 (got " + std::to_string(width) + "x" +
                std::to_string(height) + ")");
  if (!(noise >= 0))
    throw Error("synthetic restoration: noise must be non-negative (got " + mrf::NumberText(noise) + ")");
  if (holes < 0 || holes > kMaxSyntheticHoles)
    throw Error("synthetic restoration: holes must be in 0.." + std::to_string(kMaxSyntheticHoles) + " (got " +
                std::to_string(holes) + ")");
  std::mt19937_64 rng(seed);
  // A diagonal ramp, then bars and discs of flat or gently sloped intensity on top.
  std::vector<double> picture(static_cast<std::size_t>(width) * height);
  const int ramp_from = Uniform(rng, 30, 90), ramp_to = Uniform(rng, 160, 220);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      picture[static_cast<std::size_t>(y) * width + x] =
          ramp_from + (ramp_to - ramp_from) * (x + y) / static_cast<double>(width + height - 2);
  for (int i = 0; i < 6; ++i) {
    const double level = Uniform(rng, 0, 255);
    const double slope = (Uniform(rng, -10, 10)) / 10.0;
    const int cx = Uniform(rng, 0, width - 1), cy = Uniform(rng, 0, height - 1);
    const int rx = Uniform(rng, std::max(2, width / 12), std::max(3, width / 4));
    const int ry = Uniform(rng, std::max(2, height / 12), std::max(3, height / 4));
    const bool disc = i % 2 == 0;
    for (int y = std::max(0, cy - ry); y < std::min(height, cy + ry); ++y)
      for (int x = std::max(0, cx - rx); x < std::min(width, cx + rx); ++x) {
        const double dx = (x - cx) / static_cast<double>(rx), dy = (y - cy) / static_cast<double>(ry);
        if (disc && dx * dx + dy * dy > 1) continue;
        picture[static_cast<std::size_t>(y) * width + x] = level + slope * (x - cx);
      }
  }
  SyntheticRestoration s;
  s.clean = Image::Filled(width, height, 1);
  s.noisy = Image::Filled(width, height, 1);
  s.mask = Image::Filled(width, height, 1, 0);
  for (std::size_t p = 0; p < picture.size(); ++p) {
    s.clean.pixels[p] = static_cast<std::uint8_t>(std::clamp(std::lround(picture[p]), 0L, 255L));
    s.noisy.pixels[p] = static_cast<std::uint8_t>(std::clamp(std::lround(picture[p] + noise * Normal(rng)), 0L, 255L));
  }
  for (int i = 0; i < holes; ++i) {
    const int hw = Uniform(rng, std::max(1, width / 20), std::max(2, width / 8));
    const int hh = Uniform(rng, std::max(1, height / 20), std::max(2, height / 8));
    const int x0 = Uniform(rng, 0, width - hw), y0 = Uniform(rng, 0, height - hh);
    for (int y = y0; y < y0 + hh; ++y)
      for (int x = x0; x < x0 + hw; ++x) {
        s.mask.at(x, y) = 255;
        s.noisy.at(x, y) = static_cast<std::uint8_t>(Uniform(rng, 0, 255));  // garbage the solver must ignore
      }
  }
  return s;
}

}  // namespace mrf
