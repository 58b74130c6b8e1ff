#pragma once
/// @file push_relabel_engine.h
/// @brief Grid push-relabel max-flow: the host loop shared by the TBB (`tbb-pr`) and CUDA (`cuda-pr`) engines.
///
/// The algorithm (per-node steps in backends/common/push_relabel_steps.h):
/// - the grid is cut into tiles; tiles are coloured so that no two tiles of one colour touch;
/// - a *push round* visits every active tile of each colour in turn; a visit loads the tile and the
///   heights of its one-node halo, runs up to `local_iterations` synchronous push / pull / relabel
///   iterations on it, writes it back and hands flow pushed across the tile's edge to the
///   neighbouring nodes; tiles without active nodes cost nothing;
/// - a *cycle* is a global relabel followed by `rounds_per_global_relabel` push rounds: the global
///   relabel recomputes exact distances to the sink by a tiled breadth-first search (relaxation to
///   a fixpoint) over residual-edge bitmasks, marks the nodes that can no longer reach the sink as
///   dead (height inf), and counts the active nodes; push rounds stop early on the device once a
///   round finds no work;
/// - the solve ends when a global relabel finds no active node; the nodes that can reach the sink
///   in the final residual graph form the sink side of the minimum cut.
/// The host waits for the device once per cycle (cuda-pr runs a cycle as one CUDA graph).
///
/// Re-solving after capacity changes starts from the previous residual graph: terminal changes
/// adjust the netted excess, edge changes keep the edge's flow when it still fits and otherwise
/// move the excess to its endpoints (Kohli and Torr's reparametrisation, which the netted excess
/// absorbs without changing any cut).

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "backends/common/push_relabel_local.h"
#include "backends/common/push_relabel_steps.h"
#include "mrf/memory.h"
#include "mrf/st_graph.h"

