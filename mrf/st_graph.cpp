#include "mrf/st_graph.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <numeric>
#include <sstream>

#include "mrf/memory.h"
#include "mrf/model.h"
#include "mrf/registry.h"
#include "mrf/threads.h"

namespace mrf {

StopCheck MakeStopCheck(double time_limit_s, std::function<bool(const IterationRecord&)> callback,
                        std::chrono::steady_clock::time_point start) {
  if (time_limit_s <= 0 && !callback) return {};
  std::ostringstream limit;
  limit << "the time limit (" << time_limit_s << " s) passed";
  return [time_limit_s, callback = std::move(callback), start,
          limit_text = limit.str()](const IterationRecord& progress) -> std::string {
    IterationRecord record = progress;
    record.time_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (time_limit_s > 0 && record.time_ms >= time_limit_s * 1000.0) return limit_text;
    if (callback && !callback(record)) return "the callback asked to stop";
    return {};
  };
}

StGraph::StGraph() = default;
StGraph::~StGraph() = default;
StGraph::StGraph(StGraph&&) noexcept = default;
StGraph& StGraph::operator=(StGraph&&) noexcept = default;

StGraph::StGraph(const Topology& grid) : topology_(grid) {
  if (!grid.is_grid()) throw Error("StGraph(Topology) needs a grid topology; use the default constructor for general graphs");
  const std::size_t nodes = static_cast<std::size_t>(grid.num_nodes());
  const std::size_t slots = static_cast<std::size_t>(grid.num_edge_slots());
  source_cap_.resize(nodes);  // uninitialised: zeroed below in blocks on all cores
  sink_cap_.resize(nodes);
  cap_.resize(slots);
  rev_cap_.resize(slots);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, std::max(nodes, slots), std::size_t{1} << 16),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      const std::size_t node_end = std::min(range.end(), nodes), slot_end = std::min(range.end(), slots);
                      for (std::size_t i = range.begin(); i < node_end; ++i) source_cap_[i] = sink_cap_[i] = 0;
                      for (std::size_t i = range.begin(); i < slot_end; ++i) cap_[i] = rev_cap_[i] = 0;
                    });
}

void StGraph::reserve(NodeId nodes, EdgeId edges) {
  source_cap_.reserve(nodes);
  sink_cap_.reserve(nodes);
  cap_.reserve(static_cast<std::size_t>(edges));
  rev_cap_.reserve(static_cast<std::size_t>(edges));
}

NodeId StGraph::add_node(NodeId count) {
  const NodeId first = topology_.AddNodes(count);
  source_cap_.resize(topology_.num_nodes(), 0);
  sink_cap_.resize(topology_.num_nodes(), 0);
  changes_.structure_changed = true;
  last_cut_tracked_ = false;
  return first;
}

void StGraph::CheckNode(NodeId node, const char* call) const {
  if (node < 0 || node >= num_nodes())
    throw Error(std::string(call) + ": node " + std::to_string(node) + " does not exist (graph has " +
                std::to_string(num_nodes()) + " nodes)");
}

// Until the first maxflow() the whole graph counts as changed (structure_changed) and nothing is
// recorded here, which is what lets builders set different nodes and slots from several threads.
void StGraph::MarkNode(NodeId node) {
  if (!changes_.structure_changed) changes_.nodes.push_back(node);
}

void StGraph::MarkEdge(EdgeId edge) {
  if (!changes_.structure_changed) changes_.edges.push_back(edge);
}

namespace {
// Capacities as unsigned 64-bit numbers: differences and sums wrap around, and the total comes out
// exact as long as the true one fits an Energy (as CutCapacity's own sum must).
std::uint64_t Wrapped(Energy value) { return static_cast<std::uint64_t>(value); }

// What a node's terminal edges add to a cut that puts it on the given side.
Energy TerminalCapacity(bool on_sink_side, Energy source_cap, Energy sink_cap) {
  return on_sink_side ? source_cap : sink_cap;
}

// What the edge slot with these capacities adds to a cut whose sides of its two ends are given.
Cost CrossingCapacity(bool from_sink, bool to_sink, Cost cap, Cost rev_cap) {
  return from_sink == to_sink ? 0 : from_sink ? rev_cap : cap;
}
}  // namespace

void StGraph::TrackTerminalChange(NodeId node, Energy old_source, Energy old_sink) {
  if (!last_cut_tracked_) return;
  const bool on_sink_side = sink_side_[node] != 0;
  last_cut_capacity_ += Wrapped(TerminalCapacity(on_sink_side, source_cap_[node], sink_cap_[node])) -
                        Wrapped(TerminalCapacity(on_sink_side, old_source, old_sink));
}

void StGraph::TrackEdgeChange(EdgeId slot, Cost old_cap, Cost old_rev_cap) {
  NodeId from = -1, to = -1;
  if (!last_cut_tracked_ || !topology_.edge_endpoints(slot, &from, &to)) return;  // slots off the grid never count
  const bool from_sink = sink_side_[from] != 0, to_sink = sink_side_[to] != 0;
  last_cut_capacity_ += Wrapped(CrossingCapacity(from_sink, to_sink, cap_[slot], rev_cap_[slot])) -
                        Wrapped(CrossingCapacity(from_sink, to_sink, old_cap, old_rev_cap));
}

