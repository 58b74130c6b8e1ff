// The list of every solver built into the library. Adding a backend means adding it here.
#include "backends/cpu/bk_maxflow.h"
#include "backends/cpu/boost_maxflow.h"
#include "inference/alpha_beta_swap.h"
#include "inference/alpha_expansion.h"
#include "inference/bp_solvers.h"
#include "inference/cuda_expansion.h"
#include "inference/cuda_swap.h"
#include "inference/icm.h"
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

  // ---- Multilabel move-making and local search (moves cut by the best available max-flow engine) ----
  registry.Add({"cpu-expansion", Algorithm::kExpansion, Device::kCpu,
                "Alpha-expansion on the CPU; each move is one cut by a max-flow engine", 0, true, {}, {},
                [](const Model& m, const SolveOptions& o, Result* r) { RunAlphaExpansion(m, o, r); }});
  // The whole expansion loop on the GPU (grids); `auto` prefers it when a GPU is present and falls
  // back to cpu-expansion when it fails (an edge list, too little GPU memory).
  registry.Add({"cuda-expansion", Algorithm::kExpansion, Device::kCuda,
                "Alpha-expansion on the GPU, move loop on the device: graphs built, cut by push-relabel and applied "
                "there, kept residual graphs re-solved (grids)",
                0, CudaCompiledIn(), [] { return CudaUnavailableReason(); }, {},
                [](const Model& m, const SolveOptions& o, Result* r) { RunCudaExpansion(m, o, r); }});
  registry.Add({"cpu-swap", Algorithm::kSwap, Device::kCpu,
                "Alpha-beta swap on the CPU; each move is one cut by a max-flow engine", 0, true, {}, {},
                [](const Model& m, const SolveOptions& o, Result* r) { RunAlphaBetaSwap(m, o, r); }});
  // The whole swap loop on the GPU (grids), on cuda-expansion's machinery; `auto` prefers it when a
  // GPU is present and falls back to cpu-swap when it fails.
  registry.Add({"cuda-swap", Algorithm::kSwap, Device::kCuda,
                "Alpha-beta swap on the GPU, move loop on the device: graphs built, cut by push-relabel and applied "
                "there (grids)",
                0, CudaCompiledIn(), [] { return CudaUnavailableReason(); }, {},
                [](const Model& m, const SolveOptions& o, Result* r) { RunCudaSwap(m, o, r); }});
  registry.Add({"cpu-icm", Algorithm::kIcm, Device::kCpu,
                "Iterated conditional modes on the CPU (fast, weak local minima)", 0, true, {}, {},
                [](const Model& m, const SolveOptions& o, Result* r) { RunIcm(m, o, r); }});

  // ---- Belief propagation (4-connected grids) ----
  registry.Add({"tbb-bp", Algorithm::kBeliefPropagation, Device::kCpu,
                "Min-sum belief propagation with TBB: BP-M, synchronous or tiled schedule", 0, true, {}, {},
                &SolveBpCpu});
  registry.Add({"cuda-bp", Algorithm::kBeliefPropagation, Device::kCuda,
                "Min-sum tiled belief propagation on the GPU (shared-memory tiles, wavefront sweeps)", 0,
                CudaCompiledIn(), &CudaBpUnavailableReason, {}, &SolveBpCuda});
}

}  // namespace mrf
