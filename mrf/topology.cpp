#include "mrf/topology.h"

#include <limits>
#include <sstream>

namespace mrf {

Energy CheckedAdd(Energy a, Energy b, const char* what) {
  Energy sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw Error(std::string(what) + " overflows a 64-bit sum");
  return sum;
}

namespace {

NodeId CheckedNodeCount(std::int64_t count, const std::string& shape) {
  if (count <= 0) throw Error("a " + shape + " needs at least one node");
  if (count > std::numeric_limits<NodeId>::max())
    throw Error("a " + shape + " has " + std::to_string(count) + " nodes, more than the 2^31-1 supported");
  return static_cast<NodeId>(count);
}

}  // namespace

Topology Topology::Grid2D(int width, int height, int connectivity) {
  if (connectivity != 4 && connectivity != 8)
    throw Error("grid connectivity must be 4 or 8 (got " + std::to_string(connectivity) + ")");
  if (width <= 0 || height <= 0)
    throw Error("grid size " + std::to_string(width) + "x" + std::to_string(height) + " is not positive");
  Topology t;
  t.kind_ = connectivity == 4 ? TopologyKind::kGrid4 : TopologyKind::kGrid8;
  t.width_ = width;
  t.height_ = height;
  t.depth_ = 1;
  t.num_nodes_ = CheckedNodeCount(std::int64_t{width} * height, "grid");
  if (t.num_edge_slots() > std::numeric_limits<std::int32_t>::max() * 4LL)
    throw Error("grid " + std::to_string(width) + "x" + std::to_string(height) + " is too large");
  return t;
}

Topology Topology::Grid3D(int width, int height, int depth) {
  if (width <= 0 || height <= 0 || depth <= 0)
    throw Error("grid size " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                std::to_string(depth) + " is not positive");
  Topology t;
  t.kind_ = TopologyKind::kGrid3D6;
  t.width_ = width;
  t.height_ = height;
  t.depth_ = depth;
  t.num_nodes_ = CheckedNodeCount(std::int64_t{width} * height * depth, "3-D grid");
  return t;
}

Topology Topology::EdgeList(NodeId num_nodes, std::vector<NodeId> from, std::vector<NodeId> to) {
  if (num_nodes < 0) throw Error("a graph cannot have a negative number of nodes");
  if (from.size() != to.size())
    throw Error("edge list has " + std::to_string(from.size()) + " start nodes but " +
                std::to_string(to.size()) + " end nodes");
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] < 0 || from[i] >= num_nodes || to[i] < 0 || to[i] >= num_nodes)
      throw Error("edge " + std::to_string(i) + " (" + std::to_string(from[i]) + ", " + std::to_string(to[i]) +
                  ") names a node outside 0.." + std::to_string(num_nodes - 1));
    if (from[i] == to[i]) throw Error("edge " + std::to_string(i) + " joins node " + std::to_string(from[i]) + " to itself");
  }
  Topology t;
  t.kind_ = TopologyKind::kEdgeList;
  t.num_nodes_ = num_nodes;
  t.from_ = std::move(from);
  t.to_ = std::move(to);
  return t;
}

int Topology::num_directions() const {
  switch (kind_) {
    case TopologyKind::kGrid4: return 2;
    case TopologyKind::kGrid8: return 4;
    case TopologyKind::kGrid3D6: return 3;
    case TopologyKind::kEdgeList: return 0;
  }
  return 0;
}

EdgeId Topology::num_edge_slots() const {
  return is_grid() ? EdgeId{num_nodes_} * num_directions() : static_cast<EdgeId>(from_.size());
}

EdgeId Topology::num_edges() const {
  const EdgeId w = width_, h = height_, d = depth_;
  switch (kind_) {
    case TopologyKind::kGrid4: return (w - 1) * h + w * (h - 1);
    case TopologyKind::kGrid8: return (w - 1) * h + w * (h - 1) + 2 * (w - 1) * (h - 1);
    case TopologyKind::kGrid3D6: return (w - 1) * h * d + w * (h - 1) * d + w * h * (d - 1);
    case TopologyKind::kEdgeList: return static_cast<EdgeId>(from_.size());
  }
  return 0;
}

NodeId Topology::neighbor(NodeId node, int direction) const {
  if (!is_grid() || node < 0 || node >= num_nodes_ || direction < 0 || direction >= num_directions()) return -1;
  const std::int64_t plane = std::int64_t{width_} * height_;
  const int z = static_cast<int>(node / plane);
  const int rest = static_cast<int>(node - z * plane);
  return ForwardNeighbor(rest % width_, rest / width_, z, direction);
}

bool Topology::edge_endpoints(EdgeId slot, NodeId* from, NodeId* to) const {
  if (slot < 0 || slot >= num_edge_slots()) return false;
  if (!is_grid()) {
    *from = from_[slot];
    *to = to_[slot];
    return true;
  }
  const int direction = static_cast<int>(slot / num_nodes_);
  const NodeId node = static_cast<NodeId>(slot - EdgeId{direction} * num_nodes_);
  const NodeId other = neighbor(node, direction);
  if (other < 0) return false;
  *from = node;
  *to = other;
  return true;
}

EdgeId Topology::grid_slot(NodeId a, NodeId b) const {
  if (!is_grid() || a < 0 || b < 0 || a >= num_nodes_ || b >= num_nodes_) return -1;
  for (int d = 0; d < num_directions(); ++d) {
    if (neighbor(a, d) == b) return EdgeId{d} * num_nodes_ + a;
    if (neighbor(b, d) == a) return EdgeId{d} * num_nodes_ + b;
  }
  return -1;
}

NodeId Topology::AddNodes(NodeId count) {
  if (is_grid()) throw Error("nodes cannot be added to a grid");
  if (count < 0) throw Error("cannot add a negative number of nodes");
  if (std::int64_t{num_nodes_} + count > std::numeric_limits<NodeId>::max())
    throw Error("graph would exceed 2^31-1 nodes");
  const NodeId first = num_nodes_;
  num_nodes_ += count;
  return first;
}

EdgeId Topology::AddEdge(NodeId from, NodeId to) {
  if (is_grid()) throw Error("use grid_slot() to find an edge of a grid");
  if (from < 0 || from >= num_nodes_ || to < 0 || to >= num_nodes_)
    throw Error("edge (" + std::to_string(from) + ", " + std::to_string(to) + ") names a node outside 0.." +
                std::to_string(num_nodes_ - 1));
  if (from == to) throw Error("edge joins node " + std::to_string(from) + " to itself");
  from_.push_back(from);
  to_.push_back(to);
  return static_cast<EdgeId>(from_.size()) - 1;
}

std::string Topology::Describe() const {
  std::ostringstream out;
  switch (kind_) {
    case TopologyKind::kGrid4: out << "grid " << width_ << "x" << height_ << ", 4-connected"; break;
    case TopologyKind::kGrid8: out << "grid " << width_ << "x" << height_ << ", 8-connected"; break;
    case TopologyKind::kGrid3D6:
      out << "grid " << width_ << "x" << height_ << "x" << depth_ << ", 6-connected";
      break;
    case TopologyKind::kEdgeList: out << "graph of " << num_nodes_ << " nodes and " << from_.size() << " edges"; break;
  }
  return out.str();
}

bool Topology::operator==(const Topology& o) const {
  return kind_ == o.kind_ && width_ == o.width_ && height_ == o.height_ && depth_ == o.depth_ &&
         num_nodes_ == o.num_nodes_ && from_ == o.from_ && to_ == o.to_;
}

}  // namespace mrf