Energy StGraph::last_cut_capacity() const {
  if (!last_cut_tracked_)
    throw Error("last_cut_capacity: there is no cut to price (no maxflow() since the graph's nodes, edges or "
                "capacities were last reset)");
  return static_cast<Energy>(last_cut_capacity_);
}

void StGraph::add_tweights(NodeId node, Energy cap_source, Energy cap_sink) {
  CheckNode(node, "add_tweights");
  auto add = [node](Energy a, Energy b, const char* what) {
    Energy sum = 0;
    if (__builtin_add_overflow(a, b, &sum))
      throw Error(std::string("add_tweights: ") + what + " of node " + std::to_string(node) + " overflows a 64-bit sum");
    return sum;
  };
  Energy s = add(source_cap_[node], cap_source, "source capacity");
  Energy t = add(sink_cap_[node], cap_sink, "sink capacity");
  // Keep both terminal capacities non-negative: adding d to both raises every cut by d.
  if (s == std::numeric_limits<Energy>::min() || t == std::numeric_limits<Energy>::min())
    throw Error("add_tweights: terminal capacity of node " + std::to_string(node) + " is below -2^63+1");
  const Energy shift = std::max<Energy>({Energy{0}, -s, -t});
  Energy constant = constant_;
  if (shift > 0) {
    s = add(s, shift, "source capacity");
    t = add(t, shift, "sink capacity");
    if (__builtin_add_overflow(constant_, -shift, &constant))
      throw Error("add_tweights: the flow constant overflows a 64-bit sum at node " + std::to_string(node));
  }
  const Energy old_source = source_cap_[node], old_sink = sink_cap_[node];
  if (last_cut_tracked_) last_cut_capacity_ += Wrapped(constant) - Wrapped(constant_);
  constant_ = constant;  // nothing changes before every check has passed
  source_cap_[node] = s;
  sink_cap_[node] = t;
  TrackTerminalChange(node, old_source, old_sink);
  TrackTotals(old_source, old_sink, s, t);
  MarkNode(node);
}

void StGraph::set_tweights(NodeId node, Energy cap_source, Energy cap_sink) {
  CheckNode(node, "set_tweights");
  if (cap_source < 0 || cap_sink < 0)
    throw Error("set_tweights: capacities of node " + std::to_string(node) + " must be non-negative (got " +
                std::to_string(cap_source) + ", " + std::to_string(cap_sink) + ")");
  const Energy old_source = source_cap_[node], old_sink = sink_cap_[node];
  source_cap_[node] = cap_source;
  sink_cap_[node] = cap_sink;
  TrackTotals(old_source, old_sink, cap_source, cap_sink);
  TrackTerminalChange(node, old_source, old_sink);
  MarkNode(node);
}

