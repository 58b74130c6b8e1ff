#include "mrf/binary_graph.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

namespace mrf {
namespace {

// E(x) = offset + sum_p slope[p] * x_p + sum_pq cap_pq * [x_p = 0, x_q = 1]  (Kolmogorov-Zabih), with
// slope[p] = U_p(1) - U_p(0) plus, for each edge pq, V(1,0) - V(0,0) at p and V(1,1) - V(1,0) at q, and
// cap_pq = V(0,1) + V(1,0) - V(0,0) - V(1,1) >= 0 by submodularity. A positive slope is paid on the
// sink side (x_p = 1): capacity source->p.

[[noreturn]] void ThrowEdgeTooLarge(NodeId p, NodeId q, Energy cap) {
  throw Error("edge " + std::to_string(p) + "-" + std::to_string(q) + " needs capacity " + std::to_string(cap) +
              ", more than 32 bits");
}

// Edge lists: one pass over the edges, then the terminal capacities.
StGraph BuildFromEdgeList(const Model& model, Energy* energy_offset) {
  const NodeId n = model.num_nodes();
  StGraph graph;
  graph.reserve(n, model.topology.num_edges());
  graph.add_node(n);
  Energy offset = 0;
  std::vector<Energy> slope(n);
  for (NodeId p = 0; p < n; ++p) {
    offset += model.unary_cost(p, 0);
    slope[p] = Energy{model.unary_cost(p, 1)} - model.unary_cost(p, 0);
  }
  model.topology.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
    const Energy a = model.pairwise_cost(slot, 0, 0), b = model.pairwise_cost(slot, 0, 1);
    const Energy c = model.pairwise_cost(slot, 1, 0), d = model.pairwise_cost(slot, 1, 1);
    offset += a;
    slope[p] += c - a;
    slope[q] += d - c;
    const Energy cap = b + c - a - d;
    if (cap > kMaxCost) ThrowEdgeTooLarge(p, q, cap);
    if (cap != 0) graph.add_edge(p, q, static_cast<Cost>(cap), 0);
  });
  for (NodeId p = 0; p < n; ++p) {
    if (slope[p] >= 0) {
      graph.add_tweights(p, slope[p], 0);
    } else {
      graph.add_tweights(p, 0, -slope[p]);
      offset += slope[p];
    }
  }
  *energy_offset = offset;
  return graph;
}

// The slopes of grid row `row` (y + height * z) into slopes[0, width): U_p(1) - U_p(0) plus node p's
// shares of all its edges' terms. Adds the row's part of the energy offset (U_p(0), and V(0,0) of
// the forward edges) to *offset and gives each forward edge's capacity b + c - a - d to
// on_forward(slot, p, q, cap). One direction at a time, in spans without per-node bounds checks.
template <class OnForward>
void GridRowSlopes(const Model& model, std::int64_t row, Energy* slopes, Energy* offset, OnForward&& on_forward) {
  const Topology& t = model.topology;
  const NodeId n = t.num_nodes();
  const int width = t.width();
  const auto first = static_cast<NodeId>(row * width);
  for (int x = 0; x < width; ++x) {
    *offset += model.unary_cost(first + x, 0);
    slopes[x] = Energy{model.unary_cost(first + x, 1)} - model.unary_cost(first + x, 0);
  }
  for (int d = 0; d < t.num_directions(); ++d) {
    // Forward edges p -> q: their capacities, and p's share of their slopes.
    const Topology::RowSpan forward = t.ForwardSpan(row, d);
    for (int x = forward.x_begin; x < forward.x_end; ++x) {
      const NodeId p = first + x;
      const EdgeId slot = EdgeId{d} * n + p;
      const Energy a = model.pairwise_cost(slot, 0, 0), b = model.pairwise_cost(slot, 0, 1);
      const Energy c = model.pairwise_cost(slot, 1, 0), dd = model.pairwise_cost(slot, 1, 1);
      *offset += a;
      slopes[x] += c - a;
      on_forward(slot, p, p + forward.offset, b + c - a - dd);
    }
    // Backward edges r -> p: p's share of their slopes.
    const Topology::RowSpan backward = t.BackwardSpan(row, d);
    for (int x = backward.x_begin; x < backward.x_end; ++x) {
      const EdgeId slot = EdgeId{d} * n + first + x + backward.offset;
      slopes[x] += Energy{model.pairwise_cost(slot, 1, 1)} - model.pairwise_cost(slot, 1, 0);
    }
  }
}

// A slope as terminal capacities: positive ones are paid on the sink side (source -> p), negative
// ones on the source side, which moves them into the offset.
void SlopeCapacities(Energy slope, Energy* source, Energy* sink, Energy* offset) {
  *source = slope >= 0 ? slope : 0;
  *sink = slope >= 0 ? 0 : -slope;
  if (slope < 0) *offset += slope;
}

