// cuda-pr: the host side of the GPU push-relabel engine (workspace, transfers, launch batches,
// CUDA graphs, error handling). The algorithm's schedule is PushRelabelEngine's (shared with tbb-pr).
#include "backends/cuda/cuda_push_relabel.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "backends/common/push_relabel_local.h"
#include "backends/cuda/device_stack.h"
#include "backends/cuda/kept_context.h"
#include "backends/cuda/push_relabel_kernels.h"
#include "backends/cuda/staged_upload.h"
#include "mrf/device.h"
#include "mrf/memory.h"

namespace mrf {
namespace {

using cuda_pr::DeviceState;

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

class CudaPushRelabelEngine final : public PushRelabelEngine {
 public:
  explicit CudaPushRelabelEngine(const PushRelabelTuning& tuning) : PushRelabelEngine(tuning) {}
  ~CudaPushRelabelEngine() override {
    WaitForPrepareAhead();  // its Prepare() may still be allocating
    Release();
    for (cudaEvent_t& e : events_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : trace_events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
    cudaGetLastError();  // leave no error behind for the next CUDA user of this thread
  }
  std::string name() const override { return "cuda-pr"; }

  PushRelabelState DownloadState() override {
    PushRelabelState state;
    const std::int64_t n = layout_.num_nodes;
    const int dirs = pr::NumDirs(layout_.kind);
    state.x.resize(n);
    state.h.resize(n);
    state.r.resize(static_cast<std::size_t>(n) * dirs);
    Check(cudaStreamSynchronize(stream_), "waiting for the GPU");
    Check(cudaMemcpy(state.x.data(), dev_.x, n * 8, cudaMemcpyDeviceToHost), "downloading the excess");
    Check(cudaMemcpy(state.h.data(), dev_.h, n * 4, cudaMemcpyDeviceToHost), "downloading the heights");
    Check(cudaMemcpy(state.r.data(), dev_.r, state.r.size() * 4, cudaMemcpyDeviceToHost), "downloading the residuals");
    state.mask.resize(n);
    Check(cudaMemcpy(state.mask.data(), dev_.mask, n, cudaMemcpyDeviceToHost), "downloading the residual bitmasks");
    std::vector<std::uint8_t> touched(static_cast<std::size_t>(layout_.num_tiles()));
    Check(cudaMemcpy(touched.data(), dev_.touched, touched.size(), cudaMemcpyDeviceToHost), "downloading the tile flags");
    state.in_touched_tile.resize(n);
    for (std::int64_t v = 0; v < n; ++v) state.in_touched_tile[v] = touched[layout_.TileOfNode(v)];
    return state;
  }

 protected:
  bool PreparingAheadPays() const override { return true; }

  void Prepare(const pr::TileLayout& layout) override {
    debug_sync_ = CudaDebugSyncRequested("cuda-pr");
    inject_ = GetEnv("MRF_INJECT_CUDA_FAULT");
    if (!inject_.empty() && inject_ != "oom" && inject_ != "launch")
      throw Error("cuda-pr: MRF_INJECT_CUDA_FAULT must be 'oom' or 'launch' (got '" + inject_ + "')");
    const std::string why = CudaUnavailableReason();
    if (!why.empty()) throw Error("cuda-pr: " + why);
    cudaGetLastError();  // an error left by other code must not be reported as ours
    if (!cuda_pr::HasKernels(layout))
      throw Error("cuda-pr: no kernels compiled for tile " + std::to_string(layout.tile_x) + "x" +
                  std::to_string(layout.tile_y) + "x" + std::to_string(layout.tile_z) + " on this grid kind");
    if (!stream_) {
      Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
      for (cudaEvent_t& e : events_) Check(cudaEventCreate(&e), "creating an event");
    }
    describe_ = "grid " + std::to_string(layout.width) + "x" + std::to_string(layout.height) +
                (layout.kind == pr::kKindGrid3D6 ? "x" + std::to_string(layout.depth) : std::string()) +
                (layout.kind == pr::kKindGrid4 ? ", 4-connected" : layout.kind == pr::kKindGrid8 ? ", 8-connected" : ", 6-connected");
    if (inject_ == "oom") {
      Release();
      Allocate<char>(std::size_t{1} << 50, "fault injection (MRF_INJECT_CUDA_FAULT=oom)");
    }
    const bool same = dev_.x && layout.kind == dev_.layout.kind && layout.num_nodes == dev_.layout.num_nodes &&
                      layout.num_tiles() == dev_.layout.num_tiles();
    if (!same) {
      Release();
      const std::size_t n = static_cast<std::size_t>(layout.num_nodes), dirs = pr::NumDirs(layout.kind);
      const std::size_t tiles = static_cast<std::size_t>(layout.num_tiles());
      // The whole workspace is estimated first, so a grid that cannot fit is refused with both figures before
      // anything is allocated (the allocations below add their own message if memory runs out anyway).
      const std::size_t words = static_cast<std::size_t>(cuda_pr::PackedCutWords(layout.num_nodes));
      const std::size_t needed = n * (sizeof(std::int64_t) + sizeof(std::int32_t) + 2) + words * 4 + n * dirs * sizeof(std::uint32_t) +
                                 n * dirs / 2 * 2 * sizeof(std::int32_t) + 7 * tiles + tiles * sizeof(unsigned long long) +
                                 (kMaxBatch + 1) * sizeof(std::uint32_t) + cuda_pr::kNumTotals * sizeof(unsigned long long);
      if (NodeEditMode() != 0) {  // re-solves will launch the repairs: their stack first (device_stack.h)
        std::size_t frame = 0;
        Check(cuda_pr::RepairStackBytes(layout.kind, &frame), "reading the repairs' stack frame");
        Check(cuda_stack::GrowTo(frame), "raising the stack limit");
      }
      std::size_t free_bytes = 0, total_bytes = 0;
      Check(cudaMemGetInfo(&free_bytes, &total_bytes), "querying the free GPU memory");
      // The other GPU solvers keep a block between solves (kept_context.h): it is given up before refusing.
      if (needed > free_bytes && cuda_kept::ReleaseCachedDevice() > 0)
        Check(cudaMemGetInfo(&free_bytes, &total_bytes), "querying the free GPU memory");
      if (needed > free_bytes)
        throw Error("cuda-pr: the problem does not fit: " + describe_ + " needs " + MiB(needed) + " of GPU memory, " +
                    MiB(free_bytes) + " of " + MiB(total_bytes) + " free");
      dev_.x = Allocate<std::int64_t>(n, "the excess");
      dev_.h = Allocate<std::int32_t>(n, "the heights");
      dev_.r = Allocate<std::uint32_t>(n * dirs, "the residual capacities");
      dev_.mask = Allocate<std::uint8_t>(n, "the residual bitmasks");
      dev_.cap = Allocate<std::int32_t>(n * dirs / 2, "the edge capacities");
      dev_.rev = Allocate<std::int32_t>(n * dirs / 2, "the reverse edge capacities");
      dev_.labels = Allocate<std::uint8_t>(n, "the cut");
      cut_bits_ = Allocate<std::uint32_t>(words, "the packed cut");
      dev_.active = Allocate<std::uint8_t>(tiles, "the tile flags");
      dev_.touched = Allocate<std::uint8_t>(tiles, "the tile flags");
      dev_.seed = Allocate<std::uint8_t>(tiles, "the tile flags");
      dev_.dirty = Allocate<std::uint8_t>(4 * tiles, "the BFS tile flags");
      dev_.counters = Allocate<std::uint32_t>(kMaxBatch, "the round counters");
      dev_.totals = Allocate<unsigned long long>(cuda_pr::kNumTotals, "the totals");
      tile_residual_ = Allocate<unsigned long long>(tiles, "the tiles' sink residuals");
      settle_work_ = Allocate<std::uint32_t>(1, "the settling's work counter");
      // Written by every full certificate before a second check reads it; zero until then, so that a
      // misuse shows as a wrong flow rather than as garbage.
      Check(cudaMemset(tile_residual_, 0, tiles * sizeof(unsigned long long)), "clearing the tiles' sink residuals");
      host_x0_ = AllocateHost<std::int64_t>(n, "the initial excess");
      host_cut_bits_ = AllocateHost<std::uint32_t>(words, "the cut");
      host_counters_ = AllocateHost<std::uint32_t>(kMaxBatch, "the round counters");
      host_totals_ = AllocateHost<unsigned long long>(cuda_pr::kNumTotals, "the totals");
    }
    dev_.layout = layout;
    ClearGraphs();  // kernel parameters (layout, pointers) are baked into captured graphs
  }

  std::int64_t* HostExcessBuffer() override { return host_x0_; }

  void Upload(const StGraph& graph) override {
    const std::size_t n = static_cast<std::size_t>(layout_.num_nodes), slots = graph.edge_caps().size();
    masks_fresh_ = masks_kept_ = false;
    Record(kUploadStart);
    Check(cudaMemcpyAsync(dev_.x, host_x0_, n * 8, cudaMemcpyHostToDevice, stream_), "uploading the excess");
    // The two arrays decide the pinned buffer's allocation together (staged_upload.h).
    Check(cuda_upload::UploadFromPageable(dev_.cap, graph.edge_caps().data(), slots * 4, stream_, slots * 8),
          "uploading the edge capacities");
    Check(cuda_upload::UploadFromPageable(dev_.rev, graph.edge_rev_caps().data(), slots * 4, stream_, slots * 8),
          "uploading the edge capacities");
    Record(kUploadEnd);
    StartTrace();
    Check(cudaMemsetAsync(dev_.totals, 0, cuda_pr::kNumTotals * sizeof(unsigned long long), stream_), "clearing totals");
    Launched(cuda_pr::LaunchBuildResiduals(dev_, inject_ == "launch", stream_), "BuildResiduals");
  }

  void ApplyChanges(const std::vector<NodeChange>& nodes, const std::vector<EdgeChange>& edges) override {
    // Written into pinned memory and uploaded in one copy: from pageable memory the 2.7 MB of a 1%
    // edit at 4096 took 0.5-0.7 ms (pinned: 0.19), and the host issued the next launch only after it.
    const std::size_t delta_bytes = nodes.size() * sizeof(cuda_pr::NodeDelta);
    const std::size_t bytes = delta_bytes + edges.size() * sizeof(cuda_pr::EdgeUpdate);
    GrowOwnBuffer(&change_buffer_, &change_bytes_, bytes, "the capacity changes");
    GrowPinnedBuffer(&host_changes_, &host_change_bytes_, bytes);
    auto* deltas = reinterpret_cast<cuda_pr::NodeDelta*>(host_changes_);
    auto* updates = reinterpret_cast<cuda_pr::EdgeUpdate*>(host_changes_ + delta_bytes);
    for (std::size_t i = 0; i < nodes.size(); ++i) deltas[i] = {nodes[i].node, nodes[i].delta};
    for (std::size_t i = 0; i < edges.size(); ++i) updates[i] = {edges[i].slot, edges[i].cap, edges[i].rev_cap};
    dev_deltas_ = reinterpret_cast<cuda_pr::NodeDelta*>(change_buffer_);
    auto* dev_updates = reinterpret_cast<cuda_pr::EdgeUpdate*>(change_buffer_ + delta_bytes);
    push_unread_ = false;  // (a re-solve that failed part way may have left it set)
    masks_fresh_ = masks_kept_ = false;
    Record(kUploadStart);
    if (bytes > 0)
      Check(cudaMemcpyAsync(change_buffer_, host_changes_, bytes, cudaMemcpyHostToDevice, stream_),
            "uploading the capacity changes");
    Record(kUploadEnd);
    StartTrace();
    Check(cudaMemsetAsync(dev_.totals, 0, cuda_pr::kNumTotals * sizeof(unsigned long long), stream_), "clearing totals");
    Launched(cuda_pr::LaunchApplyNodeDeltas(dev_, dev_deltas_, static_cast<int>(nodes.size()), stream_),
             "ApplyNodeDeltas");
    Launched(cuda_pr::LaunchApplyEdgeUpdates(dev_, dev_updates, static_cast<int>(edges.size()), stream_),
             "ApplyEdgeUpdates");
  }

  // A GPU thread repairing its changes waits on memory at every step, and one thread takes a
  // group's changes in turn, so the full repairs (1) are slower than push rounds (docs/benchmarks.md).
  // The default (3): fills of the changed nodes that cannot reach the sink, a thread each, then the
  // usual push rounds, settling and the certificate, and relabels only around the tiles that fail it.
  // On the segmentation scene (H100) it re-solved the 1% edits 1.2x (1024) and 1.75x (4096) faster
  // than the plain tile-parallel re-solve (0) and the large brush stroke 1.7x faster; the small
  // stroke, many of whose fills give up, 1.4x slower.
  int DefaultLocalResolve() const override { return 3; }

  // A re-solve reads, orders and uploads each change (about 15 ns and 16 bytes a change), a fresh
  // solve nets and uploads whole arrays. On the 4096 scene (H200 machine, edits of +-10% at random
  // nodes) the re-solve's host work, transfers and device time came to 19-21 ms at 5% of the nodes
  // against the fresh solve's 24-25 ms, 21-35 ms at 10%, 71 ms at 25% and 290-310 ms at 100%.
  double DenseEditFraction() const override { return 1.0 / 16; }

  bool RepairLocally(const std::vector<NodeChange>& nodes, const RepairSchedule& schedule, bool dead_only) override {
    // The totals were cleared by ApplyChanges; the repairs read the deltas it uploaded, in schedule order.
    if (schedule.group_start.empty()) {
      // No schedule: a thread per change, all in one launch.
      Launched(cuda_pr::LaunchRepairGroups(dev_, dev_deltas_, nullptr, static_cast<int>(nodes.size()), dead_only,
                                           stream_),
               "RepairGroups");
    } else {
      host_groups_ = schedule.group_start;
      const std::size_t bytes = host_groups_.size() * sizeof(std::int32_t);
      GrowOwnBuffer(&group_buffer_, &group_bytes_, host_groups_.size(), "the repair schedule");
      Check(cudaMemcpyAsync(group_buffer_, host_groups_.data(), bytes, cudaMemcpyHostToDevice, stream_),
            "uploading the repair schedule");
      for (std::size_t c = 0; c + 1 < schedule.colour_start.size(); ++c)
        Launched(cuda_pr::LaunchRepairGroups(dev_, dev_deltas_, group_buffer_ + schedule.colour_start[c],
                                             schedule.colour_start[c + 1] - schedule.colour_start[c], dead_only,
                                             stream_),
                 "RepairGroups");
    }
    stats_.local_repairs = static_cast<std::int64_t>(nodes.size());
    if (dead_only) return false;  // the usual re-solve goes on, on the same stream
    return CheckCertificate(false);  // the repairs' tiles stay flagged: their bitmasks are stale
  }

  void Settle() override {
    // The kill rounds' flags (C) are free until the next relabel, whose first kill round (ungated,
    // over every tile) writes them all again.
    std::uint8_t* const settled = dev_.dirty + 2 * static_cast<std::size_t>(layout_.num_tiles());
    // Bitmasks can be stale only in tiles flagged touched. Push rounds that kept them left none
    // stale; otherwise the first pass, which visits every touched tile, stores their masks. Then
    // the later passes and the certificate read the masks, not the residuals.
    for (int pass = 0; pass < tuning_.settle_passes; ++pass)
      for (int colour = 0; colour < layout_.num_colours(); ++colour)
        Launched(cuda_pr::LaunchSettleColour(dev_, colour, pass == 0 ? dev_.touched : settled, settled,
                                             /*masks_fresh=*/pass > 0 || masks_kept_, tuning_.settle_hops,
                                             settle_work_, stream_),
                 "SettleTiles");
    masks_fresh_ = true;
  }

  // The totals it reads were cleared by ApplyChanges; since then only repairs (kLocalFailures) and
  // push rounds (visit counts) have added to them.
  bool CheckCertificate(bool narrow_touched) override {
    const bool masks_fresh = masks_fresh_;
    masks_fresh_ = false;  // until the next settling: repairs change residuals, not masks
    const std::size_t tiles = static_cast<std::size_t>(layout_.num_tiles());
    if (narrow_touched) Check(cudaMemsetAsync(dev_.touched, 0, tiles, stream_), "clearing tile marks");
    // After push rounds, the failing nodes are listed for RepairListedViolations() (kFailedListed counts them).
    const int listed = narrow_touched ? tuning_.repair_violations : 0;
    if (listed > 0) GrowOwnBuffer(&failed_buffer_, &failed_bytes_, static_cast<std::size_t>(listed), "the failing nodes");
    cuda_pr::CertifyRequest request;
    request.failed_tiles = narrow_touched ? dev_.touched : nullptr;
    request.failed_nodes = listed > 0 ? failed_buffer_ : nullptr;
    request.capacity = listed;
    request.tile_residual = tile_residual_;
    request.masks_fresh = masks_fresh;
    Launched(cuda_pr::LaunchCertify(dev_, request, stream_), "CertifyTiles");
    ReadTotals("checking the local repairs");
    if (push_unread_) CollectPushRounds();
    stats_.local_failures = static_cast<std::int64_t>(host_totals_[cuda_pr::kLocalFailures]);
    stats_.local_violations = static_cast<std::int64_t>(host_totals_[cuda_pr::kLocalViolations]);
    sink_residual_ = static_cast<std::int64_t>(host_totals_[cuda_pr::kSinkResidual]);
    // A state that passes the check is optimal whatever the repairs did (it is a preflow throughout).
    return stats_.local_violations == 0 && (narrow_touched || stats_.local_failures == 0);
  }

  // The failing nodes' repairs, a thread each in one launch (they rarely meet; the check catches it
  // when they do), then the certificate again where they and the repairs are, marking without
  // clearing: the repairs' tiles keep the flags they set, whose bitmasks are stale for the relabel
  // that follows a failed check. The check lists the nodes still failing, for the next round.
  bool RepairListedViolations() override {
    Launched(cuda_pr::LaunchRepairGroups(dev_, failed_buffer_, nullptr, static_cast<int>(stats_.local_violations), false,
                                         stream_),
             "RepairGroups");
    for (const int total : {cuda_pr::kLocalViolations, cuda_pr::kFailedListed})
      Check(cudaMemsetAsync(dev_.totals + total, 0, sizeof(unsigned long long), stream_), "clearing totals");
    cuda_pr::CertifyRequest request;
    request.near_touched = true;  // kSinkResidual is the last check's, corrected by the tiles checked
    request.failed_tiles = dev_.touched;
    request.failed_nodes = failed_buffer_;
    request.capacity = tuning_.repair_violations;
    request.tile_residual = tile_residual_;
    Launched(cuda_pr::LaunchCertify(dev_, request, stream_), "CertifyTiles");
    ReadTotals("checking the repairs of the failing nodes");
    stats_.local_violations = static_cast<std::int64_t>(host_totals_[cuda_pr::kLocalViolations]);
    sink_residual_ = static_cast<std::int64_t>(host_totals_[cuda_pr::kSinkResidual]);
    return stats_.local_violations == 0;
  }
  // Copies the totals to host_totals_ and waits for them (and everything queued before).
  void ReadTotals(const char* what) {
    Check(cudaMemcpyAsync(host_totals_, dev_.totals, cuda_pr::kNumTotals * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost, stream_), "reading the totals");
    Sync(what);
  }

  CycleResult Cycle(int push_rounds, int iterations, Relabel relabel, bool wait) override {
    CycleResult result;
    Record(kCycleStart);
    if (relabel == Relabel::kNone) {
      RunCycleBatch(kPushOnly, push_rounds, iterations, wait);
      push_unread_ = !wait;
      if (wait) CollectPushRounds();
      return result;
    }
    const int bfs = tuning_.bfs_check_every;
    auto rounds_until_zero = [&](int first, bool* converged) {
      int rounds = 0;
      *converged = false;
      for (int j = first; j < first + bfs && !*converged; ++j) {
        ++rounds;
        *converged = host_counters_[j] == 0;
      }
      return rounds;
    };
    bool converged = false;
    if (relabel == Relabel::kIncremental) {
      RunCycleBatch(kIncremental, push_rounds, iterations);
      bool killed = false;
      result.bfs_rounds += rounds_until_zero(0, &killed);
      if (killed) {
        result.bfs_rounds += rounds_until_zero(bfs, &converged);
      } else {
        // The first phase needs more rounds than a batch has: start from scratch instead (the
        // same distances come out).
        RunCycleBatch(kFirst, push_rounds, iterations);
        result.bfs_rounds += rounds_until_zero(0, &converged);
      }
    } else {
      RunCycleBatch(kFirst, push_rounds, iterations);
      result.bfs_rounds += rounds_until_zero(0, &converged);
    }
    while (!converged) {
      if (result.bfs_rounds > 4 * layout_.num_nodes + 64)
        throw Error("cuda-pr: the breadth-first search did not converge (internal error)");
      RunCycleBatch(kMoreBfs, push_rounds, iterations);  // more BFS rounds, then the census and the push rounds
      result.bfs_rounds += rounds_until_zero(0, &converged);
    }
    result.active_nodes = static_cast<std::int64_t>(host_totals_[cuda_pr::kActiveNodes]);
    sink_residual_ = static_cast<std::int64_t>(host_totals_[cuda_pr::kSinkResidual]);
    CollectTotals();
    stats_.relabel_ms += Elapsed(kCycleStart, kCensusDone);
    stats_.push_ms += Elapsed(kCensusDone, kCycleEnd);
    return result;
  }

  std::int64_t Finish(std::vector<Label>* sink_side) override {
    const std::int64_t n = layout_.num_nodes;
    // Packed first: a bit per node crosses the bus, not a byte. At 4096 x 4096 the download, packing
    // included, took 0.06 ms instead of 0.31 for 16 MB (H200 machine).
    Record(kDownloadStart);
    Launched(cuda_pr::LaunchPackCut(dev_, cut_bits_, stream_), "PackCut");
    Check(cudaMemcpyAsync(host_cut_bits_, cut_bits_, static_cast<std::size_t>(cuda_pr::PackedCutWords(n)) * 4,
                          cudaMemcpyDeviceToHost, stream_), "downloading the cut");
    Record(kDownloadEnd);
    Sync("downloading the cut");
    PrintTrace();
    // 64 MB of labels at 4096 x 4096: made and unpacked on all cores (one core took about 35 ms).
    if (sink_side->size() != static_cast<std::size_t>(n)) *sink_side = NewLabeling(static_cast<std::size_t>(n));
    Label* out = sink_side->data();
    const std::uint32_t* in = host_cut_bits_;
    ForPiecesOfLabels(static_cast<std::size_t>(n), [out, in](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = static_cast<Label>((in[i >> 5] >> (i & 31)) & 1u);
    });
    return sink_residual_;
  }

  PhaseTimes Times() override {
    PhaseTimes t;
    t.upload_ms = Elapsed(kUploadStart, kUploadEnd);
    t.solve_ms = Elapsed(kUploadEnd, kDownloadStart);
    t.download_ms = Elapsed(kDownloadStart, kDownloadEnd);
    return t;
  }

  std::size_t WorkspaceBytes() const override { return device_bytes_ + change_bytes_ + group_bytes_ + failed_bytes_; }

 private:
  enum Event { kUploadStart, kUploadEnd, kCycleStart, kCensusDone, kCycleEnd, kDownloadStart, kDownloadEnd, kNumEvents };
  static constexpr int kMaxBatch = 1536;  // kill + BFS + push rounds of one batch (tuning allows 512 each)

  void Check(cudaError_t status, const std::string& what) const {
    if (status == cudaSuccess) return;
    cudaGetLastError();  // clear non-sticky errors so later calls (and a CPU fallback) start clean
    throw Error("cuda-pr: " + what + " failed: " + cudaGetErrorString(status) + " (" + describe_ + ")");
  }

  void Launched(cudaError_t status, const char* kernel) {
    ++stats_.launches;
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error(std::string("cuda-pr: kernel launch failed (") + kernel + "): " + cudaGetErrorString(status) +
                  " (" + describe_ + ")");
    }
    if (debug_sync_) Check(cudaStreamSynchronize(stream_), std::string("kernel ") + kernel);
    if (tuning_.trace) Mark(kernel);
  }

