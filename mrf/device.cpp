#include "mrf/device.h"

#include "mrf/config.h"

namespace mrf {

bool CudaCompiledIn() { return MRF_HAVE_CUDA != 0; }

#if !MRF_HAVE_CUDA
// CPU-only build: the CUDA backends define these in backends/cuda/ otherwise.
int CudaDeviceCount() { return 0; }
std::string CudaUnavailableReason() { return "not compiled in (this build has no CUDA)"; }
std::string CudaDeviceDescription() { return ""; }
#endif

}  // namespace mrf
