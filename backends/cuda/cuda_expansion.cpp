// cuda-expansion and cuda-swap: the host side (checks, device memory, uploads, the cycle's CUDA graph,
// the loop over cycles, logs). The kernels are expansion_kernels.cu and cuda-pr's
// push_relabel_kernels.cu. One runner makes either move: the kind only sets what a cycle visits
// (labels, or cpu-swap's label pairs), the per-move bookkeeping's size, and the words of the logs.
//
// One cycle is one launch of a CUDA graph:
//   CycleStart
//   while (moves left)              -- a conditional node, set by MoveStart
//     MoveStart  Build  Solve  Delta  Commit
// Solve is one persistent kernel that runs the move's push-relabel to the end (global relabels, push
// rounds) with grid-wide barriers between its rounds. Kernels of a skipped move return at once.
// Without conditional nodes (or with device_loop off) the host enqueues the same launches for every
// move of the cycle and waits once, at the end of the cycle.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/device_stack.h"
#include "backends/cuda/expansion_kernels.h"
#include "backends/cuda/kept_context.h"
#include "backends/cuda/push_relabel_kernels.h"
#include "backends/cuda/staged_upload.h"
#include "inference/cuda_expansion.h"
#include "inference/cuda_swap.h"
#include "inference/iteration_control.h"
#include "inference/move_graph.h"
#include "mrf/device.h"
#include "mrf/memory.h"

namespace mrf {
namespace {

using cuda_pr::DeviceState;
using cuda_xp::DeviceExpansion;
using cuda_xp::Steering;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Milliseconds between two device clock stamps (%globaltimer, nanoseconds).
double StampMs(std::int64_t from, std::int64_t to) { return 1e-6 * static_cast<double>(to - from); }

// Aligned buffers cut from one allocation; with a null base it only counts bytes.
class Arena {
 public:
  explicit Arena(char* base) : base_(base) {}
  template <class T>
  T* Take(std::int64_t count) {
    const std::int64_t bytes = (count * static_cast<std::int64_t>(sizeof(T)) + 255) / 256 * 256;
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += bytes;
    return p;
  }
  std::int64_t used() const { return used_; }

 private:
  char* base_;
  std::int64_t used_ = 0;
};

class Runner {
 public:
  Runner(const Model& model, const SolveOptions& options, const CudaExpansionTuning& tuning, CudaExpansionStats* stats,
         xp::MoveKind kind)
      : m_(model), o_(options), t_(tuning), stats_(stats), kind_(kind),
        name_(kind == xp::kSwapMove ? "cuda-swap" : "cuda-expansion") {}

  ~Runner() {
    AbortCapture();
    if (ctx_ && ctx_->stream) cudaStreamSynchronize(ctx_->stream);
    if (exec_) cudaGraphExecDestroy(exec_);
    if (ctx_) {
      const bool healthy = cudaGetLastError() == cudaSuccess && healthy_;
      cuda_kept::ReturnContext(ctx_, healthy);
    }
  }

  void Run(Result* out) {
    const auto start = Clock::now();
    if (kind_ == xp::kSwapMove) CheckCudaSwapInput(m_, o_);
    else CheckCudaExpansionInput(m_, o_);
    std::string error;
    if (!t_.IsValid(&error)) throw Error(error);
    const std::string why = CudaUnavailableReason();
    if (!why.empty()) throw Error(name_ + ": " + why);
    cudaGetLastError();  // an error left by other code must not be reported as ours
    Labeling initial = InitialLabels(m_, o_);
    MakeLayout();
    ctx_ = cuda_kept::TakeContext(name_);  // kept between solves (kept_context.h)
    healthy_ = false;  // until the solve finishes
    if (!ctx_->side) Check(cudaStreamCreateWithFlags(&ctx_->side, cudaStreamNonBlocking), "creating a stream");
    st_ = ctx_->stream;
    ReserveStack();
    Allocate();
    const auto upload_start = Clock::now();
    Upload(initial);
    stats_->upload_ms = MsSince(upload_start);
    const auto graph_start = Clock::now();
    stats_->loop = "host";
    if (t_.device_loop) {
      try {
        CaptureCycle();
        stats_->loop = "device";
      } catch (const Error& e) {
        // Conditional graph nodes need a CUDA 12.4 driver; the host loop runs the same kernels.
        AbortCapture();
        if (exec_) cudaGraphExecDestroy(exec_);
        exec_ = nullptr;
        stats_->loop = std::string("host (the device loop failed: ") + e.what() + ")";
      }
    }
    stats_->graph_ms = MsSince(graph_start);
    out->timings.setup_ms = MsSince(start) - stats_->upload_ms;
    const auto solve_start = Clock::now();
    out->message = Cycles(out);
    out->timings.solve_ms = MsSince(solve_start);
    const auto download_start = Clock::now();
    out->labels = DownloadLabels();
    stats_->download_ms = MsSince(download_start);
    out->timings.transfer_ms = stats_->upload_ms + stats_->download_ms;
    healthy_ = true;
  }

