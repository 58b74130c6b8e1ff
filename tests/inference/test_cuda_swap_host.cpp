// The host-only parts of cuda-swap, tested without a GPU: the input checks (grids only, a semimetric or
// truncation, with cpu-swap's message; capacities that fit the engine), the memory estimate (per-pair
// bookkeeping, no kept graphs), and what the registry says in a build or on a machine without CUDA.
#include <gtest/gtest.h>

#include <random>

#include "inference/cuda_swap.h"
#include "mrf/config.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaSwapHost, InputChecksNameTheProblem) {
  std::mt19937_64 rng(1);
  const Pairwise potts{PairwiseKind::kPotts, 10, kMaxCost, {}};
  SolveOptions o;
  const Model list = test::RandomModel(rng, Topology::EdgeList(3, {0, 1}, {1, 2}), 3, 10, potts);
  const std::string grid = ErrorOf([&] { CheckCudaSwapInput(list, o); });
  EXPECT_NE(grid.find("cuda-swap needs a grid-shaped model"), std::string::npos) << grid;
  EXPECT_NE(grid.find("use cpu-swap"), std::string::npos) << grid;
  // Truncated quadratic is a semimetric: swap takes it (expansion would not).
  const Model quadratic = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 4, 10,
                                            Pairwise{PairwiseKind::kTruncatedQuadratic, 10, 9, {}});
  EXPECT_EQ(ErrorOf([&] { CheckCudaSwapInput(quadratic, o); }), "");
  // A table that is not a semimetric: cpu-swap's message, word for word.
  const Model table = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 2, 10,
                                        Pairwise{PairwiseKind::kTable, 1, kMaxCost, {5, 1, 1, 5}});
  const std::string broken = ErrorOf([&] { CheckCudaSwapInput(table, o); });
  EXPECT_NE(broken.find("swap needs a semimetric smoothness term"), std::string::npos) << broken;
  SolveOptions cpu;
  cpu.solver = "cpu-swap";
  EXPECT_EQ(Solve(table, cpu).message, broken);
  o.truncate_nonsubmodular = true;
  EXPECT_EQ(ErrorOf([&] { CheckCudaSwapInput(table, o); }), "");
  Model big = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 3, 10, Pairwise{PairwiseKind::kPotts, 1, kMaxCost, {}});
  big.pairwise.lambda = (kMaxCost / 2) + 10;
  const std::string message = ErrorOf([&] { CheckCudaSwapInput(big, o); });
  EXPECT_NE(message.find("cuda-swap: a move's edge capacity"), std::string::npos) << message;
  EXPECT_NE(message.find("use cpu-swap"), std::string::npos) << message;
}

TEST(CudaSwapHost, MemoryEstimateCountsThePairs) {
  std::mt19937_64 rng(2);
  const Pairwise potts{PairwiseKind::kPotts, 10, kMaxCost, {}};
  const Model few = test::RandomModel(rng, Topology::Grid2D(100, 50, 4), 3, 10, potts);
  const Model many = test::RandomModel(rng, Topology::Grid2D(100, 50, 4), 40, 10, potts);
  // 40 labels make 780 pairs: their records alone (128 bytes each) outgrow the expansion's 40.
  const std::int64_t swap_many = EstimateCudaSwapMemory(many, CudaExpansionTuning{}).base_bytes;
  const std::int64_t expansion_many = EstimateCudaExpansionMemory(many, CudaExpansionTuning{}).base_bytes;
  EXPECT_GE(swap_many - expansion_many, (780 - 40) * 128);
  // 3 labels make 3 pairs: the same bookkeeping sizes, plus the pairs and the label counts (the
  // expansion's list of changed nodes aside: swap keeps no graphs, so it has no local path).
  CudaExpansionTuning no_list;
  no_list.local_changes = 0;
  EXPECT_GT(EstimateCudaSwapMemory(few, CudaExpansionTuning{}).base_bytes,
            EstimateCudaExpansionMemory(few, no_list).base_bytes);
  EXPECT_EQ(EstimateCudaSwapMemory(few, CudaExpansionTuning{}).base_bytes, EstimateCudaSwapMemory(few, no_list).base_bytes);
  EXPECT_EQ(EstimateCudaSwapMemory(test::RandomModel(rng, Topology::EdgeList(2, {0}, {1}), 2, 1, potts),
                                   CudaExpansionTuning{})
                .base_bytes,
            0);
}

TEST(CudaSwapHost, RegisteredAndHonestWithoutAGpu) {
  test::ExpectGpuSolverRegisteredWithCpuFallback("cuda-swap", Algorithm::kSwap, "cpu-swap");
}

}  // namespace
}  // namespace mrf
