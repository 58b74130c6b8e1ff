// The host-only parts of cuda-expansion, tested without a GPU: its tuning names and ranges, the input
// checks (grids only, metric or truncation, capacities that fit the engine), the memory estimate, and
// what the registry says in a build or on a machine without CUDA.
#include <gtest/gtest.h>

#include <random>

#include "inference/cuda_expansion.h"
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

TEST(CudaExpansionHost, TuningParsesItsOwnAndTheEngineNames) {
  CudaExpansionTuning t;
  EXPECT_TRUE(t.push_relabel.wave_relabel);
  EXPECT_NE(t.Describe().find("wave relabels"), std::string::npos) << t.Describe();
  EXPECT_TRUE(t.async_relabel);
  EXPECT_NE(t.Describe().find("asynchronous relabels"), std::string::npos) << t.Describe();
  EXPECT_TRUE(t.fused_census);
  EXPECT_NE(t.Describe().find("census in the first push round"), std::string::npos) << t.Describe();
  EXPECT_FALSE(t.cooperative_launch);
  EXPECT_NE(t.Describe().find("plain solve launches"), std::string::npos) << t.Describe();
  t.Parse("reuse_flow=0,update_fraction=0.25,device_loop=off,memory_limit=64M,check_energy=1,local_iterations=4,"
          "wave_relabel=0,async_relabel=0,fused_census=0,cooperative_launch=1");
  EXPECT_FALSE(t.reuse_flow);
  EXPECT_DOUBLE_EQ(t.update_fraction, 0.25);
  EXPECT_FALSE(t.device_loop);
  EXPECT_EQ(t.memory_limit, std::int64_t{64} << 20);
  EXPECT_TRUE(t.check_energy);
  EXPECT_EQ(t.push_relabel.local_iterations, 4);
  EXPECT_FALSE(t.push_relabel.wave_relabel);
  EXPECT_FALSE(t.async_relabel);
  EXPECT_FALSE(t.fused_census);
  EXPECT_NE(t.Describe().find("census apart"), std::string::npos) << t.Describe();
  EXPECT_TRUE(t.cooperative_launch);
  EXPECT_NE(t.Describe().find("cooperative solve launches"), std::string::npos) << t.Describe();
  EXPECT_NE(t.Describe().find("relabels in rounds"), std::string::npos) << t.Describe();
  EXPECT_NE(t.Describe().find("every move solved afresh"), std::string::npos) << t.Describe();
  EXPECT_EQ(t.Describe().find("wave relabels"), std::string::npos) << t.Describe();
  EXPECT_FALSE(t.trace_moves);
  EXPECT_EQ(t.Describe().find("moves traced"), std::string::npos) << t.Describe();
  t.Parse("trace_moves=1");
  EXPECT_TRUE(t.trace_moves);
  EXPECT_NE(t.Describe().find("moves traced"), std::string::npos) << t.Describe();
  EXPECT_EQ(t.early_cycles, -1);
  EXPECT_NE(t.Describe().find("max-flows of cuda-expansion's first cycle from label 0 stop at 0.5% of the nodes active"),
            std::string::npos)
      << t.Describe();
  t.Parse("early_cycles=0");
  EXPECT_NE(t.Describe().find("exact max-flows"), std::string::npos) << t.Describe();
  t.Parse("early_cycles=auto");
  EXPECT_EQ(t.early_cycles, -1);
  t.Parse("early_cycles=2,early_fraction=0.01");
  EXPECT_EQ(t.early_cycles, 2);
  EXPECT_DOUBLE_EQ(t.early_fraction, 0.01);
  EXPECT_NE(t.Describe().find("max-flows of the first 2 cycles stop at 1% of the nodes active"), std::string::npos)
      << t.Describe();
  EXPECT_NE(ErrorOf([&] { t.Parse("early_fraction=1.5"); }).find("early_fraction must be in 0..1"), std::string::npos);
  t = CudaExpansionTuning{};  // (the failed parse left its value in place)
  EXPECT_NE(t.Describe().find("re-solves of at most 1024 changed nodes repaired locally first"), std::string::npos)
      << t.Describe();
  t.Parse("stack_bytes=4096");
  EXPECT_NE(t.Describe().find("4096-byte thread stacks"), std::string::npos) << t.Describe();
  EXPECT_NE(ErrorOf([&] { t.Parse("stack_bytes=big"); }).find("not a non-negative integer"), std::string::npos);
  CudaExpansionTuning huge;
  EXPECT_NE(ErrorOf([&] { huge.Parse("stack_bytes=600000"); }).find("stack_bytes must be in 0..524288"), std::string::npos);
  t.Parse("local_changes=0");
  EXPECT_EQ(t.Describe().find("repaired locally"), std::string::npos) << t.Describe();
  EXPECT_NE(ErrorOf([&] { t.Parse("local_changes=-3"); }).find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { t.Parse("early_cycles=-1"); }).find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { t.Parse("update_fraction=1001"); }).find("update_fraction must be in 0..1000"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { t.Parse("memory_limit=lots"); }).find("not a byte count"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { t.Parse("reuse_flow=maybe"); }).find("is not 0 or 1"), std::string::npos);
  const std::string unknown = ErrorOf([&] { t.Parse("warp_speed=9"); });
  EXPECT_NE(unknown.find("unknown name 'warp_speed'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("reuse_flow"), std::string::npos) << unknown;
}

TEST(CudaExpansionHost, InputChecksNameTheProblem) {
  std::mt19937_64 rng(1);
  const Pairwise potts{PairwiseKind::kPotts, 10, kMaxCost, {}};
  SolveOptions o;
  const Model list = test::RandomModel(rng, Topology::EdgeList(3, {0, 1}, {1, 2}), 3, 10, potts);
  EXPECT_NE(ErrorOf([&] { CheckCudaExpansionInput(list, o); }).find("needs a grid-shaped model"), std::string::npos);
  const Model quadratic = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 4, 10,
                                            Pairwise{PairwiseKind::kTruncatedQuadratic, 10, 9, {}});
  EXPECT_NE(ErrorOf([&] { CheckCudaExpansionInput(quadratic, o); }).find("triangle inequality"), std::string::npos);
  o.truncate_nonsubmodular = true;
  EXPECT_EQ(ErrorOf([&] { CheckCudaExpansionInput(quadratic, o); }), "");
  // A pairwise cost near 2^31 fits a Cost but not a move's capacity (a difference of two costs).
  Model big = test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 3, 10, Pairwise{PairwiseKind::kPotts, 1, kMaxCost, {}});
  big.pairwise.lambda = (kMaxCost / 2) + 10;
  const std::string message = ErrorOf([&] { CheckCudaExpansionInput(big, o); });
  EXPECT_NE(message.find("above the 2^31 - 1"), std::string::npos) << message;
}

