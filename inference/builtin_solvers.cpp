// The list of every solver built into the library. Adding a backend means adding it here.
#include "backends/cpu/bk_maxflow.h"
#include "backends/cpu/boost_maxflow.h"
#include "inference/bp_solvers.h"
#include "mrf/device.h"
#include "mrf/registry.h"

namespace mrf {

void RegisterBuiltinSolvers(Registry& registry) {
  // ---- Binary max-flow engines (a two-label model is one exact cut) ----
  registry.Add({"cpu-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boykov-Kolmogorov max-flow: exact, compact, re-solves incrementally after capacity changes", 10,
                true, {}, [] { return MakeBkEngine(); }, {}});
  registry.Add({"boost-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boost Graph's Boykov-Kolmogorov max-flow (independent reference, slow to build)", 0, true, {},
                [] { return MakeBoostMaxFlowEngine(); }, {}});

  // ---- Belief propagation (4-connected grids) ----
  registry.Add({"tbb-bp", Algorithm::kBeliefPropagation, Device::kCpu,
                "Min-sum belief propagation with TBB: BP-M, synchronous or tiled schedule", 0, true, {}, {},
                &SolveBpCpu});
  registry.Add({"cuda-bp", Algorithm::kBeliefPropagation, Device::kCuda,
                "Min-sum tiled belief propagation on the GPU (shared-memory tiles, wavefront sweeps)", 0,
                CudaCompiledIn(), &CudaUnavailableReason, {}, &SolveBpCuda});
}

}  // namespace mrf
