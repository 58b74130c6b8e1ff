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

/// Min-sum BP on the CPU with TBB (bpm, sync or tiled schedule). Throws mrf::Error for models it
/// cannot take (not a 4-connected grid, costs too large for 32-bit messages).
void SolveBpCpu(const Model& model, const SolveOptions& options, Result* result);

/// Min-sum BP on the GPU (tiled or sync schedule). Same options and, for the same schedule and
/// parameters, the same labelling as SolveBpCpu(). Tuning from the environment: MRF_BP_CUDA_LAUNCH
/// (auto, diagonal, graph, cooperative) and MRF_BP_LABELS_PER_LANE (2, 4, 8 or 16). Throws mrf::Error on
/// CUDA failures and for problems the GPU cannot take.
void SolveBpCuda(const Model& model, const SolveOptions& options, Result* result);

}  // namespace mrf
