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
  kNumTotals = 5
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
  std::uint8_t* dirty = nullptr;      ///< 2 x tiles: BFS work flags, by round parity.
  /// Per round of a cycle: first the BFS rounds (tiles that changed), then the push rounds (tiles
  /// that had work). A zero among the BFS counters means the BFS converged.
  std::uint32_t* counters = nullptr;
  unsigned long long* totals = nullptr;  ///< See Total.
  pr::TileLayout layout;
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
/// One colour of push round `round` of a cycle whose BFS had `bfs_rounds` rounds: the round's
/// counter is s.counters[bfs_rounds + round]. Round 0 runs only if the BFS converged and the census
/// found active nodes (always when bfs_rounds = 0), a later round only if the one before found work.
cudaError_t LaunchPushColour(const DeviceState& s, int colour, int round, int bfs_rounds, int local_iterations,
                             cudaStream_t stream);
/// Start of a global relabel: heights 1 or inf, residual bitmasks.
cudaError_t LaunchBfsInit(const DeviceState& s, cudaStream_t stream);
/// One BFS round over all tiles with work; reads dirty[parity], writes dirty[1 - parity]. With
/// `start`, the round also does LaunchBfsInit's work for its tiles (the first round of a relabel).
cudaError_t LaunchBfsRound(const DeviceState& s, int round, int parity, bool start, cudaStream_t stream);
/// If the BFS converged within the `bfs_rounds` rounds of this batch: tile flags, active nodes,
/// the cut and the sink residual (totals kActiveNodes, kSinkResidual, cleared before).
cudaError_t LaunchCensus(const DeviceState& s, int bfs_rounds, cudaStream_t stream);
/// Re-solve: terminal changes, then edge changes; both flag the tiles they touch.
cudaError_t LaunchApplyNodeDeltas(const DeviceState& s, const NodeDelta* deltas, int count, cudaStream_t stream);
cudaError_t LaunchApplyEdgeUpdates(const DeviceState& s, const EdgeUpdate* updates, int count, cudaStream_t stream);

}  // namespace mrf::cuda_pr
