#pragma once
/// @file bp_cuda_common.cuh
/// @brief cuda-bp's host-side helpers: checks of CUDA calls and launches (MRF_CUDA_CHECK, MRF_CHECK_LAUNCH,
/// MRF_CUDA_DEBUG_SYNC) and device memory (DeviceArena, DeviceBuffer). Included only by bp_cuda.cu, with the
/// other bp_*.cuh files: cuda-bp is one translation unit, so its kernels need no host wrappers.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/staged_upload.h"
#include "mrf/memory.h"
#include "mrf/types.h"

namespace mrf::bp {

namespace {

// ---- Error handling --------------------------------------------------------------------------------

void Check(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that a CPU fallback starts clean
  throw Error(std::string("cuda-bp: ") + what + " failed: " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
}
#define MRF_CUDA_CHECK(call) Check((call), #call, __FILE__, __LINE__)

bool DebugSync() {
#ifdef MRF_CUDA_DEBUG_SYNC
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("MRF_CUDA_DEBUG_SYNC");
    return v && std::string(v) == "1";  // other values are refused when a runner starts
  }();
  return on;
#endif
}

// After every launch: the launch error, and with MRF_CUDA_DEBUG_SYNC the kernel's own error.
void CheckLaunch(const char* kernel, cudaStream_t stream, bool capturing, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw Error(std::string("cuda-bp: kernel launch failed (") + kernel + "): " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
  if (DebugSync() && !capturing) Check(cudaStreamSynchronize(stream), kernel, file, line);
}

#define MRF_CHECK_LAUNCH(name, stream, capturing) CheckLaunch(name, stream, capturing, __FILE__, __LINE__)

// One block of device memory for all of a runner's buffers, handed out in 256-byte aligned pieces: the 68
// separate allocations and frees of a coarse-to-fine run cost about 3 ms on Venus (docs/bp.md). The block
// belongs to the runner's kept context (kept_context.h), which outlives the buffers. Where it runs out (or
// there is none), buffers fall back to their own cudaMalloc.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  // Hands out `bytes` from `base` (not owned).
  void Use(void* base, std::size_t bytes) {
    base_ = base;
    size_ = bytes;
    used_ = 0;
  }
  // A piece of `bytes`, or null when the reserve cannot hold it.
  void* Take(std::size_t bytes) {
    const std::size_t at = (used_ + 255) / 256 * 256;
    if (!base_ || at > size_ || bytes > size_ - at) return nullptr;
    used_ = at + bytes;
    return static_cast<char*>(base_) + at;
  }

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0, used_ = 0;
};

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_), owned_(o.owned_) {
    o.ptr_ = nullptr, o.size_ = 0, o.owned_ = false;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~DeviceBuffer() { Release(); }
  // `count` elements from `arena` when it has room (the arena must outlive the buffer), else cudaMalloc.
  void Allocate(std::size_t count, const char* what, DeviceArena* arena = nullptr) {
    Release();
    if (count == 0) return;
    if (arena && (ptr_ = static_cast<T*>(arena->Take(count * sizeof(T))))) {
      size_ = count;
      return;
    }
    const cudaError_t status = cudaMalloc(&ptr_, count * sizeof(T));
    if (status != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      std::size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      throw Error(std::string("cuda-bp: out of GPU memory: ") + what + " needs " + MiB(count * sizeof(T)) + ", " +
                  MiB(free_bytes) + " of " + MiB(total_bytes) + " free (" + cudaGetErrorString(status) + ")");
    }
    size_ = count;
    owned_ = true;
  }
  void Upload(const std::vector<T>& host, cudaStream_t s) {
    if (!host.empty())
      MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(ptr_, host.data(), host.size() * sizeof(T), s));
  }
  void Download(std::vector<T>& host, cudaStream_t s) const {
    host.resize(size_);
    if (size_) MRF_CUDA_CHECK(cudaMemcpyAsync(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost, s));
  }
  void Zero(cudaStream_t s) {
    if (size_) MRF_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, size_ * sizeof(T), s));
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Release() {
    if (ptr_ && owned_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    owned_ = false;
  }

  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  bool owned_ = false;  // from cudaMalloc, not from an arena
};

}  // namespace

}  // namespace mrf::bp
