#pragma once
/// @file icm.h
/// @brief Iterated conditional modes (Besag 1986): the simplest local search ("cpu-icm").

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Minimises the energy of `model` by ICM and fills `out` (labels, iterations, one log record per
/// sweep, and why it stopped). A sweep visits the nodes in index order and gives each the lowest
/// label that minimises its unary cost plus the pairwise costs to its neighbours' current labels,
/// so the energy never rises. Without options.initial_labels every node starts at its cheapest data
/// label (ties: the lowest), as the reference implementation of BENCHMARKS.md does; with those two
/// rules this reproduces its ICM energies exactly. Works with any pairwise term.
///
/// Options used: max_iterations (sweeps), initial_labels, time_limit_s, callback (after every sweep).
/// Throws mrf::Error on bad input.
void RunIcm(const Model& model, const SolveOptions& options, Result* out);

}  // namespace mrf