 private:
  // ---- Errors ----
  void Check(cudaError_t status, const std::string& what) const {
    if (status == cudaSuccess) return;
    cudaGetLastError();
    throw Error(name_ + ": " + what + " failed: " + cudaGetErrorString(status) + " (" + describe_ + ")");
  }
  void Launched(cudaError_t status, const char* kernel) {
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error(name_ + ": kernel launch failed (" + kernel + "): " + cudaGetErrorString(status) +
                  " (" + describe_ + ")");
    }
  }

  // ---- Layout, memory, uploads ----
  void MakeLayout() {
    const Topology& topo = m_.topology;
    const PushRelabelTuning& pr = t_.push_relabel;
    layout_ = pr.Layout(topo);
    const pr::TileLayout& L = layout_;
    n_ = L.num_nodes;
    labels_ = m_.num_labels;
    moves_ = kind_ == xp::kSwapMove ? std::int64_t{labels_} * (labels_ - 1) / 2 : labels_;
    dirs_ = pr::NumDirs(L.kind);
    solve_config_.local_iterations = pr.local_iterations;
    solve_config_.push_rounds = pr.rounds_per_global_relabel;
    solve_config_.resolve_push_rounds = t_.resolve_push_rounds;
    solve_config_.incremental_relabel = pr.incremental_relabel;
    solve_config_.wave_relabel = pr.wave_relabel;
    solve_config_.wave_push = pr.wave_push;
    solve_config_.async_relabel = t_.async_relabel;
    solve_config_.fused_census = t_.fused_census;
    solve_config_.cooperative = t_.cooperative_launch;
    // Only re-solves take the local path (Allocate turns it off again when no graph fits); a list
    // longer than the grid would never fill.
    solve_config_.local_changes = KeepsGraphs() ? static_cast<int>(std::min<std::int64_t>(t_.local_changes, n_)) : 0;
    describe_ = topo.Describe() + ", " + std::to_string(labels_) + " labels";
    if (!cuda_pr::HasKernels(L))
      throw Error(name_ + ": no push-relabel kernels compiled for tile " + std::to_string(L.tile_x) + "x" +
                  std::to_string(L.tile_y) + "x" + std::to_string(L.tile_z) + " on this grid kind");
  }

  // One line on stderr for move k of a cycle (CudaExpansionTuning::trace_moves).
  void TraceMove(std::int64_t cycle, std::int64_t k, const xp::MoveRecord& r) const {
    const std::string what = kind_ == xp::kSwapMove
                                 ? "pair " + std::to_string(r.alpha) + "," + std::to_string(r.beta)
                                 : "label " + std::to_string(r.alpha);
    if (!r.run) {
      std::fprintf(stderr, "%s: cycle %lld move %lld, %s: skipped\n", name_.c_str(), static_cast<long long>(cycle),
                   static_cast<long long>(k + 1), what.c_str());
      return;
    }
    std::fprintf(stderr,
                 "%s: cycle %lld move %lld, %s: %s%s, %s, %lld nodes moved; %lld global relabels, %lld push rounds, "
                 "%lld BFS rounds; device build %.3f ms, max-flow %.3f ms, update %.3f ms\n",
                 name_.c_str(), static_cast<long long>(cycle), static_cast<long long>(k + 1), what.c_str(),
                 r.certified ? "re-solved locally (certified)" : r.resolve ? "re-solved" : "fresh", r.stopped ? " (stopped early)" : "", r.accepted ? "accepted" : "rejected",
                 static_cast<long long>(r.moved),
                 static_cast<long long>(r.relabels), static_cast<long long>(r.push_rounds),
                 static_cast<long long>(r.bfs_rounds), StampMs(r.stamp_start, r.stamp_built),
                 StampMs(r.stamp_built, r.stamp_solved), StampMs(r.stamp_solved, r.stamp_done));
    if (r.resolve && solve_config_.local_changes > 0)
      std::fprintf(stderr, "%s:   local path: %lld nodes changed (at most %d repaired), %lld changed again by the repairs, %lld repairs gave up, %lld nodes failed the certificate\n",
                   name_.c_str(), static_cast<long long>(r.listed), static_cast<int>(solve_config_.local_changes),
                   static_cast<long long>(r.local_moved), static_cast<long long>(r.local_failures),
                   static_cast<long long>(r.local_bad));
  }

