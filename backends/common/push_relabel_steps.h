#pragma once
/// @file push_relabel_steps.h
/// @brief The per-node steps of grid push-relabel, written once for the CPU (TBB) and the GPU (CUDA).
///
/// Both engines (`tbb-pr`, `cuda-pr`) run the same tiled algorithm; only the loops around these
/// functions differ (a TBB task per tile and a loop per phase, or a CUDA block per tile and a thread
/// per node). Because every phase reads only values no other node writes in that phase, the two
/// engines produce bit-identical states, which the GPU tests check.
///
/// State per node v (direction-major arrays, see Topology):
/// - `x[v]` (int64): excess minus residual capacity to the sink. The two terminal edges are netted
///   (min(s, t) flows straight through), so x > 0 is excess and x < 0 is residual capacity to the
///   sink; flow reaching a node with x < 0 goes on to the sink at once.
/// - `h[v]` (int32): height (distance label) in 1..inf-1, or `inf` (cannot reach the sink).
/// - `r[d * N + v]` (uint32): residual capacity from v to its neighbour in direction d. A residual
///   is at most cap + rev_cap < 2^32, so 32 unsigned bits always suffice.
///
/// Directions: 0..F-1 are the topology's forward directions (so `r[d * N + v]` for d < F starts as
/// the edge slot's capacity), F..2F-1 their opposites; Opposite(d) = (d + F) mod 2F.

#include <cstdint>

#if defined(__CUDACC__)
#define MRF_HD __host__ __device__ __forceinline__
#define MRF_UNROLL _Pragma("unroll")
#else
#define MRF_HD inline
#define MRF_UNROLL
#endif

namespace mrf::pr {

/// Grid kinds, numbered like mrf::TopologyKind.
enum GridKind : int { kKindGrid4 = 0, kKindGrid8 = 1, kKindGrid3D6 = 2 };

/// Largest number of neighbour directions (8-connected grids).
constexpr int kMaxDirs = 8;

/// Neighbour directions of a kind (both ways).
MRF_HD constexpr int NumDirs(int kind) { return kind == kKindGrid4 ? 4 : kind == kKindGrid8 ? 8 : 6; }
/// Forward directions of a kind (the topology's edge-slot directions).
MRF_HD constexpr int NumForward(int kind) { return NumDirs(kind) / 2; }
/// The direction pointing back.
MRF_HD constexpr int Opposite(int kind, int d) {
  return d < NumForward(kind) ? d + NumForward(kind) : d - NumForward(kind);
}

/// Offset of direction d along x, y, z. Forward directions match Topology::GridOffset.
MRF_HD constexpr int DirX(int kind, int d) {
  return kind == kKindGrid3D6 ? (d == 0 ? 1 : d == 3 ? -1 : 0)
       : kind == kKindGrid4   ? (d == 0 ? 1 : d == 2 ? -1 : 0)
                              : (d == 0 || d == 2 || d == 7 ? 1 : d == 3 || d == 4 || d == 6 ? -1 : 0);
}
/// Offset of direction d along y.
MRF_HD constexpr int DirY(int kind, int d) {
  return kind == kKindGrid3D6 ? (d == 1 ? 1 : d == 4 ? -1 : 0)
       : kind == kKindGrid4   ? (d == 1 ? 1 : d == 3 ? -1 : 0)
                              : (d == 1 || d == 2 || d == 3 ? 1 : d == 5 || d == 6 || d == 7 ? -1 : 0);
}
/// Offset of direction d along z.
MRF_HD constexpr int DirZ(int kind, int d) {
  return kind == kKindGrid3D6 ? (d == 2 ? 1 : d == 5 ? -1 : 0) : 0;
}

/// Tiles of the grid: the unit of work (a CUDA block, a TBB task) and of skipping converged regions.
struct TileLayout {
  int kind = kKindGrid4;
  int width = 0, height = 0, depth = 0;  ///< Grid size.
  int tile_x = 32, tile_y = 16, tile_z = 1;  ///< Tile size.
  int tiles_x = 0, tiles_y = 0, tiles_z = 0;  ///< Tile counts.
  std::int64_t num_nodes = 0;
  int inf = 0;  ///< Height meaning "cannot reach the sink": num_nodes + 1.

