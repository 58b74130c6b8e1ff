#pragma once
/// @file solve.h
/// @brief The single entry point: minimise a model's energy with any registered solver.

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Minimises the energy of `model`.
///
/// Validates options and model, picks a solver (see Registry::Choose), runs it, and scores the
/// labelling with the reference evaluator. Never throws: any failure is reported in the result
/// (ok = false, message). When the device was left on auto and a GPU solver fails at run time
/// (out of memory, failed launch), the CPU solver of the same algorithm runs instead and the
/// result records the fallback.
Result Solve(const Model& model, const SolveOptions& options = {});

/// Picks the algorithm `auto` means for this model: max-flow for submodular two-label models,
/// expansion for metric pairwise terms, otherwise belief propagation on 4-connected 2-D grids, and
/// elsewhere (8-connected and 3-D grids, edge lists) swap when its moves are graph cuts and its cycle
/// takes the label count (kMaxSwapPairs), else ICM.
Algorithm AutoAlgorithm(const Model& model);

}  // namespace mrf
