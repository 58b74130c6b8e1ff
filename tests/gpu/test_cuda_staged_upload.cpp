// UploadFromPageable (backends/cuda/staged_upload.h), the host-to-device copy that cuda-pr,
// cuda-expansion, cuda-swap and cuda-bp upload their inputs with: every byte arrives, whatever the
// size (below the staging threshold, whole pieces, pieces and a remainder) and alignment, through the
// pinned buffer and without it, behind work that holds the stream up and from two threads at once;
// the buffer is allocated only by a large enough transfer, or by copies that add up to one; a bad
// MRF_CUDA_UPLOAD value is an error.
// This program links the CUDA backend's static library directly. Tests named *Small* are the ones
// compute-sanitizer runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "mrf/config.h"
#include "mrf/types.h"
#if MRF_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/staged_upload.h"
#endif

namespace mrf {
namespace {

#if MRF_HAVE_CUDA

std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(status);
  }
  return count > 0 ? "" : "no CUDA device";
}

// Holds a stream up for 30 ms: copies queued behind it start late, so a piece refilled before its
// last copy left would be caught.
void CUDART_CB Sleep(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

// Uploads `bytes` bytes of `source` from offset `src_offset` to offset `dst_offset` of a fresh device
// buffer (behind a 30 ms host function on the stream when `held`), reads the device buffer back and
// compares every byte (and that the bytes around the copy were left alone).
void CheckUpload(const std::vector<unsigned char>& source, std::size_t bytes, std::size_t src_offset,
                 std::size_t dst_offset, std::size_t transfer_bytes, const std::string& what, bool held = false) {
  ASSERT_LE(src_offset + bytes, source.size()) << what;
  unsigned char* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, dst_offset + bytes + 1), cudaSuccess) << what;
  ASSERT_EQ(cudaMemset(device, 0xA5, dst_offset + bytes + 1), cudaSuccess) << what;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  if (held) ASSERT_EQ(cudaLaunchHostFunc(stream, Sleep, nullptr), cudaSuccess);
  EXPECT_EQ(cuda_upload::UploadFromPageable(device + dst_offset, source.data() + src_offset, bytes, stream,
                                            transfer_bytes),
            cudaSuccess)
      << what;
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
  std::vector<unsigned char> back(dst_offset + bytes + 1);
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size(), cudaMemcpyDeviceToHost), cudaSuccess) << what;
  std::size_t wrong = 0, first_wrong = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    if (back[dst_offset + i] != source[src_offset + i] && wrong++ == 0) first_wrong = i;
  EXPECT_EQ(wrong, 0u) << what << ": first wrong byte at " << first_wrong;
  for (std::size_t i = 0; i < dst_offset; ++i) EXPECT_EQ(back[i], 0xA5) << what << ": byte " << i << " before the copy";
  EXPECT_EQ(back[dst_offset + bytes], 0xA5) << what << ": the byte after the copy";
  cudaStreamDestroy(stream);
  cudaFree(device);
}

