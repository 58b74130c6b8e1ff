#pragma once
/// @file cuda_swap.h
/// @brief `cuda-swap`: alpha-beta swap with the whole move loop on an NVIDIA GPU (no CUDA headers here).
///
/// The same machinery as cuda-expansion (inference/cuda_expansion.h), making swap moves: the model is
/// uploaded once; each move's graph is built on the device from the device-resident labelling, cut by
/// the persistent push-relabel kernel, its exact energy change summed there, and the labelling updated
/// there when the energy drops; a cycle over all label pairs runs as one CUDA graph, so the host waits
/// once per cycle.
///
/// A swap move on the pair (a, b), a < b, lets the nodes labelled a or b exchange those two labels;
/// the other nodes keep theirs and have no capacity in the move's graph (their edges to the pair's
/// nodes become terminal terms). Pairs are visited in cpu-swap's order (a = 0, 1, ..., and for each a,
/// b = L-1 down to a+1), or shuffled with options.seed and label_order random (label order frequent ranks
/// labels, not pairs, and is refused with mrf::Error). A pair is skipped when
/// no node has either label, or when nothing changed since its last exact move; the run stops when a
/// full cycle changes nothing. The moves are cpu-swap's (semimetric smoothness needed; other tables
/// are refused unless options.truncate_nonsubmodular is set, which truncates the offending terms as
/// cpu-swap does), and the cut is the one cpu-swap's cpu-bk finds (a is put on the sink side here, so
/// the GPU's sink-minimal cut is cpu-bk's source-minimal one): with the same order the two solvers
/// reach the same labels. Every move is solved afresh (no residual graphs are kept between cycles:
/// there are L(L-1)/2 pairs, and a pair's graph holds only its two labels' nodes).
///
/// Grids only (2-D 4- and 8-connected, 3-D 6-connected). Tuning: CudaExpansionTuning (environment
/// MRF_PR_TUNING, MRF_CUDA_EXPANSION_TUNING); reuse_flow and update_fraction do not apply.

#include "inference/cuda_expansion.h"

namespace mrf {

/// Checks that cuda-swap can take the model and options, independently of any GPU; throws
/// mrf::Error with a one-line message otherwise (not a grid, a smoothness term that is not a
/// semimetric without truncate_nonsubmodular, costs too large for the engine's 32-bit capacities,
/// invalid options).
void CheckCudaSwapInput(const Model& model, const SolveOptions& options);

/// Estimates the GPU memory of a cuda-swap run (grids only; 0 for other shapes). Swap keeps no
/// residual graphs: base_bytes is what it needs.
CudaExpansionMemory EstimateCudaSwapMemory(const Model& model, const CudaExpansionTuning& tuning);

/// Runs alpha-beta swap on the GPU and fills `out` like RunAlphaBetaSwap does (labels, iterations,
/// one log record per cycle with its energy, message, timings). Options used: max_iterations,
/// label_order and seed, initial_labels, time_limit_s and callback (both after every cycle),
/// truncate_nonsubmodular. Throws mrf::Error on bad input, CUDA failures, or when the model does not
/// fit the GPU's memory. `stats`, when given, receives the run's counts and time split.
void RunCudaSwap(const Model& model, const SolveOptions& options, Result* out,
                 const CudaExpansionTuning& tuning = CudaExpansionTuning::FromEnvironment(),
                 CudaExpansionStats* stats = nullptr);

}  // namespace mrf
