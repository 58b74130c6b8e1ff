#pragma once
// Launchers of the cuda-expansion and cuda-swap kernels (internal to backends/cuda; the host loop
// lives in cuda_expansion.cpp). The move kind is in MoveControl: the same kernels make both moves. The per-node work is backends/common/expansion_steps.h; the max-flow of each
// move runs on cuda-pr's kernels (push_relabel_kernels.h) over the same DeviceState.
// Each launcher enqueues one kernel on `stream` and returns cudaGetLastError().

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/common/expansion_steps.h"
#include "backends/cuda/push_relabel_kernels.h"

namespace mrf::cuda_xp {

/// The grid barrier of the persistent solve kernel (device memory). Each barrier adds 2^32 plus the
/// block's count of the round (tiles with work, tiles changed, active nodes) to one of two counters,
/// used in turn, so the barrier also sums the round's counts. MoveStart zeroes the counters.
struct GridSync {
  unsigned long long arrive[2][16] = {};  ///< The two counters, each on its own 128-byte line.
  unsigned int abort = 0;  ///< 1: a barrier timed out (blocks not all resident): every block leaves.
  unsigned int async_left = 0;  ///< 1: an asynchronous relabel phase ended with a tile still flagged (a bug).
  unsigned int pad[30] = {};
  /// Work left in an asynchronous relabel phase (SolveConfig::async_relabel), counted from the
  /// value every block expects at the phase's end; its own 128-byte line.
  unsigned long long pending[16] = {};
};

/// The push-relabel schedule of a move's solve.
struct SolveConfig {
  int local_iterations = 8;     ///< Push/relabel iterations per tile visit.
  int push_rounds = 2;          ///< Push rounds between global relabels (fewer when a round finds no work).
  int resolve_push_rounds = 0;  ///< Push rounds before the first relabel of a re-solve.
  int incremental_relabel = 1;  ///< As PushRelabelTuning::incremental_relabel.
  bool wave_relabel = true;     ///< As PushRelabelTuning::wave_relabel.
  bool wave_push = false;       ///< As PushRelabelTuning::wave_push.
  bool async_relabel = false;   ///< As CudaExpansionTuning::async_relabel.
  bool fused_census = false;    ///< As CudaExpansionTuning::fused_census.
  bool cooperative = false;     ///< As CudaExpansionTuning::cooperative_launch.
  std::int64_t local_changes = 0;  ///< As CudaExpansionTuning::local_changes (0: no local path).
};

/// Indices into MoveControl::blocks_done (last-block detection of multi-block kernels).
enum LastBlockCounter : int { kBuildBlocks = 0, kCommitBlocks = 1 };

/// The model, the labelling and the move loop's arrays on the device, passed by value to kernels.
struct DeviceExpansion {
  const std::int32_t* unary_t = nullptr;  ///< Label-major unary costs: unary_t[label * N + node].
  const std::int32_t* table = nullptr;    ///< L x L: lambda * distance(a, b).
  const std::int32_t* weights = nullptr;  ///< Per edge slot (direction-major); null: all 1.
  std::int32_t* labels = nullptr;         ///< The current labelling.
  const std::int32_t* order = nullptr;    ///< Move keys (expansion: labels; swap: pairs) in this cycle's order.
  xp::MoveControl* ctl = nullptr;         ///< The move loop's state.
  xp::MoveRecord* records = nullptr;      ///< One per move of the cycle.
  xp::LabelBook book;                     ///< Per-move bookkeeping (and swap's pairs and label counts).
  GridSync* sync = nullptr;               ///< The solve kernel's barrier.
  const std::uint8_t* all_tiles = nullptr;  ///< One 1 per tile: where a relabel from scratch starts.
  unsigned int* need = nullptr;  ///< Per tile: 1 while an asynchronous relabel must visit it again (0 between phases).
  // Kept graphs of move keys 0..num_slots-1 (MoveControl::num_slots).
  std::int64_t* slot_x = nullptr;       ///< [key * N + node]
  std::int32_t* slot_h = nullptr;       ///< [key * N + node]
  std::uint32_t* slot_r = nullptr;      ///< [(key * D + direction) * N + node]
  std::uint8_t* slot_mask = nullptr;    ///< [key * N + node]
  std::int32_t* slot_built = nullptr;   ///< [key * N + node]: the labels the kept graph was built from.
  /// A re-solve's changed nodes (MoveControl::listed counts them), for its local path; null: none.
  std::int64_t* changed_nodes = nullptr;
  std::int64_t changed_capacity = 0;
  int num_labels = 0;
  int reuse = 0;                        ///< 1: moves may re-solve from kept graphs.
};

/// Inside the cycle's CUDA graph, MoveStart sets the condition of the loop over moves.
struct Steering {
  bool graph = false;
  cudaGraphConditionalHandle moves = 0;
};

/// Node-major costs (unary[node * L + label]) to label-major (out[label * N + node]).
cudaError_t LaunchTransposeUnary(const std::int32_t* node_major, std::int32_t* label_major, std::int64_t n, int labels,
                                 cudaStream_t stream);
/// Adds the energy of the current labelling to ctl->energy.
cudaError_t LaunchEnergy(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Start of a cycle: the first move is order[0].
cudaError_t LaunchCycleStart(const DeviceExpansion& e, cudaStream_t stream);
/// Start of a move (one thread): xp::BeginMove.
cudaError_t LaunchMoveStart(const DeviceExpansion& e, const Steering& steer, cudaStream_t stream);
/// The move's graph from the labels (fresh) or from the label's kept graph (re-solve), into the
/// engine's state; flags the tiles a re-solve changes.
cudaError_t LaunchBuild(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Blocks of the persistent solve kernel for this layout and configuration (the kernel LaunchSolve
/// runs): one per tile, at most as many as the GPU keeps resident at once (its grid barrier needs
/// every block running). 0 when the layout has no kernel.
int SolveBlocks(const cuda_pr::DeviceState& s, const SolveConfig& config, cudaError_t* status);
/// A re-solve's local path, before its max-flow (SolveConfig::local_changes): when Build listed at
/// most that many changed nodes, each is repaired where it stands (pr::RepairNode, as cuda-pr's
/// local re-solves), then the certificate (pr::CertifiedAt) is checked in the tiles Build or the
/// repairs flagged touched and their neighbours, the cut written and those tiles' bitmasks
/// refreshed. When every node there passes, the state is a maximum preflow and the solve has nothing
/// to do; otherwise it goes on from the repaired state (a valid preflow) as usual.
cudaError_t LaunchLocalRepairs(const DeviceExpansion& e, const cuda_pr::DeviceState& s, const SolveConfig& config,
                               cudaStream_t stream);
cudaError_t LaunchLocalCertificate(const DeviceExpansion& e, const cuda_pr::DeviceState& s, const SolveConfig& config,
                                   cudaStream_t stream);
/// The stack frame of a thread of the local repairs on this grid kind (bytes; about 2 KiB).
cudaError_t LocalRepairStackBytes(int kind, std::size_t* bytes);
/// The move's maximum flow from the state Build left, to the end, in one persistent kernel: global
/// relabels (incremental ones in re-solves) and push rounds until no node is active; the cut is left
/// in s.labels, the counts in MoveControl.
cudaError_t LaunchSolve(const DeviceExpansion& e, const cuda_pr::DeviceState& s, const SolveConfig& config, int blocks,
                        cudaStream_t stream);
/// The exact energy change of the cut and the nodes it moves, summed into ctl->delta, ctl->moved.
cudaError_t LaunchDelta(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);
/// Applies the move when it lowers the energy, keeps the label's graph, and ends the move (xp::EndMove).
cudaError_t LaunchCommit(const DeviceExpansion& e, const cuda_pr::DeviceState& s, cudaStream_t stream);

}  // namespace mrf::cuda_xp