void StGraph::UpdateTweightsByRows(
    const std::function<void(std::int64_t row_begin, std::int64_t row_end, Energy* source, Energy* sink)>& fill) {
  if (!topology_.is_grid()) throw Error("UpdateTweightsByRows: the graph is not a grid");
  const int width = topology_.width();
  const std::int64_t rows = std::int64_t{topology_.height()} * topology_.depth();
  // Each piece keeps its rows' old capacities (in a buffer of its thread, reused from piece to piece:
  // fresh ones cost a page fault per 4 KB) to find what fill changed, and counts its changed nodes;
  // the list is then filled in node order on all cores, each piece at its offset.
  constexpr std::int64_t kRowsPerPiece = 16;
  const std::int64_t pieces = (rows + kRowsPerPiece - 1) / kRowsPerPiece;
  std::vector<std::int64_t> changed_in(static_cast<std::size_t>(pieces) + 1, 0);
  std::vector<std::uint64_t> last_cut_change(static_cast<std::size_t>(pieces), 0);
  struct Change {
    WideSum source = 0, sink = 0, smaller = 0;
  };
  const bool track_totals = TotalsTracked();
  std::vector<Change> total_change(static_cast<std::size_t>(pieces));
  std::vector<std::uint8_t> changed = NewZeroedVector<std::uint8_t>(static_cast<std::size_t>(num_nodes()));
  tbb::enumerable_thread_specific<std::vector<Energy>> old_values;
  std::atomic<NodeId> first_negative{std::numeric_limits<NodeId>::max()};
  // Capacities rewritten but not recorded would mislead a re-solve: after a failure part way, the
  // next solve starts afresh.
  struct AfreshUnlessDone {
    GraphChanges* changes;
    bool* last_cut_tracked;
    bool done = false;
    ~AfreshUnlessDone() {
      if (done) return;
      changes->structure_changed = true;
      *last_cut_tracked = false;
    }
  } guard{&changes_, &last_cut_tracked_};
  const Label* last_cut = last_cut_tracked_ ? sink_side_.data() : nullptr;
  tbb::parallel_for(std::int64_t{0}, pieces, [&](std::int64_t piece) {
    const std::int64_t row_begin = piece * kRowsPerPiece, row_end = std::min(rows, row_begin + kRowsPerPiece);
    const std::int64_t first = row_begin * width, count = (row_end - row_begin) * width;
    std::vector<Energy>& old = old_values.local();
    old.resize(static_cast<std::size_t>(2 * count));
    std::copy(source_cap_.begin() + first, source_cap_.begin() + first + count, old.begin());
    std::copy(sink_cap_.begin() + first, sink_cap_.begin() + first + count, old.begin() + count);
    // Isolated: a fill that runs parallel work of its own must not have this thread take another
    // piece meanwhile, which would reuse the buffer `old`.
    tbb::this_task_arena::isolate([&] { fill(row_begin, row_end, source_cap_.data(), sink_cap_.data()); });
    std::int64_t changes = 0;
    std::uint64_t cut_change = 0;
    Change sums;
    for (std::int64_t i = 0; i < count; ++i) {
      const auto p = static_cast<NodeId>(first + i);
      if (source_cap_[p] < 0 || sink_cap_[p] < 0) {
        NodeId seen = first_negative.load();
        while (p < seen && !first_negative.compare_exchange_weak(seen, p)) {
        }
      }
      const bool differs = source_cap_[p] != old[i] || sink_cap_[p] != old[count + i];
      changed[p] = differs;
      changes += differs;
      if (differs && track_totals) {
        sums.source += static_cast<WideSum>(source_cap_[p]) - old[i];
        sums.sink += static_cast<WideSum>(sink_cap_[p]) - old[count + i];
        sums.smaller += static_cast<WideSum>(std::min(source_cap_[p], sink_cap_[p])) - std::min(old[i], old[count + i]);
      }
      if (differs && last_cut)
        cut_change += Wrapped(TerminalCapacity(last_cut[p] != 0, source_cap_[p], sink_cap_[p])) -
                      Wrapped(TerminalCapacity(last_cut[p] != 0, old[i], old[count + i]));
    }
    changed_in[piece + 1] = changes;
    last_cut_change[piece] = cut_change;
    total_change[piece] = sums;
  });
  if (!changes_.structure_changed) {  // a graph not yet solved records no changes
    std::partial_sum(changed_in.begin(), changed_in.end(), changed_in.begin());
    const std::size_t before = changes_.nodes.size();
    changes_.nodes.resize(before + static_cast<std::size_t>(changed_in.back()));
    NodeId* list = changes_.nodes.data() + before;
    tbb::parallel_for(std::int64_t{0}, pieces, [&](std::int64_t piece) {
      const std::int64_t first = piece * kRowsPerPiece * width;
      const std::int64_t end = std::min(rows, (piece + 1) * kRowsPerPiece) * width;
      NodeId* out = list + changed_in[piece];
      for (std::int64_t p = first; p < end; ++p)
        if (changed[p]) *out++ = static_cast<NodeId>(p);
    });
  }
  const NodeId bad = first_negative.load();
  if (bad != std::numeric_limits<NodeId>::max())
    throw Error("UpdateTweightsByRows: capacities of node " + std::to_string(bad) + " must be non-negative (got " +
                std::to_string(source_cap_[bad]) + ", " + std::to_string(sink_cap_[bad]) + ")");
  for (std::uint64_t change : last_cut_change) last_cut_capacity_ += change;
  for (const Change& c : total_change) {
    source_total_ += c.source;
    sink_total_ += c.sink;
    smaller_total_ += c.smaller;
  }
  guard.done = true;
}

void StGraph::TrackTotals(Energy old_source, Energy old_sink, Energy source, Energy sink) {
  if (!TotalsTracked()) return;  // counted by the next solve (builders may run on many threads)
  source_total_ += static_cast<WideSum>(source) - old_source;
  sink_total_ += static_cast<WideSum>(sink) - old_sink;
  smaller_total_ += static_cast<WideSum>(std::min(source, sink)) - std::min(old_source, old_sink);
}

void StGraph::RecountTotals() {
  struct Totals {
    WideSum source = 0, sink = 0, smaller = 0;
    NodeId first_negative = std::numeric_limits<NodeId>::max();
  };
  const Totals totals = tbb::parallel_reduce(
      tbb::blocked_range<NodeId>(0, num_nodes(), NodeId{1} << 14), Totals{},
      [&](const tbb::blocked_range<NodeId>& range, Totals sum) {
        for (NodeId v = range.begin(); v < range.end(); ++v) {
          const Energy s = source_cap_[v], t = sink_cap_[v];
          sum.source += s;
          sum.sink += t;
          sum.smaller += std::min(s, t);
          if ((s | t) < 0) sum.first_negative = std::min(sum.first_negative, v);
        }
        return sum;
      },
      [](Totals a, const Totals& b) {
        a.source += b.source;
        a.sink += b.sink;
        a.smaller += b.smaller;
        a.first_negative = std::min(a.first_negative, b.first_negative);
        return a;
      });
  // Only a rewrite by rows that failed part way can leave one (every other call refuses it first).
  if (totals.first_negative != std::numeric_limits<NodeId>::max())
    throw Error("maxflow: capacities of node " + std::to_string(totals.first_negative) + " are negative (" +
                std::to_string(source_cap_[totals.first_negative]) + ", " +
                std::to_string(sink_cap_[totals.first_negative]) + ")");
  source_total_ = totals.source;
  sink_total_ = totals.sink;
  smaller_total_ = totals.smaller;
  totals_valid_ = true;
}