TEST(CudaExpansionHost, MemoryEstimateCountsTheKeptGraphs) {
  std::mt19937_64 rng(2);
  const Pairwise potts{PairwiseKind::kPotts, 10, kMaxCost, {}};
  const Model four = test::RandomModel(rng, Topology::Grid2D(100, 50, 4), 7, 10, potts);
  const Model eight = test::RandomModel(rng, Topology::Grid2D(100, 50, 8), 7, 10, potts);
  const CudaExpansionMemory m4 = EstimateCudaExpansionMemory(four, CudaExpansionTuning{});
  const CudaExpansionMemory m8 = EstimateCudaExpansionMemory(eight, CudaExpansionTuning{});
  // Excess 8, height 4, residuals 4 per direction, mask 1, the labels it was built from 4.
  EXPECT_EQ(m4.per_kept_graph_bytes, 5000 * (8 + 4 + 16 + 1 + 4));
  EXPECT_EQ(m8.per_kept_graph_bytes, 5000 * (8 + 4 + 32 + 1 + 4));
  // The base holds at least the unary costs twice (upload and label-major copy).
  EXPECT_GE(m4.base_bytes, 2 * 5000 * 7 * 4);
  EXPECT_EQ(EstimateCudaExpansionMemory(test::RandomModel(rng, Topology::EdgeList(2, {0}, {1}), 2, 1, potts),
                                        CudaExpansionTuning{})
                .base_bytes,
            0);
}

TEST(CudaExpansionHost, RegisteredAndHonestWithoutAGpu) {
  test::ExpectGpuSolverRegisteredWithCpuFallback("cuda-expansion", Algorithm::kExpansion, "cpu-expansion");
}

}  // namespace
}  // namespace mrf