  // Cuts every buffer from `arena` (null: only counts) with `slots` kept graphs; returns the bytes.
  std::int64_t Carve(char* base, std::int64_t slots) {
    Arena a(base);
    const std::int64_t n = n_, L = labels_, M = moves_, T = layout_.num_tiles();
    e_ = DeviceExpansion{};
    dev_ = DeviceState{};
    staging_ = a.Take<std::int32_t>(n * L);
    e_.unary_t = a.Take<std::int32_t>(n * L);
    e_.table = a.Take<std::int32_t>(L * L);
    e_.weights = m_.edge_weights.empty() ? nullptr : a.Take<std::int32_t>(static_cast<std::int64_t>(m_.edge_weights.size()));
    e_.labels = a.Take<std::int32_t>(n);
    e_.order = a.Take<std::int32_t>(M);
    e_.ctl = a.Take<xp::MoveControl>(1);
    e_.records = a.Take<xp::MoveRecord>(M);
    e_.book.settled_at = a.Take<std::int64_t>(M);
    e_.book.truncated = a.Take<std::int64_t>(M);
    e_.book.snapshot = a.Take<std::int64_t>(M);
    e_.book.has_state = a.Take<std::int32_t>(M);
    if (kind_ == xp::kSwapMove) {
      e_.book.pairs = a.Take<std::int32_t>(2 * M);
      e_.book.label_count = a.Take<std::int64_t>(L);
    }
    e_.sync = a.Take<cuda_xp::GridSync>(1);
    e_.all_tiles = a.Take<std::uint8_t>(T);
    e_.need = a.Take<unsigned int>(T);
    dev_.x = a.Take<std::int64_t>(n);
    dev_.h = a.Take<std::int32_t>(n);
    dev_.r = a.Take<std::uint32_t>(n * dirs_);
    dev_.mask = a.Take<std::uint8_t>(n);
    dev_.labels = a.Take<std::uint8_t>(n);
    dev_.active = a.Take<std::uint8_t>(T);
    dev_.touched = a.Take<std::uint8_t>(T);
    dev_.seed = a.Take<std::uint8_t>(T);
    dev_.dirty = a.Take<std::uint8_t>(4 * T);
    dev_.totals = a.Take<unsigned long long>(cuda_pr::kNumTotals);
    e_.slot_x = a.Take<std::int64_t>(slots * n);
    e_.slot_h = a.Take<std::int32_t>(slots * n);
    e_.slot_r = a.Take<std::uint32_t>(slots * n * dirs_);
    e_.slot_mask = a.Take<std::uint8_t>(slots * n);
    e_.slot_built = a.Take<std::int32_t>(slots * n);
    e_.changed_capacity = solve_config_.local_changes;
    e_.changed_nodes = e_.changed_capacity > 0 ? a.Take<std::int64_t>(e_.changed_capacity) : nullptr;
    dev_.layout = layout_;
    e_.num_labels = labels_;
    e_.reuse = t_.reuse_flow && slots > 0 ? 1 : 0;
    return a.used();
  }

  // Whether moves keep their residual graphs to re-solve from. Swap keeps none: a pair's graph holds
  // only the nodes labelled with one of its two labels, and there are L(L-1)/2 pairs.
  bool KeepsGraphs() const { return t_.reuse_flow && kind_ == xp::kExpansionMove; }

  // The local repairs' stack frame, grown before Allocate reads the free memory so that the driver's
  // growth at their first launch does not eat the kept graphs' share (device_stack.h). The tuning's
  // stack_bytes may ask for more (compute-sanitizer).
  void ReserveStack() {
    std::size_t want = static_cast<std::size_t>(t_.stack_bytes);
    if (solve_config_.local_changes > 0) {
      std::size_t frame = 0;
      Check(cuda_xp::LocalRepairStackBytes(layout_.kind, &frame), "reading the local repairs' stack frame");
      want = std::max(want, frame);
    }
    Check(cuda_stack::GrowTo(want, &stack_before_), "raising the stack limit");
  }

  // Back to the limit found (or the tuning's stack_bytes) when the local path turned out to be off.
  void ReleaseStack() {
    Check(cuda_stack::LowerTo(std::max(stack_before_, static_cast<std::size_t>(t_.stack_bytes))),
          "restoring the stack limit");
  }

  // Device memory this solve may use: the free memory plus the cached arena (ours too), less head-room for
  // the runtime and the CUDA graphs, capped by the tuning's memory_limit.
  std::int64_t AvailableBytes(std::size_t* total_bytes) {
    std::size_t free_bytes = 0;
    Check(cudaMemGetInfo(&free_bytes, total_bytes), "querying GPU memory");
    std::int64_t available = static_cast<std::int64_t>(free_bytes) + static_cast<std::int64_t>(ctx_->device_bytes);
    available -= std::min<std::int64_t>(available / 16, std::int64_t{512} << 20);
    if (t_.memory_limit > 0) available = std::min<std::int64_t>(available, t_.memory_limit);
    return available;
  }

