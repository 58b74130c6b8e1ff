#pragma once
// Random grid-shaped s-t graphs with capacity profiles that stress max-flow engines: uniform,
// segmentation-like (large terminals, small edges), all zero, capacities near the 32-bit limit,
// sparse, and one-sided terminals. Shared by the TBB and CUDA push-relabel tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mrf/st_graph.h"

namespace mrf::test {

/// Capacity profiles of GridFlowCase.
enum class CapacityProfile { kUniform, kSegmentation, kZero, kHuge, kSparse, kOneSided };
constexpr int kNumCapacityProfiles = 6;

inline const char* ToString(CapacityProfile p) {
  switch (p) {
    case CapacityProfile::kUniform: return "uniform";
    case CapacityProfile::kSegmentation: return "segmentation";
    case CapacityProfile::kZero: return "zero";
    case CapacityProfile::kHuge: return "huge";
    case CapacityProfile::kSparse: return "sparse";
    case CapacityProfile::kOneSided: return "one-sided";
  }
  return "?";
}

/// A new graph with the capacities of `graph` (no engine, no solved state): a fresh solve of it is a
/// reference for a graph that an engine re-solves.
inline StGraph CopyOfCapacities(const StGraph& graph) {
  StGraph copy(graph.topology());
  for (NodeId v = 0; v < graph.num_nodes(); ++v) copy.add_tweights(v, graph.source_cap(v), graph.sink_cap(v));
  graph.topology().ForEachEdge(
      [&](EdgeId e, NodeId, NodeId) { copy.add_to_edge_slot(e, graph.edge_cap(e), graph.edge_rev_cap(e)); });
  return copy;
}

/// Flow of a reference engine (boost-bk unless named) on a copy of the graph's capacities.
inline Energy ReferenceFlow(const StGraph& graph, const std::string& engine = "boost-bk") {
  const Result r = CopyOfCapacities(graph).maxflow(engine);
  if (!r.ok) throw Error(engine + " failed: " + r.message);
  return r.flow;
}

/// A grid graph of `topology` with random capacities of the given profile.
inline StGraph GridFlowCase(std::mt19937_64& rng, const Topology& topology, CapacityProfile profile) {
  StGraph g(topology);
  const NodeId n = topology.num_nodes();
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto cap = [&](std::int64_t lo, std::int64_t hi) { return static_cast<Cost>(uniform(lo, hi)); };
  // Segmentation-like: a random disc is "foreground" (source-heavy), the rest background, with noise.
  const double cx = uniform(0, std::max(0, topology.width() - 1)), cy = uniform(0, std::max(0, topology.height() - 1));
  const double radius = 1.0 + uniform(0, std::max(1, topology.width() / 2));
  for (NodeId v = 0; v < n; ++v) {
    const int x = v % topology.width(), y = (v / topology.width()) % topology.height();
    switch (profile) {
      case CapacityProfile::kUniform: g.add_tweights(v, uniform(0, 20), uniform(0, 20)); break;
      case CapacityProfile::kSegmentation: {
        const bool fg = (x - cx) * (x - cx) + (y - cy) * (y - cy) < radius * radius;
        const bool noisy = uniform(0, 9) == 0;
        const std::int64_t strong = uniform(200, 1000), weak = uniform(0, 200);
        if (fg != noisy) g.add_tweights(v, strong, weak);
        else g.add_tweights(v, weak, strong);
        break;
      }
      case CapacityProfile::kZero: break;
      case CapacityProfile::kHuge:
        g.add_tweights(v, uniform(0, std::int64_t{1} << 40), uniform(0, std::int64_t{1} << 40));
        break;
      case CapacityProfile::kSparse:
        if (uniform(0, 4) == 0) g.add_tweights(v, uniform(0, 1000), 0);
        else if (uniform(0, 4) == 0) g.add_tweights(v, 0, uniform(0, 1000));
        break;
      case CapacityProfile::kOneSided: g.add_tweights(v, uniform(0, 50), 0); break;
    }
  }
  topology.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
    switch (profile) {
      case CapacityProfile::kUniform: g.add_to_edge_slot(e, cap(0, 20), cap(0, 20)); break;
      case CapacityProfile::kSegmentation: {
        const Cost w = cap(0, 120);
        g.add_to_edge_slot(e, w, w);
        break;
      }
      case CapacityProfile::kZero: break;
      case CapacityProfile::kHuge:
        g.add_to_edge_slot(e, cap(kMaxCost - 1000, kMaxCost), cap(kMaxCost - 1000, kMaxCost));
        break;
      case CapacityProfile::kSparse:
        if (uniform(0, 3) == 0) g.add_to_edge_slot(e, cap(0, 1000), cap(0, 1000));
        break;
      case CapacityProfile::kOneSided: g.add_to_edge_slot(e, cap(0, 50), cap(0, 50)); break;
    }
  });
  return g;
}

