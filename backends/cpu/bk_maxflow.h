#pragma once
/// @file bk_maxflow.h
/// @brief The exact CPU max-flow engine "cpu-bk": the Boykov-Kolmogorov augmenting-path algorithm
/// (search trees grown from both terminals, reused after every augmentation by adopting orphans),
/// with incremental re-solving after capacity changes (dynamic graph cuts, Kohli and Torr).
///
/// Written from the papers: Y. Boykov and V. Kolmogorov, "An experimental comparison of min-cut/max-flow
/// algorithms for energy minimization in vision", PAMI 2004; P. Kohli and P. Torr, "Dynamic graph
/// cuts for efficient inference in Markov random fields", PAMI 2007.
///
/// Layout: nodes and arcs are addressed by 32-bit indices; the arcs of a node are contiguous
/// (compressed rows, built by counting), each arc knows its reverse ("sister"). Arc residuals are
/// unsigned 32-bit: an arc and its sister always hold cap + rev_cap together, which fits even when
/// both capacities are INT32_MAX. Terminal residuals and flows are 64-bit.

#include <cstdint>
#include <memory>

#include "mrf/st_graph.h"

namespace mrf {

/// Creates a Boykov-Kolmogorov engine. Cheap: nothing is allocated until Solve().
/// Resolve() keeps the residual graph and both search trees of the previous solve, applies the
/// capacity changes listed in StGraph::changes() and continues from there.
std::unique_ptr<MaxFlowEngine> MakeBkEngine();

namespace detail {
/// For tests only: an engine whose adoption timestamp wraps around after `timestamp_limit`
/// rounds instead of after 2^32 - 2, so that the wrap-around path can be exercised.
std::unique_ptr<MaxFlowEngine> MakeBkEngineWithTimestampLimit(std::uint32_t timestamp_limit);
}  // namespace detail

}  // namespace mrf