  void Allocate() {
    std::int64_t base = Carve(nullptr, 0);
    const std::int64_t per_slot = Carve(nullptr, 1) - base;
    std::size_t total_bytes = 0;
    std::int64_t available = AvailableBytes(&total_bytes);
    if (base > available && solve_config_.local_changes > 0) {
      // The repairs' stack (ReserveStack) may be what tips a model that only just fits: give it back and
      // solve without the local path rather than refuse the model.
      solve_config_.local_changes = 0;
      ReleaseStack();
      available = AvailableBytes(&total_bytes);
      base = Carve(nullptr, 0);  // (without the changed-node list)
    }
    if (base > available)
      throw Error(name_ + ": not enough GPU memory: the model and the move workspace need " + MiB(base) + ", " +
                  MiB(available) + " available" + (t_.memory_limit > 0 ? " (memory_limit)" : "") + " of " +
                  MiB(total_bytes) + " (" + describe_ + ")");
    std::int64_t slots = 0;
    if (KeepsGraphs() && per_slot > 0)
      slots = std::min<std::int64_t>(moves_, (available - base) / per_slot);
    if (slots == 0) {  // nothing is re-solved: no list, no local kernels, and no need for their stack
      solve_config_.local_changes = 0;
      ReleaseStack();
    }
    const std::int64_t bytes = Carve(nullptr, slots);
    cudaError_t status = ctx_->EnsureDevice(static_cast<std::size_t>(bytes));
    if (status != cudaSuccess)
      throw Error(name_ + ": out of GPU memory: " + MiB(bytes) + " needed, " + MiB(available) + " seemed available (" +
                  describe_ + "; " + cudaGetErrorString(status) + ")");
    Carve(ctx_->device, slots);
    slots_ = slots;
    solve_blocks_ = cuda_xp::SolveBlocks(dev_, solve_config_, &status);
    Check(status, "sizing the solve kernel");
    if (solve_blocks_ <= 0) throw Error(name_ + ": the solve kernel cannot run on this GPU (" + describe_ + ")");
    if (t_.solve_blocks > 0) solve_blocks_ = std::min(solve_blocks_, t_.solve_blocks);
    stats_->solve_blocks = solve_blocks_;
    stats_->kept_graphs = slots;
    stats_->device_bytes = bytes;
    const std::size_t pinned = sizeof(xp::MoveControl) + 256 + static_cast<std::size_t>(moves_) * (sizeof(xp::MoveRecord) + 4);
    Check(ctx_->EnsurePinned(pinned), "allocating pinned host memory");
    host_ctl_ = reinterpret_cast<xp::MoveControl*>(ctx_->pinned);
    host_records_ = reinterpret_cast<xp::MoveRecord*>(ctx_->pinned + (sizeof(xp::MoveControl) + 255) / 256 * 256);
    host_order_ = reinterpret_cast<std::int32_t*>(host_records_ + moves_);
  }