namespace mrf {

/// Tuning values of the grid push-relabel engines, in one printable place.
struct PushRelabelTuning {
  int tile_x = 32;             ///< 2-D tile width (32).
  int tile_y = 16;             ///< 2-D tile height (4-connected: 8, 16 or 32; 8-connected: 8 or 16).
  int tile3d_x = 8;            ///< 3-D tile size x (8x8x8 or 32x4x4).
  int tile3d_y = 8;            ///< 3-D tile size y.
  int tile3d_z = 8;            ///< 3-D tile size z.
  int local_iterations = 8;    ///< Push/relabel iterations per tile visit.
  /// The same in a re-solve's first push rounds, which start from the kept heights (and, with
  /// local_resolve = 3, come before the certificate); every re-solve of both engines takes them.
  /// The tiles of a small edit hold a few changed nodes whose excess settles nearby, so longer
  /// visits leave fewer nodes failing the certificate without the cost they have in a fresh solve.
  /// 16 was measured on cuda-pr only, with local_resolve = 3, on the 1% edits and the brush stroke
  /// of the segmentation scene (docs/benchmarks.md has the sweep on the H200); tbb-pr's re-solves
  /// and edits of edge capacities take it untested for speed (their results stay exact).
  int resolve_local_iterations = 16;
  int rounds_per_global_relabel = 2;  ///< Push rounds between two global relabels (one cycle).
  /// Push rounds a re-solve runs from the kept heights before its first check or relabel; -1: as
  /// many as rounds_per_global_relabel. 0 goes from the fills straight to settling and the
  /// certificate (local_resolve = 3), or to the relabels. 0 and 1 left too many nodes failing the
  /// certificate on the 1% edit at 4096 (4.2 and 3.6 against 1.3 ms, H200; docs/benchmarks.md).
  int resolve_push_rounds = -1;
  int bfs_check_every = 8;     ///< BFS rounds per batch before the host checks convergence (even).
  bool cuda_graphs = false;    ///< cuda-pr: replay each batch of launches as one CUDA graph (measured no faster).
  /// cuda-pr: the first BFS round of a global relabel computes the starting distances itself
  /// (one pass and one launch less); tbb-pr reaches the same distances either way.
  bool fused_bfs_start = true;
  /// Incremental global relabels start from the heights there: heights no longer backed by a
  /// residual path are dropped, then the BFS relaxes only around the tiles that changed since the
  /// last relabel. The distances are the same exact ones either way. 0: never; 1: in re-solves
  /// (the default: their changes are often local); 2: also in every cycle of a solve but the first
  /// (measured slower on the segmentation scene, where push rounds touch most tiles).
  int incremental_relabel = 1;
  /// cuda-pr and cuda-expansion: BFS and kill visits of 4-connected tiles relax whole rows and
  /// columns per iteration (scans across a warp) rather than one hop, so a visit's iterations count
  /// the turns of the longest path, not its length; the same distances either way. Other grids, and
  /// tbb-pr, always relax hop by hop (tbb-pr ignores the field). Off for cuda-pr: on the segmentation
  /// scene, whose paths inside a tile are short, waves made its solve slower (0.86 against 0.76 ms at
  /// 1024, H100); cuda-expansion turns it on (docs/benchmarks.md).
  bool wave_relabel = false;
  /// Wave pushes (cuda-pr, tbb-pr, cuda-expansion): each local iteration of a push visit on a
  /// 4-connected tile carries excess along admissible edges across whole rows before the push
  /// (rightwards, then leftwards) and whole columns after the pull (downwards, then upwards), so it
  /// crosses a tile in one iteration (backends/common/push_relabel_wave.h; relaxed across a warp on
  /// the GPU, node after node in tbb-pr, bit-identical). Other grids, and cuda-expansion's 32x32
  /// tiles, ignore it. Off: on the H100 it saved a cycle but made push iterations dearer, even at
  /// 1024 and 11% slower at 4096 on the segmentation scene (0.77 / 8.3 against 0.75 / 7.4 ms), and
  /// 11-16% slower in cuda-expansion on Tsukuba and Venus (even with 16 local iterations there);
  /// docs/benchmarks.md has the sweep.
  bool wave_push = false;
  /// Re-solves after terminal changes only (backends/common/push_relabel_local.h). 1: repair the
  /// state around each changed node, then check the optimality certificate on every node; only when
  /// it fails, go on with push rounds and relabels around the changed tiles. 2: only the repairs of
  /// changed nodes that cannot reach the sink (they would otherwise revive whole regions in the next
  /// relabel), then the usual re-solve. 3: those fills (each change on its own, no order), the usual
  /// re-solve's first push rounds from the kept heights, settling (the nodes those rounds left
  /// without support rise; regions cut off inside a tile drop), then the certificate; when it fails
  /// on a few nodes, their repairs and the certificate again (repair_violations); only when that
  /// fails too, relabels as in 0, starting at the tiles of the nodes that failed it. 0: the usual re-solve. -1 (the default): the engine's choice:
  /// 1 for tbb-pr, 3 for cuda-pr, where a thread's serial repairs are latency-bound (docs/benchmarks.md).
  int local_resolve = -1;
  /// local_resolve = 3, when the certificate fails on at most this many nodes: each of them is
  /// repaired where it stands (pr::RepairNode: its excess discharged nearby, its support restored,
  /// its dead region filled) and the certificate is checked again before any relabel. 0: never.
  /// 1024: with 4096 or 16384 the small brush stroke of the benchmark repaired its ~1,300 failing
  /// nodes in vain and got slower; the 1% edits were the same (docs/benchmarks.md).
  int repair_violations = 1024;
  /// local_resolve = 3: hops of a tile's settling before its regions cut off from the sink are
  /// searched (pr::kSettleHops by default). Fewer hops end a visit sooner and send more tiles to that
  /// search; the heights and the certificate's verdict come out valid either way.
  int settle_hops = pr::kSettleHops;
  /// local_resolve = 3: passes of settling over the tiles, all colours each (pr::kSettlePasses by
  /// default). One pass leaves a tile whose neighbour rose after it to the repairs of the nodes that
  /// fail the certificate; more passes follow such rises further. One pass was 5-12% faster on the
  /// small edits but slower on the 1% edit at 4096 (more rounds of repairs; docs/benchmarks.md).
  int settle_passes = pr::kSettlePasses;
  int max_push_rounds = 0;     ///< Stop after this many push rounds (step-by-step tests); 0 = no limit.
  /// cuda-pr: after each solve, print its device timeline on stderr (an event after every launch and
  /// before every host wait; microseconds between them), to see where the host keeps the GPU idle.
  /// A diagnostic: one line per solve, an event per launch (long solves make long lines); tbb-pr
  /// ignores it.
  bool trace = false;

