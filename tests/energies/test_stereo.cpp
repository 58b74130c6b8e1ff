// Stereo energies against an independent, deliberately naive reading of BENCHMARKS.md section 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "energies/stereo.h"
#include "mrf/io/image.h"
#include "support/test_support.h"

namespace mrf {
namespace {

// ---- The naive reference, written from the BENCHMARKS.md text (no shared code) ----

int Pixel(const Image& im, int x, int y, int c) { return im.pixels[(y * im.width + x) * im.channels + c]; }

// min/max over {c, (c+left)/2, (c+right)/2}, neighbours replaced by the pixel itself at the border.
void NaiveRange(const Image& im, int x, int y, int c, int* lo, int* hi) {
  const int value = Pixel(im, x, y, c);
  int left_value = value, right_value = value;
  if (x - 1 >= 0) left_value = Pixel(im, x - 1, y, c);
  if (x + 1 <= im.width - 1) right_value = Pixel(im, x + 1, y, c);
  const int three[3] = {value, (value + left_value) / 2, (value + right_value) / 2};
  *lo = three[0];
  *hi = three[0];
  for (int i = 1; i < 3; ++i) {
    if (three[i] < *lo) *lo = three[i];
    if (three[i] > *hi) *hi = three[i];
  }
}

Cost NaiveDataCost(const Image& left, const Image& right, int x, int y, int d, bool bt, bool squared, int trunc) {
  const int channels = left.channels;
  int worst = 0, cap;
  for (int c = 0; c < channels; ++c) worst += squared ? 255 * 255 : 255;
  if (trunc == 0)
    cap = worst;
  else if (squared)
    cap = trunc * trunc;
  else
    cap = channels * trunc;
  if (x - d < 0) return worst < cap ? worst : cap;
  int total = 0;
  for (int c = 0; c < channels; ++c) {
    const int c1 = Pixel(left, x, y, c), c2 = Pixel(right, x - d, y, c);
    int difference;
    if (bt) {
      int min1, max1, min2, max2;
      NaiveRange(left, x, y, c, &min1, &max1);
      NaiveRange(right, x - d, y, c, &min2, &max2);
      int dis1 = 0;
      if (c1 - max2 > dis1) dis1 = c1 - max2;
      if (min2 - c1 > dis1) dis1 = min2 - c1;
      int dis2 = 0;
      if (c2 - max1 > dis2) dis2 = c2 - max1;
      if (min1 - c2 > dis2) dis2 = min1 - c2;
      difference = dis1 < dis2 ? dis1 : dis2;
    } else {
      difference = c1 - c2;
      if (difference < 0) difference = -difference;
    }
    total += squared ? difference * difference : difference;
  }
  return total < cap ? total : cap;
}

Image RandomImage(std::mt19937_64& rng, int w, int h, int channels) {
  Image im = Image::Filled(w, h, channels);
  const int mode = static_cast<int>(rng() % 3);
  for (auto& v : im.pixels) {
    if (mode == 0)
      v = static_cast<std::uint8_t>(rng() % 256);
    else if (mode == 1)
      v = static_cast<std::uint8_t>(rng() % 2 ? 0 : 255);  // extremes
    else
      v = static_cast<std::uint8_t>(100 + rng() % 12);  // nearly flat
  }
  return im;
}

TEST(StereoDataCost, HandComputedBirchfieldTomasi) {
  // Left row 10 20 40: at x=1 the half-pixel values are 15 and 30, so [min1, max1] = [15, 30].
  // Right row 50 60 60: at x=0 (d=1) the values are 50, 50 (border) and 55, so [min2, max2] = [50, 55].
  // dis1 = max(0, 20-55, 50-20) = 30, dis2 = max(0, 50-30, 15-50) = 20, difference = 20.
  Image left = Image::Filled(3, 1, 1), right = Image::Filled(3, 1, 1);
  left.pixels = {10, 20, 40};
  right.pixels = {50, 60, 60};
  StereoParams p;
  p.num_labels = 2;
  p.gradient_threshold = 0;
  p.truncation = 0;
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[1 * 2 + 1], 20);
  p.cost = StereoCost::kSquared;
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[1 * 2 + 1], 400);
  p.birchfield_tomasi = false;
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[1 * 2 + 1], 30 * 30);
  // x=0 with d=1 has no match: min(worst possible sum, cap) = 255^2 for one channel, or T*T.
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[0 * 2 + 1], 255 * 255);
  p.truncation = 16;
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[0 * 2 + 1], 256);
  p.cost = StereoCost::kAbsolute;
  EXPECT_EQ(ComputeStereoDataCosts(left, right, p)[0 * 2 + 1], 16);  // one channel: cap = 1*T
}

