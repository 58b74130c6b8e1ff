// libFuzzer target: the model file reader must turn any input into a model or one mrf::Error.
#include <cstdint>
#include <string>

#include "mrf/io/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const mrf::Model model = mrf::LoadModelFromBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    mrf::Labeling zeros(model.num_nodes(), 0);
    mrf::EvaluateEnergy(model, zeros);
  } catch (const mrf::Error&) {
  }
  return 0;
}
