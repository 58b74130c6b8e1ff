// Image loading and writing, including the errors for missing, truncated and non-image files.
#include <gtest/gtest.h>

#include <stb_image_write.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "mrf/io/image.h"
#include "support/test_support.h"

namespace mrf {
namespace {

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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
  const std::string bytes = FileBytes(dir + "/full.png");
  std::ofstream(dir + "/cut.png", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  EXPECT_THROW(LoadImage(dir + "/cut.png"), Error);
  std::ofstream(dir + "/text.png") << "this is not an image\n";
  EXPECT_THROW(LoadImage(dir + "/text.png"), Error);
  std::ofstream(dir + "/empty.png");
  EXPECT_THROW(LoadImage(dir + "/empty.png"), Error);
}

std::string Message(const std::string& bytes, const std::string& name) {
  try {
    LoadImageFromMemory(bytes, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// stb_image checks no CRC: a damaged PNG must still be refused, not decoded to other pixels.
TEST(Image, DamagedPngChunksAreRefused) {
  const std::string dir = test::ScratchDir("image_crc");
  Image img = Image::Filled(40, 30, 3);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(i * 31 % 256);
  SavePng(dir + "/a.png", img);
  const std::string good = FileBytes(dir + "/a.png");
  EXPECT_EQ(LoadImageFromMemory(good, "a.png").pixels, img.pixels);
  // One flipped bit in the compressed pixels (the IDAT chunk follows the 8-byte signature and the
  // 25-byte IHDR chunk).
  std::string flipped = good;
  flipped[33 + 8 + 20] ^= 0x10;
  EXPECT_EQ(Message(flipped, "f.png"), "cannot read image 'f.png': PNG chunk 'IDAT' at byte 33 fails its CRC check (the file is damaged)");
  std::string header = good;
  header[8 + 8 + 3] ^= 0x01;  // the width
  EXPECT_EQ(Message(header, "h.png"), "cannot read image 'h.png': PNG chunk 'IHDR' at byte 8 fails its CRC check (the file is damaged)");
  // Without IEND (cut just before it), and cut inside a chunk.
  EXPECT_EQ(Message(good.substr(0, good.size() - 12), "e.png"), "cannot read image 'e.png': PNG is truncated (no IEND chunk)");
  EXPECT_EQ(Message(good.substr(0, 60), "c.png"), "cannot read image 'c.png': PNG is truncated in chunk 'IDAT' at byte 33");
  std::string text_mode = good;
  text_mode.replace(4, 2, "\n");  // CR LF -> LF, as a text-mode transfer does
  EXPECT_NE(Message(text_mode, "t.png").find("PNG signature is damaged"), std::string::npos);
  // Bytes after IEND do not touch the image: accepted, as other decoders do.
  EXPECT_EQ(LoadImageFromMemory(good + "trailing", "a.png").pixels, img.pixels);
}

// A JPEG segment: its marker, its length (2 + the body's) and the body.
std::string JpegSegment(char marker, const std::string& body) {
  const std::size_t n = body.size() + 2;
  return std::string{'\xFF', marker, static_cast<char>(n >> 8), static_cast<char>(n)} + body;
}

// Headers that announce more pixels than supported are refused before stb sees them. Found by fuzzing:
// stb allocated gigabytes for a few hundred bytes of JPEG header, and its size guess for a 16-bit PNG of
// 16384 x 16384 overflowed an int into a request of 2^64 bytes.
TEST(Image, HugeHeadersAreRefusedBeforeDecoding) {
  const std::string ihdr =
      test::BigEndian32(16384) + test::BigEndian32(16384) + std::string("\x10\x06\x00\x00\x00", 5);  // 16-bit RGBA
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + test::PngChunk("IHDR", ihdr) +
                          test::PngChunk("IDAT", std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8)) +
                          test::PngChunk("IEND", "");
  EXPECT_EQ(Message(png, "big.png"),
            "cannot read image 'big.png': image of 16384x16384 pixels is larger than the 67108864 pixels supported");
  // A baseline JPEG header of 16000 x 16000 pixels, 3 components, with one empty scan.
  const std::string frame = std::string("\x08\x3e\x80\x3e\x80\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00", 15);
  const std::string jpeg = std::string("\xFF\xD8", 2) + JpegSegment('\xC0', frame) +
                           JpegSegment('\xDA', std::string("\x03\x01\x00\x02\x00\x03\x00\x00\x3f\x00", 10)) +
                           std::string("\xFF\xD9", 2);
  EXPECT_EQ(Message(jpeg, "big.jpg"),
            "cannot read image 'big.jpg': image of 16000x16000 pixels is larger than the 67108864 pixels supported");
}

// stb_image decodes a bit depth that the colour type forbids (2-bit RGBA) into raw samples 0-3 without a
// word: such headers are refused; the allowed ones still decode (a 2-bit grey image scaled to 0-255).
TEST(Image, PngBitDepthsTheColourTypeForbidsAreRefused) {
  auto png = [](char depth, char colour, const std::string& idat) {
    const std::string ihdr = test::BigEndian32(2) + test::BigEndian32(1) + std::string{depth, colour, 0, 0, 0};
    return std::string("\x89PNG\r\n\x1a\n", 8) + test::PngChunk("IHDR", ihdr) + test::PngChunk("IDAT", idat) +
           test::PngChunk("IEND", "");
  };
  // zlib streams (stored blocks) of one scanline: filter 0, then the samples.
  const std::string rgba2 = std::string("\x78\x01\x01\x02\x00\xfd\xff\x00\x1b\x00\x1d\x00\x1c", 13);
  EXPECT_EQ(Message(png(2, 6, rgba2), "r.png"),
            "cannot read image 'r.png': PNG header has colour type 6 with bit depth 2, which the PNG standard does not "
            "allow");
  EXPECT_NE(Message(png(4, 4, rgba2), "ga.png").find("colour type 4 with bit depth 4"), std::string::npos);
  EXPECT_NE(Message(png(8, 5, rgba2), "c5.png").find("colour type 5 with bit depth 8"), std::string::npos);
  // Grey at 2 bits, two pixels 3 and 1 (0xD0 = 11 01 0000): 255 and 85.
  const std::string grey2 = std::string("\x78\x01\x01\x02\x00\xfd\xff\x00\xd0\x00\xd2\x00\xd1", 13);
  const Image grey = LoadImageFromMemory(png(2, 0, grey2), "g.png");
  EXPECT_EQ(grey.pixels, (std::vector<std::uint8_t>{255, 85}));
}

// Ground-truth values are data: LoadGreyValues gives 8-bit files' values unchanged and refuses files
// whose samples LoadImage rescales (a 16-bit KITTI-style map, 512 = disparity 2 x 256, would read 2).
TEST(Image, GreyValuesAreReadUnscaledOrRefused) {
  const std::string dir = test::ScratchDir("image_values");
  Image map = Image::Filled(3, 2, 1);
  map.pixels = {0, 3, 7, 15, 16, 200};
  SavePng(dir + "/eight.png", map);
  EXPECT_EQ(LoadGreyValues(dir + "/eight.png").pixels, map.pixels);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  const std::string pgm255 = write("v255.pgm", std::string("P5\n# values\n3 2\n255\n") +
                                                   std::string("\x00\x03\x07\x0f\x10\xc8", 6));
  EXPECT_EQ(LoadGreyValues(pgm255).pixels, map.pixels);
  const std::string long_comment = write("comment.pgm", "P5\n#" + std::string(300, 'c') + "\n3 2\n255\n" +
                                                            std::string("\x00\x03\x07\x0f\x10\xc8", 6));
  EXPECT_EQ(LoadGreyValues(long_comment).pixels, map.pixels);
  const std::string pgm16 = write("v16.pgm", std::string("P5 3 2 65535\n", 13) + std::string(12, '\x02'));
  const std::string pgm15 = write("v15.pgm", std::string("P5 3 2 15\n", 10) + std::string(6, '\x02'));
  for (const auto& [path, stored] : {std::pair<std::string, std::string>{pgm16, "samples up to 65535"},
                                     {pgm15, "samples up to 15"}}) {
    try {
      LoadGreyValues(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "cannot read image '" + path + "': it stores " + stored +
                                           ", which would be rescaled to 0..255; values such as disparities must be "
                                           "stored as 8-bit samples");
    }
  }
  // A 16-bit grey PNG of 2 x 1 pixels holding 512 and 256.
  const std::string ihdr = test::BigEndian32(2) + test::BigEndian32(1) + std::string("\x10\x00\x00\x00\x00", 5);
  const std::string idat = std::string("\x78\x01\x01\x05\x00\xfa\xff\x00\x02\x00\x01\x00\x00\x0f\x00\x04", 16);
  const std::string png16 = write("v16.png", std::string("\x89PNG\r\n\x1a\n", 8) + test::PngChunk("IHDR", ihdr) +
                                                 test::PngChunk("IDAT", idat) + test::PngChunk("IEND", ""));
  EXPECT_EQ(LoadImage(png16).pixels, (std::vector<std::uint8_t>{2, 1}));  // intensities: scaled
  EXPECT_THROW(LoadGreyValues(png16), Error);
}

// A JPEG cut short would decode as if the missing data were grey or zeros: the reader refuses one without
// its end.
TEST(Image, JpegDecodesAndATruncatedOneIsRefused) {
  Image img = Image::Filled(48, 32, 3);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c) img.pixels[(y * img.width + x) * 3 + c] = static_cast<std::uint8_t>(x * 4 + c * 40);
  std::string jpeg;
  auto append = [](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<const char*>(data), size); };
  ASSERT_TRUE(stbi_write_jpg_to_func(append, &jpeg, img.width, img.height, 3, img.pixels.data(), 95));
  const Image back = LoadImageFromMemory(jpeg, "a.jpg");
  ASSERT_EQ(back.width, 48);
  ASSERT_EQ(back.height, 32);
  ASSERT_EQ(back.channels, 3);
  int worst = 0;  // lossy, but a smooth ramp comes back close
  for (std::size_t i = 0; i < img.pixels.size(); ++i) worst = std::max(worst, std::abs(back.pixels[i] - img.pixels[i]));
  EXPECT_LE(worst, 16);
  EXPECT_EQ(Message(jpeg.substr(0, jpeg.size() * 2 / 3), "cut.jpg"),
            "cannot read image 'cut.jpg': JPEG is truncated (no end-of-image marker after its image data)");
  EXPECT_EQ(Message(jpeg.substr(0, 20), "head.jpg"),
            "cannot read image 'head.jpg': JPEG is truncated (it ends before its image data)");
  EXPECT_EQ(Message(std::string("\xFF\xD8\xFF\xD9", 4), "empty.jpg"),
            "cannot read image 'empty.jpg': JPEG has no image data (no start-of-scan marker)");
  EXPECT_EQ(Message(std::string("\xFF\xD8\xFF\xE0\x00\x01", 6), "short.jpg"),
            "cannot read image 'short.jpg': JPEG segment at byte 2 has a length below 2 (the file is damaged)");
  // Bytes after the end-of-image marker (phones append videos there) are not the image, even when they
  // look like a start-of-scan without an end.
  const std::string trailer("\x00\x00\xFF\xDA\x12\x34", 6);
  EXPECT_EQ(LoadImageFromMemory(jpeg + trailer, "trailer.jpg").pixels, back.pixels);
  // An Exif-like segment holding a whole thumbnail (its own scan and end marker) is skipped: the main
  // image cut short is still refused, and whole it decodes as before.
  const std::string thumbnail("\xFF\xD8\xFF\xDA\x00\x02\x11\x22\xFF\xD9", 10);
  const std::string with_thumbnail = jpeg.substr(0, 2) + JpegSegment('\xE1', thumbnail) + jpeg.substr(2);
  EXPECT_EQ(LoadImageFromMemory(with_thumbnail, "exif.jpg").pixels, back.pixels);
  EXPECT_EQ(Message(with_thumbnail.substr(0, with_thumbnail.size() - 2), "exif_cut.jpg"),
            "cannot read image 'exif_cut.jpg': JPEG is truncated (no end-of-image marker after its image data)");
}

// JPEG data that libjpeg cannot decode gives its reason in one line, not a crash: stb_image asserted on
// the fuzzer's damaged Huffman data (tests/fuzz/corpus/image/regression-jpeg-bad-huffman), and an
// over-full Huffman table.
TEST(Image, DamagedJpegDataGivesAMessageNotACrash) {
  const std::string fuzzed = FileBytes(std::string(MRF_SOURCE_DIR) + "/tests/fuzz/corpus/image/regression-jpeg-bad-huffman");
  ASSERT_FALSE(fuzzed.empty());
  const std::string fuzzed_message = Message(fuzzed, "fuzzed.jpg");
  EXPECT_EQ(fuzzed_message.rfind("cannot read image 'fuzzed.jpg': ", 0), 0u) << fuzzed_message;
  EXPECT_NE(fuzzed_message.find("JPEG data (libjpeg: "), std::string::npos) << fuzzed_message;
  EXPECT_EQ(fuzzed_message.find('\n'), std::string::npos) << fuzzed_message;

  Image grey = Image::Filled(40, 24, 1);
  for (std::size_t i = 0; i < grey.pixels.size(); ++i) grey.pixels[i] = static_cast<std::uint8_t>(i % 200);
  std::string jpeg;
  auto append = [](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<const char*>(data), size); };
  ASSERT_TRUE(stbi_write_jpg_to_func(append, &jpeg, grey.width, grey.height, 1, grey.pixels.data(), 90));
  const Image back = LoadImageFromMemory(jpeg, "grey.jpg");  // (stb writes three components)
  EXPECT_EQ(back.width, 40);
  EXPECT_EQ(back.height, 24);
  // The first Huffman table (after FF C4, its length and its class byte) claims 200 codes of one bit:
  // libjpeg then reads the next table's index from the middle of this one.
  const std::size_t dht = jpeg.find("\xFF\xC4");
  ASSERT_NE(dht, std::string::npos);
  std::string bad_table = jpeg;
  bad_table[dht + 5] = static_cast<char>(200);
  const std::string table_message = Message(bad_table, "table.jpg");
  EXPECT_EQ(table_message, "cannot read image 'table.jpg': corrupt JPEG data (libjpeg: Bogus DHT index 4)");
}

TEST(Image, PnmSamplesAndLengthMatchTheHeader) {
  EXPECT_EQ(Message(std::string("P5\n3 1\n200\n\x10\xc9\x00", 14), "max.pgm"),
            "cannot read image 'max.pgm': PNM sample 201 at pixel (1, 0) exceeds the maximum value 200");
  EXPECT_EQ(Message(std::string("P6\n1 2\n255\n\x01\x02\x03\x04\x05\x06\x07", 18), "long.ppm"),
            "cannot read image 'long.ppm': 1 bytes after the 1x2 pixels the PNM header announces (a header that "
            "does not match the data, or a second image)");
  // A newline after the pixels, as some writers add, is not data.
  EXPECT_EQ(LoadImageFromMemory(std::string("P5\n3 1\n200\n\x10\xc8\x00\n", 15), "nl.pgm").width, 3);
  const Image ok = LoadImageFromMemory(std::string("P5\n3 1\n200\n\x10\xc8\x00", 14), "ok.pgm");
  EXPECT_EQ(ok.at(1, 0), 255);
  EXPECT_EQ(ok.at(0, 0), 16 * 255 / 200);
}

TEST(Image, PnmHeadersAreCheckedAgainstTheData) {
  // Found by fuzzing: a PGM header promising more pixels than the file holds.
  EXPECT_THROW(LoadImageFromMemory(std::string("P515\n555515\n555\n\x01\x02\x03", 20), "short.pgm"), Error);
  EXPECT_THROW(LoadImageFromMemory("P6\n99999999999 2\n255\n", "huge.ppm"), Error);
  EXPECT_THROW(LoadImageFromMemory("P6\n2 2\n0\n............", "maxval.ppm"), Error);
  const Image ok = LoadImageFromMemory(std::string("P5\n# comment\n3 1\n65535\n\xff\xff\x00\x00\x80\x00", 29), "ok.pgm", 3);
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