namespace {
__extension__ typedef __int128 Wide;

std::string ToDecimal(Wide value) {
  if (value == 0) return "0";
  const bool negative = value < 0;
  std::string digits;
  for (; value != 0; value /= 10) digits.insert(digits.begin(), static_cast<char>('0' + std::abs(static_cast<int>(value % 10))));
  return negative ? "-" + digits : digits;
}

// The most every edge slot of a graph can carry, each at the 32-bit limit.
Wide EdgeSlotLimit(EdgeId slots) { return static_cast<Wide>(slots) * std::numeric_limits<Cost>::max(); }
}  // namespace

void StGraph::CheckFlowFits() const {
  // Every flow leaves the source and reaches the sink, and it crosses the cut that puts each node on
  // the side of its smaller terminal capacity; the engines add flows in 64 bits. The edges' part of
  // that cut is bounded by every slot at its limit.
  const Wide limit = std::numeric_limits<Energy>::max();
  const Wide cut = smaller_total_ + EdgeSlotLimit(num_edge_slots());
  if (source_total_ > limit && sink_total_ > limit && cut > limit)
    throw Error("maxflow: the flow could exceed 64 bits: the source capacities sum to " + ToDecimal(source_total_) +
                ", the sink capacities to " + ToDecimal(sink_total_) + " and each node's smaller one to " +
                ToDecimal(smaller_total_) + " (scale them down)");
}

namespace {
void CheckEdgeCaps(NodeId from, NodeId to, Cost cap, Cost rev_cap) {
  if (cap < 0 || rev_cap < 0)
    throw Error("edge " + std::to_string(from) + "->" + std::to_string(to) + " has a negative capacity (" +
                std::to_string(cap) + ", " + std::to_string(rev_cap) + ")");
}
Cost CheckedCapacitySum(Cost a, Cost b, EdgeId slot) {
  Cost sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw Error("capacity of edge slot " + std::to_string(slot) + " overflows 32 bits");
  return sum;
}
}  // namespace

EdgeId StGraph::add_edge(NodeId from, NodeId to, Cost cap, Cost rev_cap) {
  CheckNode(from, "add_edge");
  CheckNode(to, "add_edge");
  CheckEdgeCaps(from, to, cap, rev_cap);
  if (!topology_.is_grid()) {
    const EdgeId e = topology_.AddEdge(from, to);
    cap_.push_back(cap);
    rev_cap_.push_back(rev_cap);
    changes_.structure_changed = true;
    last_cut_tracked_ = false;
    return e;
  }
  const EdgeId slot = topology_.grid_slot(from, to);
  if (slot < 0)
    throw Error("add_edge: nodes " + std::to_string(from) + " and " + std::to_string(to) +
                " are not neighbours in the " + topology_.Describe());
  NodeId slot_from = 0, slot_to = 0;
  topology_.edge_endpoints(slot, &slot_from, &slot_to);
  if (slot_from != from) std::swap(cap, rev_cap);
  const Cost old_cap = cap_[slot], old_rev_cap = rev_cap_[slot];
  const Cost new_cap = CheckedCapacitySum(old_cap, cap, slot), new_rev_cap = CheckedCapacitySum(old_rev_cap, rev_cap, slot);
  cap_[slot] = new_cap;
  rev_cap_[slot] = new_rev_cap;
  TrackEdgeChange(slot, old_cap, old_rev_cap);
  MarkEdge(slot);
  return slot;
}

void StGraph::add_to_edge_slot(EdgeId edge, Cost cap, Cost rev_cap) {
  if (edge < 0 || static_cast<std::size_t>(edge) >= cap_.size())  // cap_ holds one entry per slot
    throw Error("edge slot " + std::to_string(edge) + " does not exist");
  if (cap < 0 || rev_cap < 0) throw Error("edge slot " + std::to_string(edge) + " given a negative capacity");
  const Cost old_cap = cap_[edge], old_rev_cap = rev_cap_[edge];
  const Cost new_cap = CheckedCapacitySum(old_cap, cap, edge), new_rev_cap = CheckedCapacitySum(old_rev_cap, rev_cap, edge);
  cap_[edge] = new_cap;
  rev_cap_[edge] = new_rev_cap;
  TrackEdgeChange(edge, old_cap, old_rev_cap);
  MarkEdge(edge);
}

