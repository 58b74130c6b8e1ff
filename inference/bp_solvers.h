#pragma once
/// @file bp_solvers.h
/// @brief The model-level belief-propagation solvers behind the registry entries "tbb-bp" and "cuda-bp".
///
/// Both read SolveOptions::bp (schedule, tile_size, inner_iterations, coarse_to_fine), max_iterations,
/// num_threads (CPU), callback and time_limit_s; both return the labelling of least energy met after
/// any iteration, with one log record per iteration. See docs/bp.md for the schedules.

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Min-sum BP on the CPU with TBB (bpm, sync or tiled schedule), on the calling thread's TBB arena
/// (mrf::Solve's, sized by options.num_threads). Throws mrf::Error for models it cannot take (not a
/// 4-connected grid, costs too large for 32-bit messages).
void SolveBpCpu(const Model& model, const SolveOptions& options, Result* result);

/// Min-sum BP on the GPU (tiled or sync schedule; the automatic schedule is the tiled one). Same
/// options and, for the same schedule and parameters, the same labelling as SolveBpCpu(). Tuning from
/// the environment: MRF_BP_CUDA_LAUNCH (auto, diagonal, graph, cooperative, pipeline, pipeline-rows, split),
/// MRF_BP_CUDA_KERNEL (auto, fast, general), MRF_BP_LABELS_PER_LANE (2, 4, 8 or 16) and MRF_BP_CUDA_MAIL (0 or
/// 1: CudaTuning::mailbox) and MRF_BP_CUDA_SETUP (device or host: CudaTuning::host_setup). Throws
/// mrf::Error on CUDA failures and for problems the GPU cannot take, before allocating when the device
/// memory cannot hold the problem (the message names both sizes).
void SolveBpCuda(const Model& model, const SolveOptions& options, Result* result);

/// Why cuda-bp cannot run now ("" when it can): not compiled in, no device, or no device injected by
/// `MRF_INJECT_CUDA_FAULT=nodevice` (for tests of the automatic choice).
std::string CudaBpUnavailableReason();

}  // namespace mrf
