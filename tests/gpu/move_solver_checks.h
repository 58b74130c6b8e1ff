#pragma once
// What the tests of cuda-expansion and cuda-swap share: their random models, one run scored by the
// reference evaluator, the checks against the CPU twin and the CPU solvers, what they refuse and how
// `auto` then falls back, their registry entries and the Middlebury problems.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "energies/stereo.h"
#include "inference/cuda_expansion.h"
#include "mrf/io/image.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "support/expansion_twin.h"
#include "support/move_cases.h"
#include "support/test_support.h"

namespace mrf::test {

/// Random grid models of the GPU move solvers' tests; `scale` 0 is tiny (for compute-sanitizer), 1 small,
/// 2 medium. Sizes are odd on purpose (not multiples of the tiles); smoothness `pairwise(rng, which, labels)`.
template <class MakePairwise>
std::vector<MoveCase> GpuMoveCases(std::uint64_t seed, int count, int scale, MakePairwise pairwise, bool expansion) {
  std::mt19937_64 rng(seed);
  auto size = [&](int lo, int spread) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(spread)); };
  auto topology = [&](int shape) {
    if (scale == 0)
      return shape == 0 ? Topology::Grid2D(size(5, 30), size(3, 20), 4)
             : shape == 1 ? Topology::Grid2D(size(5, 20), size(3, 12), 8)
                          : Topology::Grid3D(size(3, 6), size(3, 5), size(2, 4));
    if (scale == 1)
      return shape == 0 ? Topology::Grid2D(size(20, 60), size(10, 50), 4)
             : shape == 1 ? Topology::Grid2D(size(15, 40), size(10, 30), 8)
                          : Topology::Grid3D(size(6, 10), size(5, 10), size(4, 8));
    return shape == 0 ? Topology::Grid2D(size(90, 80), size(60, 70), 4)
           : shape == 1 ? Topology::Grid2D(size(60, 50), size(40, 50), 8)
                        : Topology::Grid3D(size(16, 10), size(16, 10), size(8, 8));
  };
  return RandomMoveCases(rng, count, topology, pairwise, 5000, 4, expansion);
}

/// RunCudaExpansion or RunCudaSwap.
using GpuMoveSolver = void (*)(const Model&, const SolveOptions&, Result*, const CudaExpansionTuning&,
                               CudaExpansionStats*);

/// One run of a GPU move solver with a tuning, scored by the reference evaluator.
struct GpuRun {
  Result result;
  Energy energy = -1;
  CudaExpansionStats stats;
};

inline GpuRun RunGpuMoves(GpuMoveSolver solver, const Model& model, const SolveOptions& options,
                          CudaExpansionTuning tuning) {
  tuning.check_energy = true;  // every cycle's tracked energy against EvaluateEnergy
  GpuRun run;
  solver(model, options, &run.result, tuning, &run.stats);
  run.energy = EvaluateEnergy(model, run.result.labels).total;
  return run;
}

/// The run converged at the CPU twin's labels, through the twin's energy cycle by cycle, the last being
/// the reference evaluator's.
inline void ExpectTheTwinsCycles(const GpuRun& g, const TwinResult& twin) {
  EXPECT_EQ(g.result.labels, twin.labels) << "labels differ from the CPU twin's";
  EXPECT_EQ(g.result.log.size(), twin.cycle_energies.size()) << g.result.message;
  for (std::size_t i = 0; i < std::min(g.result.log.size(), twin.cycle_energies.size()); ++i)
    EXPECT_EQ(g.result.log[i].energy, twin.cycle_energies[i]) << "cycle " << i + 1;
  if (!g.result.log.empty()) EXPECT_EQ(g.result.log.back().energy, g.energy);
  EXPECT_NE(g.result.message.find("converged"), std::string::npos) << g.result.message;
}