  void Upload(const Labeling& initial) {
    const std::int64_t n = n_, L = labels_, M = moves_;
    std::vector<std::int32_t> table(static_cast<std::size_t>(L * L));
    for (Label a = 0; a < L; ++a)
      for (Label b = 0; b < L; ++b)
        table[static_cast<std::size_t>(a * L + b)] = m_.pairwise.lambda * m_.pairwise.distance(a, b, labels_);
    Check(cuda_upload::UploadFromPageable(staging_, m_.unary.data(), static_cast<std::size_t>(n * L) * 4, st_),
          "uploading the unary costs");
    Launched(cuda_xp::LaunchTransposeUnary(staging_, const_cast<std::int32_t*>(e_.unary_t), n, labels_, st_),
             "TransposeUnary");
    Check(cudaMemcpyAsync(const_cast<std::int32_t*>(e_.table), table.data(), table.size() * 4, cudaMemcpyHostToDevice, st_),
          "uploading the smoothness table");
    if (e_.weights)
      Check(cuda_upload::UploadFromPageable(const_cast<std::int32_t*>(e_.weights), m_.edge_weights.data(),
                                            m_.edge_weights.size() * 4, st_),
            "uploading the edge weights");
    Check(cudaMemcpyAsync(e_.labels, initial.data(), static_cast<std::size_t>(n) * 4, cudaMemcpyHostToDevice, st_),
          "uploading the initial labels");
    // Swap: its pairs in cpu-swap's order (a = 0, 1, ..., and for each a, b = L-1 down to a+1), and
    // the label counts of the initial labelling.
    std::vector<std::int32_t> pairs;
    std::vector<std::int64_t> counts;
    if (kind_ == xp::kSwapMove) {
      for (Label a = 0; a < L; ++a)
        for (Label b = static_cast<Label>(L - 1); b > a; --b) {
          pairs.push_back(a);
          pairs.push_back(b);
        }
      counts.assign(static_cast<std::size_t>(L), 0);
      for (Label l : initial) ++counts[static_cast<std::size_t>(l)];
      Check(cudaMemcpyAsync(const_cast<std::int32_t*>(e_.book.pairs), pairs.data(), pairs.size() * 4,
                            cudaMemcpyHostToDevice, st_),
            "uploading the label pairs");
      Check(cudaMemcpyAsync(e_.book.label_count, counts.data(), counts.size() * 8, cudaMemcpyHostToDevice, st_),
            "uploading the label counts");
    }
    // Bookkeeping: no move has run (settled_at = -1), no kept graph, clean tile flags and counters.
    Check(cudaMemsetAsync(e_.book.settled_at, 0xff, static_cast<std::size_t>(M) * 8, st_), "clearing the bookkeeping");
    Check(cudaMemsetAsync(e_.book.truncated, 0, static_cast<std::size_t>(M) * 8, st_), "clearing the bookkeeping");
    Check(cudaMemsetAsync(e_.book.snapshot, 0, static_cast<std::size_t>(M) * 8, st_), "clearing the bookkeeping");
    Check(cudaMemsetAsync(e_.book.has_state, 0, static_cast<std::size_t>(M) * 4, st_), "clearing the bookkeeping");
    Check(cudaMemsetAsync(e_.sync, 0, sizeof(cuda_xp::GridSync), st_), "clearing the grid barrier");
    Check(cudaMemsetAsync(e_.need, 0, static_cast<std::size_t>(layout_.num_tiles()) * 4, st_), "clearing the tile flags");
    Check(cudaMemsetAsync(const_cast<std::uint8_t*>(e_.all_tiles), 1, static_cast<std::size_t>(layout_.num_tiles()), st_),
          "marking every tile");
    const std::size_t T = static_cast<std::size_t>(layout_.num_tiles());
    Check(cudaMemsetAsync(dev_.active, 0, T, st_), "clearing the tile flags");
    Check(cudaMemsetAsync(dev_.touched, 0, T, st_), "clearing the tile flags");
    Check(cudaMemsetAsync(dev_.seed, 0, T, st_), "clearing the tile flags");
    Check(cudaMemsetAsync(dev_.dirty, 0, 4 * T, st_), "clearing the tile flags");
    Check(cudaMemsetAsync(dev_.totals, 0, cuda_pr::kNumTotals * 8, st_), "clearing the totals");
    xp::MoveControl c;
    c.kind = kind_;
    c.num_moves = M;
    c.num_slots = slots_;
    c.update_limit = static_cast<std::int64_t>(t_.update_fraction * static_cast<double>(n));
    c.max_rounds = 4 * n + 1000;
    *host_ctl_ = c;
    Check(cudaMemcpyAsync(e_.ctl, host_ctl_, sizeof c, cudaMemcpyHostToDevice, st_), "uploading the loop state");
    Launched(cuda_xp::LaunchEnergy(e_, dev_, st_), "Energy");
    Check(cudaMemcpyAsync(host_ctl_, e_.ctl, sizeof c, cudaMemcpyDeviceToHost, st_), "reading the loop state");
    Check(cudaStreamSynchronize(st_), "uploading the model");  // the host vectors must outlive the copies
    initial_energy_ = host_ctl_->energy;
    if (t_.check_energy) {
      const Energy reference = EvaluateEnergy(m_, initial).total;
      if (reference != initial_energy_)
        throw Error(name_ + ": internal error: the device's energy of the initial labels is " +
                    std::to_string(initial_energy_) + ", the reference evaluator's " + std::to_string(reference));
    }
  }

  Labeling DownloadLabels() {
    Labeling labels(static_cast<std::size_t>(n_));
    Check(cudaMemcpyAsync(labels.data(), e_.labels, static_cast<std::size_t>(n_) * 4, cudaMemcpyDeviceToHost, st_),
          "downloading the labels");
    Check(cudaStreamSynchronize(st_), "downloading the labels");
    return labels;
  }

  // ---- The launches of a move ----
  void EnqueueMove(cudaStream_t s, const Steering& steer) {
    Launched(cuda_xp::LaunchMoveStart(e_, steer, s), "MoveStart");
    Launched(cuda_xp::LaunchBuild(e_, dev_, s), "Build");
    Launched(cuda_xp::LaunchLocalRepairs(e_, dev_, solve_config_, s), "LocalRepairs");
    Launched(cuda_xp::LaunchLocalCertificate(e_, dev_, solve_config_, s), "LocalCertificate");
    Launched(cuda_xp::LaunchSolve(e_, dev_, solve_config_, solve_blocks_, s), "Solve");
    Launched(cuda_xp::LaunchDelta(e_, dev_, s), "Delta");
    Launched(cuda_xp::LaunchCommit(e_, dev_, s), "Commit");
  }