  void Sync(const std::string& what) {
    ++stats_.host_syncs;
    if (tuning_.trace) Mark("wait: " + what);
    Check(cudaStreamSynchronize(stream_), what);
  }

  // Inside stream capture an event must be recorded as an external event node, or the graph only
  // uses it to order work and never records it (its elapsed times would then be invalid).
  void Record(Event e) {
    Check(cudaEventRecordWithFlags(events_[e], stream_, capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault),
          "recording an event");
  }

  // tuning_.trace: the device timeline of a solve, an event after every launch and before every host
  // wait (memsets and copies fall into the next mark's interval), printed when the cut is down.
  void StartTrace() {
    trace_used_ = 0;
    Mark("upload end");
  }
  void Mark(const std::string& label) {
    if (!tuning_.trace || capturing_) return;
    if (trace_used_ == trace_events_.size()) {
      cudaEvent_t e = nullptr;
      Check(cudaEventCreate(&e), "creating an event");
      trace_events_.push_back(e);
      trace_labels_.emplace_back();
    }
    trace_labels_[trace_used_] = label;
    Check(cudaEventRecord(trace_events_[trace_used_++], stream_), "recording an event");
  }
  void PrintTrace() {
    if (!tuning_.trace || trace_used_ < 2) return;
    float total = 0;
    cudaEventElapsedTime(&total, trace_events_[0], trace_events_[trace_used_ - 1]);
    std::string line = "cuda-pr: device timeline, " + std::to_string(trace_used_) + " marks over " +
                       std::to_string(static_cast<int>(total * 1000)) + " us (us since the mark before):";
    for (std::size_t i = 1; i < trace_used_; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, trace_events_[i - 1], trace_events_[i]);
      char step[32];
      std::snprintf(step, sizeof step, " %.1f", ms * 1000);
      line += " | " + trace_labels_[i] + step;
    }
    cudaGetLastError();
    std::fprintf(stderr, "%s\n", line.c_str());
    trace_used_ = 0;
  }

