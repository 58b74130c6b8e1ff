#pragma once
// A local stand-in for the shared synthetic segmentation scene (BENCHMARKS.md section 2, the protocol
// of Hussein, Varshney and Davis), used by the binary suite until energies/segmentation.h provides
// the project's own generator; it should then be replaced by that one.
//
// The scene: foreground is a union of random ellipses; foreground and background colours are drawn
// from two different 3-component Gaussian mixtures; the 32x32 patch at the centre is forced
// foreground and the one at the top-left forced background; colour histograms of those two patches
// give the data costs (-log probability); data weight 1, pairwise weight 2.5, contrast-sensitive
// with sigma 50, 4-connected; capacities are the real costs x 100, rounded.

#include <cstdint>

#include "mrf/st_graph.h"

namespace mrf::bench {

/// Builds the s-t graph of a side x side scene (source side = foreground). Deterministic for a seed.
StGraph LocalSyntheticSegmentationGraph(int side, std::uint64_t seed = 1);

}  // namespace mrf::bench
