#include "mrf/io/image.h"

#include <stb_image.h>
#include <stb_image_write.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

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

Image LoadImage(const std::string& path, int channels) {
  if (channels != 0 && channels != 1 && channels != 3)
    throw Error("LoadImage: channels must be 0, 1 or 3 (got " + std::to_string(channels) + ")");
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error("cannot open image '" + path + "': " + std::strerror(errno));
  int w = 0, h = 0, n = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(stbi_load_from_file(file.get(), &w, &h, &n, channels),
                                                 &stbi_image_free);
  if (!data) throw Error("cannot read image '" + path + "': " + stbi_failure_reason() + " (corrupt, truncated or not an image)");
  Image img;
  img.width = w;
  img.height = h;
  img.channels = channels ? channels : n;
  img.pixels.assign(data.get(), data.get() + img.size() * img.channels);
  return img;
}

void SavePng(const std::string& path, const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != image.size() * image.channels)
    throw Error("cannot write '" + path + "': image has an inconsistent shape");
  if (!stbi_write_png(path.c_str(), image.width, image.height, image.channels, image.pixels.data(),
                      image.width * image.channels))
    throw Error("cannot write PNG '" + path + "': " + std::strerror(errno ? errno : EIO));
}

Image ToGrey(const Image& image) {
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
