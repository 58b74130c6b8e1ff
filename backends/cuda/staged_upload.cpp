#include "backends/cuda/staged_upload.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

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
  std::size_t copied_plainly = 0;  // bytes of stageable copies made without the buffer, before it existed
  bool fail_for_tests = false;
};

Staging& TheStaging() {
  static Staging* staging = new Staging;  // never freed: the driver may be gone when statics are destroyed
  return *staging;
}

bool StagingWanted() {
  const char* mode = std::getenv("MRF_CUDA_UPLOAD");
  if (!mode || !*mode || std::string(mode) == "staged") return true;  // unset or empty: the default
  if (std::string(mode) == "pageable") return false;
  throw Error(std::string("MRF_CUDA_UPLOAD must be staged or pageable (got '") + mode + "')");
}

// Copies len bytes on all cores: one core's memcpy moves about 8 GB/s, a sixth of the link. Isolated,
// with a context of its own: a caller inside TBB work must neither see this thread take up one of its
// other tasks while the lock is held (which could upload again and lock twice) nor have the copy cut
// short when its own work is cancelled.
void ParallelCopy(char* to, const char* from, std::size_t len) {
  constexpr std::size_t kChunk = std::size_t{512} << 10;
  tbb::task_group_context own(tbb::task_group_context::isolated);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        std::size_t{0}, (len + kChunk - 1) / kChunk,
        [&](std::size_t c) {
          const std::size_t at = c * kChunk;
          std::memcpy(to + at, from + at, std::min(kChunk, len - at));
        },
        own);
  });
}

// The events that say when each piece's copy has left; on the way out (errors and exceptions too) it
// waits for them, and after an error for the whole stream, so that no copy still reads a piece when
// the next caller refills it.
class PieceEvents {
 public:
  explicit PieceEvents(cudaStream_t stream) : stream_(stream) {
    for (cudaEvent_t& e : done_)
      if (status_ == cudaSuccess) status_ = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  }
  ~PieceEvents() { Finish(); }
  cudaError_t status() const { return status_; }
  void Fail(cudaError_t status) { status_ = status; }
  cudaEvent_t operator[](std::size_t k) const { return done_[k]; }
  // Waits for both pieces; returns the first error.
  cudaError_t Finish() {
    for (cudaEvent_t& e : done_)
      if (e) {
        const cudaError_t waited = cudaEventSynchronize(e);
        if (status_ == cudaSuccess) status_ = waited;
        cudaEventDestroy(e);
        e = nullptr;
      }
    if (status_ != cudaSuccess && !synced_) {
      synced_ = true;
      cudaStreamSynchronize(stream_);  // a copy queued before a failed record still reads its piece
    }
    return status_;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t done_[2] = {nullptr, nullptr};
  cudaError_t status_ = cudaSuccess;
  bool synced_ = false;
};

}  // namespace

bool StagingAllocated() {
  Staging& s = TheStaging();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.piece[0] != nullptr;
}

void ResetStagingForTests(bool fail_allocation) {
  Staging& s = TheStaging();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (char*& p : s.piece) {
    if (p) cudaFreeHost(p);
    p = nullptr;
  }
  s.failed = false;
  s.copied_plainly = 0;
  s.fail_for_tests = fail_allocation;
}

cudaError_t UploadFromPageable(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                               std::size_t transfer_bytes) {
  auto plain = [&] { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream); };
  if (!StagingWanted() || bytes < kStageFromBytes) return plain();  // a bad value is an error at any size
  Staging& s = TheStaging();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.piece[0]) {
    // Pinning pays for itself in a process that goes on uploading: allocate once one transfer, or all
    // the plain copies so far with this one, reach kAllocateFromBytes (about what pinning costs in time).
    s.copied_plainly += bytes;
    if (s.failed || std::max({bytes, transfer_bytes, s.copied_plainly}) < kAllocateFromBytes) return plain();
    for (char*& p : s.piece)
      if (s.fail_for_tests ||
          cudaHostAlloc(reinterpret_cast<void**>(&p), kPieceBytes, cudaHostAllocPortable) != cudaSuccess)
        p = nullptr;
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
  // Events of the current device (made per call, since callers may change devices between calls).
  PieceEvents done(stream);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (std::size_t at = 0, k = 0; done.status() == cudaSuccess && at < bytes; at += kPieceBytes, k ^= 1) {
    const std::size_t len = std::min(kPieceBytes, bytes - at);
    cudaError_t status = cudaEventSynchronize(done[k]);  // the piece's last copy has left (unrecorded: at once)
    if (status == cudaSuccess) {
      ParallelCopy(s.piece[k], from + at, len);
      status = cudaMemcpyAsync(to + at, s.piece[k], len, cudaMemcpyHostToDevice, stream);
    }
    if (status == cudaSuccess) status = cudaEventRecord(done[k], stream);
    if (status != cudaSuccess) done.Fail(status);
  }
  return done.Finish();  // both pieces have left before the next caller refills them
}

}  // namespace mrf::cuda_upload
