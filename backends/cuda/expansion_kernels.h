#pragma once
// Launchers of the cuda-expansion kernels (internal to backends/cuda; the host loop lives in
// cuda_expansion.cpp). The per-node work is backends/common/expansion_steps.h; the max-flow of each
// move runs on cuda-pr's kernels (push_relabel_kernels.h) over the same DeviceState.
// Each launcher enqueues one kernel on `stream` and returns cudaGetLastError().

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/common/expansion_steps.h"
#include "backends/cuda/push_relabel_kernels.h"

namespace mrf::cuda_xp {

/// Indices into the device flags that gate cuda-pr's kernels (DeviceState::flags).
enum Flag : int {
  kFlagFusedStart = 0,  ///< 1: this batch's relabel starts from scratch (fused BFS start round).
  kFlagResolve = 1,     ///< 1: the move re-solves from a kept graph (push rounds before the first relabel).
  kNumFlags = 2
};

/// Indices into MoveControl::blocks_done (last-block detection of multi-block kernels).
enum LastBlockCounter : int { kBuildBlocks = 0, kCommitBlocks = 1 };

/// The model, the labelling and the move loop's arrays on the device, passed by value to kernels.
struct DeviceExpansion {
  const std::int32_t* unary_t = nullptr;  ///< Label-major unary costs: unary_t[label * N + node].
  const std::int32_t* table = nullptr;    ///< L x L: lambda * distance(a, b).
  const std::int32_t* weights = nullptr;  ///< Per edge slot (direction-major); null: all 1.
  std::int32_t* labels = nullptr;         ///< The current labelling.
  const std::int32_t* order = nullptr;    ///< Labels in the order of this cycle's moves.
  xp::MoveControl* ctl = nullptr;         ///< The move loop's state.
  xp::MoveRecord* records = nullptr;      ///< One per move of the cycle.
  xp::LabelBook book;                     ///< Per-label bookkeeping.
  std::uint32_t* flags = nullptr;         ///< The gates' flags (DeviceState::flags, writable).
  // Kept graphs of labels 0..num_slots-1 (MoveControl::num_slots).
  std::int64_t* slot_x = nullptr;       ///< [label * N + node]
  std::int32_t* slot_h = nullptr;       ///< [label * N + node]
  std::uint32_t* slot_r = nullptr;      ///< [(label * D + direction) * N + node]
  std::uint8_t* slot_mask = nullptr;    ///< [label * N + node]
  std::int32_t* slot_built = nullptr;   ///< [label * N + node]: the labels the kept graph was built from.
  int num_labels = 0;
  int reuse = 0;                        ///< 1: moves may re-solve from kept graphs.
  int incremental_relabel = 1;          ///< cuda-pr's policy (PushRelabelTuning::incremental_relabel).
};

/// How kernels that steer the loop report to it: inside the cycle's CUDA graph they set the
/// conditional nodes' values; in the host loop they only write MoveControl.
struct Steering {
  bool graph = false;
  cudaGraphConditionalHandle moves = 0;  ///< The cycle's loop over moves.
  cudaGraphConditionalHandle solve = 0;  ///< A move's loop over batches.
  cudaGraphConditionalHandle incr = 0;   ///< A batch's incremental-relabel section.
};

/// Node-major costs (unary[node * L + label]) to label-major (out[label * N + node]).
cudaError_t LaunchTransposeUnary(const std::int32_t* node_major, std::int32_t* label_major, std::int64_t n, int labels,
                                 cudaStream_t stream);
/// Adds the energy of the current labelling to ctl->energy.
cudaError_t LaunchEnergy(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Start of a cycle: the first move is order[0].
cudaError_t LaunchCycleStart(const DeviceExpansion& e, cudaStream_t stream);
/// Start of a move (one thread): xp::BeginMove, the gates' flags, the re-solve's push counters
/// [resolve_counter, resolve_counter + push_rounds) cleared.
cudaError_t LaunchMoveStart(const DeviceExpansion& e, const cuda_pr::DeviceState& s, int resolve_counter,
                            int push_rounds, const Steering& steer, cudaStream_t stream);
/// The move's graph from the labels (fresh) or from the label's kept graph (re-solve), into the
/// engine's state; flags the tiles a re-solve changes.
cudaError_t LaunchBuild(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Start of a batch: tile flags for the batch's mode, counters [0, num_counters) and the census
/// totals cleared, the fused-start flag and (graph) the incremental section's condition.
cudaError_t LaunchBatchStart(const DeviceExpansion& e, const cuda_pr::DeviceState& s, int num_counters,
                             const Steering& steer, cudaStream_t stream);
/// After the incremental relabel's kill rounds: the BFS starts from the seed tiles; tile marks cleared.
cudaError_t LaunchIncrementalDone(const cuda_pr::DeviceState& s, cudaStream_t stream);
/// End of a batch (one thread): reads the round counters (kill [0, bfs), BFS [bfs, 2 bfs)) and
/// the census, and decides whether the solve goes on and how the next batch starts.
cudaError_t LaunchDecide(const DeviceExpansion& e, const cuda_pr::DeviceState& s, int bfs, const Steering& steer,
                         cudaStream_t stream);
/// The exact energy change of the cut and the nodes it moves, summed into ctl->delta, ctl->moved.
cudaError_t LaunchDelta(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Applies the move when it lowers the energy, keeps the label's graph, and ends the move (xp::EndMove).
cudaError_t LaunchCommit(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);

}  // namespace mrf::cuda_xp
