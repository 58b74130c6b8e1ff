#include "mrf/device.h"

#include <cstdlib>
#include <string>
#include <system_error>

#include "mrf/config.h"
#include "mrf/types.h"

#if MRF_HAVE_CUDA
// Defined in backends/cuda/device_query.cu (the static CUDA library linked into libmrf).
namespace mrf::cuda {
int DeviceCount();
std::string UnavailableReason();
std::string DeviceDescription();
void StartContext();
std::size_t StackLimit();
std::string SetStackLimit(std::size_t bytes);
}  // namespace mrf::cuda
#endif

namespace mrf {

bool CudaCompiledIn() { return MRF_HAVE_CUDA != 0; }

bool CudaDebugSyncRequested(const std::string& engine) {
  const char* env = std::getenv("MRF_CUDA_DEBUG_SYNC");
  const std::string value = env ? env : "";
  if (value.empty() || value == "0") return false;
  if (value == "1") return true;
  throw Error(engine + ": MRF_CUDA_DEBUG_SYNC must be 0 or 1 (got '" + value + "')");
}

#if MRF_HAVE_CUDA
int CudaDeviceCount() { return cuda::DeviceCount(); }
std::string CudaUnavailableReason() { return cuda::UnavailableReason(); }
std::string CudaDeviceDescription() { return cuda::DeviceDescription(); }
std::size_t CudaStackLimitBytes() { return cuda::StackLimit(); }
void SetCudaStackLimitBytes(std::size_t bytes) {
  const std::string error = cuda::SetStackLimit(bytes);
  if (!error.empty()) throw Error("setting the CUDA stack limit to " + std::to_string(bytes) + " bytes: " + error);
}
CudaStartInBackground::CudaStartInBackground() {
  try {
    started_ = std::async(std::launch::async, cuda::StartContext);
  } catch (const std::system_error&) {
    // No thread to be had: the first GPU call starts the context, as without this object.
  }
}
#else
CudaStartInBackground::CudaStartInBackground() = default;
int CudaDeviceCount() { return 0; }
std::string CudaUnavailableReason() { return "not compiled in (this build has no CUDA)"; }
std::string CudaDeviceDescription() { return ""; }
std::size_t CudaStackLimitBytes() { return 0; }
void SetCudaStackLimitBytes(std::size_t) { throw Error("setting the CUDA stack limit: this build has no CUDA"); }
#endif

CudaStartInBackground::~CudaStartInBackground() {
  if (started_.valid()) started_.wait();
}

}  // namespace mrf
