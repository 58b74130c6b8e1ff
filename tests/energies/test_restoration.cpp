// Restoration energies: data costs against a direct reading of the definition, masks, levels, errors.
#include <gtest/gtest.h>

#include <random>

#include "energies/restoration.h"
#include "support/test_support.h"

namespace mrf {
namespace {

Image RandomGrey(std::mt19937_64& rng, int w, int h) {
  Image im = Image::Filled(w, h, 1);
  for (auto& v : im.pixels) v = static_cast<std::uint8_t>(rng() % 256);
  return im;
}

TEST(Restoration, LevelsSpanTheGreyRange) {
  for (Label levels : {2, 3, 16, 255, 256}) {
    EXPECT_EQ(LevelIntensity(0, levels), 0);
    EXPECT_EQ(LevelIntensity(levels - 1, levels), 255);
    for (Label l = 1; l < levels; ++l) EXPECT_GT(LevelIntensity(l, levels), LevelIntensity(l - 1, levels));
  }
  for (Label l = 0; l < 256; ++l) EXPECT_EQ(LevelIntensity(l, 256), l);  // 256 levels: label = intensity
  EXPECT_EQ(LevelIntensity(1, 3), 128);                                  // 127.5 rounds up
}

TEST(Restoration, DataCostIsTheSquaredDifferenceAndZeroInHoles) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    const int w = 1 + static_cast<int>(rng() % 6), h = 1 + static_cast<int>(rng() % 6);
    const Image observed = RandomGrey(rng, w, h);
    Image mask = Image::Filled(w, h, 1);
    for (auto& v : mask.pixels) v = rng() % 3 == 0 ? 255 : static_cast<std::uint8_t>(rng() % 128);
    RestorationParams p;
    p.num_labels = trial % 2 ? 256 : 2 + static_cast<Label>(rng() % 40);
    p.data_truncation = trial % 3 == 0 ? 0 : static_cast<Cost>(1 + rng() % 5000);
    const Model m = BuildRestorationModel(observed, mask, p);
    ASSERT_EQ(m.topology, Topology::Grid2D(w, h, 4));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (Label l = 0; l < p.num_labels; ++l) {
          const double value = 255.0 * l / (p.num_labels - 1);
          const long rounded = std::lround(value);
          long expected = (rounded - observed.at(x, y)) * (rounded - observed.at(x, y));
          if (p.data_truncation > 0 && expected > p.data_truncation) expected = p.data_truncation;
          if (mask.at(x, y) >= 128) expected = 0;
          ASSERT_EQ(m.unary_cost(y * w + x, l), expected) << "(" << x << "," << y << ") level " << l;
        }
  }
}

TEST(Restoration, ColourImagesAreConvertedToGrey) {
  Image colour = Image::Filled(2, 1, 3);
  colour.pixels = {255, 0, 0, 0, 0, 255};
  RestorationParams p;
  const Model from_colour = BuildRestorationModel(colour, Image{}, p);
  const Model from_grey = BuildRestorationModel(ToGrey(colour), Image{}, p);
  EXPECT_EQ(from_colour.unary, from_grey.unary);
}

TEST(Restoration, BadInputHasOneLineErrors) {
  std::mt19937_64 rng(2);
  const Image observed = RandomGrey(rng, 8, 6);
  RestorationParams p;
  try {
    BuildRestorationModel(observed, RandomGrey(rng, 8, 5), p);
    FAIL() << "a mask of the wrong size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mask is 8x5 but the image is 8x6"), std::string::npos) << e.what();
  }
  p.num_labels = 257;
  EXPECT_THROW(BuildRestorationModel(observed, Image{}, p), Error);
  p.num_labels = 16;
  p.smoothness.kind = PairwiseKind::kTable;
  EXPECT_THROW(BuildRestorationModel(observed, Image{}, p), Error);  // no table
}

TEST(Restoration, CleanPictureHasLowerEnergyThanTheNoisyOne) {
  const SyntheticRestoration s = MakeSyntheticRestoration(64, 48, 9, 25.0, 4);
  const SyntheticRestoration again = MakeSyntheticRestoration(64, 48, 9, 25.0, 4);
  EXPECT_EQ(s.noisy.pixels, again.noisy.pixels);
  EXPECT_EQ(s.mask.pixels, again.mask.pixels);
  int holes = 0;
  for (auto v : s.mask.pixels) holes += v == 255;
  EXPECT_GT(holes, 0);
  const Model m = BuildRestorationModel(s.noisy, s.mask, RestorationParams{});
  Labeling clean(s.clean.pixels.begin(), s.clean.pixels.end()), noisy(s.noisy.pixels.begin(), s.noisy.pixels.end());
  EXPECT_LT(EvaluateEnergy(m, clean).total, EvaluateEnergy(m, noisy).total);
  EXPECT_EQ(EvaluateEnergy(m, noisy).data, 0);  // the observation itself fits the data exactly
  EXPECT_GT(RootMeanSquareError(s.noisy, s.clean), 15.0);
  EXPECT_EQ(RestoredImage(clean, 64, 48, 256).pixels, s.clean.pixels);
}

}  // namespace
}  // namespace mrf