/// Solves `c` through mrf::Solve with `options` (naming a GPU move solver): that solver ran, and the
/// cycles' energies start no higher than every node at label 0, never rise and end at the reference
/// evaluator's.
inline Result SolveWatchingTheEnergy(const MoveCase& c, SolveOptions options) {
  std::vector<Energy> energies;
  options.callback = [&energies](const IterationRecord& r) {
    energies.push_back(r.energy);
    return true;
  };
  const Result gpu = Solve(c.model, options);
  EXPECT_TRUE(gpu.ok) << gpu.message;
  EXPECT_EQ(gpu.backend_used, options.solver);
  EXPECT_FALSE(energies.empty());
  if (!gpu.ok || energies.empty()) return gpu;
  EXPECT_LE(energies.front(), EvaluateEnergy(c.model, Labeling(c.model.num_nodes(), 0)).total);
  for (std::size_t i = 1; i < energies.size(); ++i) EXPECT_LE(energies[i], energies[i - 1]) << "cycle " << i + 1;
  EXPECT_EQ(energies.back(), gpu.energy) << "the last cycle's energy is not the reference evaluator's";
  return gpu;
}

/// `labels` (of energy `energy`) is where no move of the CPU solver `cpu_options.solver` helps -- unless
/// the moves need truncation, one cycle of it from `labels` tries every move exactly and must find
/// nothing -- and within 0.5% of that solver's energy from its own start. Returns the relative difference.
inline double ExpectNoMoveHelpsAndNearTheCpu(const MoveCase& c, const SolveOptions& cpu_options, const Labeling& labels,
                                             Energy energy) {
  if (!c.truncate) {
    SolveOptions again = cpu_options;
    again.initial_labels = labels;
    again.max_iterations = 1;
    const Result check = Solve(c.model, again);
    EXPECT_TRUE(check.ok) << check.message;
    EXPECT_EQ(check.energy, energy) << "a move of " << cpu_options.solver << " still lowers the energy";
  }
  const Result cpu = Solve(c.model, cpu_options);
  EXPECT_TRUE(cpu.ok) << cpu.message;
  const double gap = static_cast<double>(energy - cpu.energy) / static_cast<double>(cpu.energy);
  EXPECT_LE(std::abs(gap), 0.005) << "GPU " << energy << ", CPU " << cpu.energy;
  return std::abs(gap);
}

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

/// `gpu_solver` is `auto`'s choice for `algorithm` on the GPU and on any device, and run by algorithm and
/// device on a grid model it reports itself, its cycles, their energies and the loop on the device.
/// Returns that run's result for the solver's own checks.
inline Result ExpectChosenForTheGpu(const std::string& gpu_solver, Algorithm algorithm) {
  EXPECT_EQ(Registry::Global().Choose("auto", algorithm, Device::kCuda).name, gpu_solver);
  EXPECT_EQ(Registry::Global().Choose("auto", algorithm, Device::kAuto).name, gpu_solver);
  std::mt19937_64 rng(10);
  const Model m = RandomModel(rng, Topology::Grid2D(50, 40, 4), 4, 1000,
                              Pairwise{PairwiseKind::kTruncatedLinear, 40, 2, {}}, 3);
  SolveOptions o;
  o.algorithm = algorithm;
  o.device = Device::kCuda;
  const Result r = Solve(m, o);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.backend_used, gpu_solver);
  EXPECT_GT(r.iterations, 0);
  EXPECT_EQ(static_cast<std::int64_t>(r.log.size()), r.iterations);
  if (!r.log.empty()) EXPECT_EQ(r.log.back().energy, r.energy);
  EXPECT_GE(r.timings.solve_ms, 0);
  EXPECT_NE(r.message.find("loop on the device"), std::string::npos) << r.message;
  return r;
}

/// The Middlebury problem `name` with its benchmark energy (BENCHMARKS.md section 1), or false when its
/// images are not in the shared data.
inline bool LoadMiddlebury(const std::string& name, Model* model) {
  const std::string left = SharedDataPath("middlebury/" + name + "-imL.png");
  const std::string right = SharedDataPath("middlebury/" + name + "-imR.png");
  if (left.empty() || right.empty()) return false;
  *model = BuildStereoModel(LoadImage(left, 3), LoadImage(right, 3), StereoParams::Preset(name));
  return true;
}

}  // namespace mrf::test
