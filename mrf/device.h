#pragma once
/// @file device.h
/// @brief Run-time questions about GPUs, answered without including CUDA headers.

#include <cstddef>
#include <future>
#include <string>

namespace mrf {

/// True when this build contains the CUDA backends.
bool CudaCompiledIn();
/// Number of usable CUDA devices now (0 in CPU-only builds or when none is present).
int CudaDeviceCount();
/// Empty when a CUDA device is usable; otherwise a one-line reason
/// ("built without CUDA", "no CUDA device found: ...").
std::string CudaUnavailableReason();
/// Name and memory of device 0, e.g. "NVIDIA H100 80GB HBM3, 79.2 GiB", or "" without one.
std::string CudaDeviceDescription();
/// The per-thread stack limit of device 0 in bytes (cudaLimitStackSize), or 0 without a device. The
/// engines whose kernels need more than the driver's default raise it before they size their
/// workspaces (it takes frame x resident threads of device memory); it stays raised for the process.
std::size_t CudaStackLimitBytes();
/// Sets that limit (for tests that check who raises it); throws mrf::Error when the device refuses.
void SetCudaStackLimitBytes(std::size_t bytes);
/// Whether MRF_CUDA_DEBUG_SYNC asks the CUDA engines to synchronise after every launch: unset, empty or
/// "0": no; "1": yes; any other value throws mrf::Error naming `engine` ("cuda-pr: MRF_CUDA_DEBUG_SYNC
/// must be 0 or 1 (got 'yes')").
bool CudaDebugSyncRequested(const std::string& engine);

/// Creates the CUDA context of device 0 on a thread of its own, so that a program's first GPU solve
/// does not wait for it (about 0.1-0.2 s on the GPU machine) while the program reads its input.
/// CUDA calls made meanwhile wait for it as they would for their own start. The destructor waits for
/// the thread. Does nothing in CPU-only builds; without a device the thread only finds none.
class CudaStartInBackground {
 public:
  CudaStartInBackground();
  ~CudaStartInBackground();
  CudaStartInBackground(const CudaStartInBackground&) = delete;
  CudaStartInBackground& operator=(const CudaStartInBackground&) = delete;

 private:
  std::future<void> started_;
};

}  // namespace mrf
