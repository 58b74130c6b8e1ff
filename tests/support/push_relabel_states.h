#pragma once
// Comparing the raw states of two grid push-relabel engines (cuda-pr against its CPU twin, or one
// schedule against another) and checking them against the optimality certificate, shared by the
// TBB and CUDA push-relabel tests.

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "backends/common/push_relabel_local.h"
#include "backends/cpu/push_relabel_engine.h"
#include "mrf/st_graph.h"
#include "support/grid_flow_cases.h"

namespace mrf::test {

/// Expects the two states to be equal field by field; a failure names `what` and the field.
inline void ExpectSameState(const PushRelabelState& a, const PushRelabelState& b, const std::string& what) {
  EXPECT_EQ(a.x, b.x) << what << ": excess differs";
  EXPECT_EQ(a.h, b.h) << what << ": heights differ";
  EXPECT_EQ(a.r, b.r) << what << ": residuals differ";
}

/// The layout of a grid for checking the certificate on a downloaded state: one tile (CertifiedAt
/// reads coordinates only).
inline pr::TileLayout CertificateLayout(const Topology& t) {
  pr::TileLayout L;
  L.kind = static_cast<int>(t.kind());
  L.width = t.width();
  L.height = t.height();
  L.depth = t.depth();
  L.num_nodes = t.num_nodes();
  L.inf = static_cast<int>(L.num_nodes + 1);
  L.tile_x = L.tile_y = L.tile_z = 1 << 20;
  L.tiles_x = L.tiles_y = L.tiles_z = 1;
  return L;
}

template <int KIND>
std::int64_t CertificateViolationsT(const PushRelabelState& s, const pr::TileLayout& L) {
  std::int64_t bad = 0;
  for (std::int64_t v = 0; v < L.num_nodes; ++v)
    bad += pr::CertifiedAt<KIND>(s.x.data(), s.h.data(), s.r.data(), L, v) ? 0 : 1;
  return bad;
}

/// Nodes of the state that fail the certificate (pr::CertifiedNode), checked on every node.
inline std::int64_t CertificateViolations(const PushRelabelState& s, const pr::TileLayout& L) {
  if (L.kind == pr::kKindGrid4) return CertificateViolationsT<pr::kKindGrid4>(s, L);
  if (L.kind == pr::kKindGrid8) return CertificateViolationsT<pr::kKindGrid8>(s, L);
  return CertificateViolationsT<pr::kKindGrid3D6>(s, L);
}

/// After repairs of the nodes that failed it (local_resolve = 3), the engines check the certificate
/// again only on the tiles of the repairs and of the failing nodes, and their neighbours, and count
/// the sink residual again there only. Re-solves of terminal edits (a few nodes, 1%, 5%; weights of
/// another node or random ones), first on the smallest tiles (32x8, 8x8x8), so that most tiles lie
/// outside that region, then on the largest (32x32 on 4-connected grids, 32x16 on 8-connected ones,
/// 32x4x4): every flow must equal Boost's, and each re-solve certified after such repairs must leave
/// a state that passes the certificate on every node, with its finite nodes the cut returned.
inline void ExpectStatesCertifiedAfterRepairsPassEverywhere(
    const std::function<std::unique_ptr<PushRelabelEngine>(const PushRelabelTuning&)>& make_engine,
    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int repaired = 0, resolves = 0;
  for (const bool small_tiles : {true, false})
  for (const Topology& shape : {Topology::Grid2D(41, 33, 4), Topology::Grid2D(29, 26, 8), Topology::Grid3D(11, 9, 8),
                                Topology::Grid2D(1, 97, 4), Topology::Grid2D(131, 2, 8), Topology::Grid3D(70, 9, 9)})
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kSparse}) {
      PushRelabelTuning tuning;
      tuning.local_resolve = 3;
      tuning.tile_y = small_tiles ? 8 : static_cast<int>(shape.kind()) == pr::kKindGrid4 ? 32 : 16;
      if (!small_tiles) {
        tuning.tile3d_x = 32;
        tuning.tile3d_y = tuning.tile3d_z = 4;
      }
      StGraph g = GridFlowCase(rng, shape, p);
      auto engine = make_engine(tuning);
      Result result;
      engine->Solve(g, &result);
      g.MarkSolved();
      const NodeId n = shape.num_nodes();
      auto pick = [&](std::int64_t k) { return std::uniform_int_distribution<std::int64_t>(0, k - 1)(rng); };
      for (int step = 0; step < 12; ++step) {
        const std::string what = shape.Describe() + ", " + ToString(p) + ", step " + std::to_string(step);
        const std::int64_t count = step % 3 == 0 ? 1 + pick(3) : step % 3 == 1 ? 1 + n / 100 : 1 + n / 20;
        for (std::int64_t i = 0; i < count; ++i) {
          const NodeId v = static_cast<NodeId>(pick(n)), donor = static_cast<NodeId>(pick(n));
          if (step < 6) g.set_tweights(v, g.source_cap(donor), g.sink_cap(donor));
          else g.set_tweights(v, pick(1000), pick(1000));
        }
        Result again;
        engine->Resolve(g, &again);
        g.MarkSolved();
        ++resolves;
        ASSERT_EQ(again.flow, ReferenceFlow(g)) << what << ": " << again.message;
        if (!RepairedFailingNodes(again.message, true)) continue;
        ++repaired;
        const PushRelabelState state = engine->DownloadState();
        const pr::TileLayout L = CertificateLayout(shape);
        EXPECT_EQ(CertificateViolations(state, L), 0) << what << ": " << again.message;
        for (NodeId v = 0; v < n; ++v)
          ASSERT_EQ(again.labels[v], state.h[v] < L.inf ? 1 : 0) << what << ": the finite nodes are the sink side";
      }
    }
  std::printf("re-solves certified after repairs of the nodes failing the certificate: %d of %d\n", repaired,
              resolves);
  EXPECT_GT(repaired, 10) << "too few re-solves went through the repairs";
}

}  // namespace mrf::test
