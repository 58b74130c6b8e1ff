#pragma once
/// @file st_graph.h
/// @brief An s-t graph for binary problems, with the calls users of Kolmogorov's maxflow library know.
///
/// @code
///   mrf::StGraph g;
///   g.add_node(2);
///   g.add_tweights(0, 3, 9);    // source->0 capacity 3, 0->sink capacity 9
///   g.add_tweights(1, 8, 1);
///   g.add_edge(0, 1, 3, 4);     // 0->1 capacity 3, 1->0 capacity 4
///   mrf::Result r = g.maxflow("cpu-bk");   // or "auto"
///   bool zero_on_source_side = g.what_segment(0) == mrf::Segment::kSource;
/// @endcode
///
/// Changing capacities after a solve and calling maxflow() again re-solves from the previous
/// residual graph when the engine supports it (dynamic graph cuts, Kohli and Torr).
///
/// A solve can be limited (set_limits(), or SolveOptions::time_limit_s and callback in mrf::Solve): a
/// stopped solve returns the cut the engine holds at that point (a valid labelling, not a minimum
/// cut), no lower bound, and a message beginning "stopped early".

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mrf/result.h"
#include "mrf/topology.h"
#include "mrf/types.h"

namespace mrf {

class MaxFlowEngine;

/// std::allocator, except that growing a vector without a value leaves the new elements
/// uninitialised: a grid graph's 0.5 GB of capacities (4096 x 4096) can then be zeroed on all cores
/// rather than by one (about 180 ms on one core), and pages land where they are first touched.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// The arrays StGraph keeps its capacities in (a std::vector with the allocator above).
template <class T>
using CapacityArray = std::vector<T, UninitializedAllocator<T>>;

/// What a max-flow engine asks now and then while it works (see MaxFlowEngine::set_stop_check). It
/// gets a progress record (iteration: the poll, counted from 0 per solve; energy -1; note: the work
/// done so far, e.g. "16384 augmentations") and returns "" to go on, or why the engine should stop.
using StopCheck = std::function<std::string(const IterationRecord& progress)>;

/// The StopCheck of a time limit and a progress callback, with the meaning they have in SolveOptions:
/// stops once `time_limit_s` seconds (0 = no limit) have passed since `start` ("the time limit (2 s)
/// passed"), or when `callback` (may be empty) returns false ("the callback asked to stop"). The
/// callback sees every progress record, with time_ms measured from `start`. Returns an empty
/// function when there is neither a limit nor a callback.
StopCheck MakeStopCheck(double time_limit_s, std::function<bool(const IterationRecord&)> callback,
                        std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());

/// Which side of the minimum cut a node is on.
enum class Segment { kSource = 0, kSink = 1 };

/// What changed since the last solve; engines use it to re-solve incrementally.
struct GraphChanges {
  std::vector<NodeId> nodes;  ///< Nodes whose terminal capacities changed (may repeat).
  std::vector<EdgeId> edges;  ///< Edge slots whose capacities changed (may repeat).
  bool structure_changed = true;  ///< Nodes or edges were added: a re-solve must start afresh.
};

/// A directed graph with a source and a sink. Two shapes:
/// - general (default constructor): add_node() and add_edge() between any two nodes;
/// - grid-shaped (constructed from a grid Topology): all nodes exist from the start and add_edge()
///   accepts grid neighbours only, accumulating into the edge slot they share. Grid engines
///   (push-relabel on the GPU) need this shape.
///
/// Terminal capacities may be given negative, as in Kolmogorov's library: the graph keeps them
/// non-negative by adding the same amount to both terminal edges of the node, and remembers the
/// amount in constant(), which maxflow() includes in the reported flow.
class StGraph {
 public:
  /// A general graph with no nodes.
  StGraph();
  /// A grid-shaped graph over `grid` (which must be a grid kind), all capacities zero.
  explicit StGraph(const Topology& grid);
  ~StGraph();
  StGraph(StGraph&&) noexcept;             ///< Movable.
  StGraph& operator=(StGraph&&) noexcept;  ///< Movable.
  StGraph(const StGraph&) = delete;
  StGraph& operator=(const StGraph&) = delete;

