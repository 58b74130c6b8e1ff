#pragma once
// Checks that cuda-expansion and cuda-swap share: what they refuse and how `auto` then falls back.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "inference/cuda_expansion.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf::test {

/// An edge-list model: `gpu_solver` named explicitly refuses it ("needs a grid"); `auto` for `algorithm`
/// runs `cpu_solver` instead and records why.
inline void ExpectEdgeListRefusedAndAutoFallsBack(const std::string& gpu_solver, Algorithm algorithm,
                                                  const std::string& cpu_solver) {
  std::mt19937_64 rng(9);
  const Model list = RandomModel(rng, Topology::EdgeList(4, {0, 1, 2}, {1, 2, 3}), 3, 100,
                                 Pairwise{PairwiseKind::kPotts, 10, kMaxCost, {}});
  SolveOptions named;
  named.solver = gpu_solver;
  const Result bad = Solve(list, named);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find(gpu_solver + " needs a grid"), std::string::npos) << bad.message;
  SolveOptions automatic;
  automatic.algorithm = algorithm;
  const Result fallback = Solve(list, automatic);
  ASSERT_TRUE(fallback.ok) << fallback.message;
  EXPECT_EQ(fallback.backend_used, cpu_solver);
  EXPECT_NE(fallback.fallback_reason.find(gpu_solver + " failed"), std::string::npos) << fallback.fallback_reason;
}

/// `run(tuning)` under a memory limit of half of `base_bytes` (what the model needs without kept graphs)
/// fails, naming the shortage and both figures.
inline void ExpectRefusedBelowItsMemory(const std::string& gpu_solver, std::int64_t base_bytes,
                                        const std::function<void(const CudaExpansionTuning&)>& run) {
  CudaExpansionTuning small;
  small.memory_limit = base_bytes / 2;
  try {
    run(small);
    ADD_FAILURE() << gpu_solver << ": a run above the memory limit did not fail";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(gpu_solver + ": not enough GPU memory"), std::string::npos) << message;
    EXPECT_NE(message.find("MiB available"), std::string::npos) << message;
  }
}

}  // namespace mrf::test