  /// Number of tiles.
  MRF_HD int num_tiles() const { return tiles_x * tiles_y * tiles_z; }
  /// Tiles are coloured so that no two tiles of one colour touch (8-connected grids need 4).
  MRF_HD int num_colours() const { return kind == kKindGrid8 ? 4 : 2; }
  /// Colour of tile (tx, ty, tz).
  MRF_HD int Colour(int tx, int ty, int tz) const {
    return kind == kKindGrid8 ? (tx & 1) + 2 * (ty & 1) : (tx + ty + tz) & 1;
  }
  /// Tile index of (tx, ty, tz).
  MRF_HD int TileIndex(int tx, int ty, int tz) const { return tx + tiles_x * (ty + tiles_y * tz); }
  /// Node index of grid coordinates.
  MRF_HD std::int64_t Node(int x, int y, int z) const {
    return x + static_cast<std::int64_t>(width) * (y + static_cast<std::int64_t>(height) * z);
  }
  /// Whether grid coordinates lie inside the grid.
  MRF_HD bool InGrid(int x, int y, int z) const {
    return x >= 0 && y >= 0 && z >= 0 && x < width && y < height && z < depth;
  }
  /// Tile index of node v.
  MRF_HD int TileOfNode(std::int64_t v) const {
    const int x = static_cast<int>(v % width);
    const std::int64_t rest = v / width;
    const int y = static_cast<int>(rest % height), z = static_cast<int>(rest / height);
    return TileIndex(x / tile_x, y / tile_y, z / tile_z);
  }
  /// Blocks of a colour's launch along x: every other tile.
  MRF_HD int ColourGridX() const { return (tiles_x + 1) / 2; }
  /// Blocks of a colour's launch along y (every other tile on 8-connected grids).
  MRF_HD int ColourGridY() const { return kind == kKindGrid8 ? (tiles_y + 1) / 2 : tiles_y; }
  /// Blocks of a colour's launch along z.
  MRF_HD int ColourGridZ() const { return tiles_z; }
  /// The tile of colour `colour` at launch position (bx, by, bz); false past the grid's edge.
  MRF_HD bool ColourTile(int colour, int bx, int by, int bz, int* tx, int* ty, int* tz) const {
    if (kind == kKindGrid8) {
      *tx = 2 * bx + (colour & 1);
      *ty = 2 * by + (colour >> 1);
    } else {
      *tx = 2 * bx + ((colour + by + bz) & 1);
      *ty = by;
    }
    *tz = bz;
    return *tx < tiles_x && *ty < tiles_y && *tz < tiles_z;
  }
};

// ---- Per-node steps ------------------------------------------------------------------------------

/// Push: an active node (x > 0, h < inf) sends excess along each admissible edge (residual > 0,
/// neighbour one lower), in direction order. out[d] receives what went along d (0 if nothing).
template <int D>
MRF_HD void PushStep(std::int64_t& x, int h, int inf, std::uint32_t (&r)[D], const int (&nh)[D],
                     std::uint32_t (&out)[D]) {
MRF_UNROLL
  for (int d = 0; d < D; ++d) out[d] = 0;
  if (x <= 0 || h >= inf) return;
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    if (x > 0 && r[d] > 0 && nh[d] == h - 1) {
      const std::uint32_t f = x < static_cast<std::int64_t>(r[d]) ? static_cast<std::uint32_t>(x) : r[d];
      out[d] = f;
      r[d] -= f;
      x -= f;
    }
  }
}

