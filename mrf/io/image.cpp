#include "mrf/io/image.h"

#include <stb_image.h>
#include <stb_image_write.h>

#include <csetjmp>
// libjpeg's header needs FILE and size_t declared first.
#include <cstddef>
#include <jpeglib.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <memory>

#include "mrf/io/read_file.h"
#include "mrf/model.h"
#include "mrf/types.h"

namespace mrf {

Image Image::Filled(int width, int height, int channels, std::uint8_t value) {
  if (width <= 0 || height <= 0 || channels < 1 || channels > 4)
    throw Error("invalid image shape " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                std::to_string(channels));
  Image img;
  img.width = width;
  img.height = height;
  img.channels = channels;
  img.pixels.assign(img.size() * channels, value);
  return img;
}

std::string Image::Describe() const {
  static const char* kNames[] = {"?", "grey", "grey+alpha", "RGB", "RGBA"};
  return std::to_string(width) + "x" + std::to_string(height) + " " + kNames[channels >= 0 && channels <= 4 ? channels : 0];
}

namespace {

// Largest image accepted (8192 x 8192): keeps a lying header from asking for gigabytes. A JPEG header of a
// few hundred bytes can announce any size and stb allocates several bytes per pixel for it before reading
// any data, and stb's PNG size guess overflows an int beyond 2^31 bytes (both found by fuzzing).
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 26;

[[noreturn]] void Fail(const std::string& name, const std::string& why) {
  throw Error("cannot read image '" + name + "': " + why);
}

void CheckShape(const std::string& name, std::int64_t w, std::int64_t h) {
  if (w <= 0 || h <= 0) Fail(name, "image has no pixels");
  if (w > kMaxPixels / h)
    Fail(name, "image of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is larger than the " +
                   std::to_string(kMaxPixels) + " pixels supported");
}

// Converts between grey and RGB (alpha dropped) so callers get the channel count they asked for.
Image ConvertChannels(Image img, int channels) {
  if (channels == 0 || channels == img.channels) return img;
  if (channels == 1) return ToGrey(img);
  Image rgb = Image::Filled(img.width, img.height, 3);
  for (std::size_t i = 0; i < img.size(); ++i)
    for (int c = 0; c < 3; ++c)
      rgb.pixels[i * 3 + c] = img.pixels[i * img.channels + (img.channels >= 3 ? c : 0)];
  return rgb;
}

// A binary PGM/PPM header: the size, the maximum sample value, and where the pixels start.
struct PnmHeader {
  std::int64_t width = 0, height = 0, maxval = 0;
  std::size_t pixels_at = 0;
};

PnmHeader ReadPnmHeader(const std::string& bytes, const std::string& name) {
  std::size_t pos = 2;
  auto skip_space = [&] {
    while (pos < bytes.size()) {
      if (bytes[pos] == '#') {
        while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      } else if (std::isspace(static_cast<unsigned char>(bytes[pos]))) {
        ++pos;
      } else {
        break;
      }
    }
  };
  auto number = [&](const char* what) {
    skip_space();
    std::int64_t value = 0;
    const std::size_t start = pos;
    while (pos < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[pos]))) {
      value = value * 10 + (bytes[pos++] - '0');
      if (value > (1 << 30)) Fail(name, std::string("PNM ") + what + " is too large");
    }
    if (pos == start) Fail(name, std::string("PNM header has no ") + what);
    return value;
  };
  PnmHeader h;
  h.width = number("width");
  h.height = number("height");
  h.maxval = number("maximum value");
  CheckShape(name, h.width, h.height);
  if (h.maxval < 1 || h.maxval > 65535) Fail(name, "PNM maximum value " + std::to_string(h.maxval) + " is out of range");
  if (pos >= bytes.size() || !std::isspace(static_cast<unsigned char>(bytes[pos]))) Fail(name, "PNM header is malformed");
  h.pixels_at = pos + 1;
  return h;
}

