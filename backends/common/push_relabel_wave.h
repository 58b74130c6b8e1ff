#pragma once
/// @file push_relabel_wave.h
/// @brief Wave relaxation of a 4-connected 2-D tile: the per-lane and per-word rules of cuda-pr's
/// scan-based BFS and kill loops (backends/cuda/push_relabel_tiles.cuh), written once so that a
/// host emulation of the warps (tests/backends/test_push_relabel_wave.cpp) runs the same rules; and
/// the rules of wave pushes (PushRelabelTuning::wave_push), which tbb-pr runs lane after lane.
///
/// The hop-by-hop loops (BfsStep, KillStep to a fixpoint) need one iteration per node of the
/// longest path inside the tile. A wave iteration relaxes whole rows, then whole columns, so the
/// iterations count the turns of a path instead. Both reach the same local fixpoint, given the
/// halo heights read once at the start of the visit; heights are in 1..inf as everywhere.
///
/// Lanes are the nodes of one row (lane = x) or, in the transposed layout, of a few columns
/// (lane = column group * TY + y). A *link* is a residual edge to a neighbour inside the tile
/// along which a node may take a value; a *segment* is a run of lanes joined by links in one
/// direction.

#include <cstdint>

#include "backends/common/push_relabel_steps.h"

namespace mrf::pr {

/// Direction bits of a 4-connected node (kKindGrid4: d0 = +x, d1 = +y, d2 = -x, d3 = -y).
enum WaveDir : std::uint8_t { kTakeRight = 1, kTakeBelow = 2, kTakeLeft = 4, kTakeAbove = 8 };

/// The directions of a node of a TX x TY tile whose neighbour lies inside the tile (the other
/// directions point into the halo).
MRF_HD std::uint8_t InsideDirs4(int lx, int ly, int tx, int ty) {
  return static_cast<std::uint8_t>((lx + 1 < tx ? kTakeRight : 0) | (ly + 1 < ty ? kTakeBelow : 0) |
                                   (lx > 0 ? kTakeLeft : 0) | (ly > 0 ? kTakeAbove : 0));
}

/// Index of the highest set bit of w (w != 0).
MRF_HD int HighestBit(std::uint32_t w) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(static_cast<int>(w));
#else
  return 31 - __builtin_clz(w);
#endif
}

/// Index of the lowest set bit of w (w != 0).
MRF_HD int LowestBit(std::uint32_t w) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(w)) - 1;
#else
  return __builtin_ctz(w);
#endif
}

/// First lane of `lane`'s segment when values flow towards higher lanes: the highest lane <= `lane`
/// whose bit in `takes` (takes from the lane below it) is clear. Bit 0 of `takes` must be clear.
MRF_HD int SegmentFirst(std::uint32_t takes, int lane) { return HighestBit(~takes & (0xffffffffu >> (31 - lane))); }

/// Last lane of `lane`'s segment when values flow towards lower lanes: the lowest lane >= `lane`
/// whose bit in `takes` (takes from the lane above it) is clear. Bit 31 of `takes` must be clear.
MRF_HD int SegmentLast(std::uint32_t takes, int lane) { return LowestBit(~takes & (0xffffffffu << lane)); }

// ---- BFS ------------------------------------------------------------------------------------------
//
// Along a segment, h(v) = min over u of h(u) + |v - u|. With b = h - lane (values from lower lanes)
// that is lane + a min-scan of b; with b = h + lane (from higher lanes), a min-scan of b minus lane.
// A node's own value is part of its scan, so results never exceed inf, and BfsStep's clamp
// (inf - 1 + 1 = inf) is the plain sum here: no clamp is needed.

/// The links of a node in the wave BFS: its residual edges to tile neighbours. Nodes with h <= 1
/// keep their height (BfsStep), so they take nothing and no value passes through them.
MRF_HD std::uint8_t BfsWaveLinks(int h, std::uint8_t mask, std::uint8_t inside) {
  return h > 1 ? static_cast<std::uint8_t>(mask & inside) : std::uint8_t{0};
}

/// The Hillis-Steele steps of a lane's two scans whose source lane lies in its segments: bit j
/// (j < 5) when lane - 2^j >= first (values from lower lanes), bit 5 + j when lane + 2^j <= last
/// (values from higher lanes). One word for what the scans test at every step.
MRF_HD std::uint32_t ScanSteps(int lane, int first, int last) {
  std::uint32_t steps = 0;
MRF_UNROLL
  for (int j = 0; j < 5; ++j) {
    steps |= lane - (1 << j) >= first ? 1u << j : 0u;
    steps |= lane + (1 << j) <= last ? 1u << (5 + j) : 0u;
  }
  return steps;
}

/// One Hillis-Steele step of the segmented min-scan: `other` is the value 2^j lanes away, which
/// counts when that lane lies in this lane's segment (`in_segment`: the step's bit of ScanSteps).
MRF_HD int ScanTake(int b, int other, bool in_segment) { return in_segment && other < b ? other : b; }

// ---- Kill -----------------------------------------------------------------------------------------
//
// KillStep's fixpoint, hop by hop: nodes with x < 0 drop to 1 and live; every other node keeps its
// height only while a residual neighbour holds exactly one less. Heights strictly fall along such
// supports, so there are no cycles and the surviving set is also the least one grown from the
// nodes that live for sure: those with x < 0 and those supported by the halo (constant). One
// detail of the hop-by-hop loop is kept: its first hop sees the neighbours' heights before they
// drop to 1, and a node that fails that hop is dead for good.