  /// True when every value is usable; otherwise `error` names the field and the constraint.
  bool IsValid(std::string* error) const;
  /// "tile 32x16 (3-D 8x8x8), 8 local iterations (16 in a re-solve's first push rounds), ..." for
  /// logs and benchmark tables.
  std::string Describe() const;
  /// Applies overrides "name=value,name=value" (names as the fields); throws mrf::Error on bad input.
  void Parse(const std::string& overrides);
  /// The defaults with the overrides of the environment variable MRF_PR_TUNING, if set.
  static PushRelabelTuning FromEnvironment();
  /// The tiling of a grid `topology` by this tuning's tile sizes (2-D or 3-D).
  pr::TileLayout Layout(const Topology& topology) const;
};

/// What the last solve did (for logs and benchmarks).
struct PushRelabelStats {
  std::int64_t push_rounds = 0;      ///< Push rounds enqueued (each visits every colour).
  std::int64_t global_relabels = 0;  ///< Global relabels (BFS from the sink).
  std::int64_t bfs_rounds = 0;       ///< BFS rounds over all global relabels.
  std::int64_t launches = 0;         ///< Kernel launches (cuda-pr) or parallel loops (tbb-pr).
  std::int64_t host_syncs = 0;       ///< Times the host waited for the device to read a counter.
  std::int64_t tile_visits = 0;      ///< Tile visits that found active nodes.
  std::int64_t tile_iterations = 0;  ///< Local push/relabel iterations summed over those visits.
  std::int64_t bfs_tile_visits = 0;  ///< BFS visits of tiles (tiles processed in BFS rounds).
  double relabel_ms = 0;             ///< Time in global relabels (device time on the GPU).
  double push_ms = 0;                ///< Time in push rounds (device time on the GPU).
  std::int64_t local_repairs = 0;    ///< Re-solve: changed nodes repaired locally.
  std::int64_t local_failures = 0;   ///< Re-solve: local repairs that gave up.
  std::int64_t local_violations = 0; ///< Re-solve: nodes failing the certificate after the repairs.
  /// Re-solve (local_resolve = 3): nodes failing the certificate again after those that failed it
  /// were repaired; -1 when they were not repaired (too many, or repair_violations = 0).
  std::int64_t violations_after_repair = -1;
};

/// The raw state of the engine (for step-by-step comparisons of the two engines).
struct PushRelabelState {
  std::vector<std::int64_t> x;   ///< Netted excess per node.
  std::vector<std::int32_t> h;   ///< Height per node.
  std::vector<std::uint32_t> r;  ///< Residual capacity per direction and node (direction-major).
  /// cuda-pr only (empty for tbb-pr): each node's residual bitmask as the device holds it, and
  /// whether the node's tile is flagged touched (where the masks may be stale).
  std::vector<std::uint8_t> mask, in_touched_tile;
};

/// The device-independent part of the grid push-relabel engines.
class PushRelabelEngine : public MaxFlowEngine {
 public:
  /// The changed nodes of an edit (`nodes`, which may repeat) in increasing order, each once.
  /// `bitmap`: scratch space for large edits, all zero between calls (it is left so). Public for tests.
  static std::vector<NodeId> SortedUnique(const std::vector<NodeId>& nodes, std::int64_t num_nodes,
                                          std::vector<std::uint64_t>* bitmap);
  explicit PushRelabelEngine(const PushRelabelTuning& tuning);
  ~PushRelabelEngine() override;

  std::string CannotSolve(const Topology& topology) const override;
  /// Runs Prepare() for this shape on a thread of its own when PreparingAheadPays() and the engine
  /// holds no solved state (whose workspace a re-solve needs).
  void PrepareAhead(const Topology& topology) override;
  void Solve(const StGraph& graph, Result* out) override;
  bool SupportsResolve() const override { return true; }
  void Resolve(const StGraph& graph, Result* out) override;

  /// The tuning values in use.
  const PushRelabelTuning& tuning() const { return tuning_; }
  /// Replaces the tuning values (workspace is re-made at the next solve when tiles change).
  void set_tuning(const PushRelabelTuning& tuning);
  /// Counters of the last solve.
  const PushRelabelStats& stats() const { return stats_; }
  /// Time spent in the phases of a solve, in milliseconds (device time for the GPU).
  struct PhaseTimes {
    double upload_ms = 0, solve_ms = 0, download_ms = 0;
  };
  /// Phase times of the last solve or re-solve.
  PhaseTimes LastPhaseTimes() { return Times(); }
  /// Bytes of the workspace (device memory for cuda-pr) plus the host copies kept for re-solves.
  std::size_t MemoryBytes() const override;
  /// Copies the current state (after a solve or RunForTest) to the host.
  virtual PushRelabelState DownloadState() = 0;
  /// Uploads `graph` and runs the algorithm for at most `push_rounds` push rounds (with the
  /// global relabels the schedule puts between them), leaving the state for DownloadState().
  void RunForTest(const StGraph& graph, int push_rounds);

