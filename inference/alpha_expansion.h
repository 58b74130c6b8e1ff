#pragma once
/// @file alpha_expansion.h
/// @brief Alpha-expansion (Boykov, Veksler and Zabih, PAMI 2001) above the binary-cut interface:
/// each move is one minimum cut of a Kolmogorov-Zabih graph, computed by any registered max-flow
/// engine ("cpu-expansion" in the registry).

#include "inference/move_graph.h"
#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Minimises the energy of `model` by alpha-expansion and fills `out` (labels, iterations, one log
/// record per cycle, and a message saying why it stopped: converged, iteration limit, callback or time
/// limit, plus the engine used and, when truncating, the number of truncated terms).
///
/// An expansion move on label a lets every node either keep its label or take a; the best such move
/// is one graph cut when the smoothness term is a metric (Potts, truncated linear, metric tables),
/// and then each move is exact. Otherwise (truncated quadratic with truncation > 2, tables that break
/// the triangle inequality) the run is refused with a message naming the labels that break it, unless
/// options.truncate_nonsubmodular is set: then offending move terms are truncated (Rother et al.
/// 2005) and counted. Either way a move is kept only if it lowers the true energy, measured exactly.
///
/// Options used: max_iterations (cycles over all labels), label_order and seed, initial_labels,
/// time_limit_s, callback (after every cycle), truncate_nonsubmodular, maxflow_backend ("auto" = the
/// best available CPU engine for the model's shape). Throws mrf::Error on bad input.
///
/// Speed: every label keeps its move graph and residual flow between cycles when the engine can
/// re-solve (cpu-bk) and the memory allows, and only the terms around nodes that changed since
/// are rebuilt; moves that cannot find anything new (nothing changed since they last ran) are
/// skipped. `tuning` switches these off for comparisons.
void RunAlphaExpansion(const Model& model, const SolveOptions& options, Result* out,
                       const MoveTuning& tuning = MoveTuning());

}  // namespace mrf
