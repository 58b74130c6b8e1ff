#pragma once
// Host-to-device copies from pageable memory at the speed of the link. Internal to backends/cuda.
//
// cudaMemcpyAsync from pageable memory copies through the driver's pinned buffers on one core: 5-8 GB/s
// on the GPU machine (H200), where a copy from pinned memory moves about 50 GB/s. UploadFromPageable
// copies through a pinned buffer of its own instead, in pieces that all cores fill while the previous
// piece travels: 35-40 GB/s for cuda-pr's 256 MB and Aloe's 1.3 GB (docs/benchmarks.md, "Uploads
// through a pinned buffer").
#include <cuda_runtime.h>

#include <cstddef>

namespace mrf::cuda_upload {

/// Copies `bytes` from host memory at `src` (pageable or not) to device memory at `dst`, in order
/// on `stream` (a stream of the current device); returns once `src` may change or go, as
/// cudaMemcpyAsync from pageable memory does. Safe to call from several threads (they take turns).
///
/// The pinned buffer is the process's, taken under a lock: two pieces of kPieceBytes, allocated by
/// the first copy of kAllocateFromBytes or more, or by the copy that brings the process's copies of
/// kStageFromBytes or more to that many bytes (pinning costs about 0.4 ms per MB, so one smaller copy
/// would lose by it, while a process that goes on uploading wins it back), and kept until the process
/// ends. Once it exists, every copy of
/// kStageFromBytes or more uses it; smaller copies, and every copy when pinned memory cannot be had
/// or MRF_CUDA_UPLOAD=pageable, are plain cudaMemcpyAsync calls. Throws mrf::Error for a bad
/// MRF_CUDA_UPLOAD value; returns the first CUDA error of the copies.
/// `transfer_bytes`: the whole transfer this copy is a piece of, when larger (it decides the
/// allocation as a single copy of that size would).
cudaError_t UploadFromPageable(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                               std::size_t transfer_bytes = 0);

constexpr std::size_t kPieceBytes = std::size_t{16} << 20;
constexpr std::size_t kAllocateFromBytes = std::size_t{64} << 20;
constexpr std::size_t kStageFromBytes = std::size_t{1} << 20;

/// Whether the process's pinned buffer exists (for tests and reports).
bool StagingAllocated();

/// For tests: frees the pinned buffer and forgets a failed allocation; with `fail_allocation`, the
/// next allocations fail as if no pinned memory could be had.
void ResetStagingForTests(bool fail_allocation);

}  // namespace mrf::cuda_upload