 protected:
  /// A change of one edge slot: new capacities in the slot's direction.
  struct EdgeChange {
    std::int64_t slot = 0;
    std::int32_t cap = 0, rev_cap = 0;
  };
  /// A change of one node's netted terminal capacity (s - t).
  struct NodeChange {
    std::int64_t node = 0;
    std::int64_t delta = 0;
  };

  // ---- The device-specific part ----
  /// Makes the workspace for this layout (or keeps the one there when it fits).
  virtual void Prepare(const pr::TileLayout& layout) = 0;
  /// Whether PrepareAhead() should run Prepare() in the background (cuda-pr: its first use of the
  /// GPU and its allocations took 218-238 ms of a 4096 x 4096 segmentation on the GPU machine).
  virtual bool PreparingAheadPays() const { return false; }
  /// Waits for PrepareAhead()'s Prepare(), dropping its failure (the Prepare() of the solve repeats
  /// it with its message). Engines whose PreparingAheadPays() must call it first in their destructors:
  /// the base's destructor runs after their members are gone.
  void WaitForPrepareAhead() const;
  /// Where the host writes the initial netted excess (N values) before Upload().
  virtual std::int64_t* HostExcessBuffer() = 0;
  /// Uploads the excess from HostExcessBuffer() and the graph's edge capacities; builds residuals.
  virtual void Upload(const StGraph& graph) = 0;
  /// Applies capacity changes to the residual state (re-solve) and flags the tiles they touch.
  virtual void ApplyChanges(const std::vector<NodeChange>& nodes, const std::vector<EdgeChange>& edges) = 0;
  /// What one cycle found.
  struct CycleResult {
    std::int64_t active_nodes = 0;  ///< Active nodes after the global relabel (0: solved).
    std::int64_t bfs_rounds = 0;    ///< BFS rounds until the fixpoint.
  };
  /// How a cycle's global relabel starts.
  enum class Relabel {
    kNone,         ///< No global relabel: push rounds from the tile flags and heights as they are.
    kFull,         ///< From scratch: distance 1 at the sink's neighbours, inf elsewhere.
    kIncremental,  ///< From the heights there, around the tiles changed since the last relabel.
  };
  /// One cycle: a global relabel (exact distances, dead nodes, tile flags, the cut, the active
  /// nodes) and then, if any node is active, `push_rounds` push rounds (stopping after a round
  /// without work) of up to `iterations` local iterations a tile visit; with Relabel::kNone only
  /// the push rounds (active_nodes is then not counted).
  /// Adds to stats_ (launches, syncs, visits, phase times).
  /// Without `wait` (Relabel::kNone only), the host does not wait for the push rounds: what it
  /// enqueues next (the certificate) waits for them, and collects their counts.
  virtual CycleResult Cycle(int push_rounds, int iterations, Relabel relabel, bool wait) = 0;
  /// Copies the cut of the last global relabel (1 = sink side) and returns the total residual
  /// capacity left on the sink edges.
  virtual std::int64_t Finish(std::vector<Label>* sink_side) = 0;
  /// Order of local repairs: changes grouped by blocks of kRepairBlock nodes a side, blocks coloured
  /// so that two blocks of one colour are a block apart. The repairs of one colour may run in
  /// parallel (a thread per group, its changes in order), the colours one after another: repairs
  /// that run together rarely meet, and the certificate catches it when they do.
  static constexpr int kRepairBlock = 16;
  struct RepairSchedule {
    std::vector<std::int32_t> group_start;   ///< Per group: index of its first change; then the end.
    std::vector<std::int32_t> colour_start;  ///< Per colour: index of its first group; then the end.
  };
  /// Re-solve without global relabels: repairs the state around each changed node (their deltas
  /// already applied by ApplyChanges, `nodes` in schedule order), then checks the certificate on
  /// every node, writing the cut and the sink residual for Finish(). Returns whether the certificate
  /// holds; fills the local_* stats.
  /// With `dead_only`, only changed nodes that cannot reach the sink are repaired and nothing is
  /// checked (returns false).
  virtual bool RepairLocally(const std::vector<NodeChange>& nodes, const RepairSchedule& schedule, bool dead_only) = 0;
  /// Settles the tiles that changed and those next to them (pr::SettleStep, colour by colour), before
  /// CheckCertificate() after push rounds; leaves every residual bitmask current (cuda-pr: it
  /// stores those of the tiles it visits, unless the push rounds kept them).
  virtual void Settle() = 0;
  /// Checks the certificate (push_relabel_local.h) on every node, after local repairs (whose failures
  /// count as a failed check) or push rounds; when it holds, writes the cut and the sink residual
  /// for Finish(). Fills stats_.local_violations, and stats_.local_failures where the engine counts
  /// the repairs' failures on the device (cuda-pr; tbb-pr counts them in RepairLocally). With
  /// `narrow_touched` (after Settle(), which left
  /// every bitmask fresh), only the tiles of failing nodes stay flagged `touched`, so that the
  /// incremental relabel after a failed check starts there alone.
  virtual bool CheckCertificate(bool narrow_touched) = 0;
  /// One round of repairs after a failed certificate: the last check (CheckCertificate(true), or this)
  /// listed its stats_.local_violations failing nodes (at most tuning_.repair_violations); each is
  /// repaired where it stands (pr::RepairNode, which flags the tiles it changes), then the certificate
  /// is checked again on the tiles flagged `touched` and their neighbours (where the repairs and the
  /// failing nodes are; elsewhere nothing changed since the check passed), listing the nodes still
  /// failing and flagging their tiles without clearing any flag. Sets stats_.local_violations to the
  /// new count; returns whether the certificate holds. RepairViolations() runs the rounds.
  virtual bool RepairListedViolations() = 0;
  /// The local re-solve mode that local_resolve = -1 stands for on this engine.
  virtual int DefaultLocalResolve() const { return 1; }
  /// The local re-solve mode that re-solves with node changes only take (the tuning's, or the default's).
  int NodeEditMode() const { return tuning_.local_resolve < 0 ? DefaultLocalResolve() : tuning_.local_resolve; }
  /// The share of the nodes beyond which an edit of a grid of at least 2^18 nodes is solved afresh
  /// (on the kept workspace) instead of re-solved: the edit's changes, capacities changed at nodes
  /// and edge slots counted with repeats, exceed it x nodes. A re-solve works per change, a fresh
  /// solve per node.
  virtual double DenseEditFraction() const = 0;
  /// Times of the last solve's phases.
  virtual PhaseTimes Times() = 0;
  /// Bytes held by the workspace.
  virtual std::size_t WorkspaceBytes() const = 0;