  /// Reserves room for a general graph of this many nodes and edges.
  void reserve(NodeId nodes, EdgeId edges);
  /// Adds `count` nodes to a general graph; returns the id of the first.
  NodeId add_node(NodeId count = 1);
  /// Adds capacity to the edges source->node and node->sink (accumulates; may be negative).
  void add_tweights(NodeId node, Energy cap_source, Energy cap_sink);
  /// Adds an edge from->to with capacity `cap` and to->from with `rev_cap` (both >= 0).
  /// General graphs get a new edge; grid graphs add to the slot shared by the two neighbours.
  /// Returns the edge slot.
  EdgeId add_edge(NodeId from, NodeId to, Cost cap, Cost rev_cap);
  /// Adds capacity to a known edge slot, in the slot's own direction (fast path for builders).
  void add_to_edge_slot(EdgeId edge, Cost cap, Cost rev_cap);
  /// Replaces the terminal capacities of a node (for re-solving). Until the graph's first maxflow(),
  /// calls for different nodes may run at once (builders fill large grids on all cores).
  void set_tweights(NodeId node, Energy cap_source, Energy cap_sink);
  /// Replaces the capacities of an edge slot, given in the slot's own direction (for re-solving).
  void set_edge(EdgeId edge, Cost cap, Cost rev_cap);
  /// Replaces the capacities of an edge slot in the slot's own direction: the fast path of
  /// set_edge() for builders that walk the topology's edges (like add_to_edge_slot(), the slot is
  /// only range-checked, not looked up). Until the graph's first maxflow(), calls for different
  /// slots may run at once.
  void set_edge_slot(EdgeId edge, Cost cap, Cost rev_cap);
  /// Grids: calls fill(row_begin, row_end, source, sink) on pieces of the rows (row = y + height * z),
  /// on all cores; fill may replace source[p] and sink[p] for the nodes p of its rows (node ids index
  /// both arrays) with non-negative capacities. Nodes whose capacities changed are recorded for
  /// re-solves, as set_tweights() records them. Throws mrf::Error naming the lowest node left with a
  /// negative capacity, or when the graph is not a grid. After a failure part way (that error, or
  /// fill's or an allocation's) the capacities stay as fill wrote them and the next maxflow() solves
  /// afresh.
  void UpdateTweightsByRows(
      const std::function<void(std::int64_t row_begin, std::int64_t row_end, Energy* source, Energy* sink)>& fill);
  /// Sets every terminal and edge capacity and constant() to zero, keeping the nodes and edges: a
  /// graph of the same shape can then be filled again (move-making algorithms build one per move).
  /// The next maxflow() solves from scratch.
  void ResetCapacities();

  /// Computes a maximum flow with the named engine ("auto" picks the best available one; if a GPU
  /// engine it picked fails at run time, a CPU engine runs instead and result.fallback_reason says why).
  /// With `reuse`, a graph solved before by the same engine whose capacities changed since is
  /// re-solved incrementally. Never throws: errors end up in the result (ok = false, message).
  /// result.flow is the max-flow value; result.energy is the capacity of the cut that was found,
  /// computed independently from the graph (from the last cut's capacity and the nodes that changed
  /// sides, once there is a last cut: see last_cut_capacity()); for a correct engine the two are equal.
  /// A solve stopped by set_limits() returns ok = true, the engine's current cut (result.energy is its
  /// capacity, result.flow the flow routed so far), has_lower_bound = false and a message beginning
  /// "stopped early"; the next maxflow() with `reuse` continues from the flow routed so far when the
  /// engine supports re-solves.
  Result maxflow(const std::string& backend = "auto", bool reuse = true);
  /// Limits every later maxflow() call: it stops early once `time_limit_s` seconds (0 = no limit) have
  /// passed since the call began, or when `callback` returns false for a progress record (see
  /// StopCheck; engines poll every few thousand augmentations or once per push-relabel cycle).
  /// Engines that cannot be interrupted (boost-bk) check only before they start. Throws mrf::Error
  /// for a negative or non-finite limit.
  void set_limits(double time_limit_s, std::function<bool(const IterationRecord&)> callback = {});
  /// The side of the last computed cut that `node` is on.
  Segment what_segment(NodeId node) const;
  /// Value of the last computed flow (constant() included).
  Energy flow() const { return flow_; }

