// The device's per-thread stack, shared by the engines whose kernels need more than the driver's
// default (1 KiB): the local repairs of cuda-pr and cuda-expansion keep about 2 KiB a thread.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace mrf::cuda_stack {

/// The stack frame (bytes a thread) that `kernel` was compiled with.
template <class Kernel>
cudaError_t FrameBytes(Kernel kernel, std::size_t* bytes) {
  cudaFuncAttributes a{};
  const cudaError_t status = cudaFuncGetAttributes(&a, kernel);
  *bytes = status == cudaSuccess ? a.localSizeBytes : 0;
  return status;
}

/// Raises the per-thread stack limit to at least `bytes`; never lowers it. The driver would grow it
/// itself at the first launch of a kernel with a larger frame, taking frame x resident threads of
/// device memory (hundreds of MiB on an H100) after an engine had sized its workspace from the free
/// memory. So engines call this before they read the free memory. The limit is the process's: it stays.
/// `before`, when given, gets the limit found.
inline cudaError_t GrowTo(std::size_t bytes, std::size_t* before = nullptr) {
  std::size_t stack = 0;
  cudaError_t status = cudaDeviceGetLimit(&stack, cudaLimitStackSize);
  if (before) *before = stack;
  if (status == cudaSuccess && stack < bytes) status = cudaDeviceSetLimit(cudaLimitStackSize, bytes);
  return status;
}

/// Lowers the limit to `bytes` where it stands above (an engine giving back what GrowTo took for
/// kernels it turned out not to launch); never raises it.
inline cudaError_t LowerTo(std::size_t bytes) {
  std::size_t stack = 0;
  cudaError_t status = cudaDeviceGetLimit(&stack, cudaLimitStackSize);
  if (status == cudaSuccess && stack > bytes) status = cudaDeviceSetLimit(cudaLimitStackSize, bytes);
  return status;
}

}  // namespace mrf::cuda_stack