/// Pull: flow `in` arrived along direction d (from the neighbour there): more excess, and the
/// edge back to that neighbour gains residual capacity.
MRF_HD void PullStep(std::int64_t& x, std::uint32_t& r_d, std::uint32_t in) {
  x += in;
  r_d += in;
}

/// Relabel: an active node with no admissible edge rises to one above its lowest residual
/// neighbour (or to inf when none can reach the sink). Returns the new height.
template <int D>
MRF_HD int RelabelStep(std::int64_t x, int h, int inf, const std::uint32_t (&r)[D], const int (&nh)[D]) {
  if (x <= 0 || h >= inf) return h;
  int lowest = inf;
  bool admissible = false;
MRF_UNROLL
  for (int d = 0; d < D; ++d) {
    if (r[d] > 0) {
      admissible |= nh[d] == h - 1;
      lowest = nh[d] < lowest ? nh[d] : lowest;
    }
  }
  if (admissible) return h;
  return lowest >= inf - 1 ? inf : lowest + 1;
}

/// Start of a global relabel: nodes with residual capacity to the sink are at distance 1, the
/// others unknown (inf).
MRF_HD int BfsInitStep(std::int64_t x, int inf) { return x < 0 ? 1 : inf; }

/// Residual-edge bitmask of a node: bit d set when r[d] > 0 (the BFS reads one byte, not D words).
template <int D>
MRF_HD std::uint8_t ResidualMask(const std::uint32_t (&r)[D]) {
  std::uint8_t mask = 0;
MRF_UNROLL
  for (int d = 0; d < D; ++d) mask |= static_cast<std::uint8_t>(r[d] > 0 ? 1u << d : 0u);
  return mask;
}

/// One relaxation of the breadth-first search from the sink: the distance of a node is one more
/// than that of its nearest residual neighbour. Distances only fall, so any order of relaxations
/// reaches the same fixpoint: the exact distances.
template <int D>
MRF_HD int BfsStep(int h, int inf, std::uint8_t mask, const int (&nh)[D]) {
  if (h <= 1) return h;
  int lowest = inf;
MRF_UNROLL
  for (int d = 0; d < D; ++d)
    if (mask & (1u << d)) lowest = nh[d] < lowest ? nh[d] : lowest;
  const int candidate = lowest >= inf - 1 ? inf : lowest + 1;
  return candidate < h ? candidate : h;
}

/// Incremental global relabel, first phase: a height survives only if it is still the length of
/// a residual path to the sink, i.e. the node has residual capacity to the sink (height 1) or a
/// residual edge to a neighbour one lower that survives too; otherwise it becomes inf. Nodes with
/// residual capacity to the sink get height 1. Heights only rise in this phase, and the nodes that
/// survive do not depend on the order of the steps. The surviving heights are upper bounds of the
/// distances, so relaxing from them (BfsStep) then gives the exact distances, where the heights
/// outside the tiles it starts from were exact; where they were only certified (a re-solve of
/// local_resolve = 3: every node there passes the certificate of push_relabel_local.h, so its
/// support is exactly one below), the heights that come out are valid and backed by residual
/// paths, which is all the cut needs.
template <int D>
MRF_HD int KillStep(std::int64_t x, int h, int inf, std::uint8_t mask, const int (&nh)[D]) {
  if (x < 0) return 1;
  if (h >= inf || h <= 1) return inf;
  bool supported = false;
MRF_UNROLL
  for (int d = 0; d < D; ++d) supported |= (mask & (1u << d)) && nh[d] == h - 1;
  return supported ? h : inf;
}

/// A node still has work: excess that may reach the sink.
MRF_HD bool IsActive(std::int64_t x, int h, int inf) { return x > 0 && h < inf; }

/// The node's side of the minimum cut read from the final heights: 1 (sink side) while it can still
/// reach the sink, else 0.
MRF_HD std::uint8_t CutSide(int h, int inf) { return h < inf ? 1 : 0; }

}  // namespace mrf::pr