// Binary PGM (P5) and PPM (P6), 8 or 16 bits. Parsed here rather than by stb, whose PNM reader
// trusts the header's size (found by fuzzing: a short file made it read past the buffer).
Image DecodePnm(const std::string& bytes, const std::string& name) {
  const int channels = bytes[1] == '5' ? 1 : 3;
  const PnmHeader header = ReadPnmHeader(bytes, name);
  const std::int64_t w = header.width, h = header.height, maxval = header.maxval;
  std::size_t pos = header.pixels_at;
  const int sample_bytes = maxval < 256 ? 1 : 2;
  const std::int64_t needed = w * h * channels * sample_bytes;
  if (static_cast<std::int64_t>(bytes.size() - pos) < needed)
    Fail(name, "file is truncated (" + std::to_string(bytes.size() - pos) + " of " + std::to_string(needed) +
                   " pixel bytes)");
  // Bytes past the pixels mean a header that does not describe the data (or a second image in the file):
  // either way the pixels read would not be the ones meant.
  // Trailing whitespace (a newline some writers add) is not data.
  std::size_t end = bytes.size();
  while (end > pos + static_cast<std::size_t>(needed) && std::isspace(static_cast<unsigned char>(bytes[end - 1]))) --end;
  const std::int64_t extra = static_cast<std::int64_t>(end - pos) - needed;
  if (extra > 0)
    Fail(name, std::to_string(extra) + " bytes after the " + std::to_string(w) + "x" + std::to_string(h) +
                   " pixels the PNM header announces (a header that does not match the data, or a second image)");
  Image img = Image::Filled(static_cast<int>(w), static_cast<int>(h), channels);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
  for (std::size_t i = 0; i < img.pixels.size(); ++i) {
    const std::int64_t v = sample_bytes == 1 ? data[i] : (data[2 * i] << 8 | data[2 * i + 1]);
    if (v > maxval) {
      const std::int64_t pixel = static_cast<std::int64_t>(i) / channels;
      Fail(name, "PNM sample " + std::to_string(v) + " at pixel (" + std::to_string(pixel % w) + ", " +
                     std::to_string(pixel / w) + ") exceeds the maximum value " + std::to_string(maxval));
    }
    img.pixels[i] = static_cast<std::uint8_t>(v * 255 / maxval);
  }
  return img;
}

// CRC-32 of ISO 3309 / ITU-T V.42 (the one PNG chunks carry), reflected, polynomial 0xEDB88320.
std::uint32_t Crc32(const unsigned char* data, std::size_t size) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// A PNG's sample format, from its IHDR chunk (bytes 24 and 25: the file is at least that long once
// CheckPngChunks has passed it).
struct PngSampleFormat {
  int bit_depth;
  int colour_type;  // 0 grey, 2 RGB, 3 palette, 4 grey + alpha, 6 RGBA
};
PngSampleFormat ReadPngSampleFormat(const std::string& bytes) {
  return {static_cast<unsigned char>(bytes[24]), static_cast<unsigned char>(bytes[25])};
}

