#pragma once
/// @file cuda_expansion.h
/// @brief `cuda-expansion`: alpha-expansion with the whole move loop on an NVIDIA GPU (no CUDA headers here).
///
/// The model (unary costs, the smoothness table, edge weights) is uploaded once. Each move's graph is
/// built on the device from the device-resident labelling, cut by cuda-pr's push-relabel kernels, its
/// exact energy change summed on the device, and the labelling updated there when the energy drops.
/// Each move's max-flow runs to the end inside one persistent kernel (cuda-pr's tile visits, global
/// relabels and push rounds separated by grid-wide barriers), and a cycle over all labels runs as one
/// CUDA graph whose conditional node loops over the moves, so the host waits once per cycle (it reads
/// the cycle's records, logs, and decides whether to go on).
///
/// Reuse across moves (Vineet and Narayanan's incremental alpha-expansion, with Kohli and Torr's
/// reparametrisation): each label keeps the residual graph of its last move while device memory
/// allows; its next move updates that graph where labels changed since, keeping the flow the new
/// capacities allow, and re-solves from there. A move is skipped when nothing changed since the
/// label's last exact move; the run stops when a full cycle changes nothing.
///
/// Grids only (2-D 4- and 8-connected, 3-D 6-connected). Same moves as cpu-expansion (the
/// Kolmogorov-Zabih construction, truncation of non-submodular terms by raising the disagreement
/// costs when options.truncate_nonsubmodular is set), and a move is kept only if it lowers the exact
/// energy. The cut of a move is the sink-minimal minimum cut (the nodes that can reach the sink in the
/// residual graph), which does not depend on the flow the solver found.

#include <cstdint>
#include <string>

#include "backends/cpu/push_relabel_engine.h"
#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"