  PushRelabelTuning tuning_;
  PushRelabelStats stats_;
  pr::TileLayout layout_;

 private:
  mutable std::future<void> prepare_ahead_;  // PrepareAhead()'s Prepare(); waited for by const readers too
  void PrepareHost(const StGraph& graph);
  [[noreturn]] void ThrowTooLarge(const StGraph& graph, NodeId v) const;  ///< node v's weight is above 2^62
  /// The push / relabel loop; a re-solve starts with push rounds from the kept heights, and with
  /// `certify_first` ends there when CheckCertificate() holds.
  void RunLoop(Result* out, int max_push_rounds, bool resolve, bool certify_first = false);
  /// Rounds of RepairListedViolations() while the count of failing nodes falls (pr::kRepairRounds at
  /// most). Returns whether the certificate holds; sets stats_.violations_after_repair and leaves
  /// stats_.local_violations at the first check's count.
  bool RepairViolations();
  void FinishResult(Result* out, const std::string& message);
  RepairSchedule ScheduleRepairs(std::vector<NodeChange>* nodes) const;

  // t per node at the last solve (flow = sum t - residual); uninitialised when allocated, since
  // PrepareHost() writes it on all cores (with a zero fill on one core first, a first solve at
  // 4096 x 4096 spent 70-80 ms in setup on the GPU machine, against 11-12 ms now).
  CapacityArray<std::int64_t> sink_caps_;
  std::vector<std::uint64_t> changed_bits_;  // SortedUnique's bitmap
  LabelingAhead cut_labels_;  // the cut's labelling, made while the solve runs
  std::int64_t sum_sink_caps_ = 0;
  bool solved_ = false;
};

}  // namespace mrf
