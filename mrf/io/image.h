#pragma once
/// @file image.h
/// @brief 8-bit images: loading (PNG, JPEG, binary PGM/PPM) and PNG writing, with clear errors.

#include <cstdint>
#include <string>
#include <vector>

namespace mrf {

/// An 8-bit image, rows top to bottom, channels interleaved (1 = grey, 3 = RGB, 4 = RGBA).
struct Image {
  int width = 0;      ///< Columns.
  int height = 0;     ///< Rows.
  int channels = 0;   ///< Values per pixel.
  std::vector<std::uint8_t> pixels;  ///< width * height * channels values.

  /// An image of the given size filled with `value`.
  static Image Filled(int width, int height, int channels, std::uint8_t value = 0);
  /// Value of channel c at (x, y).
  std::uint8_t at(int x, int y, int c = 0) const {
    return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c];
  }
  /// Writable value of channel c at (x, y).
  std::uint8_t& at(int x, int y, int c = 0) {
    return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c];
  }
  /// Number of pixels.
  std::size_t size() const { return static_cast<std::size_t>(width) * height; }
  /// "384x288 RGB" and the like.
  std::string Describe() const;
};

/// Loads an image. `channels` = 0 keeps the file's channel count; 1 or 3 converts (grey <-> RGB).
/// Throws mrf::Error with a one-line message naming the file for a missing, unreadable,
/// truncated or corrupt file: a PNG's chunks must pass their CRCs and end with IEND; a PGM/PPM must
/// hold exactly the pixels its header announces (trailing whitespace aside), none above its maximum value.
Image LoadImage(const std::string& path, int channels = 0);
/// Loads an image whose grey values are data (a ground-truth disparity map), not intensities: as
/// LoadImage(path, 1), but refuses a file whose samples LoadImage would rescale to 0..255 (16-bit or
/// 1-, 2-, 4-bit PNGs, PGM/PPM with a maximum value other than 255), which would change the values.
Image LoadGreyValues(const std::string& path);
/// Decodes an image held in memory; `name` appears in error messages.
Image LoadImageFromMemory(const std::string& bytes, const std::string& name, int channels = 0);
/// Writes a PNG; throws mrf::Error if the file cannot be written.
void SavePng(const std::string& path, const Image& image);
/// Converts to grey (ITU-R 601 luma) or leaves a grey image unchanged.
Image ToGrey(const Image& image);

/// Throws mrf::Error unless `image` is a consistent picture: positive size, 1 to 4 channels, and
/// width * height * channels values. `what` names it, e.g. "left image" gives "left image is empty (0x5)".
void CheckImageShape(const Image& image, const std::string& what);

}  // namespace mrf