void StGraph::set_edge_slot(EdgeId edge, Cost cap, Cost rev_cap) {
  if (edge < 0 || static_cast<std::size_t>(edge) >= cap_.size())  // cap_ holds one entry per slot
    throw Error("edge slot " + std::to_string(edge) + " does not exist");
  if (cap < 0 || rev_cap < 0) throw Error("edge slot " + std::to_string(edge) + " given a negative capacity");
  const Cost old_cap = cap_[edge], old_rev_cap = rev_cap_[edge];
  cap_[edge] = cap;
  rev_cap_[edge] = rev_cap;
  TrackEdgeChange(edge, old_cap, old_rev_cap);
  MarkEdge(edge);
}

void StGraph::set_edge(EdgeId edge, Cost cap, Cost rev_cap) {
  NodeId from = -1, to = -1;
  if (edge < 0 || edge >= num_edge_slots() || !topology_.edge_endpoints(edge, &from, &to))
    throw Error("set_edge: edge slot " + std::to_string(edge) + " holds no edge");
  CheckEdgeCaps(from, to, cap, rev_cap);
  const Cost old_cap = cap_[edge], old_rev_cap = rev_cap_[edge];
  cap_[edge] = cap;
  rev_cap_[edge] = rev_cap;
  TrackEdgeChange(edge, old_cap, old_rev_cap);
  MarkEdge(edge);
}

void StGraph::ResetCapacities() {
  std::fill(source_cap_.begin(), source_cap_.end(), 0);
  std::fill(sink_cap_.begin(), sink_cap_.end(), 0);
  std::fill(cap_.begin(), cap_.end(), 0);
  std::fill(rev_cap_.begin(), rev_cap_.end(), 0);
  constant_ = 0;
  changes_ = GraphChanges{};  // structure_changed: the next solve starts afresh
  last_cut_tracked_ = false;
}

void StGraph::MarkSolved() {
  if (changes_.structure_changed) totals_valid_ = false;  // counted when a maxflow() needs them
  ClearChanges();
}

void StGraph::ClearChanges() {
  // Cleared, not freed: a graph re-solved again and again (GrabCut rounds, video frames) refills the
  // list, and fresh memory for 16.8M changes costs more than the list itself.
  changes_.nodes.clear();
  changes_.edges.clear();
  changes_.structure_changed = false;
}

Energy StGraph::CutCapacity(const Labeling& sink_side) const {
  if (static_cast<NodeId>(sink_side.size()) != num_nodes())
    throw Error("cut has " + std::to_string(sink_side.size()) + " entries for " + std::to_string(num_nodes()) +
                " nodes");
  // Summed exactly whatever the capacities (a cut that is not minimal, a stopped solve's or a caller's,
  // may pass 64 bits even when the flow cannot): 128-bit totals, and in the grids' rows, unless the
  // kept sums show that every cut fits, each terminal term split into its high and low 32 bits, two
  // 64-bit sums that cannot overflow and still vectorise.
  const Wide limit = std::numeric_limits<Energy>::max();
  auto checked = [&](Wide total) {
    total += constant_;
    if (total > limit || total < -limit - 1)
      throw Error("the cut's capacity " + ToDecimal(total) + " does not fit 64 bits");
    return static_cast<Energy>(total);
  };
  if (!topology_.is_grid()) {
    Wide total = 0;
    for (NodeId v = 0; v < num_nodes(); ++v) total += sink_side[v] ? source_cap_[v] : sink_cap_[v];
    topology_.ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if (!sink_side[p] && sink_side[q]) total += cap_[e];
      if (sink_side[p] && !sink_side[q]) total += rev_cap_[e];
    });
    return checked(total);
  }
  // Grids: rows of nodes on all cores; in each row the terminal edges, then each direction's forward
  // edges that cross the cut, in spans without bounds checks. maxflow() checks every cut with this:
  // on one core it was about 70-90 ms of a 4096 x 4096 re-solve's 150-185 ms through maxflow() (GPU
  // machine), where the GPU's part is about 8 ms; a bounds check per node and direction made it
  // 7.7 ns a node on one core of the 2-core development machine, the spans 4.0 (4-connected), about
  // what reading the labels and both terminal arrays costs.
  const Topology& t = topology_;
  const NodeId n = num_nodes();
  const int width = t.width(), directions = t.num_directions();
  const std::int64_t rows = std::int64_t{t.height()} * t.depth();
  const Label* labels = sink_side.data();
  // When the kept sums show that every cut fits (the usual case), a row's terms add up in 64 bits.
  const bool fits = TotalsTracked() && source_total_ + sink_total_ + EdgeSlotLimit(num_edge_slots()) <= limit;
  return checked(tbb::parallel_reduce(
      tbb::blocked_range<std::int64_t>(0, rows, 16), Wide{0},
      [&](const tbb::blocked_range<std::int64_t>& range, Wide total) {
        for (std::int64_t row = range.begin(); row < range.end(); ++row) {
          const std::int64_t first = row * width;
          const Label* in_row = labels + first;
          const Energy* source = source_cap_.data() + first;
          const Energy* sink = sink_cap_.data() + first;
          // Without branches (masks instead): a cut with many short runs mispredicts them. Random
          // labels at 4096 x 4096: 200-228 ms with branches, 65-66 without, 2-core machine (a
          // disc: 33-35 and 32-33; the segmentation scene on the H200 machine: about 9 either way).
          auto term = [&](int x) {
            const Energy to_source = source[x], to_sink = sink[x];
            return to_sink + ((to_source - to_sink) & -static_cast<Energy>(in_row[x] != 0));
          };
          if (fits) {
            Energy sum = 0;
            for (int x = 0; x < width; ++x) sum += term(x);
            total += sum;
          } else {
            std::uint64_t high = 0, low = 0;  // terms below 2^63, rows below 2^31 nodes: neither wraps
            for (int x = 0; x < width; ++x) {
              const auto value = static_cast<std::uint64_t>(term(x));
              high += value >> 32;
              low += value & 0xffffffffu;
            }
            total += (static_cast<Wide>(high) << 32) + low;
          }
          for (int d = 0; d < directions; ++d) {
            const Topology::RowSpan span = t.ForwardSpan(row, d);
            const Label* neighbours = in_row + span.offset;
            const Cost* cap = cap_.data() + EdgeId{d} * n + first;
            const Cost* rev = rev_cap_.data() + EdgeId{d} * n + first;
            Energy crossing = 0;
            for (int x = span.x_begin; x < span.x_end; ++x) {
              const bool p_sink = in_row[x] != 0, q_sink = neighbours[x] != 0;
              const Cost forward = cap[x], backward = rev[x];
              const Cost cut = forward + ((backward - forward) & -static_cast<Cost>(p_sink));
              crossing += cut & -static_cast<Cost>(p_sink != q_sink);
            }
            total += crossing;
          }
        }
        return total;
      },
      [](Wide a, Wide b) { return a + b; }));
}