/// What a node brings to the wave kill: whether it lives for sure, and its links (directions of
/// tile neighbours whose survival keeps it alive).
struct KillSeed {
  bool alive = false;
  std::uint8_t links = 0;
};

/// The seed of a node: nh are the neighbours' heights as read at the start (halo included),
/// `base` the directions of tile neighbours with x < 0 (they count as height 1 after the first
/// hop), `inside` the directions of tile neighbours. Out-of-grid nodes (x = 0, h = inf) get none.
template <int D>
MRF_HD KillSeed KillWaveSeed(std::int64_t x, int h, int inf, std::uint8_t mask, const int (&nh)[D], std::uint8_t base,
                             std::uint8_t inside) {
  KillSeed seed;
  if (x < 0) {
    seed.alive = true;
    return seed;
  }
  if (h >= inf || h <= 1) return seed;
  bool first_hop = false;  // KillStep on the heights as read
MRF_UNROLL
  for (int d = 0; d < D; ++d) first_hop |= (mask & (1u << d)) && nh[d] == h - 1;
  if (!first_hop) return seed;
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    const int later = (base & (1u << d)) ? 1 : nh[d];  // the neighbour's height from the second hop on
    if (!(mask & (1u << d)) || later != h - 1) continue;
    if (inside & (1u << d)) seed.links |= static_cast<std::uint8_t>(1u << d);
    else seed.alive = true;  // the halo does not change during the visit
  }
  return seed;
}

/// The height a node ends with (KillStep's fixpoint): 1 with x < 0, its height if alive, else inf.
MRF_HD int KillWaveHeight(std::int64_t x, int h, int inf, bool alive) { return x < 0 ? 1 : alive ? h : inf; }

/// One log-step doubling (Kogge-Stone) step on bit words: `alive` gains the bits of `alive_k` (the
/// word k positions away, shifted into place) where `takes` (this position takes over the whole
/// k-run) is set; `takes` then covers runs twice as long.
MRF_HD void SpreadStep(std::uint32_t& alive, std::uint32_t& takes, std::uint32_t alive_k, std::uint32_t takes_k) {
  alive |= takes & alive_k;
  takes &= takes_k;
}

/// Spreads alive bits towards higher bits through `takes` (bit i: node i takes from node i - 1).
MRF_HD std::uint32_t SpreadUp(std::uint32_t alive, std::uint32_t takes) {
MRF_UNROLL
  for (int k = 1; k < 32; k *= 2) SpreadStep(alive, takes, alive << k, takes << k);
  return alive;
}

/// Spreads alive bits towards lower bits through `takes` (bit i: node i takes from node i + 1).
MRF_HD std::uint32_t SpreadDown(std::uint32_t alive, std::uint32_t takes) {
MRF_UNROLL
  for (int k = 1; k < 32; k *= 2) SpreadStep(alive, takes, alive >> k, takes >> k);
  return alive;
}

// ---- Push -----------------------------------------------------------------------------------------
//
// A wave push carries excess along a row (or column) of a tile in one pass: heights are fixed while
// it runs, so the admissible edges in one direction (residual > 0, neighbour exactly one lower) form
// chains, and the flow f_i that node i sends to node i + 1 obeys f_i = min(c_i, max(0, x_i + f_{i-1}))
// (WaveCarry), with c_i the link's capacity (0 where the edge is not admissible) and x_i the netted
// excess: a node passes on what arrives plus its own excess, and a node with residual capacity to
// the sink (x < 0) keeps what it can absorb. Each step is a push of push-relabel (admissible edge,
// amount at most the excess and the residual), so conservation and capacities hold exactly. tbb-pr
// runs the recurrence node after node; a warp relaxes it hop by hop (every lane recomputes its flow
// from its predecessor's until none changes: flows only rise, and after t steps the first t lanes of
// a line are exact), which reaches the same integers in as many steps as the flow travels.

/// Capacity of a node's link along one direction in a wave push: its residual to that neighbour
/// when the neighbour lies inside the tile (`inside`) and the edge is admissible, else 0.
MRF_HD std::uint32_t WaveLinkCap(int h, int inf, std::uint32_t r, int nh, bool inside) {
  return inside && h < inf && r > 0 && nh == h - 1 ? r : 0u;
}

/// The flow a node passes on: min(cap, max(0, x + in)) for `in` arriving from the previous node.
MRF_HD std::uint32_t WaveCarry(std::int64_t x, std::uint32_t cap, std::uint32_t in) {
  const std::int64_t have = x + static_cast<std::int64_t>(in);
  return have <= 0 ? 0u : have < static_cast<std::int64_t>(cap) ? static_cast<std::uint32_t>(have) : cap;
}

/// The node's side of a wave step: `in` arrived from the previous node (the edge back to it gains
/// residual), `out` left to the next one.
MRF_HD void WaveApply(std::int64_t& x, std::uint32_t& r_out, std::uint32_t& r_back, std::uint32_t in,
                      std::uint32_t out) {
  x += static_cast<std::int64_t>(in) - static_cast<std::int64_t>(out);
  r_out -= out;
  r_back += in;
}

}  // namespace mrf::pr
