// Image loading and writing, including the errors for missing, truncated and non-image files.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "mrf/io/image.h"
#include "support/test_support.h"

namespace mrf {
namespace {

TEST(Image, PngRoundTripKeepsEveryValue) {
  const std::string dir = test::ScratchDir("image_roundtrip");
  Image img = Image::Filled(7, 5, 3);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(i * 37 + 11);
  SavePng(dir + "/a.png", img);
  const Image back = LoadImage(dir + "/a.png");
  EXPECT_EQ(back.width, 7);
  EXPECT_EQ(back.height, 5);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, img.pixels);
  const Image grey = LoadImage(dir + "/a.png", 1);
  EXPECT_EQ(grey.channels, 1);
}

TEST(Image, MissingFileNamesTheFile) {
  try {
    LoadImage("/nonexistent/left.png");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/left.png'"), std::string::npos) << e.what();
  }
}

TEST(Image, TruncatedAndNonImageFilesAreRejected) {
  const std::string dir = test::ScratchDir("image_bad");
  Image img = Image::Filled(64, 64, 3);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(i * 7919 % 251);
  SavePng(dir + "/full.png", img);
  std::ifstream in(dir + "/full.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir + "/cut.png", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  EXPECT_THROW(LoadImage(dir + "/cut.png"), Error);
  std::ofstream(dir + "/text.png") << "this is not an image\n";
  EXPECT_THROW(LoadImage(dir + "/text.png"), Error);
  std::ofstream(dir + "/empty.png");
  EXPECT_THROW(LoadImage(dir + "/empty.png"), Error);
}

TEST(Image, PnmHeadersAreCheckedAgainstTheData) {
  // Found by fuzzing: a PGM header promising more pixels than the file holds.
  EXPECT_THROW(LoadImageFromMemory(std::string("P515\n555515\n555\n\x01\x02\x03", 20), "short.pgm"), Error);
  EXPECT_THROW(LoadImageFromMemory("P6\n99999999999 2\n255\n", "huge.ppm"), Error);
  EXPECT_THROW(LoadImageFromMemory("P6\n2 2\n0\n............", "maxval.ppm"), Error);
  const Image ok = LoadImageFromMemory(std::string("P5\n# comment\n3 1\n65535\n\xff\xff\x00\x00\x80\x00", 30), "ok.pgm", 3);
  EXPECT_EQ(ok.width, 3);
  EXPECT_EQ(ok.channels, 3);
  EXPECT_EQ(ok.at(0, 0, 1), 255);
  EXPECT_EQ(ok.at(1, 0, 2), 0);
  EXPECT_EQ(ok.at(2, 0, 0), 127);
  try {
    LoadImageFromMemory("GIF89a....", "anim.gif");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a PNG, JPEG or binary PGM/PPM"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mrf
