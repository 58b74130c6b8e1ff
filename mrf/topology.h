#pragma once
/// @file topology.h
/// @brief Which nodes are joined: 2-D grids (4- or 8-connected), 3-D grids (6-connected) or an edge list.

#include <array>
#include <string>
#include <vector>

#include "mrf/types.h"

namespace mrf {

/// The shapes a model or an s-t graph can have.
enum class TopologyKind {
  kGrid4,     ///< 2-D grid, each pixel joined to its right and lower neighbour.
  kGrid8,     ///< 2-D grid, 4-connected plus the two diagonals.
  kGrid3D6,   ///< 3-D grid, each voxel joined to its +x, +y and +z neighbour.
  kEdgeList,  ///< Any graph, given as a list of undirected edges.
};

/// Node and edge layout.
///
/// Grid nodes are numbered `x + width * (y + height * z)`. Each undirected edge is stored once, in an
/// *edge slot*. On grids a slot is `direction * num_nodes + node`: the edge from `node` to its neighbour
/// in one of the forward directions (see GridOffset). Slots whose neighbour lies outside the grid exist
/// but hold no edge (edge_endpoints() returns false). This direction-major layout keeps per-edge arrays
/// contiguous per direction, which is what GPU kernels read. For edge lists a slot is simply the edge index.
class Topology {
 public:
  /// An empty edge list with no nodes.
  Topology() = default;
  /// A width x height grid with connectivity 4 or 8.
  static Topology Grid2D(int width, int height, int connectivity = 4);
  /// A width x height x depth grid, 6-connected.
  static Topology Grid3D(int width, int height, int depth);
  /// A general graph of num_nodes nodes and the given undirected edges (from[i], to[i]).
  static Topology EdgeList(NodeId num_nodes, std::vector<NodeId> from, std::vector<NodeId> to);

  TopologyKind kind() const { return kind_; }                       ///< The shape.
  bool is_grid() const { return kind_ != TopologyKind::kEdgeList; }  ///< True for the three grid kinds.
  int width() const { return width_; }    ///< Grid width (edge list: 0).
  int height() const { return height_; }  ///< Grid height (edge list: 0).
  int depth() const { return depth_; }    ///< Grid depth (1 for 2-D grids, 0 for edge lists).
  NodeId num_nodes() const { return num_nodes_; }  ///< Number of nodes.
  /// Number of forward directions on a grid (2, 4 or 3); 0 for edge lists.
  int num_directions() const;
  /// Number of edge slots: num_nodes * num_directions on grids, the edge count for edge lists.
  EdgeId num_edge_slots() const;
  /// Number of slots that hold an edge.
  EdgeId num_edges() const;
  /// Endpoints of the edge in `slot`; false when a grid slot's neighbour lies outside the grid, or
  /// the slot is not one of this topology's.
  bool edge_endpoints(EdgeId slot, NodeId* from, NodeId* to) const;
  /// The neighbour of grid node `node` in forward direction `direction`, or -1 outside the grid (and
  /// for a node or direction out of range, or an edge list).
  NodeId neighbor(NodeId node, int direction) const;
  /// The same for the grid node at (x, y, z), for loops that walk coordinates (no division).
  NodeId ForwardNeighbor(int x, int y, int z, int direction) const { return Shifted(x, y, z, direction, 1); }
  /// The grid node whose forward neighbour in `direction` is (x, y, z), or -1 outside the grid.
  NodeId BackwardNeighbor(int x, int y, int z, int direction) const { return Shifted(x, y, z, direction, -1); }
  /// The grid slot joining a and b (in either order), or -1 if they are not grid neighbours.
  EdgeId grid_slot(NodeId a, NodeId b) const;
  /// Offset (dx, dy, dz) of forward direction `direction` for a grid kind.
  /// Forward directions only: each undirected edge is stored once, at its first endpoint. Inline,
  /// since the grid loops (graph building, energies, cut checks) ask for it per node and direction.
  static std::array<int, 3> GridOffset(TopologyKind kind, int direction) {
    constexpr std::array<int, 3> k2D[4] = {{{1, 0, 0}}, {{0, 1, 0}}, {{1, 1, 0}}, {{-1, 1, 0}}};
    constexpr std::array<int, 3> k3D[3] = {{{1, 0, 0}}, {{0, 1, 0}}, {{0, 0, 1}}};
    return kind == TopologyKind::kGrid3D6 ? k3D[direction] : k2D[direction];
  }

  /// Edge-list only: appends `count` nodes and returns the first new id.
  NodeId AddNodes(NodeId count);
  /// Edge-list only: appends an edge and returns its slot.
  EdgeId AddEdge(NodeId from, NodeId to);
  /// Edge-list endpoints (empty on grids).
  const std::vector<NodeId>& edge_from() const { return from_; }
  /// Edge-list endpoints (empty on grids).
  const std::vector<NodeId>& edge_to() const { return to_; }