  /// Node and edge layout.
  const Topology& topology() const { return topology_; }
  NodeId num_nodes() const { return topology_.num_nodes(); }  ///< Number of nodes.
  EdgeId num_edge_slots() const { return topology_.num_edge_slots(); }  ///< Number of edge slots.
  Energy source_cap(NodeId node) const { return source_cap_[node]; }  ///< Capacity source->node.
  Energy sink_cap(NodeId node) const { return sink_cap_[node]; }      ///< Capacity node->sink.
  Cost edge_cap(EdgeId e) const { return cap_[e]; }          ///< Capacity in the slot's direction.
  Cost edge_rev_cap(EdgeId e) const { return rev_cap_[e]; }  ///< Capacity against it.
  const CapacityArray<Energy>& source_caps() const { return source_cap_; }  ///< All source capacities.
  const CapacityArray<Energy>& sink_caps() const { return sink_cap_; }      ///< All sink capacities.
  const CapacityArray<Cost>& edge_caps() const { return cap_; }             ///< All forward capacities.
  const CapacityArray<Cost>& edge_rev_caps() const { return rev_cap_; }     ///< All reverse capacities.
  /// Amount added to every flow because of negative terminal capacities (<= 0).
  Energy constant() const { return constant_; }
  /// Changes since the last solve.
  const GraphChanges& changes() const { return changes_; }
  /// Forgets the recorded changes, as maxflow() does after a solve: for callers that drive a
  /// MaxFlowEngine themselves (Solve(), change capacities, Resolve(), MarkSolved(), ...).
  void MarkSolved();
  /// Capacity of the cut whose sink side is given (1 = sink side, one entry per node),
  /// constant() included. Independent of any engine: used to check them.
  Energy CutCapacity(const Labeling& sink_side) const;
  /// Capacity of the last computed cut (the one what_segment() reports) under the capacities as
  /// they are now, constant() included: CutCapacity() of that cut, without reading the graph. Every
  /// capacity change since that maxflow() keeps it up to date, which is how maxflow() checks a
  /// re-solve's cut by reading only where it differs from the last one. Throws mrf::Error when
  /// there is no such cut (no successful maxflow() since the graph was built, nodes or edges were
  /// added, ResetCapacities(), or a failed UpdateTweightsByRows()).
  Energy last_cut_capacity() const;
  /// CutCapacity(sink_side), computed from last_cut_capacity() when there is a last cut: it compares
  /// the two labellings and reads capacities only around the nodes that changed sides, so it is
  /// quick for cuts near the last one (maxflow() checks its cuts with it). When more than 1/64 of
  /// the nodes moved, or there is no last cut, it is CutCapacity() itself.
  Energy CutCapacityFromLastCut(const Labeling& sink_side) const;

 private:
  void MarkNode(NodeId node);
  void MarkEdge(EdgeId edge);
  void ClearChanges();  // MarkSolved() without marking the terminal sums stale
  void CheckNode(NodeId node, const char* call) const;
  // Keeping last_cut_capacity() up to date: each capacity change adds what it changes in the
  // capacity of the last cut (sink_side_), in wrap-around arithmetic (exact once summed).
  void TrackTerminalChange(NodeId node, Energy old_source, Energy old_sink);
  void TrackEdgeChange(EdgeId slot, Cost old_cap, Cost old_rev_cap);
  // The sums of all source capacities, of all sink capacities and of each node's smaller one bound
  // every flow. Counted by maxflow() when they are not valid (a fresh graph, or after MarkSolved()),
  // then kept by each change while changes are recorded (single-threaded after a solve).
  void TrackTotals(Energy old_source, Energy old_sink, Energy source, Energy sink);
  void RecountTotals();
  bool TotalsTracked() const { return totals_valid_ && !changes_.structure_changed; }
  // Refuses a graph whose flow could exceed 64 bits.
  void CheckFlowFits() const;