// Walks a PNG's chunks up to IEND and checks each one's length and CRC, then the header's bit depth: stb_image checks none, so
// a damaged file could otherwise decode to wrong pixels without a word. Bytes after IEND are ignored,
// as other decoders do (the image itself is whole).
void CheckPngChunks(const std::string& bytes, const std::string& name) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || bytes.compare(0, 8, kSignature, 8) != 0)
    Fail(name, "PNG signature is damaged (a file sent through a text-mode transfer?)");
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto be32 = [data](std::size_t at) {
    return std::uint32_t{data[at]} << 24 | std::uint32_t{data[at + 1]} << 16 | std::uint32_t{data[at + 2]} << 8 |
           data[at + 3];
  };
  std::size_t pos = 8;
  while (true) {
    if (pos == bytes.size()) Fail(name, "PNG is truncated (no IEND chunk)");
    if (bytes.size() - pos < 12) Fail(name, "PNG is truncated in the chunk at byte " + std::to_string(pos));
    const std::uint32_t length = be32(pos);
    std::string type = bytes.substr(pos + 4, 4);
    for (char& c : type)  // quoted in messages: keep them one printable line
      if (!std::isalpha(static_cast<unsigned char>(c))) c = '?';
    if (length > 0x7FFFFFFFu || bytes.size() - pos - 12 < length)
      Fail(name, "PNG is truncated in chunk '" + type + "' at byte " + std::to_string(pos));
    if (Crc32(data + pos + 4, std::size_t{length} + 4) != be32(pos + 8 + length))
      Fail(name, "PNG chunk '" + type + "' at byte " + std::to_string(pos) + " fails its CRC check (the file is damaged)");
    if (type == "IEND") break;
    pos += std::size_t{length} + 12;
  }
  // The header: stb_image decodes bit depths that the colour type forbids (2-bit RGBA, say) into raw,
  // unscaled samples, so the pairs the PNG standard allows are checked here.
  // (After the walk, so that a damaged header is reported by its CRC.)
  if (be32(8) != 13 || bytes.compare(12, 4, "IHDR") != 0)
    Fail(name, "PNG does not start with its IHDR header chunk (the file is damaged)");
  const auto [depth, colour] = ReadPngSampleFormat(bytes);
  const bool depth_allowed = colour == 0   ? depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
                             : colour == 3 ? depth == 1 || depth == 2 || depth == 4 || depth == 8
                             : colour == 2 || colour == 4 || colour == 6 ? depth == 8 || depth == 16
                                                                         : false;
  if (!depth_allowed)
    Fail(name, "PNG header has colour type " + std::to_string(colour) + " with bit depth " + std::to_string(depth) +
                   ", which the PNG standard does not allow");
}

// stb_image decodes a JPEG cut short as if the missing data were zeros, without a word. So the reader walks
// the file's markers up to its end-of-image marker: segments by their lengths (an Exif thumbnail inside one
// is skipped whole), and after each start-of-scan the entropy-coded data, where a 0xFF byte is followed by
// 0x00 (a stuffed byte), a restart marker or more 0xFF fill bytes. Bytes after the end-of-image marker are
// ignored, as other decoders do (phones append videos there); stray bytes between segments are skipped,
// as stb does.
void CheckJpegEnd(const std::string& bytes, const std::string& name) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t size = bytes.size();
  bool scanned = false;
  auto truncated = [&] {
    Fail(name, scanned ? "JPEG is truncated (no end-of-image marker after its image data)"
                       : "JPEG is truncated (it ends before its image data)");
  };
  auto next_ff = [&](std::size_t from) {
    const void* at = from < size ? std::memchr(data + from, 0xFF, size - from) : nullptr;
    if (!at) truncated();
    return static_cast<std::size_t>(static_cast<const unsigned char*>(at) - data);
  };
  std::size_t pos = 2;  // after the start-of-image marker
  while (true) {
    pos = next_ff(pos);
    while (pos < size && data[pos] == 0xFF) ++pos;  // fill bytes before a marker
    if (pos == size) truncated();
    const unsigned marker = data[pos++];
    if (marker == 0xD9) {
      if (!scanned) Fail(name, "JPEG has no image data (no start-of-scan marker)");
      return;
    }
    if (marker == 0x00 || marker == 0x01 || marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length
    if (size - pos < 2) truncated();
    const std::size_t length = std::size_t{data[pos]} << 8 | data[pos + 1];
    if (length < 2) Fail(name, "JPEG segment at byte " + std::to_string(pos - 2) + " has a length below 2 (the file is damaged)");
    if (size - pos < length) truncated();
    pos += length;
    if (marker != 0xDA) continue;
    scanned = true;  // entropy-coded data up to the next marker
    while (true) {
      pos = next_ff(pos);
      if (pos + 1 == size) truncated();
      const unsigned after = data[pos + 1];
      if (after == 0x00 || (after >= 0xD0 && after <= 0xD7)) {
        pos += 2;
      } else if (after == 0xFF) {
        ++pos;
      } else {
        break;  // a marker: the outer loop reads it
      }
    }
  }
}