TEST(StereoDataCost, MatchesNaiveReferenceOnRandomImages) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int w = 1 + static_cast<int>(rng() % 9), h = 1 + static_cast<int>(rng() % 4);
    const int channels = rng() % 4 == 0 ? 1 : 3;
    const Image left = RandomImage(rng, w, h, channels), right = RandomImage(rng, w, h, channels);
    StereoParams p;
    p.num_labels = 1 + static_cast<Label>(rng() % w);
    p.birchfield_tomasi = rng() % 4 != 0;
    p.cost = rng() % 2 ? StereoCost::kSquared : StereoCost::kAbsolute;
    const int truncations[] = {0, 1, 5, 16, 100, 300};
    p.truncation = truncations[rng() % 6];
    const std::vector<Cost> costs = ComputeStereoDataCosts(left, right, p);
    ASSERT_EQ(costs.size(), static_cast<std::size_t>(w) * h * p.num_labels);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int d = 0; d < p.num_labels; ++d)
          ASSERT_EQ(
              costs[(static_cast<std::size_t>(y) * w + x) * p.num_labels + d],
              NaiveDataCost(left, right, x, y, d, p.birchfield_tomasi, p.cost == StereoCost::kSquared, p.truncation))
              << "trial " << trial << " at (" << x << "," << y << ") d=" << d << ", " << p.Describe();
  }
}

// The same image with a random alpha channel appended (grey -> grey+alpha, RGB -> RGBA).
Image WithAlpha(const Image& image, std::mt19937_64& rng) {
  const int from = image.channels, to = from + 1;
  Image out = Image::Filled(image.width, image.height, to);
  for (std::size_t p = 0; p < image.size(); ++p)
    for (int c = 0; c < to; ++c)
      out.pixels[p * to + c] = c < from ? image.pixels[p * from + c] : static_cast<std::uint8_t>(rng());
  return out;
}

// Alpha is not compared, also when only one of the two images has it (each is read with its own
// stride: reading the right image with the left one's once gave wrong costs or read past its end).
TEST(StereoDataCost, AlphaChannelIsIgnored) {
  std::mt19937_64 rng(7);
  for (const int channels : {3, 1}) {
    const Image left = RandomImage(rng, 8, 3, channels), right = RandomImage(rng, 8, 3, channels);
    const Image left_alpha = WithAlpha(left, rng), right_alpha = WithAlpha(right, rng);
    StereoParams p;
    p.num_labels = 5;
    for (const bool bt : {true, false}) {
      p.birchfield_tomasi = bt;
      const std::vector<Cost> plain = ComputeStereoDataCosts(left, right, p);
      EXPECT_EQ(plain, ComputeStereoDataCosts(left_alpha, right_alpha, p)) << channels << " channels";
      EXPECT_EQ(plain, ComputeStereoDataCosts(left_alpha, right, p)) << channels << " channels, left alpha";
      EXPECT_EQ(plain, ComputeStereoDataCosts(left, right_alpha, p)) << channels << " channels, right alpha";
    }
  }
}

TEST(StereoGradientWeights, MatchNaiveReference) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    const int w = 1 + static_cast<int>(rng() % 7), h = 1 + static_cast<int>(rng() % 7);
    const int channels = rng() % 3 == 0 ? 1 : 3;
    const Image im = RandomImage(rng, w, h, channels);
    StereoParams p;
    p.gradient_threshold = 1 + static_cast<int>(rng() % 60);
    p.gradient_penalty = 2 + static_cast<Cost>(rng() % 3);
    const std::vector<Cost> weights = ComputeGradientWeights(im, p);
    const std::size_t n = im.size();
    ASSERT_EQ(weights.size(), 2 * n);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        int right_sum = 0, down_sum = 0;
        for (int c = 0; c < channels; ++c) {
          const int here = Pixel(im, x, y, c);
          const int right = x == w - 1 ? here : Pixel(im, x + 1, y, c);
          const int down = y == h - 1 ? here : Pixel(im, x, y + 1, c);
          right_sum += (here - right) * (here - right);
          down_sum += (here - down) * (here - down);
        }
        const int limit = channels * p.gradient_threshold * p.gradient_threshold;
        ASSERT_EQ(weights[y * w + x], right_sum < limit ? p.gradient_penalty : 1) << "horizontal at " << x << "," << y;
        ASSERT_EQ(weights[n + y * w + x], down_sum < limit ? p.gradient_penalty : 1) << "vertical at " << x << "," << y;
      }
  }
  StereoParams none;
  none.gradient_threshold = 0;
  EXPECT_TRUE(ComputeGradientWeights(RandomImage(rng, 4, 4, 3), none).empty());
}

