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
/// result records the fallback; so does an algorithm that auto chose and that cannot represent the
/// model's values (ModelRefused).
Result Solve(const Model& model, const SolveOptions& options = {});

/// Picks the algorithm `auto` means for this model: max-flow for submodular two-label models,
/// expansion for metric pairwise terms, otherwise belief propagation on 4-connected 2-D grids, and
/// elsewhere (8-connected and 3-D grids, edge lists) swap when its moves are graph cuts and its cycle
/// takes the label count (kMaxSwapPairs), else ICM. When the algorithm it picked throws ModelRefused
/// (belief propagation's 32-bit messages), Solve runs AutoAlternative's instead and records why.
Algorithm AutoAlgorithm(const Model& model);

/// The algorithm `auto` turns to when `refused` cannot represent the model's values (ModelRefused):
/// swap (when its moves are graph cuts) or ICM after belief propagation; none (Algorithm::kAuto) after
/// the others, whose refusals stand.
Algorithm AutoAlternative(const Model& model, Algorithm refused);

}  // namespace mrf