/// Replaces the terminal weights of each node of `g` with probability `share` by weights within +-10%
/// of the old ones (a re-fitted colour model, a video's next frame); returns how many nodes it drew.
inline NodeId NudgeTerminalWeights(std::mt19937_64& rng, StGraph* g, double share) {
  NodeId changed = 0;
  auto nudge = [&](Energy w) { return w + w * static_cast<Energy>(rng() % 21 - 10) / 100; };
  for (NodeId v = 0; v < g->num_nodes(); ++v) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= share) continue;
    g->set_tweights(v, nudge(g->source_cap(v)), nudge(g->sink_cap(v)));
    ++changed;
  }
  return changed;
}

/// The dense-edit rule of the push-relabel engines, checked on `solver`: on each shape (segmentation
/// capacities), edits of each share of the nodes accumulate (NudgeTerminalWeights); an edit that
/// changed more than 1/`denominator` of a grid of 2^18 nodes or more must be solved afresh, any other
/// re-solved. Either way the flow must equal reference_flow(graph) and the cut a fresh solve's.
inline void CheckDenseEditRule(const std::string& solver, std::uint64_t seed, const std::vector<Topology>& shapes,
                               const std::vector<double>& shares, NodeId denominator,
                               const std::function<Energy(const StGraph&)>& reference_flow) {
  std::mt19937_64 rng(seed);
  for (const Topology& shape : shapes) {
    StGraph g = GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
    ASSERT_TRUE(g.maxflow(solver).ok);
    const bool large = shape.num_nodes() >= (1 << 18);
    for (const double share : shares) {
      const NodeId changed = NudgeTerminalWeights(rng, &g, share);
      const Result again = g.maxflow(solver);
      ASSERT_TRUE(again.ok) << again.message;
      const bool afresh = again.message.find("solved afresh, not re-solved") != std::string::npos;
      EXPECT_EQ(afresh, large && changed > shape.num_nodes() / denominator)
          << solver << ", " << shape.Describe() << ", " << changed << " changed: " << again.message;
      EXPECT_EQ(again.flow, reference_flow(g)) << solver << ", " << shape.Describe() << ", share " << share;
      const Result fresh = g.maxflow(solver, /*reuse=*/false);
      ASSERT_TRUE(fresh.ok) << fresh.message;
      EXPECT_EQ(again.labels, fresh.labels) << solver << ", " << shape.Describe() << ", share " << share;
    }
  }
}

/// Whether a push-relabel re-solve's message says that the nodes failing the certificate after its
/// push rounds were repaired (local_resolve = 3): `certified` after the repairs, or not.
inline bool RepairedFailingNodes(const std::string& message, bool certified) {
  return message.find(certified ? "nodes that failed the certificate (checked again" : "after their repairs") !=
         std::string::npos;
}

/// Grid shapes for the tests: odd sizes that are not multiples of any tile, strips, single nodes.
inline std::vector<Topology> GridFlowShapes(bool small) {
  std::vector<Topology> shapes;
  for (int c : {4, 8}) {
    shapes.push_back(Topology::Grid2D(1, 1, c));
    shapes.push_back(Topology::Grid2D(1, 37, c));
    shapes.push_back(Topology::Grid2D(53, 1, c));
    shapes.push_back(Topology::Grid2D(3, 5, c));
    shapes.push_back(Topology::Grid2D(33, 17, c));
    if (!small) {
      shapes.push_back(Topology::Grid2D(70, 45, c));
      shapes.push_back(Topology::Grid2D(31, 129, c));
    }
  }
  shapes.push_back(Topology::Grid3D(1, 1, 1));
  shapes.push_back(Topology::Grid3D(1, 1, 19));
  shapes.push_back(Topology::Grid3D(9, 5, 11));
  shapes.push_back(Topology::Grid3D(2, 3, 2));
  if (!small) shapes.push_back(Topology::Grid3D(17, 33, 10));
  return shapes;
}

}  // namespace mrf::test
