// The context cache of kept_context.h: one slot, guarded by a mutex.
#include "backends/cuda/kept_context.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "mrf/types.h"

namespace mrf::cuda_kept {
namespace {

std::mutex cache_mutex;
Context* cached = nullptr;  // deliberately never destroyed: process exit reclaims it
constexpr std::size_t kKeepDeviceBytes = std::size_t{2} << 30;

// MRF_CUDA_KEPT_POISON=1 (for tests): a device block is handed out filled with 0xff bytes, so that a solver
// that reads memory it did not write first gives a wrong answer instead of zeros or the last run's leftovers.
bool PoisonRequested(const std::string& who) {
  const char* v = std::getenv("MRF_CUDA_KEPT_POISON");
  if (!v || !*v || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  throw Error(who + ": MRF_CUDA_KEPT_POISON must be 0 or 1 (got '" + v + "')");
}

// Replaces *block by one of `bytes` when it holds fewer (its contents are not kept).
cudaError_t Grow(char** block, std::size_t* held, std::size_t bytes, cudaError_t (*allocate)(void**, std::size_t),
                 cudaError_t (*free)(void*)) {
  if (bytes <= *held) return cudaSuccess;
  if (*block) free(*block);
  *block = nullptr;
  *held = 0;
  void* p = nullptr;
  const cudaError_t status = allocate(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return status;
  }
  *block = static_cast<char*>(p);
  *held = bytes;
  return cudaSuccess;
}

}  // namespace

cudaError_t Context::EnsureDevice(std::size_t bytes) {
  const bool grows = bytes > device_bytes;
  const cudaError_t status =
      Grow(&device, &device_bytes, bytes, [](void** p, std::size_t n) { return cudaMalloc(p, n); }, cudaFree);
  if (status != cudaSuccess || !grows || !poison) return status;
  const cudaError_t filled = cudaMemsetAsync(device, 0xff, bytes, stream);
  if (filled != cudaSuccess) {
    cudaGetLastError();
    ReleaseDevice();  // not handed out unpoisoned
  }
  return filled;
}

void Context::ReleaseDevice() {
  if (device) cudaFree(device);
  device = nullptr;
  device_bytes = 0;
}

cudaError_t Context::EnsurePinned(std::size_t bytes) {
  return Grow(&pinned, &pinned_bytes, bytes, [](void** p, std::size_t n) { return cudaMallocHost(p, n); },
              cudaFreeHost);
}

void Context::Release() {
  ReleaseDevice();
  if (pinned) cudaFreeHost(pinned);
  if (stream) cudaStreamDestroy(stream);
  if (side) cudaStreamDestroy(side);
  pinned = nullptr;
  pinned_bytes = 0;
  stream = side = nullptr;
  cudaGetLastError();
}

Context* TakeContext(const std::string& who) {
  const bool poison = PoisonRequested(who);  // before anything is taken: a bad value leaves the cache as it is
  int device_id = 0;
  if (cudaGetDevice(&device_id) != cudaSuccess) cudaGetLastError();
  Context* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    c = cached;
    cached = nullptr;
  }
  if (c && c->device_id != device_id) {  // made for another device: its stream and memory are not usable here
    ReturnContext(c, false);
    c = nullptr;
  }
  if (!c) c = new Context;
  c->device_id = device_id;
  c->poison = poison;
  auto fail = [&](const char* what, cudaError_t status) {
    cudaGetLastError();
    ReturnContext(c, false);
    throw Error(who + ": " + what + " failed: " + cudaGetErrorString(status));
  };
  if (!c->stream) {
    const cudaError_t status = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (status != cudaSuccess) {
      c->stream = nullptr;
      fail("creating a stream", status);
    }
  }
  if (c->device && poison) {
    const cudaError_t status = cudaMemsetAsync(c->device, 0xff, c->device_bytes, c->stream);
    if (status != cudaSuccess) fail("filling the kept memory (MRF_CUDA_KEPT_POISON)", status);
  }
  return c;
}

std::size_t ReleaseCachedDevice() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (!cached || !cached->device) return 0;
  const std::size_t bytes = cached->device_bytes;
  cached->ReleaseDevice();
  return bytes;
}

void ReturnContext(Context* c, bool healthy) {
  if (!c) return;
  if (healthy && c->device_bytes > kKeepDeviceBytes) c->ReleaseDevice();
  if (healthy) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (!cached) {
      cached = c;
      return;
    }
  }
  c->Release();
  delete c;
}

}  // namespace mrf::cuda_kept