  double Elapsed(Event from, Event to) const {
    float ms = 0;
    return cudaEventElapsedTime(&ms, events_[from], events_[to]) == cudaSuccess ? ms : (cudaGetLastError(), 0.0);
  }

  template <class T>
  T* Allocate(std::size_t count, const std::string& what) {
    void* p = nullptr;
    const std::size_t bytes = count * sizeof(T);
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();
      std::size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      throw Error("cuda-pr: out of GPU memory: " + what + " needs " + MiB(bytes) + ", " + MiB(free_bytes) + " of " +
                  MiB(total_bytes) + " free (" + describe_ + "; " + cudaGetErrorString(status) + ")");
    }
    device_bytes_ += bytes;
    device_blocks_.push_back(p);
    return static_cast<T*>(p);
  }

  template <class T>
  T* AllocateHost(std::size_t count, const std::string& what) {
    void* p = MallocPinned(count * sizeof(T), what);
    host_blocks_.push_back(p);
    return static_cast<T*>(p);
  }

  // Pinned host memory, or an Error that says how much and what for.
  static void* MallocPinned(std::size_t bytes, const std::string& what) {
    void* p = nullptr;
    const cudaError_t status = cudaMallocHost(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error("cuda-pr: cannot allocate " + MiB(bytes) + " of pinned host memory for " + what + " (" +
                  cudaGetErrorString(status) + ")");
    }
    return p;
  }

