// Run-time GPU availability for builds with CUDA (mrf/device.h).
#include <cuda_runtime.h>

#include <cstdio>

#include <string>

// Called through mrf/device.h: the public functions live in libmrf so the linker keeps these.
namespace mrf::cuda {

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

std::string UnavailableReason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device found (") + cudaGetErrorString(status) + ")";
  }
  if (count == 0) return "no CUDA device found";
  return {};
}

std::string DeviceDescription() {
  if (DeviceCount() == 0) return {};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
  char text[256];
  std::snprintf(text, sizeof text, "%s, %.1f GiB, %d SMs", prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), prop.multiProcessorCount);
  return text;
}

void StartContext() {
  if (DeviceCount() == 0) return;
  cudaFree(nullptr);  // the customary way to create the primary context
  cudaGetLastError();  // a failure here is met again, with its message, by the first real call
}

std::size_t StackLimit() {
  if (DeviceCount() == 0) return 0;
  std::size_t bytes = 0;
  if (cudaDeviceGetLimit(&bytes, cudaLimitStackSize) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return bytes;
}

std::string SetStackLimit(std::size_t bytes) {
  if (DeviceCount() == 0) return "no CUDA device found";
  const cudaError_t status = cudaDeviceSetLimit(cudaLimitStackSize, bytes);
  if (status == cudaSuccess) return {};
  cudaGetLastError();
  return cudaGetErrorString(status);
}

}  // namespace mrf::cuda