TEST(StereoGradientWeights, ThresholdIsStrict) {
  // Sum of squared differences exactly 3*g*g is not below the threshold: weight 1.
  Image im = Image::Filled(2, 1, 3);
  im.pixels = {0, 0, 0, 8, 8, 8};  // 3 * 8^2 = 192 = 3*g*g for g = 8
  StereoParams p;
  p.gradient_threshold = 8;
  p.gradient_penalty = 2;
  EXPECT_EQ(ComputeGradientWeights(im, p)[0], 1);
  im.pixels = {0, 0, 0, 8, 8, 7};  // 191 < 192
  EXPECT_EQ(ComputeGradientWeights(im, p)[0], 2);
}

TEST(StereoParams, PresetsAreTheBenchmarkEnergies) {
  const StereoParams t = StereoParams::Preset("tsukuba");
  EXPECT_EQ(t.num_labels, 16);
  EXPECT_TRUE(t.birchfield_tomasi);
  EXPECT_EQ(t.cost, StereoCost::kAbsolute);
  EXPECT_EQ(t.truncation, 0);
  EXPECT_EQ(t.smoothness.kind, PairwiseKind::kTruncatedLinear);
  EXPECT_EQ(t.smoothness.lambda, 20);
  EXPECT_EQ(t.smoothness.truncation, 2);
  EXPECT_EQ(t.gradient_threshold, 8);
  EXPECT_EQ(t.gradient_penalty, 2);
  const StereoParams v = StereoParams::Preset("venus");
  EXPECT_EQ(v.num_labels, 20);
  EXPECT_TRUE(v.birchfield_tomasi);
  EXPECT_EQ(v.cost, StereoCost::kSquared);
  EXPECT_EQ(v.truncation, 16);
  EXPECT_EQ(v.smoothness.kind, PairwiseKind::kTruncatedQuadratic);
  EXPECT_EQ(v.smoothness.lambda, 50);
  EXPECT_EQ(v.smoothness.truncation, 7);
  EXPECT_EQ(v.gradient_threshold, 0);
  const StereoParams d = StereoParams::Preset("teddy");
  EXPECT_EQ(d.num_labels, 60);
  EXPECT_TRUE(d.birchfield_tomasi);
  EXPECT_EQ(d.cost, StereoCost::kAbsolute);
  EXPECT_EQ(d.truncation, 16);
  EXPECT_EQ(d.smoothness.lambda, 10);
  for (Label a = 0; a < 60; ++a)
    for (Label b = 0; b < 60; ++b) EXPECT_EQ(d.smoothness.distance(a, b, 60), a == b ? 0 : 1);  // Potts
  EXPECT_EQ(d.gradient_threshold, 10);
  EXPECT_EQ(d.gradient_penalty, 3);
  EXPECT_THROW(StereoParams::Preset("cones"), Error);
}

TEST(StereoParams, PresetCapsOnRealisticImages) {
  // Random images make large differences: every cost must stay within the preset's cap.
  std::mt19937_64 rng(3);
  const Image left = RandomImage(rng, 70, 4, 3), right = RandomImage(rng, 70, 4, 3);
  struct Case {
    const char* name;
    Cost cap;
  };
  for (const Case& c : {Case{"tsukuba", 765}, Case{"venus", 256}, Case{"teddy", 48}}) {
    const std::vector<Cost> costs = ComputeStereoDataCosts(left, right, StereoParams::Preset(c.name));
    EXPECT_EQ(*std::max_element(costs.begin(), costs.end()), c.cap) << c.name;
    EXPECT_EQ(costs[1], c.cap) << c.name << ": x=0, d=1 falls outside the right image";
  }
}