Image DecodeWithStb(const std::string& bytes, const std::string& name, const char* format) {
  int w = 0, h = 0, n = 0;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int size = static_cast<int>(bytes.size());
  // stb_image's reasons are terse ("IDA", "outofdata"): say what they mean, keep them for reference.
  auto corrupt = [&] {
    // stb's reason can quote bytes of the file (a PNG chunk's name): keep the message one printable line.
    const std::string reason = PrintableText(stbi_failure_reason());
    Fail(name, std::string("corrupt or truncated ") + format + " data (stb_image: " + reason + ")");
  };
  if (!stbi_info_from_memory(data, size, &w, &h, &n)) corrupt();
  CheckShape(name, w, h);
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load_from_memory(data, size, &w, &h, &n, 0), &stbi_image_free);
  if (!pixels) corrupt();
  Image img;
  img.width = w;
  img.height = h;
  img.channels = n;
  img.pixels.assign(pixels.get(), pixels.get() + img.size() * n);
  return img;
}

// JPEG through libjpeg-turbo, not stb_image: stb asserts (and reads out of bounds) on some damaged
// Huffman data (found by fuzz_image). libjpeg's errors jump back here instead of ending the process,
// and its warnings (damaged data that it would paper over with grey) count as errors.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int warnings;
};

void OnJpegError(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void OnJpegMessage(j_common_ptr info, int level) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  if (level >= 0 || errors->warnings++ > 0) return;  // trace messages; later warnings
  (*info->err->format_message)(info, errors->message);
}

// Owns the decompressor, so that a C++ exception (Fail) or the jump back from OnJpegError releases it.
// On the heap: automatic objects changed between setjmp and longjmp would have indeterminate values.
struct JpegDecompressor {
  jpeg_decompress_struct info;
  JpegErrors errors;
  bool created = false;
  JpegDecompressor() {
    std::memset(&info, 0, sizeof info);
    std::memset(&errors, 0, sizeof errors);
    info.err = jpeg_std_error(&errors.mgr);
    errors.mgr.error_exit = OnJpegError;
    errors.mgr.emit_message = OnJpegMessage;
  }
  ~JpegDecompressor() {
    if (created) jpeg_destroy_decompress(&info);
  }
};

Image DecodeJpeg(const std::string& bytes, const std::string& name) {
  const auto owner = std::make_unique<JpegDecompressor>();
  JpegDecompressor& d = *owner;
  Image img;
  // OnJpegError jumps back here: no object with a destructor may be alive across a libjpeg call below.
  if (setjmp(d.errors.jump)) Fail(name, std::string("corrupt JPEG data (libjpeg: ") + PrintableText(d.errors.message) + ")");
  jpeg_create_decompress(&d.info);
  d.created = true;
  jpeg_mem_src(&d.info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d.info, TRUE);
  CheckShape(name, d.info.image_width, d.info.image_height);
  if (d.info.jpeg_color_space == JCS_CMYK || d.info.jpeg_color_space == JCS_YCCK)
    Fail(name, "CMYK JPEG is not supported (convert it to RGB)");
  d.info.out_color_space = d.info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&d.info);
  img.width = static_cast<int>(d.info.output_width);
  img.height = static_cast<int>(d.info.output_height);
  img.channels = d.info.output_components;
  img.pixels.resize(img.size() * static_cast<std::size_t>(img.channels));
  const std::size_t stride = static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.channels);
  while (d.info.output_scanline < d.info.output_height) {
    JSAMPROW row = img.pixels.data() + d.info.output_scanline * stride;
    jpeg_read_scanlines(&d.info, &row, 1);
  }
  jpeg_finish_decompress(&d.info);
  if (d.errors.warnings > 0)
    Fail(name, std::string("damaged JPEG data (libjpeg: ") + PrintableText(d.errors.message) + ")");
  return img;
}

}  // namespace