namespace mrf {

/// Switches of cuda-expansion, in one printable place.
struct CudaExpansionTuning {
  bool reuse_flow = true;  ///< Keep each label's residual graph between its moves (as memory allows).
  /// A kept graph is re-solved if the label changes since it was built number at most this fraction
  /// of the nodes; otherwise the move builds its graph afresh. Changes are counted with repeats (a
  /// node that changed twice counts twice), so values above 1 are meaningful (0..1000).
  double update_fraction = 0.5;
  /// Run each cycle as one CUDA graph with a conditional node looping over the moves; false: the
  /// host launches every move's kernels (the fallback, and a check). Either way the host waits once
  /// per cycle.
  bool device_loop = true;
  /// Push rounds a re-solve runs from the kept heights before its first global relabel.
  int resolve_push_rounds = 0;
  /// Global relabels without rounds after the first: a block relaxes a tile again as soon as a
  /// neighbouring tile changed the heights it reads, instead of every block waiting at a grid
  /// barrier for the slowest tile of each round (the same distances either way).
  bool async_relabel = true;
  /// The census after a global relabel (the cut, the active tiles and nodes) rides on the first
  /// push round's visits instead of taking a grid-wide phase of its own (the same flow either way).
  bool fused_census = true;
  /// Launch the persistent solve kernel cooperatively: its blocks start only when all can be resident,
  /// so its grid barrier never waits on a block that another kernel of the process (a run from another
  /// thread) keeps from starting, and no block spins while it waits. Off by default: it cost 5% of
  /// Tsukuba's max-flow time on an H200, and with plain launches the GPU starts the waiting kernel's
  /// blocks first, a barrier that still starves ending after 5 s with a message (docs/benchmarks.md).
  /// For processes that run several GPU solves at once.
  bool cooperative_launch = false;
  /// Cycles (from the first) whose max-flows may stop early: once a global relabel leaves at most
  /// early_fraction x nodes active, the move takes the cut of that relabel's exact distances, which
  /// exceeds a minimum cut by at most the excess still on its way, and is scored exactly like any
  /// other (taken only when it lowers the energy). Such a move is never skipped later and its next
  /// run builds its graph afresh. The cycles after these solve exactly, and an early cycle that
  /// changes nothing is followed by exact ones, so the run still ends at a labelling that no move
  /// improves. 0: every max-flow exact; -1 (automatic): 1 for cuda-expansion from its default
  /// start, 0 from given labels (such as --start bp's, where stopping early cost a cycle) and for
  /// cuda-swap (1.2% higher energy on Venus); docs/benchmarks.md has the measurements.
  int early_cycles = -1;
  /// The share of the nodes that may be left active when an early cycle's max-flow stops (0..1).
  double early_fraction = 0.005;
  /// A re-solve whose update of the kept graph changed at most this many nodes (0: none) first
  /// repairs them where they stand, as cuda-pr's local re-solves do (push_relabel_local.h), and
  /// checks the optimality certificate around them; when it holds, no max-flow runs. Otherwise the
  /// solve goes on from the repaired state as usual. The same cut either way.
  int local_changes = 1024;
  /// Per-thread stack (bytes) the solver asks the device for before it runs (cudaLimitStackSize;
  /// it only raises it); 0: the local repairs' frame when local_changes is on (backends/cuda/device_stack.h),
  /// else the driver's. Only for compute-sanitizer's memcheck: its instrumented
  /// local repairs need more stack than their 2,176-byte frame, and in the conditional graph of the
  /// device loop the driver gives them only the frame, so memcheck stops with an illegal address that
  /// is not in the code (4096 runs clean; docs/benchmarks.md, "Re-solves certified after local repairs").
  /// The limit belongs to the process: it stays raised for every later GPU solve. At most kMaxStackBytes.
  int stack_bytes = 0;
  static constexpr int kMaxStackBytes = 512 * 1024;
  /// Blocks of the persistent solve kernel; 0: one per tile, at most as many as the GPU keeps
  /// resident. 1 runs every tile in one block (for tools that serialise blocks, e.g. racecheck).
  int solve_blocks = 0;
  /// Bytes of GPU memory the solver may use; 0: the free memory of the device.
  std::int64_t memory_limit = 0;
  /// After every cycle, download the labels and check the tracked energy against EvaluateEnergy
  /// (tests; costs a transfer and an evaluation per cycle).
  bool check_energy = false;
  /// After every cycle, print one line per move to stderr: its label, whether it ran, was re-solved
  /// and accepted, the nodes it moved, its global relabels, push and BFS rounds, and its device times.
  bool trace_moves = false;
  /// The push-relabel engine's tuning: tiles, local iterations, push rounds per global relabel,
  /// incremental relabels (1: in re-solves, 2: also in fresh solves after the first), wave
  /// relabels (wave_relabel: 4-connected tiles relax a row or column per step), wave pushes
  /// (wave_push, off: measured slower, docs/benchmarks.md; not on 32x32 tiles). Its
  /// bfs_check_every, fused_bfs_start, cuda_graphs, max_push_rounds and resolve_local_iterations
  /// fields are not used (the solve kernel runs BFS rounds to their fixpoint and starts a fresh BFS
  /// fused; its re-solves have their own push rounds, resolve_push_rounds). The defaults
  /// differ from cuda-pr's: 32 local iterations per tile visit and wave relabels (1.1-1.2x faster
  /// than hop-by-hop ones on Tsukuba and Venus, which made 2 push rounds per global relabel 1.04-1.1x
  /// faster than the 4 measured best before); docs/benchmarks.md has the sweeps.
  PushRelabelTuning push_relabel = [] {
    PushRelabelTuning t;
    t.local_iterations = 32;
    t.rounds_per_global_relabel = 2;
    t.wave_relabel = true;
    return t;
  }();