TEST(StereoModel, BadInputHasOneLineErrors) {
  std::mt19937_64 rng(5);
  const Image a = RandomImage(rng, 10, 6, 3), b = RandomImage(rng, 11, 6, 3), grey = RandomImage(rng, 10, 6, 1);
  StereoParams p;
  p.num_labels = 4;
  auto message = [&](const Image& l, const Image& r, const StereoParams& params) {
    try {
      BuildStereoModel(l, r, params);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(a, b, p).find("differ in size"), std::string::npos) << message(a, b, p);
  EXPECT_NE(message(a, grey, p).find("differ in colour"), std::string::npos);
  p.num_labels = 11;
  EXPECT_NE(message(a, a, p).find("only 10 pixels wide"), std::string::npos) << message(a, a, p);
  StereoParams preset = StereoParams::Preset("tsukuba");
  EXPECT_NE(message(grey, grey, preset).find("colour"), std::string::npos) << message(grey, grey, preset);
  p.num_labels = 4;
  p.truncation = -1;
  EXPECT_NE(message(a, a, p).find("truncation"), std::string::npos);
  for (const std::string& m : {message(a, b, p), message(grey, grey, preset)})
    EXPECT_EQ(m.find('\n'), std::string::npos);
  // Grey images are fine without a preset: costs sum over one channel.
  p.truncation = 0;
  EXPECT_NO_THROW(BuildStereoModel(grey, grey, p));
}

TEST(StereoModel, ModelShapeAndWeights) {
  std::mt19937_64 rng(11);
  const int w = 20, h = 9;
  const Image left = RandomImage(rng, w, h, 3), right = RandomImage(rng, w, h, 3);
  const StereoParams p = StereoParams::Preset("tsukuba");
  const Model m = BuildStereoModel(left, right, p);
  EXPECT_EQ(m.topology, Topology::Grid2D(w, h, 4));
  EXPECT_EQ(m.num_labels, 16);
  EXPECT_EQ(m.unary, ComputeStereoDataCosts(left, right, p));
  EXPECT_EQ(m.edge_weights, ComputeGradientWeights(left, p));
  // Energy by hand for one labelling: data terms plus lambda * min(|a-b|, 2) * w per edge.
  Labeling labels(m.num_nodes());
  for (auto& l : labels) l = static_cast<Label>(rng() % 16);
  Energy expected = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const int q = y * w + x;
      expected += NaiveDataCost(left, right, x, y, labels[q], true, false, 0);
      if (x + 1 < w) expected += 20 * std::min(std::abs(labels[q] - labels[q + 1]), 2) * m.edge_weights[q];
      if (y + 1 < h) expected += 20 * std::min(std::abs(labels[q] - labels[q + w]), 2) * m.edge_weights[w * h + q];
    }
  EXPECT_EQ(EvaluateEnergy(m, labels).total, expected);
}

TEST(SyntheticStereo, DeterministicAndConsistent) {
  const SyntheticStereo a = MakeSyntheticStereo(64, 48, 12, 42), b = MakeSyntheticStereo(64, 48, 12, 42);
  const SyntheticStereo c = MakeSyntheticStereo(64, 48, 12, 43);
  EXPECT_EQ(a.left.pixels, b.left.pixels);
  EXPECT_EQ(a.right.pixels, b.right.pixels);
  EXPECT_EQ(a.disparity, b.disparity);
  EXPECT_NE(a.left.pixels, c.left.pixels);
  // Every visible pixel has exactly the colour of its match in the right view.
  int visible = 0;
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) {
      const std::size_t p = static_cast<std::size_t>(y) * 64 + x;
      ASSERT_GE(a.disparity[p], 0);
      ASSERT_LT(a.disparity[p], 12);
      if (a.occluded[p]) continue;
      ++visible;
      for (int ch = 0; ch < 3; ++ch) ASSERT_EQ(a.left.at(x, y, ch), a.right.at(x - a.disparity[p], y, ch));
    }
  EXPECT_GT(visible, 64 * 48 * 3 / 4);
  // Several depths are present.
  EXPECT_GE(std::set<Label>(a.disparity.begin(), a.disparity.end()).size(), 3u);
}