Energy StGraph::CutCapacityFromLastCut(const Labeling& sink_side) const {
  // The changes are summed modulo 2^64, exact when the result fits: when the sums say some cut might
  // not, the full sum decides (and refuses one that does not fit).
  if (!last_cut_tracked_ || sink_side.size() != sink_side_.size() || !TotalsTracked() ||
      source_total_ + sink_total_ + EdgeSlotLimit(num_edge_slots()) > std::numeric_limits<Energy>::max())
    return CutCapacity(sink_side);
  const Label* now = sink_side.data();
  const Label* before = sink_side_.data();
  auto moved = [now, before](NodeId p) { return (now[p] != 0) != (before[p] != 0); };
  // What a node that changed sides changes in the terminal part of the cut.
  auto terminal_change = [&](NodeId p) {
    return Wrapped(TerminalCapacity(now[p] != 0, source_cap_[p], sink_cap_[p])) -
           Wrapped(TerminalCapacity(before[p] != 0, source_cap_[p], sink_cap_[p]));
  };
  // What the edge slot changes in the cut when either end changed sides.
  auto edge_change = [&](EdgeId e, NodeId p, NodeId q) {
    return Wrapped(CrossingCapacity(now[p] != 0, now[q] != 0, cap_[e], rev_cap_[e])) -
           Wrapped(CrossingCapacity(before[p] != 0, before[q] != 0, cap_[e], rev_cap_[e]));
  };
  // Past this many moved nodes the full check is quicker: on the 2-core machine (2048 x 2048) the
  // pricing took 7.6 ms at 0.5% of the nodes moved and 30 at 5%, CutCapacity 16 either way.
  const std::int64_t most_moved = std::int64_t{num_nodes()} / 64;
  if (!topology_.is_grid()) {
    std::int64_t moved_nodes = 0;
    std::uint64_t change = 0;
    for (NodeId p = 0; p < num_nodes(); ++p)
      if (moved(p)) {
        ++moved_nodes;
        change += terminal_change(p);
      }
    if (moved_nodes > most_moved) return CutCapacity(sink_side);
    topology_.ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if (moved(p) || moved(q)) change += edge_change(e, p, q);
    });
    return static_cast<Energy>(last_cut_capacity_ + change);
  }
  // Grids: pieces of rows on all cores list their nodes that changed sides, comparing 16 labels at
  // a time (a 1% edit at 4096 x 4096 moves about one node in 200, scattered), and stop once too
  // many have. Then each moved node prices its terminal edges, its forward edges, and its backward
  // edges whose other end did not move (a moved neighbour prices those as its forward ones). Those
  // reads miss the caches, a dozen lines per node, so each piece prefetches a few nodes ahead of
  // the one it prices. 4096 x 4096, one node in 250 moved: 2.3-2.5 ms against 5.9-6.4 for
  // CutCapacity on the H200 machine's 16 cores (1.1-1.2 against 5.5-5.6 when none moved, 4.0-4.3
  // against 6.6-6.8 for one in 100); on the 2-core machine, one in 200 moved: 106-119 ms comparing
  // node by node, 37-43 with the blocks of 16, 25-32 with the prefetching, against 40-53.
  const Topology& t = topology_;
  const NodeId n = num_nodes();
  const int width = t.width(), directions = t.num_directions();
  const std::int64_t rows = std::int64_t{t.height()} * t.depth();
  constexpr std::int64_t kRowsPerPiece = 16;
  const std::int64_t pieces = (rows + kRowsPerPiece - 1) / kRowsPerPiece;
  constexpr int kBlock = 16;  // labels compared at once, as 64-bit words
  auto block_differs = [now, before](std::int64_t first) {
    std::uint64_t differ = 0;
    for (int k = 0; k < kBlock; k += 2) {
      std::uint64_t a = 0, b = 0;
      std::memcpy(&a, now + first + k, sizeof a);
      std::memcpy(&b, before + first + k, sizeof b);
      differ |= a ^ b;
    }
    return differ != 0;
  };
  std::vector<std::vector<NodeId>> moved_in(static_cast<std::size_t>(pieces));
  std::atomic<std::int64_t> moved_nodes{0};
  tbb::parallel_for(std::int64_t{0}, pieces, [&](std::int64_t piece) {
    if (moved_nodes.load(std::memory_order_relaxed) > most_moved) return;
    std::vector<NodeId>& list = moved_in[static_cast<std::size_t>(piece)];
    const std::int64_t row_end = std::min(rows, (piece + 1) * kRowsPerPiece);
    for (std::int64_t row = piece * kRowsPerPiece; row < row_end; ++row) {
      const std::int64_t first = row * width;
      for (int x = 0; x < width; x += kBlock) {
        if (x + kBlock <= width && !block_differs(first + x)) continue;
        for (int k = x; k < std::min(width, x + kBlock); ++k)
          if (moved(static_cast<NodeId>(first + k))) list.push_back(static_cast<NodeId>(first + k));
      }
    }
    moved_nodes += static_cast<std::int64_t>(list.size());
  });
  if (moved_nodes.load() > most_moved) return CutCapacity(sink_side);
  // Forward neighbour's offset per direction (at most 4), for the prefetches only: where the first
  // row has no neighbour in a direction it reads 0, and those prefetches fetch the node's own slot.
  NodeId step[4] = {};
  for (int d = 0; d < directions; ++d) step[d] = t.ForwardSpan(0, d).offset;
  const EdgeId last_slot = num_edge_slots() - 1;
  auto prefetch = [&](NodeId p) {
    __builtin_prefetch(source_cap_.data() + p);
    __builtin_prefetch(sink_cap_.data() + p);
    for (int d = 0; d < directions; ++d) {
      const EdgeId slot = EdgeId{d} * n + p, back = std::max<EdgeId>(0, slot - step[d]);
      __builtin_prefetch(cap_.data() + slot);
      __builtin_prefetch(rev_cap_.data() + slot);
      __builtin_prefetch(cap_.data() + std::min(back, last_slot));
      __builtin_prefetch(rev_cap_.data() + std::min(back, last_slot));
    }
  };
  constexpr std::size_t kAhead = 8;  // nodes prefetched ahead of the one priced
  const std::uint64_t change = tbb::parallel_reduce(
      tbb::blocked_range<std::int64_t>(0, pieces), std::uint64_t{0},
      [&](const tbb::blocked_range<std::int64_t>& range, std::uint64_t total) {
        Topology::RowSpan forward[4], backward[4];
        std::int64_t spans_row = -1;
        for (std::int64_t piece = range.begin(); piece < range.end(); ++piece) {
          const std::vector<NodeId>& list = moved_in[static_cast<std::size_t>(piece)];
          for (std::size_t i = 0; i < std::min(kAhead, list.size()); ++i) prefetch(list[i]);
          for (std::size_t i = 0; i < list.size(); ++i) {
            if (i + kAhead < list.size()) prefetch(list[i + kAhead]);
            const NodeId p = list[i];
            const std::int64_t row = p / width;
            const int x = static_cast<int>(p - row * width);
            if (row != spans_row) {
              for (int d = 0; d < directions; ++d) {
                forward[d] = t.ForwardSpan(row, d);
                backward[d] = t.BackwardSpan(row, d);
              }
              spans_row = row;
            }
            total += terminal_change(p);
            for (int d = 0; d < directions; ++d) {
              const Topology::RowSpan& f = forward[d];
              if (x >= f.x_begin && x < f.x_end) total += edge_change(EdgeId{d} * n + p, p, p + f.offset);
              const Topology::RowSpan& b = backward[d];
              const NodeId a = p + b.offset;
              if (x >= b.x_begin && x < b.x_end && !moved(a)) total += edge_change(EdgeId{d} * n + a, a, p);
            }
          }
        }
        return total;
      },
      [](std::uint64_t a, std::uint64_t b) { return a + b; });
  return static_cast<Energy>(last_cut_capacity_ + change);
}

