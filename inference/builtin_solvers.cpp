// The list of every solver built into the library. Adding a backend means adding it here.
#include "backends/cpu/bk_maxflow.h"
#include "backends/cpu/boost_maxflow.h"
#include "backends/cpu/tbb_push_relabel.h"
#include "mrf/config.h"
#include "mrf/device.h"
#include "mrf/registry.h"
#if MRF_HAVE_CUDA
#include "backends/cuda/cuda_push_relabel.h"
#endif

namespace mrf {

void RegisterBuiltinSolvers(Registry& registry) {
  // ---- Binary max-flow engines (a two-label model is one exact cut) ----
  registry.Add({"cpu-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boykov-Kolmogorov max-flow: exact, compact, re-solves incrementally after capacity changes", 10,
                true, {}, [] { return MakeBkEngine(); }, {}});
  registry.Add({"boost-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boost Graph's Boykov-Kolmogorov max-flow (independent reference, slow to build)", 0, true, {},
                [] { return MakeBoostMaxFlowEngine(); }, {}});
  // Grid push-relabel on the CPU: the GPU engine's twin; below the CPU BK engine for `auto`.
  registry.Add({"tbb-pr", Algorithm::kMaxFlow, Device::kCpu,
                "tiled push-relabel max-flow on grids, TBB threads (the CPU twin of cuda-pr)", 5, true, {},
                [] { return std::unique_ptr<MaxFlowEngine>(MakeTbbPushRelabelEngine()); }, {}});
  // Grid push-relabel on the GPU; `auto` prefers it when a GPU is present.
  registry.Add({"cuda-pr", Algorithm::kMaxFlow, Device::kCuda,
                "tiled push-relabel max-flow on grids, CUDA (exact; 2-D 4/8-connected, 3-D 6-connected)", 20,
                CudaCompiledIn(), [] { return CudaUnavailableReason(); },
#if MRF_HAVE_CUDA
                [] { return std::unique_ptr<MaxFlowEngine>(MakeCudaPushRelabelEngine()); },
#else
                {},
#endif
                {}});
}

}  // namespace mrf
