#pragma once
/// @file alpha_beta_swap.h
/// @brief Alpha-beta swap (Boykov, Veksler and Zabih, PAMI 2001) above the binary-cut interface
/// ("cpu-swap" in the registry).

#include <cstdint>

#include "inference/move_graph.h"
#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Minimises the energy of `model` by alpha-beta swap and fills `out` like RunAlphaExpansion().
///
/// A swap move on labels a < b lets the nodes labelled a or b exchange those two labels; the best
/// such move is one graph cut when the smoothness term is a semimetric (V(a,a) + V(b,b) <=
/// V(a,b) + V(b,a)), which covers Potts, truncated linear and truncated quadratic terms. Tables that
/// break it are refused with a message naming the two labels, unless options.truncate_nonsubmodular
/// is set. A move is kept only if it lowers the true energy. A cycle visits all L(L-1)/2 pairs in the
/// reference implementation's order, a = 0, 1, ..., and for each a, b = L-1 down to a+1 (with it the
/// Middlebury energies of BENCHMARKS.md are reproduced exactly), or shuffled with options.seed; label
/// order frequent ranks labels, not pairs, and is refused with mrf::Error.
///
/// Speed: each move cuts a compact graph of just the nodes labelled a or b when the engine takes
/// general graphs (cpu-bk does); `tuning` can switch that off, or supply the engine.
void RunAlphaBetaSwap(const Model& model, const SolveOptions& options, Result* out,
                      const MoveTuning& tuning = MoveTuning());

/// Most label pairs a swap cycle takes: its bookkeeping holds a few words per pair, so larger label
/// counts are refused (a 2-node model with 100000 labels has 5 billion pairs).
constexpr std::int64_t kMaxSwapPairs = std::int64_t{1} << 24;
/// The label pairs, and so the moves, of one swap cycle: L(L-1)/2.
inline std::int64_t SwapPairs(Label num_labels) { return std::int64_t{num_labels} * (num_labels - 1) / 2; }
/// True when swap takes `num_labels` labels (SwapPairs() <= kMaxSwapPairs).
inline bool SwapTakesLabelCount(Label num_labels) { return SwapPairs(num_labels) <= kMaxSwapPairs; }

}  // namespace mrf
