// libFuzzer target: image decoding must turn any input into an image or one mrf::Error.
#include <cstdint>
#include <string>

#include "mrf/io/image.h"
#include "mrf/types.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const mrf::Image image = mrf::LoadImageFromMemory(std::string(reinterpret_cast<const char*>(data), size), "fuzz", 3);
    if (image.pixels.size() != image.size() * 3) __builtin_trap();
  } catch (const mrf::Error&) {
  }
  return 0;
}