  // Grows a buffer that lives apart from the workspace (re-solve inputs, freed on its own) to hold
  // `count` values; the old one is freed once the GPU no longer reads it.
  template <class T>
  void GrowOwnBuffer(T** buffer, std::size_t* bytes_held, std::size_t count, const std::string& what) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes <= *bytes_held) return;
    Sync("waiting for the GPU");  // the old buffer may still be read
    if (*buffer) cudaFree(*buffer);
    *buffer = nullptr;
    *bytes_held = 0;
    *buffer = Allocate<T>(count, what);
    device_blocks_.pop_back();  // not part of the workspace: Release() frees it on its own
    device_bytes_ -= bytes;
    *bytes_held = bytes;
  }

  // Grows the pinned buffer the re-solve's changes are written into (freed on its own, like the
  // device buffers above).
  void GrowPinnedBuffer(char** buffer, std::size_t* bytes_held, std::size_t bytes) {
    if (bytes <= *bytes_held) return;
    if (*buffer) Sync("waiting for the GPU");  // the last upload may still read the old buffer
    if (*buffer) cudaFreeHost(*buffer);
    *buffer = nullptr;
    *bytes_held = 0;
    *buffer = static_cast<char*>(MallocPinned(bytes, "the capacity changes"));
    *bytes_held = bytes;
  }

  void Release() {
    ClearGraphs();
    for (void* p : device_blocks_) cudaFree(p);
    for (void* p : host_blocks_) cudaFreeHost(p);
    if (change_buffer_) cudaFree(change_buffer_);
    if (host_changes_) cudaFreeHost(host_changes_);
    host_changes_ = nullptr;
    host_change_bytes_ = 0;
    if (group_buffer_) cudaFree(group_buffer_);
    group_buffer_ = nullptr;
    group_bytes_ = 0;
    if (failed_buffer_) cudaFree(failed_buffer_);
    failed_buffer_ = nullptr;
    failed_bytes_ = 0;
    device_blocks_.clear();
    host_blocks_.clear();
    change_buffer_ = nullptr;
    change_bytes_ = 0;
    device_bytes_ = 0;
    cudaGetLastError();  // frees report nothing useful; clear what they may have left
    dev_ = DeviceState{};
    tile_residual_ = nullptr;
    settle_work_ = nullptr;
    host_x0_ = nullptr;
    host_cut_bits_ = nullptr;
    cut_bits_ = nullptr;
    host_counters_ = nullptr;
    host_totals_ = nullptr;
  }

  void ClearGraphs() {
    for (auto& entry : graphs_) cudaGraphExecDestroy(entry.second);
    graphs_.clear();
  }

  // The counts and time of push rounds run without a relabel (after the host waited for them).
  void CollectPushRounds() {
    push_unread_ = false;
    CollectTotals();
    stats_.push_ms += Elapsed(kCycleStart, kCycleEnd);
  }

  void CollectTotals() {
    stats_.tile_visits = static_cast<std::int64_t>(host_totals_[cuda_pr::kTileVisits]);
    stats_.tile_iterations = static_cast<std::int64_t>(host_totals_[cuda_pr::kTileIterations]);
    stats_.bfs_tile_visits = static_cast<std::int64_t>(host_totals_[cuda_pr::kBfsTileVisits]);
  }

  // Batches of launches. Each ends by copying the round counters and totals back; the host waits
  // once per batch. kFirst: global relabel from scratch (BFS rounds), census, push rounds.
  // kMoreBfs: more BFS rounds of a relabel that had not converged, census, push rounds.
  // kIncremental: kill rounds, BFS rounds from the seed tiles, census, push rounds. kPushOnly:
  // push rounds. Kernels decide on the device whether they have work (Gate), so a batch is a fixed
  // sequence and, with CUDA graphs, captured once and replayed.
  enum BatchKind { kFirst, kMoreBfs, kIncremental, kPushOnly };

  int BatchLaunches(BatchKind kind, int push) const {
    const int bfs = tuning_.bfs_check_every;
    const int relabel = kind == kPushOnly ? 0 : bfs + 1 + (kind == kIncremental ? bfs : 0) +
                                                 (kind == kFirst && !tuning_.fused_bfs_start ? 1 : 0);
    return relabel + push * layout_.num_colours();
  }

  // Whether a batch of `kind` keeps the residual bitmasks current. Push rounds before a re-solve's
  // relabels (kPushOnly) do where a word of masks holds the nodes of one tile only (PushTile): then
  // settling and the certificate read the masks instead of the residuals. They visit every tile
  // whose masks may be stale: those flagged touched, which ApplyChanges flagged active too
  // (LaunchApplyNodeDeltas).
  bool KeepsMasks(BatchKind kind) const {
    return kind == kPushOnly && layout_.width % 4 == 0 && layout_.tile_x % 4 == 0;
  }

  void RunCycleBatch(BatchKind kind, int push, int iterations, bool wait = true) {
    const int launches = BatchLaunches(kind, push);
    if (!tuning_.cuda_graphs || debug_sync_) {
      EnqueueCycleBatch(kind, push, iterations);
    } else {
      const auto key = std::make_tuple(static_cast<int>(kind) + (tuning_.fused_bfs_start ? 8 : 0) +
                                           (tuning_.wave_relabel ? 16 : 0) + (tuning_.wave_push ? 32 : 0),
                                       tuning_.bfs_check_every, push, iterations);
      auto found = graphs_.find(key);
      if (found == graphs_.end()) {
        cudaGraph_t graph = nullptr;
        Check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capturing a CUDA graph");
        capturing_ = true;
        try {
          EnqueueCycleBatch(kind, push, iterations);
        } catch (...) {
          capturing_ = false;
          cudaStreamEndCapture(stream_, &graph);
          if (graph) cudaGraphDestroy(graph);
          throw;
        }
        capturing_ = false;
        Check(cudaStreamEndCapture(stream_, &graph), "capturing a CUDA graph");
        cudaGraphExec_t exec = nullptr;
        const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        Check(status, "instantiating a CUDA graph");
        found = graphs_.emplace(key, exec).first;
        stats_.launches -= launches;  // counted when replayed
      }
      Check(cudaGraphLaunch(found->second, stream_), "launching a CUDA graph");
      if (tuning_.trace) Mark("CUDA graph");  // (launches inside a graph record no marks)
      stats_.launches += launches;
    }
    masks_kept_ = KeepsMasks(kind);
    if (wait)
      Sync(kind == kPushOnly ? "push rounds" : kind == kMoreBfs ? "more BFS rounds" : "a global relabel and its push rounds");
  }

  void EnqueueCycleBatch(BatchKind kind, int push, int iterations) {
    using cuda_pr::Gate;
    const int bfs = kind == kPushOnly ? 0 : tuning_.bfs_check_every;
    const int kill = kind == kIncremental ? bfs : 0;
    const int counters = kill + bfs + push;
    const std::size_t T = static_cast<std::size_t>(layout_.num_tiles());
    std::uint8_t* const a = dev_.dirty;
    std::uint8_t* const b = dev_.dirty + T;
    std::uint8_t* const c = dev_.dirty + 2 * T;
    std::uint8_t* const d = dev_.dirty + 3 * T;
    Check(cudaMemsetAsync(dev_.counters, 0, counters * sizeof(std::uint32_t), stream_), "clearing round counters");
    if (kind != kPushOnly)
      Check(cudaMemsetAsync(dev_.totals, 0, 2 * sizeof(unsigned long long), stream_), "clearing totals");
    const bool fused = kind == kFirst && tuning_.fused_bfs_start;
    const std::uint8_t* bfs_start = a;  // tiles of the first BFS round
    if (kind == kFirst) {
      if (!fused) Launched(cuda_pr::LaunchBfsInit(dev_, stream_), "BfsInit");
      Check(cudaMemsetAsync(a, 1, T, stream_), "marking tiles for the BFS");
      Check(cudaMemsetAsync(dev_.touched, 0, T, stream_), "clearing tile marks");
    } else if (kind == kIncremental) {
      Check(cudaMemcpyAsync(dev_.seed, dev_.touched, T, cudaMemcpyDeviceToDevice, stream_), "seeding the BFS");
      for (int j = 0; j < kill; ++j) {
        const Gate gate = j == 0 ? Gate{} : Gate{Gate::kIfPreviousChanged, j - 1, 1};
        const std::uint8_t* in = j == 0 ? dev_.touched : j % 2 ? c : d;
        Launched(cuda_pr::LaunchKillRound(dev_, j, gate, in, j % 2 ? d : c, j == 0, tuning_.wave_relabel, stream_),
                 "KillTiles");
      }
      Check(cudaMemsetAsync(dev_.touched, 0, T, stream_), "clearing tile marks");
      bfs_start = dev_.seed;
    }
    // BFS rounds alternate A -> B -> A ...; the last (odd) round writes A, where kMoreBfs goes on.
    for (int j = 0; j < bfs; ++j) {
      const int counter = kill + j;
      Gate gate{Gate::kIfPreviousChanged, counter - 1, 1};
      if (j == 0) gate = kind == kIncremental ? Gate{Gate::kIfConverged, 0, kill} : Gate{};
      const std::uint8_t* in = j == 0 ? bfs_start : j % 2 ? b : a;
      Launched(cuda_pr::LaunchBfsRound(dev_, counter, gate, in, j % 2 ? a : b, fused && j == 0, tuning_.wave_relabel,
                                       stream_),
               "BfsTiles");
    }
    if (kind != kPushOnly) {
      Launched(cuda_pr::LaunchCensus(dev_, Gate{Gate::kIfConverged, kill, bfs}, stream_), "Census");
      Record(kCensusDone);
    }
    const bool keep_masks = KeepsMasks(kind);
    for (int k = 0; k < push; ++k) {
      const int counter = kill + bfs + k;
      Gate gate{Gate::kIfPreviousChanged, counter - 1, 1};
      if (k == 0) gate = kind == kPushOnly ? Gate{} : Gate{Gate::kIfConvergedAndActive, kill, bfs};
      for (int colour = 0; colour < layout_.num_colours(); ++colour)
        Launched(cuda_pr::LaunchPushColour(dev_, colour, counter, gate, iterations, tuning_.wave_push, keep_masks,
                                           stream_),
                 "PushTiles");
    }
    Check(cudaMemcpyAsync(host_counters_, dev_.counters, counters * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                          stream_), "reading round counters");
    Check(cudaMemcpyAsync(host_totals_, dev_.totals, cuda_pr::kNumTotals * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost, stream_), "reading the totals");
    Record(kCycleEnd);
  }

  DeviceState dev_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t events_[kNumEvents] = {};
  std::vector<void*> device_blocks_, host_blocks_;
  std::size_t device_bytes_ = 0;
  char* change_buffer_ = nullptr;
  std::size_t change_bytes_ = 0;
  char* host_changes_ = nullptr;  // pinned: the re-solve's node deltas, then its edge updates
  std::size_t host_change_bytes_ = 0;
  cuda_pr::NodeDelta* dev_deltas_ = nullptr;  // in change_buffer_: the last re-solve's terminal changes
  std::vector<std::int32_t> host_groups_;     // the repair schedule's group starts (read by an async copy)
  std::int32_t* group_buffer_ = nullptr;
  std::size_t group_bytes_ = 0;
  unsigned long long* tile_residual_ = nullptr;  // per tile: the sink residual the last certificate counted there
  std::uint32_t* settle_work_ = nullptr;         // how a settling launch deals out its tiles
  cuda_pr::NodeDelta* failed_buffer_ = nullptr;  // the nodes that failed the certificate (delta unused)
  std::size_t failed_bytes_ = 0;
  std::int64_t* host_x0_ = nullptr;
  std::uint32_t* host_cut_bits_ = nullptr;  // pinned: the packed cut (LaunchPackCut)
  std::uint32_t* cut_bits_ = nullptr;
  std::uint32_t* host_counters_ = nullptr;
  unsigned long long* host_totals_ = nullptr;
  std::int64_t sink_residual_ = 0;
  std::map<std::tuple<int, int, int, int>, cudaGraphExec_t> graphs_;
  bool push_unread_ = false;  // push rounds enqueued without a wait: their counts are not read yet
  bool masks_fresh_ = false;  // settled since the last change of residuals: every bitmask is current
  bool masks_kept_ = false;   // the last batch was push rounds that kept the bitmasks current
  bool debug_sync_ = false;
  bool capturing_ = false;
  std::vector<cudaEvent_t> trace_events_;  // tuning_.trace: marks of the solve's timeline, reused
  std::vector<std::string> trace_labels_;
  std::size_t trace_used_ = 0;
  std::string inject_;
  std::string describe_;
};

}  // namespace

std::unique_ptr<PushRelabelEngine> MakeCudaPushRelabelEngine(const PushRelabelTuning& tuning) {
  return std::make_unique<CudaPushRelabelEngine>(tuning);
}

double MeasureCudaCopyBandwidth(std::size_t bytes, int repeat) {
  const std::string why = CudaUnavailableReason();
  if (!why.empty()) throw Error("bandwidth probe: " + why);
  auto check = [](cudaError_t status, const char* what) {
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error(std::string("bandwidth probe: ") + what + " failed: " + cudaGetErrorString(status));
    }
  };
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(a);
    throw Error("bandwidth probe: cudaMalloc failed");
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> times;
  try {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaMemset(a, 1, bytes), "cudaMemset");
    check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
    for (int i = 0; i < std::max(1, repeat); ++i) {
      check(cudaEventRecord(start), "cudaEventRecord");
      check(cudaMemcpy(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice), "copy");
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      times.push_back(ms);
    }
  } catch (...) {
    cudaFree(a);
    cudaFree(b);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    throw;
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  const double ms = times[times.size() / 2];
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace mrf