  Topology topology_;
  CapacityArray<Energy> source_cap_, sink_cap_;
  CapacityArray<Cost> cap_, rev_cap_;
  Energy constant_ = 0;
  GraphChanges changes_;
  std::unique_ptr<MaxFlowEngine> engine_;  // kept for re-solves
  Labeling sink_side_;
  bool last_cut_tracked_ = false;  // last_cut_capacity_ holds the capacity of sink_side_
  std::uint64_t last_cut_capacity_ = 0;
  // (__extension__: GCC's 128-bit integer, without -Wpedantic warnings in the users' builds.)
  __extension__ typedef __int128 WideSum;
  WideSum source_total_ = 0, sink_total_ = 0, smaller_total_ = 0;  // valid while TotalsTracked()
  bool totals_valid_ = false;
  Energy flow_ = -1;
  double time_limit_s_ = 0;                                  // set_limits()
  std::function<bool(const IterationRecord&)> callback_;     // set_limits()
};

/// A max-flow engine: the binary-cut interface every backend (CPU or GPU) implements.
/// Engines may throw mrf::Error or std::bad_alloc; callers turn that into a failed Result.
class MaxFlowEngine {
 public:
  virtual ~MaxFlowEngine() = default;
  /// Registry name, e.g. "cpu-bk".
  virtual std::string name() const = 0;
  /// Empty when this engine can solve graphs of this shape; otherwise why not (e.g. "needs a
  /// grid-shaped graph"). Must be cheap: it is asked before anything is built.
  virtual std::string CannotSolve(const Topology& topology) const {
    (void)topology;
    return {};
  }
  /// Computes a maximum flow from scratch. Must set out->flow (without graph.constant()),
  /// out->labels (the cut: 0 = source side, 1 = sink side, one per node) and out->timings; may add
  /// out->iterations and out->log.
  virtual void Solve(const StGraph& graph, Result* out) = 0;
  /// Optional: begins, in the background, what a solve of a graph of this shape needs before its
  /// capacities are known (cuda-pr: the GPU's context and the workspace), so that it overlaps with
  /// building the graph. Every later call waits for it; when it failed, the solve's own preparation
  /// fails again and reports that. The default does nothing; cuda-pr does nothing either once it
  /// holds a solved graph (re-solves need its workspace as it is).
  virtual void PrepareAhead(const Topology& topology) { (void)topology; }
  /// Bytes of memory the engine holds for the last graph solved (for benchmarks; 0 if unknown).
  virtual std::size_t MemoryBytes() const { return 0; }
  /// True when Resolve() reuses the previous residual graph.
  virtual bool SupportsResolve() const { return false; }
  /// Re-solves after the capacity changes listed in graph.changes(); the structure is the one of
  /// the last Solve(). The default solves from scratch.
  virtual void Resolve(const StGraph& graph, Result* out) { Solve(graph, out); }

  /// Makes Solve() and Resolve() poll `check` (an empty function removes it). When it answers with a
  /// reason the engine stops early, leaving a valid cut in out->labels, the flow routed so far in
  /// out->flow (not a maximum flow), and the reason in stop_reason(). Where engines poll: cpu-bk at
  /// the start and every 16384 growth steps, tbb-pr and cuda-pr after every cycle (global relabel and
  /// push rounds), boost-bk only before it starts (Boost's solver cannot be interrupted). Engines
  /// that never poll simply run to the end.
  void set_stop_check(StopCheck check) { stop_check_ = std::move(check); }
  /// Why the last Solve() or Resolve() stopped before reaching a maximum flow: "" when it finished.
  const std::string& stop_reason() const { return stop_reason_; }

 protected:
  /// For engines: true when a stop check is set (so that polling costs nothing otherwise).
  bool HasStopCheck() const { return static_cast<bool>(stop_check_); }
  /// For engines: asks the stop check with this progress; on a stop, records the reason and the
  /// progress note in stop_reason() and returns true.
  bool PollStop(const IterationRecord& progress) {
    if (!stop_check_) return false;
    const std::string why = stop_check_(progress);
    if (why.empty()) return false;
    stop_reason_ = progress.note.empty() ? why : why + " after " + progress.note;
    return true;
  }
  /// For engines: forgets the last stop; called at the start of every Solve() and Resolve().
  void ClearStop() { stop_reason_.clear(); }

 private:
  StopCheck stop_check_;
  std::string stop_reason_;
};

}  // namespace mrf