Image LoadImageFromMemory(const std::string& bytes, const std::string& name, int channels) {
  if (channels != 0 && channels != 1 && channels != 3)
    throw Error("LoadImage: channels must be 0, 1 or 3 (got " + std::to_string(channels) + ")");
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) Fail(name, "file too large");
  auto starts_with = [&](const char* magic, std::size_t n) { return bytes.size() >= n && bytes.compare(0, n, magic, n) == 0; };
  Image img;
  if (starts_with("\x89PNG", 4)) {
    CheckPngChunks(bytes, name);
    img = DecodeWithStb(bytes, name, "PNG");
  }
  else if (starts_with("\xFF\xD8\xFF", 3)) {
    CheckJpegEnd(bytes, name);
    img = DecodeJpeg(bytes, name);
  }
  else if (starts_with("P5", 2) || starts_with("P6", 2)) img = DecodePnm(bytes, name);
  else if (bytes.empty()) Fail(name, "file is empty");
  else Fail(name, "not a PNG, JPEG or binary PGM/PPM image");
  return ConvertChannels(std::move(img), channels);
}

Image LoadImage(const std::string& path, int channels) {
  return LoadImageFromMemory(ReadWholeFile(path, "image"), path, channels);
}

Image LoadGreyValues(const std::string& path) {
  const std::string bytes = ReadWholeFile(path, "image");
  Image img = LoadImageFromMemory(bytes, path, 1);  // a damaged file is reported as such first
  // LoadImage scales samples of other depths to 0..255, which is right for intensities only.
  std::string stored;
  if (bytes.compare(0, 4, "\x89PNG", 4) == 0) {
    const auto [depth, colour] = ReadPngSampleFormat(bytes);
    if (depth != 8 && colour != 3) stored = std::to_string(depth) + "-bit samples";  // (palette: indices)
  } else if (bytes.compare(0, 2, "P5") == 0 || bytes.compare(0, 2, "P6") == 0) {
    const std::int64_t maxval = ReadPnmHeader(bytes, path).maxval;
    if (maxval != 255) stored = "samples up to " + std::to_string(maxval);
  }
  if (!stored.empty())
    Fail(path, "it stores " + stored + ", which would be rescaled to 0..255; values such as disparities must be "
               "stored as 8-bit samples");
  return img;
}

void SavePng(const std::string& path, const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != image.size() * image.channels)
    throw Error("cannot write '" + path + "': image has an inconsistent shape");
  // Encoded in memory, then written with every step checked: stb's own file writer ignores write errors.
  std::string bytes;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &bytes, image.width, image.height, image.channels, image.pixels.data(),
                              image.width * image.channels))
    throw Error("cannot write PNG '" + path + "': the encoder failed");
  WriteWholeFile(path, bytes, "PNG");
}

void CheckImageShape(const Image& image, const std::string& what) {
  if (image.width <= 0 || image.height <= 0)
    throw Error(what + " is empty (" + std::to_string(image.width) + "x" + std::to_string(image.height) + ")");
  if (image.channels < 1 || image.channels > 4)
    throw Error(what + " has " + std::to_string(image.channels) + " channels (expected 1 to 4)");
  if (image.pixels.size() != image.size() * image.channels)
    throw Error(what + " holds " + std::to_string(image.pixels.size()) + " values, expected " +
                std::to_string(image.size() * image.channels));
}

Image ToGrey(const Image& image) {
  CheckImageShape(image, "image");
  if (image.channels <= 2) {
    Image grey = Image::Filled(image.width, image.height, 1);
    for (std::size_t i = 0; i < image.size(); ++i) grey.pixels[i] = image.pixels[i * image.channels];
    return grey;
  }
  Image grey = Image::Filled(image.width, image.height, 1);
  for (std::size_t i = 0; i < image.size(); ++i) {
    const std::uint8_t* p = &image.pixels[i * image.channels];
    grey.pixels[i] = static_cast<std::uint8_t>((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
  }
  return grey;
}

}  // namespace mrf