// One test, in order: the buffer's allocation depends on what the process copied before.
TEST(CudaStagedUpload, SmallEveryByteArrivesWithAndWithoutThePinnedBuffer) {
  const std::string why = NoDeviceReason();
  if (!why.empty()) GTEST_SKIP() << why;
  constexpr std::size_t MiB = std::size_t{1} << 20;
  using cuda_upload::kPieceBytes;
  std::vector<unsigned char> source(cuda_upload::kAllocateFromBytes + 2 * kPieceBytes + 64);
  std::mt19937_64 rng(5);
  for (std::size_t i = 0; i < source.size(); i += 8) {
    const std::uint64_t word = rng();
    for (std::size_t b = 0; b < 8 && i + b < source.size(); ++b) source[i + b] = static_cast<unsigned char>(word >> (8 * b));
  }
  ASSERT_FALSE(cuda_upload::StagingAllocated()) << "nothing in this program copied before";

  // Below the allocation threshold: plain copies, and no buffer yet.
  CheckUpload(source, 8 * MiB + 3, 1, 0, 0, "8 MiB + 3 before the buffer exists");
  CheckUpload(source, 0, 0, 0, 0, "an empty copy");
  EXPECT_FALSE(cuda_upload::StagingAllocated());

  // A piece of a large transfer allocates it, as the whole transfer would.
  CheckUpload(source, 2 * MiB + 1, 7, 5, cuda_upload::kAllocateFromBytes, "2 MiB + 1 of a 64 MiB transfer");
  EXPECT_TRUE(cuda_upload::StagingAllocated());

  // Through the buffer: below a piece, whole pieces, pieces and a remainder, odd offsets.
  for (std::size_t bytes : {cuda_upload::kStageFromBytes - 1, cuda_upload::kStageFromBytes, kPieceBytes - 1, kPieceBytes,
                            kPieceBytes + 1, 2 * kPieceBytes, 3 * kPieceBytes + 4097,
                            cuda_upload::kAllocateFromBytes + 2 * kPieceBytes + 5})
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}})
      CheckUpload(source, bytes, offset, offset * 5, 0,
                  std::to_string(bytes) + " bytes, offsets " + std::to_string(offset) + " and " + std::to_string(offset * 5));

  // Behind a stream held up by the host: the third piece must wait for the first's copy to leave.
  CheckUpload(source, 3 * kPieceBytes + 17, 1, 2, 0, "3 pieces + 17 behind a held stream", /*held=*/true);
  // Two threads at once, different bytes, one of them held up: they take turns with the pieces.
  std::vector<unsigned char> other(source.rbegin(), source.rend());
  std::thread first([&] { CheckUpload(source, 4 * kPieceBytes + 3, 0, 0, 0, "thread 1", /*held=*/true); });
  std::thread second([&] { CheckUpload(other, 5 * kPieceBytes + 9, 5, 0, 0, "thread 2"); });
  first.join();
  second.join();

  // MRF_CUDA_UPLOAD=pageable: plain copies, the same bytes; a bad value is a one-line error.
  setenv("MRF_CUDA_UPLOAD", "pageable", 1);
  CheckUpload(source, 3 * kPieceBytes + 11, 2, 1, 0, "MRF_CUDA_UPLOAD=pageable");
  setenv("MRF_CUDA_UPLOAD", "pinned", 1);
  try {
    cuda_upload::UploadFromPageable(nullptr, source.data(), 16, nullptr);  // at any size
    ADD_FAILURE() << "a bad MRF_CUDA_UPLOAD value was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "MRF_CUDA_UPLOAD must be staged or pageable (got 'pinned')");
  }
  setenv("MRF_CUDA_UPLOAD", "", 1);  // empty: the default
  CheckUpload(source, 2 * kPieceBytes, 0, 0, 0, "MRF_CUDA_UPLOAD empty");
  unsetenv("MRF_CUDA_UPLOAD");

  // No pinned memory to be had: plain copies, the same bytes.
  cuda_upload::ResetStagingForTests(/*fail_allocation=*/true);
  CheckUpload(source, cuda_upload::kAllocateFromBytes + 7, 1, 3, 0, "a large copy when pinning fails");
  EXPECT_FALSE(cuda_upload::StagingAllocated());
  cuda_upload::ResetStagingForTests(false);
  EXPECT_FALSE(cuda_upload::StagingAllocated());
  CheckUpload(source, cuda_upload::kAllocateFromBytes, 0, 0, 0, "a large copy after the reset");
  EXPECT_TRUE(cuda_upload::StagingAllocated());

  // A process that goes on uploading smaller inputs pins the buffer once its copies add up to the
  // threshold; copies too small to stage do not count.
  cuda_upload::ResetStagingForTests(false);
  for (int i = 0; i < 80; ++i)
    CheckUpload(source, cuda_upload::kStageFromBytes - 1, 0, 0, 0, "a copy too small to count");
  EXPECT_FALSE(cuda_upload::StagingAllocated());
  const std::size_t part = cuda_upload::kAllocateFromBytes / 8;
  for (int i = 1; i <= 8; ++i) {
    CheckUpload(source, part, static_cast<std::size_t>(i), 0, 0, "copy " + std::to_string(i) + " of 8");
    EXPECT_EQ(cuda_upload::StagingAllocated(), i == 8) << "after " << i << " copies of an eighth of the threshold";
  }
  CheckUpload(source, part + 5, 3, 1, 0, "a copy through the buffer the small ones pinned");
}

#else

TEST(CudaStagedUpload, SmallEveryByteArrivesWithAndWithoutThePinnedBuffer) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace mrf