  /// True when every value is usable; otherwise `error` names the field and the constraint.
  bool IsValid(std::string* error) const;
  /// One line for logs and benchmark tables.
  std::string Describe() const;
  /// Applies overrides "name=value,..." (reuse_flow, update_fraction, device_loop, resolve_push_rounds,
  /// async_relabel, fused_census, cooperative_launch, early_cycles, early_fraction, local_changes, stack_bytes, solve_blocks, memory_limit, check_energy, trace_moves, and any PushRelabelTuning name); throws mrf::Error on bad input.
  void Parse(const std::string& overrides);
  /// The defaults with MRF_PR_TUNING (push-relabel names only) and then MRF_CUDA_EXPANSION_TUNING
  /// applied, if set.
  static CudaExpansionTuning FromEnvironment();
};

/// What a run did, for benchmarks: counts, and device time split by phase (from the device clock).
struct CudaExpansionStats {
  std::int64_t cycles = 0;
  std::int64_t moves = 0;          ///< Moves run (built, cut, scored).
  std::int64_t skipped = 0;        ///< Moves skipped (nothing changed since the label's last exact move).
  std::int64_t resolved = 0;       ///< Moves re-solved from the label's kept graph.
  std::int64_t accepted = 0;       ///< Moves that lowered the energy.
  std::int64_t stopped_early = 0;  ///< Moves whose max-flow stopped early (CudaExpansionTuning::early_cycles).
  std::int64_t certified_locally = 0;  ///< Re-solves certified after local repairs (CudaExpansionTuning::local_changes).
  std::int64_t certified_after_repairs = 0;  ///< Of those, the ones whose repairs changed a listed node.
  std::int64_t lists_overflowed = 0;  ///< Re-solves whose update changed more nodes than local_changes (no local path).
  std::int64_t relabels = 0;       ///< Global relabels of all moves.
  std::int64_t push_rounds = 0;    ///< Push rounds of all moves.
  std::int64_t bfs_rounds = 0;     ///< BFS and kill rounds of all relabels (an asynchronous rest counts as one).
  std::int64_t kept_graphs = 0;    ///< Labels whose residual graph is kept (slots).
  int solve_blocks = 0;            ///< Blocks of the persistent solve kernel.
  double build_ms = 0;    ///< Device time building or updating move graphs.
  double solve_ms = 0;    ///< Device time in the moves' max-flows.
  double update_ms = 0;   ///< Device time scoring cuts and updating labels and kept graphs.
  double cycles_ms = 0;   ///< Host time of the cycles (launch to results), everything on the device included.
  double upload_ms = 0;   ///< Host time uploading the model and initialising the device state.
  double graph_ms = 0;    ///< Host time capturing and instantiating the cycle's CUDA graph.
  double download_ms = 0; ///< Host time downloading the labels.
  std::int64_t device_bytes = 0;   ///< GPU memory used.
  std::string loop;       ///< "device" (conditional CUDA graph) or "host" (and why, when it fell back).
};

/// GPU memory a model needs: a fixed part (model, labelling, push-relabel workspace) and the part
/// of one kept residual graph.
struct CudaExpansionMemory {
  std::int64_t base_bytes = 0;
  std::int64_t per_kept_graph_bytes = 0;
};

/// Estimates the GPU memory of a run's buffers (grids only; 0 for other shapes). The stack that local
/// repairs raise (their frame, or stack_bytes, for every thread the device keeps resident) depends on
/// the device and is not counted.
CudaExpansionMemory EstimateCudaExpansionMemory(const Model& model, const CudaExpansionTuning& tuning);

/// Checks that cuda-expansion can take the model and options, independently of any GPU; throws
/// mrf::Error with a one-line message otherwise (not a grid, a non-metric term without
/// truncate_nonsubmodular, costs too large for the engine's 32-bit capacities, invalid options).
void CheckCudaExpansionInput(const Model& model, const SolveOptions& options);

/// Runs alpha-expansion on the GPU and fills `out` like RunAlphaExpansion does (labels, iterations,
/// one log record per cycle with its energy, message, timings). Options used: max_iterations,
/// label_order and seed, initial_labels, time_limit_s and callback (both after every cycle),
/// truncate_nonsubmodular. Throws mrf::Error on bad input, CUDA failures, or when the model does not
/// fit the GPU's memory (the message gives the bytes needed and available). `stats`, when given,
/// receives the run's counts and time split.
void RunCudaExpansion(const Model& model, const SolveOptions& options, Result* out,
                      const CudaExpansionTuning& tuning = CudaExpansionTuning::FromEnvironment(),
                      CudaExpansionStats* stats = nullptr);

}  // namespace mrf
