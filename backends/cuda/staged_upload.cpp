#include "backends/cuda/staged_upload.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "mrf/types.h"

namespace mrf::cuda_upload {
namespace {

struct Staging {
  std::mutex mutex;
  char* piece[2] = {nullptr, nullptr};
  bool failed = false;  // pinned memory could not be had: plain copies from then on
};

Staging& TheStaging() {
  static Staging* staging = new Staging;  // never freed: the driver may be gone when statics are destroyed
  return *staging;
}

bool StagingWanted() {
  const char* mode = std::getenv("MRF_CUDA_UPLOAD");
  if (!mode || std::string(mode) == "staged") return true;
  if (std::string(mode) == "pageable") return false;
  throw Error(std::string("MRF_CUDA_UPLOAD must be staged or pageable (got '") + mode + "')");
}

// Copies len bytes on all cores: one core's memcpy moves about 8 GB/s, a sixth of the link.
void ParallelCopy(char* to, const char* from, std::size_t len) {
  constexpr std::size_t kChunk = std::size_t{512} << 10;
  tbb::parallel_for(std::size_t{0}, (len + kChunk - 1) / kChunk, [&](std::size_t c) {
    const std::size_t at = c * kChunk;
    std::memcpy(to + at, from + at, std::min(kChunk, len - at));
  });
}

}  // namespace

bool StagingAllocated() {
  Staging& s = TheStaging();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.piece[0] != nullptr;
}

cudaError_t UploadFromPageable(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                               std::size_t transfer_bytes) {
  auto plain = [&] { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream); };
  if (!StagingWanted() || bytes < kStageFromBytes) return plain();  // a bad value is an error at any size
  Staging& s = TheStaging();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.piece[0]) {
    if (s.failed || std::max(bytes, transfer_bytes) < kAllocateFromBytes) return plain();
    for (char*& p : s.piece)
      if (cudaHostAlloc(reinterpret_cast<void**>(&p), kPieceBytes, cudaHostAllocPortable) != cudaSuccess) p = nullptr;
    if (!s.piece[0] || !s.piece[1]) {
      for (char*& p : s.piece) {
        if (p) cudaFreeHost(p);
        p = nullptr;
      }
      cudaGetLastError();  // the failed allocation is not the caller's error
      s.failed = true;
      return plain();
    }
  }
  // Events of the current device, made per call, so that the buffer serves streams of any device.
  cudaEvent_t done[2] = {nullptr, nullptr};
  cudaError_t status = cudaSuccess;
  for (cudaEvent_t& e : done)
    if (status == cudaSuccess) status = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (std::size_t at = 0, k = 0; status == cudaSuccess && at < bytes; at += kPieceBytes, k ^= 1) {
    const std::size_t len = std::min(kPieceBytes, bytes - at);
    status = cudaEventSynchronize(done[k]);  // the piece's last copy has left (an unrecorded event: at once)
    if (status != cudaSuccess) break;
    ParallelCopy(s.piece[k], from + at, len);
    status = cudaMemcpyAsync(to + at, s.piece[k], len, cudaMemcpyHostToDevice, stream);
    if (status == cudaSuccess) status = cudaEventRecord(done[k], stream);
  }
  // Both pieces must have left before the next caller refills them.
  for (cudaEvent_t e : done)
    if (e) {
      const cudaError_t waited = cudaEventSynchronize(e);
      if (status == cudaSuccess) status = waited;
      cudaEventDestroy(e);
    }
  return status;
}

}  // namespace mrf::cuda_upload