// Grids: rows of nodes on all cores (one core took about 0.65 s for the 16.8M nodes of a 4096 x 4096
// segmentation on the GPU machine, 60 times cuda-pr's cut). Each node gathers its slope from all its
// edges, so every edge's costs are read by both endpoints; each node writes only its own terminal
// capacities and its own forward slots, which a graph not yet solved allows from several threads.
StGraph BuildFromGrid(const Model& model, Energy* energy_offset) {
  const Topology& t = model.topology;
  const int width = t.width(), height = t.height();
  StGraph graph(t);
  std::mutex mutex;
  Energy offset = 0;
  EdgeId bad_slot = std::numeric_limits<EdgeId>::max();  // the first slot whose capacity is too large
  NodeId bad_p = -1, bad_q = -1;
  Energy bad_cap = 0;
  const std::int64_t rows = std::int64_t{height} * t.depth();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 16), [&](const tbb::blocked_range<std::int64_t>& range) {
    Energy local_offset = 0;
    EdgeId local_bad = std::numeric_limits<EdgeId>::max();
    NodeId local_p = -1, local_q = -1;
    Energy local_cap = 0;
    std::vector<Energy> slopes(static_cast<std::size_t>(width));
    for (std::int64_t row = range.begin(); row < range.end(); ++row) {
      GridRowSlopes(model, row, slopes.data(), &local_offset, [&](EdgeId slot, NodeId p, NodeId q, Energy cap) {
        if (cap > kMaxCost && slot < local_bad) {
          local_bad = slot;
          local_p = p;
          local_q = q;
          local_cap = cap;
        } else if (cap != 0 && cap <= kMaxCost) {
          graph.set_edge_slot(slot, static_cast<Cost>(cap), 0);
        }
      });
      for (int x = 0; x < width; ++x) {
        Energy source = 0, sink = 0;
        SlopeCapacities(slopes[x], &source, &sink, &local_offset);
        graph.set_tweights(static_cast<NodeId>(row * width + x), source, sink);
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    offset += local_offset;
    if (local_bad < bad_slot) {
      bad_slot = local_bad;
      bad_p = local_p;
      bad_q = local_q;
      bad_cap = local_cap;
    }
  });
  if (bad_p >= 0) ThrowEdgeTooLarge(bad_p, bad_q, bad_cap);  // the edge a pass in slot order meets first
  *energy_offset = offset;
  return graph;
}

}  // namespace

void CheckBinaryModel(const Model& model) {
  model.ValidateOrThrow();
  if (model.num_labels != 2)
    throw Error("a single graph cut needs a two-label model (this one has " + std::to_string(model.num_labels) +
                " labels)");
  std::string why;
  if (!IsSubmodularBinary(model, &why)) throw Error(why);
}

StGraph BuildCheckedBinaryGraph(const Model& model, Energy* energy_offset) {
  return model.topology.is_grid() ? BuildFromGrid(model, energy_offset) : BuildFromEdgeList(model, energy_offset);
}

StGraph BuildBinaryGraph(const Model& model, Energy* energy_offset) {
  CheckBinaryModel(model);
  return BuildCheckedBinaryGraph(model, energy_offset);
}

bool UpdateBinaryGridTerminals(const Model& model, StGraph* graph, Energy* energy_offset) {
  const Topology& t = model.topology;
  // A constant means someone added negative capacities to the kept graph: not the graph built here.
  if (!t.is_grid() || graph->topology() != t || graph->constant() != 0) return false;
  const int width = t.width();
  std::atomic<bool> same_edges{true};
  std::atomic<Energy> offset{0};
  graph->UpdateTweightsByRows([&](std::int64_t row_begin, std::int64_t row_end, Energy* source, Energy* sink) {
    Energy local_offset = 0;
    bool local_same = true;
    std::vector<Energy> slopes(static_cast<std::size_t>(width));
    for (std::int64_t row = row_begin; row < row_end && local_same; ++row) {
      GridRowSlopes(model, row, slopes.data(), &local_offset, [&](EdgeId slot, NodeId, NodeId, Energy cap) {
        // The graph holds cap (0 when it was 0) one way and nothing back, as BuildBinaryGraph left it.
        local_same = local_same && graph->edge_cap(slot) == cap && graph->edge_rev_cap(slot) == 0;
      });
      const std::int64_t first = row * width;
      for (int x = 0; x < width; ++x) SlopeCapacities(slopes[x], &source[first + x], &sink[first + x], &local_offset);
    }
    if (!local_same) same_edges = false;
    offset += local_offset;
  });
  if (!same_edges) return false;
  *energy_offset = offset;
  return true;
}

}  // namespace mrf
