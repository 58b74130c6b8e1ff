// The context the GPU solvers keep between solves (backends/cuda/kept_context.h): a context handed back
// healthy is the one the next TakeContext returns, block and all; one handed back unhealthy is not; with
// MRF_CUDA_KEPT_POISON=1 every device block is handed out as 0xff bytes, new or kept (the hook the solvers'
// tests rely on to catch reads of memory not written first), and a bad value is refused; the cached block
// can be given up for code that does not take a context. Tests named *Small* are the ones compute-sanitizer
// runs. This program links the CUDA backend's static library directly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mrf/config.h"
#include "mrf/types.h"
#include "support/test_support.h"
#if MRF_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/kept_context.h"
#endif

namespace mrf {
namespace {

#if MRF_HAVE_CUDA

// The first `bytes` of the context's device block, read back after its stream's work.
std::vector<unsigned char> BlockBytes(const cuda_kept::Context& c, std::size_t bytes) {
  std::vector<unsigned char> out(bytes);
  EXPECT_EQ(cudaMemcpyAsync(out.data(), c.device, bytes, cudaMemcpyDeviceToHost, c.stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(c.stream), cudaSuccess);
  return out;
}

bool All(const std::vector<unsigned char>& bytes, unsigned char value) {
  for (unsigned char b : bytes)
    if (b != value) return false;
  return true;
}

TEST(CudaKeptContext, SmallKeptBlocksComeBackAndArePoisonedWhenAsked) {
  MRF_SKIP_WITHOUT_CUDA();
  constexpr std::size_t kBytes = 1 << 16;
  {
    const test::ScopedEnv plain("MRF_CUDA_KEPT_POISON", "0");
    cuda_kept::Context* c = cuda_kept::TakeContext("test");
    ASSERT_NE(c->stream, nullptr);
    ASSERT_EQ(c->EnsureDevice(kBytes), cudaSuccess);
    ASSERT_EQ(c->EnsurePinned(64), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(c->device, 0x5a, kBytes, c->stream), cudaSuccess);
    char* const block = c->device;
    cuda_kept::ReturnContext(c, /*healthy=*/true);
    // Kept: the same context, its block and its contents, and a smaller request keeps the block.
    cuda_kept::Context* again = cuda_kept::TakeContext("test");
    EXPECT_EQ(again, c);
    EXPECT_EQ(again->device, block);
    ASSERT_EQ(again->EnsureDevice(kBytes / 2), cudaSuccess);
    EXPECT_EQ(again->device, block);
    EXPECT_TRUE(All(BlockBytes(*again, kBytes), 0x5a)) << "the kept block lost its contents";
    // A second solve while the first holds the context makes its own; handing it back then frees it.
    cuda_kept::Context* other = cuda_kept::TakeContext("test");
    EXPECT_NE(other, again);
    cuda_kept::ReturnContext(again, true);
    cuda_kept::ReturnContext(other, true);
    EXPECT_EQ(cuda_kept::TakeContext("test"), again) << "the cache should hold the first context handed back";
    cuda_kept::ReturnContext(again, true);
  }
  {
    // Poisoned: the kept block, and a block that grows, are handed out as 0xff bytes.
    const test::ScopedEnv poison("MRF_CUDA_KEPT_POISON", "1");
    cuda_kept::Context* c = cuda_kept::TakeContext("test");
    EXPECT_TRUE(All(BlockBytes(*c, kBytes), 0xff)) << "a kept block was handed out unpoisoned";
    ASSERT_EQ(cudaMemsetAsync(c->device, 0, kBytes, c->stream), cudaSuccess);
    ASSERT_EQ(c->EnsureDevice(4 * kBytes), cudaSuccess);
    EXPECT_TRUE(All(BlockBytes(*c, 4 * kBytes), 0xff)) << "a new block was handed out unpoisoned";
    // Handed back unhealthy: freed, and the next one starts without a block.
    cuda_kept::ReturnContext(c, /*healthy=*/false);
    cuda_kept::Context* fresh = cuda_kept::TakeContext("test");
    EXPECT_EQ(fresh->device, nullptr);
    EXPECT_EQ(fresh->device_bytes, 0u);
    ASSERT_EQ(fresh->EnsureDevice(kBytes), cudaSuccess);
    cuda_kept::ReturnContext(fresh, true);
  }
  // The cached block can be given up (cuda-pr does so before it refuses a problem for want of memory).
  EXPECT_EQ(cuda_kept::ReleaseCachedDevice(), kBytes);
  EXPECT_EQ(cuda_kept::ReleaseCachedDevice(), 0u);
  {
    const test::ScopedEnv bad("MRF_CUDA_KEPT_POISON", "yes");
    try {
      cuda_kept::TakeContext("test");
      ADD_FAILURE() << "a bad MRF_CUDA_KEPT_POISON was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "test: MRF_CUDA_KEPT_POISON must be 0 or 1 (got 'yes')");
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

#else

TEST(CudaKeptContext, SmallKeptBlocksComeBackAndArePoisonedWhenAsked) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace mrf
