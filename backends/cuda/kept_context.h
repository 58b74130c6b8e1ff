#pragma once
/// @file kept_context.h
/// @brief A stream, device memory and pinned host memory kept between the GPU solves of one process.
///
/// Making them can cost as much as a small solve: on an H100 machine the first cudaMallocHost of a few bytes
/// after a free took 0.9-1.4 ms, a cudaMalloc and cudaFree 0.05-0.2 ms each (docs/bp.md, "Kept between runs",
/// which also says that keeping cuda-bp's changed no benchmark beyond the spread). So cuda-expansion,
/// cuda-swap and cuda-bp take one cached context when they start and hand it back when they end; a `--start bp` run passes it from the start's BP to the moves. One solve at a time holds it: a solve
/// that starts while another holds it makes its own, which is freed when it is handed back.
///
/// Tests set MRF_CUDA_KEPT_POISON=1: every device block is then handed out filled with 0xff bytes, so that
/// a solver that reads memory before writing it fails its comparisons instead of reading zeros or leftovers.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace mrf::cuda_kept {

struct Context {
  int device_id = -1;             ///< the device current when it was made; another device gets another context
  cudaStream_t stream = nullptr;  ///< non-blocking; made by TakeContext
  cudaStream_t side = nullptr;    ///< made by the solver that needs it (cuda-expansion's graph capture)
  char* device = nullptr;         ///< one block, carved by the solver that holds the context
  std::size_t device_bytes = 0;
  char* pinned = nullptr;  ///< page-locked host memory
  std::size_t pinned_bytes = 0;
  bool poison = false;  ///< MRF_CUDA_KEPT_POISON=1: device blocks are handed out as 0xff bytes

  /// At least `bytes` of device memory at `device` (its contents are not kept when it grows). Returns the
  /// CUDA error of a failed allocation; the block is then empty.
  cudaError_t EnsureDevice(std::size_t bytes);
  /// At least `bytes` of pinned host memory at `pinned`, as EnsureDevice.
  cudaError_t EnsurePinned(std::size_t bytes);
  /// Frees the device block (for a solve that will not use it).
  void ReleaseDevice();
  /// Frees everything (errors are cleared, not reported: the context is being dropped).
  void Release();
};

/// The cached context, or a new one; its stream exists. Throws mrf::Error with `who` in the message when the
/// stream cannot be made or MRF_CUDA_KEPT_POISON is neither unset, empty, 0 nor 1.
Context* TakeContext(const std::string& who);

/// Frees the device block of the cached context, if one is cached: for GPU code that does not take a context
/// (cuda-pr) and finds too little free memory. Returns the bytes freed.
std::size_t ReleaseCachedDevice();

/// Hands a context back. `healthy`: the solve ended without a CUDA error and its stream is idle; only such a
/// context is cached (its device block is freed first when it is over 2 GiB), others are released and deleted.
void ReturnContext(Context* context, bool healthy);

}  // namespace mrf::cuda_kept