Segment StGraph::what_segment(NodeId node) const {
  if (sink_side_.empty()) throw Error("what_segment: maxflow() has not computed a cut yet");
  CheckNode(node, "what_segment");
  return sink_side_[node] ? Segment::kSink : Segment::kSource;
}

void StGraph::set_limits(double time_limit_s, std::function<bool(const IterationRecord&)> callback) {
  if (!(time_limit_s >= 0) || std::isinf(time_limit_s))
    throw Error("set_limits: the time limit must be a finite number of seconds >= 0 (got " +
                mrf::NumberText(time_limit_s) + ")");
  time_limit_s_ = time_limit_s;
  callback_ = std::move(callback);
}

Result StGraph::maxflow(const std::string& backend, bool reuse) {
  const auto start = std::chrono::steady_clock::now();
  Result result;
  result.backend_requested = backend;
  const StopCheck stop_check = MakeStopCheck(time_limit_s_, callback_, start);
  try {
    if (num_nodes() == 0) throw Error("maxflow: the graph has no nodes");
    if (!TotalsTracked()) RecountTotals();
    CheckFlowFits();
    const bool resolve = reuse && engine_ && !changes_.structure_changed && engine_->SupportsResolve() &&
                         (backend == "auto" || backend == engine_->name());
    auto accepts = [this](const SolverEntry& e) {
      return e.make_engine ? e.make_engine()->CannotSolve(topology_) : std::string("not an engine");
    };
    const SolverEntry* entry = nullptr;
    try {
      if (!resolve) {
        std::string note;
        entry = &Registry::Global().Choose(backend, Algorithm::kMaxFlow, Device::kAuto, &note, accepts);
        engine_ = entry->make_engine();
        result.fallback_reason = note;
        engine_->set_stop_check(stop_check);
        engine_->Solve(*this, &result);
      } else {
        entry = Registry::Global().Find(engine_->name());
        engine_->set_stop_check(stop_check);
        engine_->Resolve(*this, &result);
      }
    } catch (const std::exception& e) {
      // A GPU engine failing at run time (out of memory, a failed launch) falls back to the CPU
      // when the backend was left to us; the result says so.
      if (backend != "auto" || !entry || entry->device != Device::kCuda) throw;
      const std::string failure = entry->name + " failed: " + e.what();
      std::string note;
      const SolverEntry& cpu = Registry::Global().Choose("auto", Algorithm::kMaxFlow, Device::kCpu, &note, accepts);
      engine_ = cpu.make_engine();
      result = Result{};
      result.backend_requested = backend;
      result.fallback_reason = failure + "; ran " + cpu.name + " instead";
      engine_->set_stop_check(stop_check);
      engine_->Solve(*this, &result);
    }
    result.backend_used = engine_->name();
    ClearChanges();  // (the sums were counted before the solve)
    if (static_cast<NodeId>(result.labels.size()) != num_nodes())
      throw Error(result.backend_used + " returned a cut of " + std::to_string(result.labels.size()) +
                  " nodes for a graph of " + std::to_string(num_nodes()));
    result.flow += constant_;
    const std::string stopped = engine_->stop_reason();
    // A re-solve's cut mostly equals the last one: priced from it, the check reads the labels of
    // both cuts but capacities only where they differ. The full sum decides when the two disagree,
    // or when a stopped solve leaves no flow to compare with: a slip in the graph's own bookkeeping
    // must not pass for an engine's error, nor give a wrong energy.
    if (stopped.empty()) result.energy = CutCapacityFromLastCut(result.labels);
    if (!stopped.empty() || result.energy != result.flow) result.energy = CutCapacity(result.labels);
    engine_->set_stop_check({});  // the check refers to this call's clock and callback
    if (!stopped.empty()) {
      // A valid cut, but not a minimum one: no bound is claimed, and the flow only counts what was
      // routed so far. The engine keeps its state: the next maxflow() continues or starts afresh.
      result.has_lower_bound = false;
      result.message = "stopped early: " + stopped + "; the cut (capacity " + std::to_string(result.energy) +
                       ") is not a minimum cut, flow routed so far " + std::to_string(result.flow);
    } else {
      if (result.energy != result.flow)
        throw Error("internal error in " + result.backend_used + ": cut capacity " + std::to_string(result.energy) +
                    " differs from flow " + std::to_string(result.flow));
      result.has_lower_bound = true;
      result.lower_bound = result.flow;
      if (result.message == "Solve was not called") result.message = "maximum flow found";
    }
    result.ok = true;
    last_cut_tracked_ = false;  // until sink_side_ holds the new cut
    AssignLabeling(&sink_side_, result.labels);  // on all cores: a re-solve at 4096 x 4096 copies 64 MB
    last_cut_capacity_ = Wrapped(result.energy);
    last_cut_tracked_ = true;
    flow_ = result.flow;
  } catch (const std::bad_alloc&) {
    engine_.reset();
    result.ok = false;
    result.message = "out of memory while computing the maximum flow";
  } catch (const std::exception& e) {
    engine_.reset();
    result.ok = false;
    result.message = e.what();
  } catch (abi::__forced_unwind&) {  // a cancelled thread must unwind
    throw;
  } catch (...) {  // maxflow never throws, whatever a callback throws
    engine_.reset();
    result.ok = false;
    result.message = kForeignException;
  }
  result.threads = ThreadsFor(0);
  result.timings.total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mrf
