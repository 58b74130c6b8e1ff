#pragma once
// Launchers of the cuda-pr kernels (internal to backends/cuda; the engine lives in cuda_push_relabel.cpp).
// Each launcher enqueues one kernel on `stream` and returns cudaGetLastError().

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/common/push_relabel_steps.h"

namespace mrf::cuda_pr {

/// Indices into DeviceState::totals.
enum Total : int {
  kActiveNodes = 0,     ///< Active nodes found by the last census.
  kSinkResidual = 1,    ///< Residual capacity left on the sink edges (last census).
  kTileVisits = 2,      ///< Push visits of tiles with work (whole solve).
  kTileIterations = 3,  ///< Local iterations of those visits (whole solve).
  kBfsTileVisits = 4,   ///< BFS visits of tiles (whole solve).
  kLocalFailures = 5,   ///< Local re-solve: repairs that gave up.
  kLocalViolations = 6, ///< Local re-solve: nodes failing the certificate.
  kFailedListed = 7,    ///< Local re-solve: failing nodes the certificate tried to list (may exceed the list).
  kNumTotals = 8
};

/// Device pointers of the workspace, passed by value to every kernel.
struct DeviceState {
  std::int64_t* x = nullptr;          ///< Netted excess per node.
  std::int32_t* h = nullptr;          ///< Height per node.
  std::uint32_t* r = nullptr;         ///< Residual per direction and node (direction-major).
  std::uint8_t* mask = nullptr;       ///< Residual-edge bitmask per node (BFS).
  std::int32_t* cap = nullptr;        ///< Edge-slot capacities of the solved graph (re-solve).
  std::int32_t* rev = nullptr;        ///< Edge-slot reverse capacities.
  std::uint8_t* labels = nullptr;     ///< Cut of the last census (1 = sink side).
  std::uint8_t* active = nullptr;     ///< Per tile: may hold active nodes.
  std::uint8_t* touched = nullptr;    ///< Per tile: heights, residuals or excess changed since the last relabel.
  std::uint8_t* seed = nullptr;       ///< Per tile: where an incremental relabel's BFS starts.
  std::uint8_t* dirty = nullptr;      ///< 4 x tiles: work flags of BFS rounds (A, B) and kill rounds (C, D).
  /// Per round of a cycle: first the BFS rounds (tiles that changed), then the push rounds (tiles
  /// that had work). A zero among the BFS counters means the BFS converged.
  std::uint32_t* counters = nullptr;
  unsigned long long* totals = nullptr;  ///< See Total.
  pr::TileLayout layout;
};

/// When a kernel of a batch has work, decided on the device from the round counters of the batch
/// (every block decides the same), so that a batch is a fixed sequence of launches.
struct Gate {
  enum Mode : int {
    kAlways = 0,
    kIfPreviousChanged = 1,      ///< counters[first] != 0: the round before found work.
    kIfConverged = 2,            ///< One of counters[first, first + count) is 0: a fixpoint was reached.
    kIfConvergedAndActive = 3,   ///< kIfConverged, and the census found active nodes.
  };
  int mode = kAlways;
  int first = 0;
  int count = 0;
};

/// A node's terminal change (re-solve).
struct NodeDelta {
  std::int64_t node;
  std::int64_t delta;
};
/// An edge slot's new capacities (re-solve).
struct EdgeUpdate {
  std::int64_t slot;
  std::int32_t cap, rev_cap;
};

/// True when this layout's tile size has compiled kernels.
bool HasKernels(const pr::TileLayout& layout);

/// Residuals from the slot capacities in s.cap / s.rev (the first kernel of a solve).
/// `bad_config` launches with an invalid block size: a real launch failure (fault injection).
cudaError_t LaunchBuildResiduals(const DeviceState& s, bool bad_config, cudaStream_t stream);
/// One colour of a push round whose counter is s.counters[counter] (tiles that had work). With
/// `wave`, local iterations on tiles of 4-connected grids start with wave pushes
/// (PushRelabelTuning::wave_push). With `keep_masks` the visits keep s.mask current for every
/// residual they change (PushTile; only on grids whose width is a multiple of 4).
cudaError_t LaunchPushColour(const DeviceState& s, int colour, int counter, Gate gate, int local_iterations, bool wave,
                             bool keep_masks, cudaStream_t stream);
/// Start of a global relabel: heights 1 or inf, residual bitmasks.
cudaError_t LaunchBfsInit(const DeviceState& s, cudaStream_t stream);
/// One BFS round over the tiles flagged in `dirty_in` or next to one; a tile that changes is
/// flagged in `dirty_out` and counted in s.counters[counter]. With `start`, the round also does
/// LaunchBfsInit's work for its tiles (the first round of a global relabel from scratch). With
/// `wave`, tiles of 4-connected grids relax by waves (PushRelabelTuning::wave_relabel).
cudaError_t LaunchBfsRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                           std::uint8_t* dirty_out, bool start, bool wave, cudaStream_t stream);
/// One round of the incremental relabel's first phase (KillStep) over the tiles flagged in
/// `dirty_in` or next to one; changed tiles go to `dirty_out` and s.seed. With `refresh_masks`
/// (the first round), visited tiles recompute their residual bitmasks; `wave` as for BFS rounds.
cudaError_t LaunchKillRound(const DeviceState& s, int counter, Gate gate, const std::uint8_t* dirty_in,
                            std::uint8_t* dirty_out, bool refresh_masks, bool wave, cudaStream_t stream);
