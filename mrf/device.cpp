#include "mrf/device.h"

#include "mrf/config.h"

#if MRF_HAVE_CUDA
// Defined in backends/cuda/device_query.cu (the static CUDA library linked into libmrf).
namespace mrf::cuda {
int DeviceCount();
std::string UnavailableReason();
std::string DeviceDescription();
}  // namespace mrf::cuda
#endif

namespace mrf {

bool CudaCompiledIn() { return MRF_HAVE_CUDA != 0; }

#if MRF_HAVE_CUDA
int CudaDeviceCount() { return cuda::DeviceCount(); }
std::string CudaUnavailableReason() { return cuda::UnavailableReason(); }
std::string CudaDeviceDescription() { return cuda::DeviceDescription(); }
#else
int CudaDeviceCount() { return 0; }
std::string CudaUnavailableReason() { return "not compiled in (this build has no CUDA)"; }
std::string CudaDeviceDescription() { return ""; }
#endif

}  // namespace mrf