  /// Calls f(slot, from, to) for every existing edge, in slot order. On grids it walks coordinates,
  /// so no division is done per edge.
  template <class F>
  void ForEachEdge(F&& f) const {
    if (!is_grid()) {
      for (std::size_t s = 0; s < from_.size(); ++s) f(static_cast<EdgeId>(s), from_[s], to_[s]);
      return;
    }
    for (int d = 0; d < num_directions(); ++d) {
      const auto off = GridOffset(kind_, d);
      const EdgeId base = EdgeId{d} * num_nodes_;
      const int x_begin = off[0] < 0 ? 1 : 0, x_end = off[0] > 0 ? width_ - 1 : width_;
      for (int z = 0; z + off[2] < depth_; ++z)
        for (int y = 0; y + off[1] < height_; ++y) {
          const NodeId row = static_cast<NodeId>((std::int64_t{z} * height_ + y) * width_);
          const NodeId other_row = static_cast<NodeId>(
              (std::int64_t{z + off[2]} * height_ + y + off[1]) * width_ + off[0]);
          for (int x = x_begin; x < x_end; ++x) f(base + row + x, row + x, other_row + x);
        }
    }
  }

  /// Grids: the edges of ForEachEdge whose first endpoint lies in rows [row_begin, row_end) (row =
  /// y + height * z), node by node: for loops that split a grid by rows over the cores.
  template <class F>
  void ForEachEdgeInRows(std::int64_t row_begin, std::int64_t row_end, F&& f) const {
    const int directions = num_directions();
    for (std::int64_t row = row_begin; row < row_end; ++row) {
      const int y = static_cast<int>(row % height_), z = static_cast<int>(row / height_);
      for (int x = 0; x < width_; ++x) {
        const NodeId p = static_cast<NodeId>(row * width_ + x);
        for (int d = 0; d < directions; ++d) {
          const NodeId q = ForwardNeighbor(x, y, z, d);
          if (q >= 0) f(EdgeId{d} * num_nodes_ + p, p, q);
        }
      }
    }
  }

  /// Grids: the nodes of row `row` (y + height * z) whose forward neighbour in `direction` lies in
  /// the grid are x in [x_begin, x_end) (empty when none is), and node p's neighbour is p + offset.
  /// For tight loops over a row's edges of one direction, which need no per-node bounds checks.
  struct RowSpan {
    int x_begin = 0, x_end = 0;
    NodeId offset = 0;
  };
  RowSpan ForwardSpan(std::int64_t row, int direction) const { return Span(row, direction, 1); }
  /// The same for the nodes of the row whose backward neighbour (BackwardNeighbor) lies in the grid:
  /// p + offset is that neighbour, and the edge's slot is direction * num_nodes + p + offset.
  RowSpan BackwardSpan(std::int64_t row, int direction) const { return Span(row, direction, -1); }

  /// Human-readable shape, e.g. "grid 384x288, 4-connected".
  std::string Describe() const;
  /// True when both have the same kind, size and (for edge lists) the same edges.
  bool operator==(const Topology& other) const;
  /// Negation of operator==.
  bool operator!=(const Topology& other) const { return !(*this == other); }

 private:
  NodeId Shifted(int x, int y, int z, int direction, int sign) const {
    const auto off = GridOffset(kind_, direction);
    const int nx = x + sign * off[0], ny = y + sign * off[1], nz = z + sign * off[2];
    if (nx < 0 || nx >= width_ || ny < 0 || ny >= height_ || nz < 0 || nz >= depth_) return -1;
    return static_cast<NodeId>(nx + std::int64_t{width_} * (ny + std::int64_t{height_} * nz));
  }

  RowSpan Span(std::int64_t row, int direction, int sign) const {
    const auto off = GridOffset(kind_, direction);
    const int dx = sign * off[0], dy = sign * off[1], dz = sign * off[2];
    const int y = static_cast<int>(row % height_) + dy, z = static_cast<int>(row / height_) + dz;
    if (y < 0 || y >= height_ || z < 0 || z >= depth_) return {};
    return {dx < 0 ? -dx : 0, dx > 0 ? width_ - dx : width_,
            static_cast<NodeId>(dx + std::int64_t{width_} * (dy + std::int64_t{height_} * dz))};
  }

  TopologyKind kind_ = TopologyKind::kEdgeList;
  int width_ = 0, height_ = 0, depth_ = 0;
  NodeId num_nodes_ = 0;
  std::vector<NodeId> from_, to_;
};

}  // namespace mrf
