// Diagnostic, not built by CMake: runs 1, 2 and 4 independent cuda-expansion solves of one Middlebury
// problem at once (a host thread and a CUDA stream each) and prints the wall time and each run's device
// max-flow and cycle times, to see whether moves of different labels could share the GPU.
// Build (after a CUDA build in build-gpu):
//   g++ -O2 -std=c++17 -I. -Ibuild-gpu tools/concurrent_runs.cpp -o build-gpu/bin/concurrent_runs \
//     -Lbuild-gpu -lmrf -ltbb -pthread -Wl,-rpath,'$ORIGIN/../lib'
// Run: concurrent_runs DATA_DIR/middlebury tsukuba|venus
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include "energies/stereo.h"
#include "inference/cuda_expansion.h"
#include "mrf/io/image.h"
#include "mrf/solve.h"
using namespace mrf;
int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: concurrent_runs MIDDLEBURY_DIR tsukuba|venus\n");
    return 2;
  }
  const std::string dir = argv[1], name = argv[2];
  const Model m = BuildStereoModel(LoadImage(dir + "/" + name + "-imL.png", 3), LoadImage(dir + "/" + name + "-imR.png", 3),
                                   StereoParams::Preset(name));
  SolveOptions o;
  o.solver = "cuda-expansion";
  o.truncate_nonsubmodular = name == "venus";
  for (int threads : {1, 2, 4, 1, 2, 4}) {
    std::vector<Result> results(threads);
    std::vector<CudaExpansionStats> stats(threads);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { RunCudaExpansion(m, o, &results[t], CudaExpansionTuning::FromEnvironment(), &stats[t]); });
    for (auto& th : pool) th.join();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s, %d concurrent runs: %.2f ms wall;", name.c_str(), threads, ms);
    for (int t = 0; t < threads; ++t)
      std::printf(" [%lld, max-flow %.2f ms, cycles %.2f ms]", (long long)EvaluateEnergy(m, results[t].labels).total,
                  stats[t].solve_ms, stats[t].cycles_ms);
    std::printf("\n");
  }
}