/// Tile flags, active nodes, the cut and the sink residual (totals kActiveNodes, kSinkResidual,
/// cleared before), if the gate is open.
cudaError_t LaunchCensus(const DeviceState& s, Gate gate, cudaStream_t stream);
/// Words of the packed cut of a grid of `nodes` nodes (a bit per node).
constexpr std::int64_t PackedCutWords(std::int64_t nodes) { return (nodes + 31) / 32; }
/// The cut (s.labels) packed into PackedCutWords(num_nodes) words, bit i % 32 of word i / 32 for node i.
cudaError_t LaunchPackCut(const DeviceState& s, std::uint32_t* bits, cudaStream_t stream);
/// Re-solve: terminal changes, then edge changes; both flag the tiles they touch. The first also
/// flags every tile flagged touched active (the masks are stale there at most: the push rounds that
/// keep the masks then visit all of them); it runs with no changes too.
cudaError_t LaunchApplyNodeDeltas(const DeviceState& s, const NodeDelta* deltas, int count, cudaStream_t stream);
cudaError_t LaunchApplyEdgeUpdates(const DeviceState& s, const EdgeUpdate* updates, int count, cudaStream_t stream);
/// Local re-solve, one colour of the repair schedule: a thread per group repairs its changes in
/// order (deltas[group_start[g] .. group_start[g + 1]) for g < groups; with `dead_only` only those
/// that cannot reach the sink); s.totals[kLocalFailures] counts the repairs that gave up. With
/// `group_start` null, every change is a group of its own.
cudaError_t LaunchRepairGroups(const DeviceState& s, const NodeDelta* deltas, const std::int32_t* group_start,
                               int groups, bool dead_only, cudaStream_t stream);
/// The repair kernel's stack frame (bytes a thread), for cuda_stack::GrowTo before the workspace is sized.
cudaError_t RepairStackBytes(int kind, std::size_t* bytes);
/// Settling before the certificate (pr::SettleStep, pr::AliveStep), one colour of a pass: the tiles
/// flagged in `near_flags` or next to one; `settled` gets whether each tile changed; `max_hops` bounds
/// a visit's hops before its search for regions cut off from the sink (the tuning's settle_hops). Visits store
/// their nodes' residual bitmasks (s.mask); with `masks_fresh` they read them instead, which is
/// right once every mask is current: bitmasks are stale only in tiles flagged s.touched (see
/// CertifyRequest::masks_fresh), and a pass from s.touched visits every such tile. `work`: a word
/// of device memory by which the launch's resident blocks deal out the tiles (cleared by the launcher).
cudaError_t LaunchSettleColour(const DeviceState& s, int colour, const std::uint8_t* near_flags,
                               std::uint8_t* settled, bool masks_fresh, int max_hops, std::uint32_t* work,
                               cudaStream_t stream);
/// Nodes per thread of the census's and the certificate's launches (tile sizes are multiples of them).
constexpr int kCensusNodesPerThread = 4;
constexpr int kCertifyNodesPerThread = 4;

/// What a certificate launch checks and records.
struct CertifyRequest {
  /// Only the tiles flagged s.touched and their neighbours (after repairs of the nodes that failed
  /// the last check of every tile, on the same state but for those repairs); otherwise every tile.
  bool near_touched = false;
  /// Where set, the tiles of failing nodes are flagged here, and the check always runs; otherwise
  /// it is skipped when a repair gave up (s.totals[kLocalFailures]).
  std::uint8_t* failed_tiles = nullptr;
  /// Where set, the first `capacity` failing nodes found are listed here (in no order;
  /// s.totals[kFailedListed] counts them all, and must be cleared before).
  NodeDelta* failed_nodes = nullptr;
  int capacity = 0;
  /// Per tile: the sink residual counted there by the last check (written; read with near_touched).
  unsigned long long* tile_residual = nullptr;
  /// Every node's residual bitmask (s.mask) is current: the check reads a byte a node instead of
  /// its residuals. True right after settling; repairs change residuals without their masks.
  bool masks_fresh = false;
};

/// Local re-solve, then: the certificate with the cut and the sink residual, a block per tile
/// (s.totals[kLocalViolations] counts the failing nodes, [kSinkResidual] the residual, both cleared
/// before a check of every tile; with near_touched, kSinkResidual keeps the last check's total and
/// changes by what the checked tiles count now against then).
cudaError_t LaunchCertify(const DeviceState& s, const CertifyRequest& request, cudaStream_t stream);

}  // namespace mrf::cuda_pr