TEST(SyntheticStereo, TrueDisparitiesHaveLowEnergy) {
  const SyntheticStereo s = MakeSyntheticStereo(96, 72, 16, 7);
  const StereoParams p;  // Tsukuba-like
  const Model m = BuildStereoModel(s.left, s.right, p);
  for (std::size_t q = 0; q < s.disparity.size(); ++q)
    if (!s.occluded[q]) ASSERT_EQ(m.unary_cost(static_cast<NodeId>(q), s.disparity[q]), 0) << "pixel " << q;
  const Energy truth = EvaluateEnergy(m, s.disparity).total;
  // Any other simple labelling costs more: constant disparities, and the truth shifted by one.
  for (Label d = 0; d < 16; ++d) EXPECT_LT(truth, EvaluateEnergy(m, Labeling(s.disparity.size(), d)).total);
  Labeling shifted = s.disparity;
  for (Label& l : shifted) l = l + 1 < 16 ? l + 1 : l - 1;
  EXPECT_LT(truth, EvaluateEnergy(m, shifted).total);
}

TEST(BadPixels, CountsOnlyKnownPixels) {
  Image gt = Image::Filled(4, 1, 1);
  gt.pixels = {0, 32, 48, 80};                                         // unknown, 2, 3, 5 at scale 16
  EXPECT_DOUBLE_EQ(BadPixelPercent({9, 2, 4, 3}, gt, 16), 100.0 / 3);  // 4 vs 3 is fine, 3 vs 5 is bad
  EXPECT_DOUBLE_EQ(BadPixelPercent({0, 2, 3, 5}, gt, 16), 0.0);
  EXPECT_THROW(BadPixelPercent({0, 2, 3}, gt, 16), Error);
  EXPECT_THROW(BadPixelPercent({0, 2, 3, 5}, gt, 0), Error);
}

TEST(Shrink, BoxFilterAndGroundTruthSubsampling) {
  Image im = Image::Filled(5, 3, 1);  // the last column and row are a partial block: dropped
  im.pixels = {10, 20, 30, 40, 99,    //
               30, 41, 50, 61, 99,    //
               99, 99, 99, 99, 99};
  const Image half = ShrinkImage(im, 2);
  ASSERT_EQ(half.width, 2);
  ASSERT_EQ(half.height, 1);
  EXPECT_EQ(half.pixels[0], 25);  // (10+20+30+41)/4 = 25.25
  EXPECT_EQ(half.pixels[1], 45);  // (30+40+50+61)/4 = 45.25
  const Image gt = ShrinkGroundTruth(im, 2);
  EXPECT_EQ(gt.pixels, (std::vector<std::uint8_t>{10, 30}));
  EXPECT_EQ(ShrinkImage(im, 1).pixels, im.pixels);
  EXPECT_THROW(ShrinkImage(im, 4), Error);
  EXPECT_THROW(ShrinkImage(im, 0), Error);
  // A ground-truth value v at scale s means disparity v / (s * factor) on the shrunk grid.
  EXPECT_DOUBLE_EQ(BadPixelPercent({5, 15}, gt, 2.0 * 1), 0.0);
}

TEST(Middlebury, BenchmarkModelsHaveTheRightSizes) {
  struct Case {
    const char* name;
    int w, h;
    Label labels;
  };
  for (const Case& c : {Case{"tsukuba", 384, 288, 16}, Case{"venus", 434, 383, 20}}) {
    const std::string left = test::SharedDataPath(std::string("middlebury/") + c.name + "-imL.png");
    const std::string right = test::SharedDataPath(std::string("middlebury/") + c.name + "-imR.png");
    if (left.empty() || right.empty()) GTEST_SKIP() << "Middlebury images not found under the shared data folder";
    const Model m = BuildStereoModel(LoadImage(left), LoadImage(right), StereoParams::Preset(c.name));
    EXPECT_EQ(m.topology, Topology::Grid2D(c.w, c.h, 4)) << c.name;
    EXPECT_EQ(m.num_labels, c.labels) << c.name;
    EXPECT_EQ(m.unary.size(), static_cast<std::size_t>(c.w) * c.h * c.labels);
    EXPECT_EQ(m.edge_weights.empty(), std::string(c.name) == "venus");
  }
}

}  // namespace
}  // namespace mrf