  // ---- The cycle as a CUDA graph ----
  cudaGraph_t AddConditional(cudaStream_t s, cudaGraphConditionalHandle handle, cudaGraphConditionalNodeType type) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    std::size_t count = 0;
    Check(cudaStreamGetCaptureInfo(s, &status, nullptr, &graph, &deps, nullptr, &count), "reading a capture");
    cudaGraphNodeParams params = {cudaGraphNodeTypeConditional};  // the rest zeroed, as the API wants
    params.conditional.handle = handle;
    params.conditional.type = type;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    Check(cudaGraphAddNode(&node, graph, deps, nullptr, count, &params), "adding a conditional node");
    Check(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
          "continuing a capture after a conditional node");
    return params.conditional.phGraph_out[0];
  }

  void BeginCapture(cudaStream_t s, cudaGraph_t into) {
    if (into)
      Check(cudaStreamBeginCaptureToGraph(s, into, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal),
            "capturing a conditional body");
    else
      Check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capturing the cycle");
    capturing_ = s;
    capturing_body_ = into != nullptr;
  }
  // Ends a capture; a capture into a conditional body (`body`) leaves its graph with the node.
  cudaGraph_t EndCapture(cudaStream_t s, bool body) {
    cudaGraph_t graph = nullptr;
    capturing_ = nullptr;
    Check(cudaStreamEndCapture(s, body ? nullptr : &graph), "ending a capture");
    return graph;
  }
  void AbortCapture() {
    if (capturing_) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(capturing_, capturing_body_ ? nullptr : &graph);
      if (graph) cudaGraphDestroy(graph);
      capturing_ = nullptr;
    }
    if (top_graph_) cudaGraphDestroy(top_graph_);
    top_graph_ = nullptr;
    cudaGetLastError();
  }

  void CaptureCycle() {
    Steering steer;
    steer.graph = true;
    BeginCapture(st_, nullptr);
    Launched(cuda_xp::LaunchCycleStart(e_, st_), "CycleStart");
    {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      cudaGraph_t graph = nullptr;
      Check(cudaStreamGetCaptureInfo(st_, &status, nullptr, &graph, nullptr, nullptr, nullptr), "reading a capture");
      Check(cudaGraphConditionalHandleCreate(&steer.moves, graph, 1, cudaGraphCondAssignDefault),
            "creating a conditional handle");
    }
    cudaGraph_t moves_body = AddConditional(st_, steer.moves, cudaGraphCondTypeWhile);
    top_graph_ = EndCapture(st_, false);
    BeginCapture(ctx_->side, moves_body);
    EnqueueMove(ctx_->side, steer);
    EndCapture(ctx_->side, true);
    Check(cudaGraphInstantiate(&exec_, top_graph_, 0), "instantiating the cycle's CUDA graph");
    cudaGraphDestroy(top_graph_);
    top_graph_ = nullptr;
  }

  // ---- Cycles ----
  void ReadControl(bool records) {
    Check(cudaMemcpyAsync(host_ctl_, e_.ctl, sizeof(xp::MoveControl), cudaMemcpyDeviceToHost, st_), "reading the loop state");
    if (records)
      Check(cudaMemcpyAsync(host_records_, e_.records, static_cast<std::size_t>(moves_) * sizeof(xp::MoveRecord),
                            cudaMemcpyDeviceToHost, st_),
            "reading the move records");
    Check(cudaStreamSynchronize(st_), "running a cycle");
  }

  void RunCycleOnHost() {
    Launched(cuda_xp::LaunchCycleStart(e_, st_), "CycleStart");
    for (std::int64_t k = 0; k < moves_; ++k) EnqueueMove(st_, Steering{});
    ReadControl(true);
  }

  // CudaExpansionTuning::early_cycles, the automatic choice resolved: early stops pay in the first
  // cycle of an expansion from label 0, whose moves change the most; from given labels they cost a
  // cycle, and cuda-swap's energy rose with them on Venus (docs/benchmarks.md).
  int EarlyCycles() const {
    if (t_.early_cycles >= 0) return t_.early_cycles;
    return kind_ == xp::kExpansionMove && o_.initial_labels.empty() ? 1 : 0;
  }

  std::string Cycles(Result* out) {
    IterationControl control(o_, out);
    MoveOrder move_order(o_.label_order, o_.seed, m_, moves_, kind_ == xp::kSwapMove);
    std::vector<std::int64_t> order;
    std::int64_t truncations = 0;
    Energy energy = initial_energy_;
    std::string stop;
    const int early_cycles = EarlyCycles();
    bool exact_from_now = early_cycles == 0;  // after the early cycles, or an early cycle that changed nothing
    int cycles_with_stops = 0;                // cycles that ran with the early-stop bound
    for (int cycle = 1;; ++cycle) {
      if (cycle > early_cycles) exact_from_now = true;
      // The cycle's early-stop bound (MoveControl::stop_active), written into the device's loop state.
      host_ctl_->stop_active =
          exact_from_now ? 0 : static_cast<std::int64_t>(t_.early_fraction * static_cast<double>(n_));
      if (!exact_from_now) ++cycles_with_stops;
      Check(cudaMemcpyAsync(&e_.ctl->stop_active, &host_ctl_->stop_active, sizeof(std::int64_t),
                            cudaMemcpyHostToDevice, st_),
            "uploading the early-stop bound");
      move_order.Next(&order);
      for (std::int64_t k = 0; k < moves_; ++k)
        host_order_[k] = static_cast<std::int32_t>(order[static_cast<std::size_t>(k)]);
      Check(cudaMemcpyAsync(const_cast<std::int32_t*>(e_.order), host_order_, static_cast<std::size_t>(moves_) * 4,
                            cudaMemcpyHostToDevice, st_),
            "uploading the move order");
      const std::int64_t changes_before = host_ctl_->changes;
      const auto cycle_start = Clock::now();
      if (exec_) {
        Check(cudaGraphLaunch(exec_, st_), "launching the cycle's CUDA graph");
        ReadControl(true);
      } else {
        RunCycleOnHost();
      }
      stats_->cycles_ms += MsSince(cycle_start);
      if (host_ctl_->error == 2)
        throw Error(name_ + ": the solve kernel's grid barrier timed out: not all of its " +
                    std::to_string(solve_blocks_) + " blocks ran at once (another program on the GPU?) (" + describe_ + ")");
      if (host_ctl_->error == 3)
        throw Error(name_ + ": internal error: an asynchronous relabel ended with a tile still to visit; "
                    "async_relabel=0 (MRF_CUDA_EXPANSION_TUNING) avoids it (" + describe_ + ")");
      if (host_ctl_->error)
        throw Error(name_ + ": internal error: a move's max-flow did not converge within " +
                    std::to_string(host_ctl_->max_rounds) + " rounds (" + describe_ + ")");
      // The cycle's records.
      std::int64_t run = 0, skipped = 0, resolved = 0, nodes = 0, cycle_truncations = 0, relabels = 0, pushes = 0,
                   stopped = 0, certified = 0, certified_after_repairs = 0, overflowed = 0;
      double build_ms = 0, solve_ms = 0, update_ms = 0;
      for (std::int64_t k = 0; k < moves_; ++k) {
        const xp::MoveRecord& r = host_records_[k];
        if (t_.trace_moves) TraceMove(cycle, k, r);
        if (!r.run) {
          ++skipped;
          continue;
        }
        ++run;
        resolved += r.resolve;
        stopped += r.stopped;
        certified += r.certified;
        certified_after_repairs += r.certified && r.local_moved > 0;
        const bool overflow = r.resolve && solve_config_.local_changes > 0 && r.listed > solve_config_.local_changes;
        overflowed += overflow;
        if (overflow && r.certified)  // its unlisted nodes were never repaired or checked
          throw Error(name_ + ": internal error: move " + std::to_string(k + 1) + " of cycle " + std::to_string(cycle) +
                      " was certified locally although its update changed " + std::to_string(r.listed) +
                      " nodes, more than the " + std::to_string(solve_config_.local_changes) + " listed");
        nodes += r.moved;
        cycle_truncations += r.truncated;
        relabels += r.relabels;
        pushes += r.push_rounds;
        stats_->accepted += r.accepted;
        stats_->bfs_rounds += r.bfs_rounds;
        build_ms += StampMs(r.stamp_start, r.stamp_built);
        solve_ms += StampMs(r.stamp_built, r.stamp_solved);
        update_ms += StampMs(r.stamp_solved, r.stamp_done);
      }
      truncations += cycle_truncations;
      stats_->cycles = cycle;
      stats_->moves += run;
      stats_->skipped += skipped;
      stats_->resolved += resolved;
      stats_->stopped_early += stopped;
      stats_->certified_locally += certified;
      stats_->certified_after_repairs += certified_after_repairs;
      stats_->lists_overflowed += overflowed;
      stats_->relabels += relabels;
      stats_->push_rounds += pushes;
      stats_->build_ms += build_ms;
      stats_->solve_ms += solve_ms;
      stats_->update_ms += update_ms;
      energy = host_ctl_->energy;
      if (t_.check_energy) {
        const Energy reference = EvaluateEnergy(m_, DownloadLabels()).total;
        if (reference != energy)
          throw Error(name_ + ": internal error: after cycle " + std::to_string(cycle) + " the tracked energy is " +
                      std::to_string(energy) + ", the reference evaluator's " + std::to_string(reference));
      }
      char times[200];
      std::snprintf(times, sizeof times,
                    "; device: build %.3f ms, max-flow %.3f ms (%lld global relabels, %lld push rounds), update %.3f ms",
                    build_ms, solve_ms, static_cast<long long>(relabels), static_cast<long long>(pushes), update_ms);
      std::string note = std::to_string(run) + " moves" +
                         (kind_ == xp::kExpansionMove ? " (" + std::to_string(resolved) + " re-solved from kept graphs)"
                                                      : std::string()) +
                         ", " + std::to_string(skipped) + " skipped, " + std::to_string(nodes) + " nodes changed";
      if (o_.truncate_nonsubmodular) note += ", " + std::to_string(cycle_truncations) + " terms truncated";
      if (stopped) note += ", " + std::to_string(stopped) + " max-flows stopped early";
      if (certified) note += ", " + std::to_string(certified) + " re-solves certified after local repairs";
      note += times;
      const bool go_on = control.Record(cycle, energy, note);
      // Only an exact cycle that changes nothing shows that no move lowers the energy.
      if (host_ctl_->changes == changes_before && stopped > 0) {
        exact_from_now = true;
      } else if (host_ctl_->changes == changes_before) {
        stop = "converged after " + std::to_string(cycle) + (cycle == 1 ? " cycle" : " cycles") +
               ": no " + (kind_ == xp::kSwapMove ? "swap" : "expansion") + " move lowers the energy";
        break;
      }
      if (!go_on) {
        stop = "stopped by the callback after cycle " + std::to_string(cycle);
        break;
      }
      if (cycle >= o_.max_iterations) {
        stop = "stopped at the iteration limit (" + std::to_string(o_.max_iterations) + " cycles)";
        break;
      }
      if (control.TimeUp()) {
        stop = "stopped by the time limit (" + SecondsText(o_.time_limit_s) + ") after cycle " + std::to_string(cycle);
        break;
      }
    }
    stop += "; " + name_ + " on " + CudaDeviceDescription() + ", " + std::to_string(stats_->moves) + " moves";
    if (kind_ == xp::kExpansionMove)
      stop += " (" + std::to_string(stats_->resolved) + " re-solved), " + std::to_string(slots_) + " of " +
              std::to_string(labels_) + " labels keep their residual graph";
    else
      stop += " over " + std::to_string(moves_) + " label pairs, every move solved afresh";
    if (stats_->stopped_early)
      stop += ", " + std::to_string(stats_->stopped_early) + " max-flows of the first " +
              (cycles_with_stops == 1 ? std::string("cycle") : std::to_string(cycles_with_stops) + " cycles") + " stopped early";
    stop += ", loop on the " + stats_->loop;
    if (o_.truncate_nonsubmodular) stop += "; " + std::to_string(truncations) + " non-submodular move terms truncated";
    return stop;
  }

  const Model& m_;
  const SolveOptions& o_;
  const CudaExpansionTuning& t_;
  CudaExpansionStats* stats_;
  xp::MoveKind kind_;
  std::string name_;       // the solver's registry name, first word of every message
  std::int64_t moves_ = 0;  // moves per cycle: labels (expansion) or label pairs (swap)
  cuda_kept::Context* ctx_ = nullptr;
  bool healthy_ = true;
  cudaStream_t st_ = nullptr;
  cudaStream_t capturing_ = nullptr;
  bool capturing_body_ = false;
  cudaGraph_t top_graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  pr::TileLayout layout_;
  std::int64_t n_ = 0;
  Label labels_ = 0;
  int dirs_ = 4;
  cuda_xp::SolveConfig solve_config_;
  int solve_blocks_ = 0;
  std::int64_t slots_ = 0;
  std::size_t stack_before_ = 0;  // the stack limit ReserveStack found
  std::string describe_;
  DeviceExpansion e_;
  DeviceState dev_;
  std::int32_t* staging_ = nullptr;
  xp::MoveControl* host_ctl_ = nullptr;
  xp::MoveRecord* host_records_ = nullptr;
  std::int32_t* host_order_ = nullptr;
  Energy initial_energy_ = 0;
};

}  // namespace

void RunCudaExpansion(const Model& model, const SolveOptions& options, Result* out, const CudaExpansionTuning& tuning,
                      CudaExpansionStats* stats) {
  CudaExpansionStats local;
  CudaExpansionStats* s = stats ? stats : &local;
  *s = CudaExpansionStats{};
  Runner runner(model, options, tuning, s, xp::kExpansionMove);
  runner.Run(out);
}

void RunCudaSwap(const Model& model, const SolveOptions& options, Result* out, const CudaExpansionTuning& tuning,
                 CudaExpansionStats* stats) {
  CudaExpansionStats local;
  CudaExpansionStats* s = stats ? stats : &local;
  *s = CudaExpansionStats{};
  Runner runner(model, options, tuning, s, xp::kSwapMove);
  runner.Run(out);
}

}  // namespace mrf
