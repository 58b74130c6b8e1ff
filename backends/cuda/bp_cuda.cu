// Min-sum belief propagation on CUDA: the tiled schedule (a tile per block in shared memory, BP-M inside,
// border messages in global memory, tile diagonals as a wavefront) and a plain synchronous schedule.
// Results equal the TBB engine bit for bit (integer messages); docs/bp.md describes the schedule.
// One translation unit: the kernels and helpers are in the bp_*.cuh files included below, in the order of
// their sections; this file keeps the kernel selection, the runner (CudaRunner) and the device probes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"
#include "backends/cuda/staged_upload.h"
#include "mrf/device.h"
#include "mrf/memory.h"

// The sections before the runner, in order (each opens mrf::bp's anonymous namespace itself):
#include "backends/cuda/bp_cuda_common.cuh"   // error checks, DeviceArena, DeviceBuffer
#include "backends/cuda/kept_context.h"
#include "backends/cuda/bp_tile_kernels.cuh"  // the general tile kernel
#include "backends/cuda/bp_fast_kernels.cuh"  // the fast tile kernel (fastk)
#include "backends/cuda/bp_grid_kernels.cuh"  // synchronous schedule, labels, energy, coarse-to-fine, unary costs

namespace mrf::bp {

namespace {

// ---- Kernel selection ------------------------------------------------------------------------------

using DiagonalKernel = void (*)(TileParams, int, int);
using CooperativeKernel = void (*)(TileParams);

template <int C>
void PickKernels(int kind, DiagonalKernel* d, CooperativeKernel* c) {
  switch (kind) {
    case kPottsMessage: *d = TileDiagonalKernel<C, kPottsMessage>, *c = TileCooperativeKernel<C, kPottsMessage>; break;
    case kLinearMessage: *d = TileDiagonalKernel<C, kLinearMessage>, *c = TileCooperativeKernel<C, kLinearMessage>; break;
    case kQuadraticMessage:
      *d = TileDiagonalKernel<C, kQuadraticMessage>, *c = TileCooperativeKernel<C, kQuadraticMessage>;
      break;
    default: *d = TileDiagonalKernel<C, kTableMessage>, *c = TileCooperativeKernel<C, kTableMessage>; break;
  }
}

unsigned Blocks(std::int64_t threads, int per_block) {
  return static_cast<unsigned>((threads + per_block - 1) / per_block);
}

// One problem (the fine one or a coarse level) on the device, with synchronous-schedule buffers.
struct Level {
  int width = 0, height = 0;
  Energy unary_offset = 0;
  DeviceBuffer<Cost> unary, scale_right, scale_down;
  DeviceBuffer<Cost> messages[2][4];  // two generations for the synchronous schedule
  DeviceBuffer<Cost> hbuf;
  DeviceBuffer<int> scratch;
  int current = 0;  // which generation holds the latest messages

  std::size_t nodes() const { return static_cast<std::size_t>(width) * height; }
  Messages Get(int generation) const {
    return Messages{{messages[generation][0].get(), messages[generation][1].get(), messages[generation][2].get(),
                     messages[generation][3].get()}};
  }
};

}  // namespace

// ---- The runner -----------------------------------------------------------------------------------

struct CudaRunner::Impl {
  cuda_kept::Context* kept = nullptr;  // stream, device block (the arena's) and pinned words, kept between runs
  DeviceArena arena;
  Problem problem;  // the fine problem (host copy: energies, sizes)
  Config config;
  CudaTuning tuning;
  int C = 4, Lp = 0, G = 1, tile = 0, threads = 0, window = 0, scratch_stride = 0;
  bool envelope = false;
  std::size_t shared_bytes = 0;
  std::string note;  // e.g. a tile reduced to fit shared memory
  std::string inject;  // MRF_INJECT_CUDA_FAULT
  bool inject_launch_pending = false;
  CudaLaunch launch = CudaLaunch::kPerDiagonal;
  PairwiseParams pw{};
  DeviceBuffer<Cost> table;
  DeviceBuffer<Cost> upload_staging;  // padded uploads go up through it (part of the arena: kept)
  std::vector<Level> levels;  // [0] fine, then coarser
  std::vector<Problem> coarse;  // host copies of the coarser levels (coarse-to-fine)
  TileGrid grid;
  DeviceBuffer<Cost> borders[4];
  DeviceBuffer<Label> labels, best_labels;
  DeviceBuffer<unsigned long long> energy_sum;
  DeviceBuffer<int> changed;
  DeviceBuffer<int> coarse_changed;  // one flag per coarse-level iteration (device-side early stop)
  unsigned long long* host_energy = nullptr;  // pinned (kept->pinned)
  int* host_changed = nullptr;                // pinned (kept->pinned)
  cudaStream_t stream = nullptr;              // kept->stream
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraphExec_t graph = nullptr;
  DiagonalKernel diagonal_kernel = nullptr;
  CooperativeKernel cooperative_kernel = nullptr;
  int cooperative_blocks = 0;
  bool capturing = false;
  // Fast kernel.
  bool use_fast = false;
  fast::Support fast_support;
  std::string fast_why;  // why the general kernel runs (auto)
  fastk::Kernel fast_kernel = nullptr;
  DeviceBuffer<fast::Word> fast_unary;
  DeviceBuffer<int> tile_done, fast_error;
  DeviceBuffer<std::uint64_t> mailbox;  // pipeline by tile columns (fast::Mail); stamps as tile_done's counts
  int pipeline_blocks = 0;
  int sweep_base = 0;  // pipeline: sweeps run since the tile counters were cleared (they only grow)
  bool fresh_pending = false;  // pipeline: the next launch starts from zero messages without clearing them
  static constexpr int kMaxSweepBase = 1 << 30;  // tile counters are cleared before they pass this
  static constexpr std::size_t kArenaPieces = 128;  // buffers a runner allocates: at most 5 levels x 13, and 15
  std::size_t estimated = 0;

  ~Impl() {
    // Kept only when nothing failed; the next runner reuses the block once this one's work has ended, so
    // the stream is waited for whatever happened.
    const bool idle = !kept || cudaStreamSynchronize(stream) == cudaSuccess;
    const bool healthy = kept && idle && cudaGetLastError() == cudaSuccess;
    if (graph) cudaGraphExecDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (kept) cuda_kept::ReturnContext(kept, healthy);
    cudaGetLastError();  // leave no error behind for the next CUDA user of this thread
  }

  GridParams Params(const Level& level) const {
    return GridParams{level.unary.get(), level.scale_right.get(), level.scale_down.get(), pw,
                      level.width, level.height, problem.num_labels, Lp, scratch_stride};
  }

  TileParams Tiles() const {
    TileParams P{};
    const Level& f = levels[0];
    P.unary = f.unary.get();
    P.scale_right = f.scale_right.get();
    P.scale_down = f.scale_down.get();
    P.pw = pw;
    P.width = f.width;
    P.height = f.height;
    P.L = problem.num_labels;
    P.Lp = Lp;
    P.G = G;
    P.tile = tile;
    P.tiles_x = grid.tiles_x;
    P.tiles_y = grid.tiles_y;
    P.row_stride = TileRowStride(tile, Lp);
    P.inner = config.inner_iterations;
    P.envelope = envelope;
    P.window = window;
    P.scratch_per_chain = problem.kind == kTableMessage || problem.kind == kLinearMessage
                              ? Lp
                              : problem.kind == kQuadraticMessage ? (envelope ? 4 * Lp : Lp) : 0;
    P.linear_window = UseLinearWindow(pw) ? LinearWindow(problem.truncation, problem.num_labels) : -1;
    P.border_right = borders[0].get();
    P.border_left = borders[1].get();
    P.border_down = borders[2].get();
    P.border_up = borders[3].get();
    P.labels = labels.get();
    P.changed = changed.get();
    return P;
  }

  fast::Params FastParams() const {
    fast::Params P;
    P.unary = fast_unary.get();
    P.scale_right = levels[0].scale_right.get();
    P.scale_down = levels[0].scale_down.get();
    P.border_right = borders[0].get();
    P.border_left = borders[1].get();
    P.border_down = borders[2].get();
    P.border_up = borders[3].get();
    P.labels = labels.get();
    P.changed = changed.get();
    P.tile_done = tile_done.get();
    P.mailbox = mailbox.get();  // null: the tile counters hand messages over
    P.error = fast_error.get();
    P.form = fast_support.params;
    P.width = problem.width;
    P.height = problem.height;
    P.L = problem.num_labels;
    P.Lp = Lp;
    P.tile = tile;
    P.tiles_x = grid.tiles_x;
    P.tiles_y = grid.tiles_y;
    P.row_stride = fast::RowStride(tile, fast_support.words, FastLanes());
    P.inner = config.inner_iterations;
    return P;
  }

  // Uploads a level. Its unary costs come from p.unary, or (the fine level, `raw`) from the model's own
  // costs, shifted on the device, or (a coarse level of CoarseShapes, without costs) are summed from
  // `finer`'s.
  void UploadLevel(Level& level, const Problem& p, const Level* finer = nullptr, const Cost* raw = nullptr) {
    level.width = p.width;
    level.height = p.height;
    level.unary_offset = p.unary_offset;
    const std::size_t n = level.nodes();
    const int L = p.num_labels;
    level.unary.Allocate(n * Lp, "the unary costs", &arena);
    const Cost* host = raw ? raw : p.unary.data();
    if (p.unary.empty() && !raw) {  // a level of CoarseShapes
      if (!finer)  // a fine level without costs: PrepareProblemWithoutCosts is for CudaRunner(const Model&)
        throw Error("cuda-bp: the problem has no unary costs (prepare it with PrepareProblem, or pass the model)");
      CoarsenUnaryKernel<<<Blocks(32 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(
          finer->unary.get(), finer->scale_right.get(), finer->scale_down.get(), finer->width, finer->height,
          p.width, p.height, L, Lp, p.kind, table.get(), level.unary.get());
      MRF_CHECK_LAUNCH("coarse unary kernel", stream, false);
    } else if (Lp == L) {  // nothing to pad: upload the costs as they are
      MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(level.unary.get(), host, n * L * sizeof(Cost), stream));
    } else if (!tuning.host_setup) {
      // Padded on the device: the costs go up in contiguous pieces through a staging buffer, and a kernel
      // spreads each node's L costs over its Lp slots. A pitched copy straight from pageable memory (below)
      // moved Aloe's 1.3 GB at 1.7 GB/s (docs/bp.md).
      const std::size_t piece = StagingNodes(n, L);
      if (upload_staging.size() < piece * L) upload_staging.Allocate(piece * L, "the upload staging buffer", &arena);
      for (std::size_t first = 0; first < n; first += piece) {
        const std::size_t count = std::min(piece, n - first);
        MRF_CUDA_CHECK(cuda_upload::UploadFromPageable(upload_staging.get(), host + first * L, count * L * sizeof(Cost),
                                                      stream, n * L * sizeof(Cost)));
        const std::int64_t slots = static_cast<std::int64_t>(count) * Lp;
        PadUnaryKernel<<<Blocks(slots, 256), 256, 0, stream>>>(upload_staging.get(), slots, L, Lp,
                                                              level.unary.get() + first * Lp);
        MRF_CHECK_LAUNCH("unary padding kernel", stream, false);
      }
    } else {
      // Padded on the way: a pitched copy puts each node's L costs at the start of its Lp slots and a
      // pitched memset zeroes the rest (Venus's 13 MB: 1.6-2.4 ms on an H100 machine, against 4.3-19 ms
      // for padding a fresh host copy first and uploading that).
      const std::size_t row = static_cast<std::size_t>(L) * sizeof(Cost);
      const std::size_t pitch = static_cast<std::size_t>(Lp) * sizeof(Cost);
      MRF_CUDA_CHECK(cudaMemcpy2DAsync(level.unary.get(), pitch, host, row, row, n, cudaMemcpyHostToDevice, stream));
      MRF_CUDA_CHECK(cudaMemset2DAsync(level.unary.get() + L, pitch, 0, pitch - row, n, stream));
    }
    if (raw) {
      ShiftUnaryKernel<<<Blocks(32 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(level.unary.get(), n, L, Lp);
      MRF_CHECK_LAUNCH("unary shift kernel", stream, false);
    }
    level.scale_right.Allocate(n, "the edge scales", &arena);
    level.scale_right.Upload(p.scale_right, stream);
    level.scale_down.Allocate(n, "the edge scales", &arena);
    level.scale_down.Upload(p.scale_down, stream);
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the costs are in place before the first run
  }

  // Message buffers start at 0; messages from outside the grid and at padded labels are never written
  // afterwards (the kernels write 0 there or skip them), so Reset() clears only what a run reads first.
  void AllocateSync(Level& level) {
    const std::size_t n = level.nodes();
    for (auto& generation : level.messages)
      for (auto& m : generation) {
        m.Allocate(n * Lp, "the BP messages", &arena);
        m.Zero(stream);
      }
    level.hbuf.Allocate(4 * n * Lp, "the BP message sums", &arena);
    if (scratch_stride > 0) level.scratch.Allocate(4 * n * scratch_stride, "the message scratch", &arena);
  }

  // Nodes per piece of a padded upload: 32 MB of costs (or what the tuning asks), or all of them.
  std::size_t StagingNodes(std::size_t nodes, int L) const {
    const std::size_t costs = tuning.upload_piece_costs > 0 ? tuning.upload_piece_costs : std::size_t{8} << 20;
    return std::min(nodes, std::max<std::size_t>(1, costs / static_cast<std::size_t>(L)));
  }

  // Bytes of device memory Setup() allocates (the buffers below, in the same order).
  std::size_t EstimateBytes() const {
    const std::size_t L = problem.num_labels, lp = Lp, ints = sizeof(Cost);
    auto level_bytes = [&](std::size_t n) { return n * lp * ints + 2 * n * ints; };
    auto sync_bytes = [&](std::size_t n) {
      return 8 * n * lp * ints + 4 * n * lp * ints + 4 * n * static_cast<std::size_t>(scratch_stride) * ints;
    };
    const std::size_t n = static_cast<std::size_t>(problem.num_nodes());
    std::size_t bytes = problem.table.size() * ints + level_bytes(n);
    if (lp != L && !tuning.host_setup) bytes += StagingNodes(n, problem.num_labels) * L * ints;  // upload_staging
    for (const Problem& c : coarse) {
      const std::size_t cn = static_cast<std::size_t>(c.num_nodes());
      bytes += level_bytes(cn) + sync_bytes(cn);
    }
    if (config.schedule == Schedule::kSync) bytes += sync_bytes(n);
    bytes += 2 * n * sizeof(Label) + sizeof(unsigned long long) + sizeof(int);
    if (!coarse.empty()) bytes += coarse.size() * static_cast<std::size_t>(config.iterations) * sizeof(int);
    if (config.schedule == Schedule::kTiled) {
      const TileGrid g = TileGrid::Make(problem.width, problem.height, tile);
      const std::size_t vertical = static_cast<std::size_t>(g.tiles_x - 1) * problem.height * lp;
      const std::size_t horizontal = static_cast<std::size_t>(g.tiles_y - 1) * problem.width * lp;
      bytes += 2 * (vertical + horizontal) * ints;
      if (use_fast)
        bytes += n * static_cast<std::size_t>(fast_support.words) * sizeof(fast::Word) +
                 static_cast<std::size_t>(g.tiles_x) * g.tiles_y * sizeof(int) + sizeof(int) +
                 MailboxSlots(g) * sizeof(std::uint64_t);
    }
    return bytes;
  }

  // Slots of the mailbox (fast::Mail): messages of both directions across the tiles_x - 1 boundaries between
  // tile columns, a slot per word. Only the fast kernel's pipeline by tile columns (also the automatic
  // launch) uses one, unless CudaTuning::mailbox is off; 0 also when int cannot index the slots
  // (fast::MailIndex): the tile counters then hand the messages over.
  std::size_t MailboxSlots(const TileGrid& g) const {
    const bool columns = tuning.launch == CudaLaunch::kAuto || tuning.launch == CudaLaunch::kPipeline;
    if (!use_fast || !tuning.mailbox || !columns || g.tiles_x < 2) return 0;
    const std::size_t slots = static_cast<std::size_t>(g.tiles_x - 1) * 2 * problem.height * fast_support.words;
    return slots <= static_cast<std::size_t>(std::numeric_limits<int>::max()) ? slots : 0;
  }

  std::size_t AllocatedBytes() const {
    std::size_t bytes = table.bytes() + upload_staging.bytes() + labels.bytes() + best_labels.bytes() +
                        energy_sum.bytes() + changed.bytes() + coarse_changed.bytes() + fast_unary.bytes() +
                        tile_done.bytes() + fast_error.bytes() + mailbox.bytes();
    for (const auto& b : borders) bytes += b.bytes();
    for (const Level& level : levels) {
      bytes += level.unary.bytes() + level.scale_right.bytes() + level.scale_down.bytes() + level.hbuf.bytes() +
               level.scratch.bytes();
      for (const auto& generation : level.messages)
        for (const auto& m : generation) bytes += m.bytes();
    }
    return bytes;
  }

  // The largest message spread the fine level's tile kernel meets: its own, and (coarse-to-fine) that of
  // the level just above, whose messages become its border messages. The coarser levels only start
  // that level, on the 32-bit synchronous kernels, so their larger spreads (coarse edge scales double
  // per level) do not bound the fast kernel's 16-bit sums.
  Cost LargestMessage() const {
    Cost r = problem.max_message;
    if (!coarse.empty()) r = std::max(r, coarse.front().max_message);
    return r;
  }

  // Threads a chain of the fast kernel is split over (fast::ChainLanes()).
  int FastLanes() const { return fast::ChainLanes(fast_support.words, fast_support.form); }

  void ChooseKernel() {
    use_fast = false;
    if (config.schedule != Schedule::kTiled || tuning.kernel == CudaKernel::kGeneral) return;
    Cost min_scale = 0;
    for (Cost s : problem.scale_right) min_scale = std::min(min_scale, s);
    for (Cost s : problem.scale_down) min_scale = std::min(min_scale, s);
    fast_support = fast::FastSupport(problem.num_labels, problem.kind, problem.truncation, problem.max_unary_spread,
                                     LargestMessage(), min_scale);
    std::string why = fast_support.why;
    if (fast_support.ok) {
      const int asked = RequestedTileSize(config.tile_size, problem.width, problem.height);
      const int t = asked > 0 ? asked : AutoTileSize(problem.num_labels, problem.kind);
      const int lanes = FastLanes();
      const std::size_t bytes = fast::SharedWords(t, fast_support.words, lanes) * sizeof(fast::Word);
      if (bytes > CudaMaxSharedBytesPerBlock() ||
          fastk::ComputeThreads(t, lanes) + fastk::kPipelineLoaders > fastk::MaxThreads(fast_support.words, lanes))
        why = "a tile of side " + std::to_string(t) + " does not fit the fast kernel (" + std::to_string(bytes) +
              " bytes of shared memory, " + std::to_string(2 * t) + " chains)";
      else
        use_fast = true;
    }
    if (!use_fast && tuning.kernel == CudaKernel::kFast) throw Error("cuda-bp: the fast kernel cannot run this problem: " + why);
    if (!use_fast) fast_why = why;
  }

  // `raw`: the model's unary costs when `given` has none (PrepareProblemWithoutCosts); `shapes`: the
  // coarse levels when the caller has them already (CoarseShapes).
  void Setup(Problem&& given, const Config& c, const CudaTuning& t, const Cost* raw = nullptr,
             std::vector<Problem> shapes = {}) {
    problem = std::move(given);  // moved, not copied: the unary costs alone are megabytes
    const Problem& p = problem;
    config = c;
    tuning = t;
    CheckConfig(p, c);
    if (c.schedule == Schedule::kBpm)
      throw Error("cuda-bp runs the tiled and sync schedules; bpm runs on the CPU (tbb-bp)");
    CudaDebugSyncRequested("cuda-bp");  // a bad value is refused here; DebugSync() caches the switch
    if (const char* v = std::getenv("MRF_INJECT_CUDA_FAULT")) inject = v;
    if (!inject.empty() && inject != "oom" && inject != "launch" && inject != "nodevice")
      throw Error("cuda-bp: MRF_INJECT_CUDA_FAULT must be 'nodevice', 'oom' or 'launch' (got '" + inject + "')");
    if (inject == "nodevice") throw Error("cuda-bp: no CUDA device found (injected by MRF_INJECT_CUDA_FAULT=nodevice)");
    const std::string why_not = CudaUnavailableReason();
    if (!why_not.empty()) throw Error("cuda-bp: " + why_not);
    cudaGetLastError();  // an error left by other code must not be reported as ours
    const int L = p.num_labels;
    if (c.coarse_to_fine) {
      // The coarser levels' costs are summed on the device when a bound rules out overflow; otherwise (and
      // when a test asks) the host builds them, checking every sum.
      coarse = std::move(shapes);
      if (coarse.empty() && CanCoarsen(p)) {
        if (!t.host_setup) coarse = CoarseShapes(p);
        if (coarse.empty()) coarse = CoarseLevels(p);  // needs the host's costs: the caller gave them
      }
    }
    ChooseKernel();
    if (use_fast) {
      Lp = 2 * fast_support.words;
    } else {
      C = t.labels_per_lane ? t.labels_per_lane : DefaultLabelsPerLane(L);
      if (C != 2 && C != 4 && C != 8 && C != 16)
        throw Error("cuda-bp: labels per lane must be 2, 4, 8 or 16 (got " + std::to_string(C) + ")");
      Lp = PaddedLabels(L, C);
      if (Lp == 0)
        throw Error("cuda-bp takes at most " + std::to_string(32 * C) + " labels with " + std::to_string(C) +
                    " labels per lane (got " + std::to_string(L) + "); use tbb-bp for more");
      G = Lp / C;
    }
    pw = p.params();
    envelope = p.kind == kQuadraticMessage && !UseQuadraticWindow(pw);
    window = p.kind == kQuadraticMessage ? QuadraticWindow(p.truncation, L) : 0;
    scratch_stride = MessageScratchNeeded(p.params());

    MRF_CUDA_CHECK(cudaSetDevice(0));
    if (c.schedule == Schedule::kTiled) ChooseTile();

    // Refuse what cannot fit before allocating anything.
    estimated = EstimateBytes();
    std::size_t free_bytes = 0, total_bytes = 0;
    MRF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    kept = cuda_kept::TakeContext("cuda-bp");
    stream = kept->stream;
    if (t.host_setup)
      kept->ReleaseDevice();  // the old setup allocates each buffer apart: the block would only take room
    else
      free_bytes += kept->device_bytes;  // the kept block is this runner's to reuse or replace
    if (t.free_bytes_override) free_bytes = t.free_bytes_override;
    if (estimated > free_bytes)
      throw Error("cuda-bp: out of GPU memory: this problem needs " + MiB(estimated) + " of GPU memory, " +
                  MiB(free_bytes) + " of " + MiB(total_bytes) + " are free (" + std::to_string(p.width) + "x" +
                  std::to_string(p.height) + ", " + std::to_string(L) + " labels); use tbb-bp");

    // One block for the buffers below: EstimateBytes() counts them, and each piece rounds up to 256 bytes.
    const std::size_t block = estimated + 256 * kArenaPieces;
    if (!t.host_setup && kept->EnsureDevice(block) == cudaSuccess) arena.Use(kept->device, block);
    MRF_CUDA_CHECK(cudaEventCreate(&start));
    MRF_CUDA_CHECK(cudaEventCreate(&stop));
    MRF_CUDA_CHECK(kept->EnsurePinned(2 * sizeof(unsigned long long)));
    host_energy = reinterpret_cast<unsigned long long*>(kept->pinned);
    host_changed = reinterpret_cast<int*>(kept->pinned + sizeof(unsigned long long));
    if (inject == "oom") {
      DeviceBuffer<char> impossible;
      impossible.Allocate(std::size_t{1} << 50, "fault injection (MRF_INJECT_CUDA_FAULT=oom)");
    }
    inject_launch_pending = inject == "launch";

    MRF_CUDA_CHECK(cudaEventRecord(start, stream));
    if (!p.table.empty()) {
      table.Allocate(p.table.size(), "the pairwise table", &arena);
      table.Upload(p.table, stream);
      pw.table = table.get();
    }
    levels.resize(1);
    UploadLevel(levels[0], p, nullptr, raw);
    if (c.coarse_to_fine) {
      levels.resize(1 + coarse.size());
      for (std::size_t i = 0; i < coarse.size(); ++i) {
        UploadLevel(levels[i + 1], coarse[i], &levels[i]);
        AllocateSync(levels[i + 1]);
      }
    }
    if (c.schedule == Schedule::kSync) AllocateSync(levels[0]);
    const std::size_t n = levels[0].nodes();
    labels.Allocate(n, "the labels", &arena);
    best_labels.Allocate(n, "the labels", &arena);
    labels.Zero(stream);
    energy_sum.Allocate(1, "the energy", &arena);
    changed.Allocate(1, "the flags", &arena);
    if (!coarse.empty()) coarse_changed.Allocate(coarse.size() * static_cast<std::size_t>(c.iterations), "the flags", &arena);
    if (c.schedule == Schedule::kTiled) {
      grid = TileGrid::Make(p.width, p.height, tile);
      const std::size_t vertical = static_cast<std::size_t>(grid.tiles_x - 1) * p.height * Lp;
      const std::size_t horizontal = static_cast<std::size_t>(grid.tiles_y - 1) * p.width * Lp;
      borders[0].Allocate(vertical, "the border messages", &arena);
      borders[1].Allocate(vertical, "the border messages", &arena);
      borders[2].Allocate(horizontal, "the border messages", &arena);
      borders[3].Allocate(horizontal, "the border messages", &arena);
      for (auto& b : borders) b.Zero(stream);
      if (use_fast) UploadFast();
      ChooseLaunch();
    }
    MRF_CUDA_CHECK(cudaEventRecord(stop, stream));
    MRF_CUDA_CHECK(cudaEventSynchronize(stop));
  }

  // The fast kernel's packed unary costs (padded labels cost fast_support.pad_cost) and counters.
  void UploadFast() {
    const int words = fast_support.words;
    const std::int64_t count = static_cast<std::int64_t>(problem.num_nodes()) * words;
    fast_unary.Allocate(static_cast<std::size_t>(count), "the packed unary costs", &arena);
    PackUnaryKernel<<<Blocks(count, 256), 256, 0, stream>>>(levels[0].unary.get(), problem.num_labels, words,
                                                            fast_support.pad_cost, count, fast_unary.get());
    MRF_CHECK_LAUNCH("unary packing kernel", stream, false);
    tile_done.Allocate(static_cast<std::size_t>(grid.tiles_x) * grid.tiles_y, "the tile counters", &arena);
    fast_error.Allocate(1, "the flags", &arena);
    mailbox.Allocate(MailboxSlots(grid), "the mailbox", &arena);
    tile_done.Zero(stream);
    mailbox.Zero(stream);
    fast_error.Zero(stream);
    fast_kernel = fastk::Pick(words, fast_support.form, false);
  }

  void ChooseTile() {
    const int L = problem.num_labels;
    const int asked = RequestedTileSize(config.tile_size, problem.width, problem.height);
    const std::size_t limit = CudaMaxSharedBytesPerBlock();
    if (use_fast) {
      tile = asked > 0 ? asked : AutoTileSize(L, problem.kind);  // fits (ChooseKernel)
      const int lanes = FastLanes();
      shared_bytes = fast::SharedWords(tile, fast_support.words, lanes) * sizeof(fast::Word);
      threads = fastk::ComputeThreads(tile, lanes);
      return;
    }
    auto fits = [&](int t) {
      return TileSharedBytes(t, Lp, problem.kind, envelope) <= limit && 2 * t * G <= kMaxTileThreads;
    };
    if (asked > 0) {
      tile = asked;
      if (!fits(tile)) {
        int largest = 0;
        for (int t = 1; t <= tile; ++t)
          if (fits(t)) largest = t;
        throw Error("cuda-bp: a tile of side " + std::to_string(tile) + " for " + std::to_string(L) + " labels needs " +
                    std::to_string(TileSharedBytes(tile, Lp, problem.kind, envelope)) + " bytes of shared memory and " +
                    std::to_string(2 * tile * G) + " threads; this GPU allows " + std::to_string(limit) + " bytes and " +
                    std::to_string(kMaxTileThreads) + " threads per block: use a tile size of at most " +
                    std::to_string(largest));
      }
    } else {
      tile = AutoTileSize(L, problem.kind);
      const int wanted = tile;
      while (tile > 1 && !fits(tile)) --tile;
      if (!fits(tile))
        throw Error("cuda-bp: " + std::to_string(L) + " labels do not fit one pixel per tile in " +
                    std::to_string(limit) + " bytes of shared memory");
      if (tile != wanted)
        note = "tile reduced from " + std::to_string(wanted) + " to " + std::to_string(tile) +
               " to fit this GPU's shared memory (the CPU's automatic tile differs: give --tile-size to compare)";
    }
    threads = (2 * tile * G + 31) / 32 * 32;  // whole warps: every lane takes part in the warp shuffles
    shared_bytes = TileSharedBytes(tile, Lp, problem.kind, envelope);
    switch (C) {
      case 2: PickKernels<2>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      case 4: PickKernels<4>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      case 8: PickKernels<8>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
      default: PickKernels<16>(problem.kind, &diagonal_kernel, &cooperative_kernel); break;
    }
  }

  // The launches with a loader warp (or warps) and blocks that walk tile rows or columns.
  static bool Pipelined(CudaLaunch l) {
    return l == CudaLaunch::kPipeline || l == CudaLaunch::kPipelineRows || l == CudaLaunch::kSplit;
  }
  static int KernelMode(CudaLaunch l) {
    return l == CudaLaunch::kSplit          ? fastk::kSplit
           : l == CudaLaunch::kPipelineRows ? fastk::kPipelineRows
                                            : fastk::kPipelineColumns;
  }

  // Threads of a fast-kernel block in launch `l`: the compute threads, the split's second crew, the loaders.
  int FastBlockThreads(CudaLaunch l) const {
    if (l == CudaLaunch::kSplit) return 2 * threads + fastk::kSplitLoaders;
    return l == CudaLaunch::kPipeline || l == CudaLaunch::kPipelineRows ? threads + fastk::kPipelineLoaders : threads;
  }

  void ChooseLaunch() {
    int cooperative = 0, sms = 0, per_sm = 0;
    MRF_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
    MRF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int widest = std::min(grid.tiles_x, grid.tiles_y);
    launch = tuning.launch;
    // Each kernel may take as much shared memory as a block can have: the attribute belongs to the kernel,
    // not to this runner, so a smaller value would fail the launches of other runners of the same kernel.
    const int max_shared = static_cast<int>(CudaMaxSharedBytesPerBlock());
    if (use_fast) {
      const int lanes = FastLanes();
      const std::size_t split_bytes = fast::SharedWords(tile, fast_support.words, lanes, 3, 2) * sizeof(fast::Word);
      const bool split_fits = split_bytes <= CudaMaxSharedBytesPerBlock() &&
                              FastBlockThreads(CudaLaunch::kSplit) <= fastk::MaxSplitThreads(fast_support.words, lanes);
      // Measured fastest (docs/bp.md): since the step loops address shared memory directly, the pipeline beats
      // the split launch at the automatic tile (Tsukuba, tile 24: 0.37 against 0.40 ms on an H100).
      if (launch == CudaLaunch::kAuto) launch = CudaLaunch::kPipeline;
      if (launch == CudaLaunch::kSplit) {
        if (config.inner_iterations != 1)
          throw Error("cuda-bp: the split launch runs one inner iteration per visit, not " +
                      std::to_string(config.inner_iterations) + " (use pipeline)");
        if (!split_fits)
          throw Error("cuda-bp: the split launch needs " + std::to_string(split_bytes) +
                      " bytes of shared memory for a tile of side " + std::to_string(tile) + ", more than a block has " +
                      "(use pipeline or a smaller tile)");
        shared_bytes = split_bytes;
        fast_kernel = fastk::Pick(fast_support.words, fast_support.form, true);
      }
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fast_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fast_kernel, FastBlockThreads(launch), shared_bytes));
      cooperative_blocks = std::min(widest, per_sm * sms);
      // A block per tile column (pipeline) or row (the others), as many as can be resident.
      pipeline_blocks = std::min(launch == CudaLaunch::kPipeline ? grid.tiles_x : grid.tiles_y, per_sm * sms);
      if (tuning.pipeline_blocks > 0) pipeline_blocks = std::min(pipeline_blocks, tuning.pipeline_blocks);
    } else {
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(diagonal_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(cooperative_kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared));
      MRF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cooperative_kernel, threads, shared_bytes));
      cooperative_blocks = std::min(widest, per_sm * sms);
      if (launch == CudaLaunch::kAuto) launch = CudaLaunch::kGraph;  // measured fastest (docs/bp.md)
      if (Pipelined(launch))
        throw Error(std::string("cuda-bp: the ") + ToString(launch) + " launch needs the fast kernel, " +
                    (fast_why.empty() ? std::string("and the general kernel was asked for")
                                      : "which cannot run this problem (" + fast_why + ")") +
                    "; use diagonal, graph or cooperative");
    }
    if ((launch == CudaLaunch::kCooperative && (!cooperative || cooperative_blocks < 1)) ||
        (Pipelined(launch) && (!cooperative || pipeline_blocks < 1)))
      throw Error(std::string("cuda-bp: this GPU cannot run the ") + ToString(launch) + " launch (use diagonal or graph)");
  }

  // Fault injection: a real launch with more threads than a block may have.
  void InjectLaunchFault() {
    inject_launch_pending = false;
    SyncKernel<<<1, 4096, 0, stream>>>(Params(levels[0]), Messages{}, Messages{}, nullptr, nullptr, nullptr, nullptr);
    MRF_CHECK_LAUNCH("tile kernel (fault injected by MRF_INJECT_CUDA_FAULT=launch)", stream, false);
  }

  void LaunchDiagonal(int d, bool write_labels) {
    int begin = std::max(0, d - (grid.tiles_y - 1)), end = std::min(d, grid.tiles_x - 1) + 1;
    if (use_fast) {
      fast_kernel<<<end - begin, threads, shared_bytes, stream>>>(FastParams(), fastk::kDiagonal, d, write_labels ? 1 : 0);
      MRF_CHECK_LAUNCH("fast tile diagonal kernel", stream, capturing);
      return;
    }
    diagonal_kernel<<<end - begin, threads, shared_bytes, stream>>>(Tiles(), d, write_labels ? 1 : 0);
    MRF_CHECK_LAUNCH("tile diagonal kernel", stream, capturing);
  }

  void EnqueueOuterByDiagonals() {
    const int diagonals = grid.num_diagonals();
    for (int d = 0; d < diagonals; ++d) LaunchDiagonal(d, false);
    for (int d = diagonals - 1; d >= 0; --d) LaunchDiagonal(d, true);
  }

  void LaunchFastCooperative(int mode, int blocks, int block_threads, int arg0) {
    fast::Params P = FastParams();
    P.fresh = fresh_pending ? 1 : 0;
    fresh_pending = false;
    int arg1 = 0;
    void* args[] = {&P, &mode, &arg0, &arg1};
    MRF_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fast_kernel), dim3(blocks),
                                               dim3(block_threads), args, shared_bytes, stream));
    MRF_CHECK_LAUNCH(mode == fastk::kSplit      ? "fast tile split pipeline kernel"
                     : mode == fastk::kPipelineColumns || mode == fastk::kPipelineRows ? "fast tile pipeline kernel"
                                                : "fast tile cooperative kernel",
                     stream, false);
  }

  void EnqueueOuter() {
    if (inject_launch_pending) InjectLaunchFault();
    if (use_fast && Pipelined(launch)) {
      LaunchFastCooperative(KernelMode(launch), pipeline_blocks,
                            FastBlockThreads(launch), sweep_base);
      sweep_base += 2;
      return;
    }
    switch (launch) {
      case CudaLaunch::kCooperative: {
        if (use_fast) {
          LaunchFastCooperative(fastk::kCooperative, cooperative_blocks, threads, 0);
          break;
        }
        TileParams P = Tiles();
        void* args[] = {&P};
        MRF_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(cooperative_kernel),
                                                   dim3(cooperative_blocks), dim3(threads), args, shared_bytes, stream));
        MRF_CHECK_LAUNCH("cooperative tile kernel", stream, false);
        break;
      }
      case CudaLaunch::kGraph: {
        if (!graph) {
          cudaGraph_t g = nullptr;
          MRF_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          capturing = true;
          try {
            EnqueueOuterByDiagonals();
          } catch (...) {
            capturing = false;
            cudaStreamEndCapture(stream, &g);
            if (g) cudaGraphDestroy(g);
            throw;
          }
          capturing = false;
          MRF_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
          const cudaError_t status = cudaGraphInstantiate(&graph, g, 0);
          cudaGraphDestroy(g);
          MRF_CUDA_CHECK(status);
        }
        MRF_CUDA_CHECK(cudaGraphLaunch(graph, stream));
        MRF_CHECK_LAUNCH("tile graph", stream, false);
        break;
      }
      default: EnqueueOuterByDiagonals(); break;
    }
  }

  // One sync iteration on one level from its current messages. `skip_if_zero`: the previous iteration's
  // change flag (coarse levels), or null.
  void EnqueueSync(Level& level, bool labels_too, Label* out_labels, int* changed_flag, const int* skip_if_zero) {
    const std::size_t n = level.nodes();
    SyncKernel<<<Blocks(4 * static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(
        Params(level), level.Get(level.current), level.Get(1 - level.current), level.hbuf.get(), level.scratch.get(),
        changed_flag, skip_if_zero);
    MRF_CHECK_LAUNCH("sync kernel", stream, false);
    level.current = 1 - level.current;
    if (labels_too) {
      GridLabelsKernel<<<Blocks(static_cast<std::int64_t>(n), 256), 256, 0, stream>>>(Params(level), level.Get(level.current),
                                                                                      out_labels);
      MRF_CHECK_LAUNCH("labels kernel", stream, false);
    }
  }

  // Start state: zero messages, or the coarse-to-fine start (coarse levels run on the device, each
  // stopping early, as on the CPU, once an iteration changed nothing).
  // (Only what a run reads before writing it is cleared: each memset is a few microseconds of a
  // millisecond-long run.)
  void Reset() {
    for (Level& level : levels) level.current = 0;
    // A run enqueues as little as it can before its first launch: every call here is a stream operation the
    // run's time includes. The pipeline's tile counters only grow (a wait is for this run's sweeps), so
    // they are cleared only before they could overflow.
    if (sweep_base > kMaxSweepBase) {
      tile_done.Zero(stream);
      mailbox.Zero(stream);
      sweep_base = 0;
    }
    coarse_changed.Zero(stream);
    const bool c2f = config.coarse_to_fine && levels.size() >= 2;
    fresh_pending = false;
    if (!c2f) {  // zero messages: the border messages (tiled) or the fine level's first generation (sync)
      if (use_fast && Pipelined(launch))
        fresh_pending = true;  // the first launch reads them as 0 (fast::FreshVisit())
      else
        for (auto& b : borders) b.Zero(stream);
      for (auto& m : levels[0].messages[0]) m.Zero(stream);
      return;
    }
    // Coarse-to-fine: the coarsest level starts from zero messages; every finer level's first generation
    // and (tiled) every border message are then written whole by the upsampling kernels.
    for (auto& m : levels.back().messages[0]) m.Zero(stream);
    for (std::size_t i = levels.size() - 1; i >= 1; --i) {
      Level& level = levels[i];
      int* flags = coarse_changed.get() + (i - 1) * static_cast<std::size_t>(config.iterations);
      for (int it = 0; it < config.iterations; ++it)
        EnqueueSync(level, false, nullptr, flags + it, it > 0 ? flags + it - 1 : nullptr);
      const Messages coarse_messages = level.Get(level.current);
      if (i > 1 || config.schedule == Schedule::kSync) {
        Level& finer = levels[i - 1];
        const std::int64_t count = static_cast<std::int64_t>(finer.nodes()) * Lp;
        UpsampleKernel<<<Blocks(count, 256), 256, 0, stream>>>(coarse_messages, level.width, finer.Get(finer.current),
                                                               finer.width, finer.height, Lp);
        MRF_CHECK_LAUNCH("upsample kernel", stream, false);
      } else {
        const std::int64_t count =
            (static_cast<std::int64_t>(grid.tiles_x - 1) * problem.height +
             static_cast<std::int64_t>(grid.tiles_y - 1) * problem.width) * Lp;
        if (count > 0) {
          BordersFromCoarseKernel<<<Blocks(count, 256), 256, 0, stream>>>(coarse_messages, level.width, Tiles());
          MRF_CHECK_LAUNCH("borders kernel", stream, false);
        }
      }
    }
  }

  void EnqueueIteration() {
    if (config.schedule == Schedule::kTiled) {
      EnqueueOuter();
    } else {
      if (inject_launch_pending) InjectLaunchFault();
      EnqueueSync(levels[0], true, labels.get(), changed.get(), nullptr);
    }
  }

  // A fast-kernel wait that timed out is a bug: say so rather than return wrong labels.
  void CheckPipeline() {
    if (!use_fast) return;
    int error = 0;
    MRF_CUDA_CHECK(cudaMemcpyAsync(&error, fast_error.get(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (error) {
      fast_error.Zero(stream);  // a later run starts clean
      tile_done.Zero(stream);
      mailbox.Zero(stream);
      sweep_base = 0;
      throw Error("cuda-bp: the tile pipeline stalled waiting for a neighbouring tile (internal error " +
                  std::to_string(error) + ")");
    }
  }

  Energy EnergyOf(const Label* device_labels) {
    MRF_CUDA_CHECK(cudaMemsetAsync(energy_sum.get(), 0, sizeof(unsigned long long), stream));
    const std::int64_t n = static_cast<std::int64_t>(levels[0].nodes());
    EnergyKernel<<<Blocks(n, 256), 256, 0, stream>>>(Params(levels[0]), device_labels, energy_sum.get());
    MRF_CHECK_LAUNCH("energy kernel", stream, false);
    MRF_CUDA_CHECK(cudaMemcpyAsync(host_energy, energy_sum.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return static_cast<Energy>(*host_energy) + levels[0].unary_offset;
  }

  // Border messages (or grid messages) back to the host, without the padded labels.
  std::vector<Cost> Unpad(const DeviceBuffer<Cost>& buffer) {
    std::vector<Cost> padded;
    buffer.Download(padded, stream);
    MRF_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int L = problem.num_labels;
    std::vector<Cost> out(padded.size() / Lp * L);
    for (std::size_t i = 0; i < padded.size() / Lp; ++i) std::copy_n(&padded[i * Lp], L, &out[i * L]);
    return out;
  }
};

CudaRunner::CudaRunner(Problem problem, const Config& config, const CudaTuning& tuning)
    : impl_(std::make_unique<Impl>()) {
  impl_->Setup(std::move(problem), config, tuning);
  ReadUploadTime();
}

CudaRunner::CudaRunner(const Model& model, const Config& config, const CudaTuning& tuning)
    : impl_(std::make_unique<Impl>()) {
  if (tuning.host_setup) {  // the old setup throughout: the costs shifted on the host
    impl_->Setup(PrepareProblem(model), config, tuning);
    ReadUploadTime();
    return;
  }
  Problem problem = PrepareProblemWithoutCosts(model);
  const Cost* raw = model.unary.data();
  std::vector<Problem> shapes;
  if (config.coarse_to_fine && CanCoarsen(problem)) {
    shapes = CoarseShapes(problem);
    if (shapes.empty()) {  // the bound gave up: the host builds the levels from its shifted costs
      problem = PrepareProblem(model);
      raw = nullptr;
    }
  }
  impl_->Setup(std::move(problem), config, tuning, raw, std::move(shapes));
  ReadUploadTime();
}

void CudaRunner::ReadUploadTime() {
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
  times_.upload_ms = ms;
}

std::vector<Cost> CudaRunner::LevelUnary(int level) {
  if (level < 0 || level >= static_cast<int>(impl_->levels.size()))
    throw Error("cuda-bp: no level " + std::to_string(level) + " (" + std::to_string(impl_->levels.size()) + " levels)");
  return impl_->Unpad(impl_->levels[static_cast<std::size_t>(level)].unary);
}

CudaRunner::~CudaRunner() = default;

RunOutput CudaRunner::Run(const IterationCallback& callback, bool per_iteration, bool download_messages) {
  Impl& m = *impl_;
  RunOutput out;
  out.grid = m.grid;
  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.Reset();
  Energy best = 0;
  bool have_best = false;
  for (int it = 1; it <= m.config.iterations; ++it) {
    MRF_CUDA_CHECK(cudaMemsetAsync(m.changed.get(), 0, sizeof(int), m.stream));
    m.EnqueueIteration();
    out.iterations = it;
    if (!per_iteration) continue;
    m.CheckPipeline();
    const Energy energy = m.EnergyOf(m.labels.get());  // synchronises
    MRF_CUDA_CHECK(cudaMemcpyAsync(m.host_changed, m.changed.get(), sizeof(int), cudaMemcpyDeviceToHost, m.stream));
    MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    out.converged = *m.host_changed == 0;
    out.energies.push_back(energy);
    if (!have_best || energy < best) {
      best = energy;
      have_best = true;
      MRF_CUDA_CHECK(cudaMemcpyAsync(m.best_labels.get(), m.labels.get(), m.labels.size() * sizeof(Label),
                                     cudaMemcpyDeviceToDevice, m.stream));
    }
    if (callback && !callback(IterationState{it, energy, out.converged})) break;
    if (out.converged) break;
  }
  if (!per_iteration) {
    m.CheckPipeline();
    best = m.EnergyOf(m.labels.get());
    out.energies.push_back(best);
    MRF_CUDA_CHECK(cudaMemcpyAsync(m.best_labels.get(), m.labels.get(), m.labels.size() * sizeof(Label),
                                   cudaMemcpyDeviceToDevice, m.stream));
  }
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  times_.solve_ms = ms;

  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.labels.Download(out.labels, m.stream);
  m.best_labels.Download(out.best_labels, m.stream);
  MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  out.best_energy = best;
  if (download_messages) {
    if (m.config.schedule == Schedule::kTiled) {
      out.borders.right = m.Unpad(m.borders[0]);
      out.borders.left = m.Unpad(m.borders[1]);
      out.borders.down = m.Unpad(m.borders[2]);
      out.borders.up = m.Unpad(m.borders[3]);
    } else {
      Level& f = m.levels[0];
      out.messages.from_left = m.Unpad(f.messages[f.current][0]);
      out.messages.from_right = m.Unpad(f.messages[f.current][1]);
      out.messages.from_up = m.Unpad(f.messages[f.current][2]);
      out.messages.from_down = m.Unpad(f.messages[f.current][3]);
    }
  }
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  times_.download_ms = ms;
  return out;
}

double CudaRunner::TimeIterations(int iterations) {
  Impl& m = *impl_;
  MRF_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  MRF_CUDA_CHECK(cudaEventRecord(m.start, m.stream));
  m.Reset();
  for (int it = 0; it < iterations; ++it) m.EnqueueIteration();
  MRF_CUDA_CHECK(cudaEventRecord(m.stop, m.stream));
  MRF_CUDA_CHECK(cudaEventSynchronize(m.stop));
  float ms = 0;
  MRF_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  m.CheckPipeline();
  return ms;
}

Energy CudaRunner::DeviceEnergy() { return impl_->EnergyOf(impl_->labels.get()); }

Labeling CudaRunner::DeviceLabels() {
  Labeling out;
  impl_->labels.Download(out, impl_->stream);
  MRF_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  return out;
}

std::size_t CudaRunner::estimated_bytes() const { return impl_->estimated; }
std::size_t CudaRunner::allocated_bytes() const { return impl_->AllocatedBytes(); }
bool CudaRunner::uses_fast_kernel() const { return impl_->use_fast; }

std::string CudaRunner::Describe() const {
  const Impl& m = *impl_;
  std::string text = "GPU";
  if (m.config.schedule == Schedule::kTiled) {
    if (m.use_fast)
      text += " (tile " + std::to_string(m.tile) + ", fast kernel: a chain per " +
              (m.FastLanes() == 2 ? "pair of threads, " : "thread, ") +
              std::to_string(m.Lp) + " labels packed in 16 bits, " + ToString(m.launch) + " launch, " +
              (m.launch == CudaLaunch::kPipeline && m.mailbox.get() ? "mailbox handoff, " : "") +
              std::to_string(m.shared_bytes / 1024) + " KB shared)";
    else
      text += " (tile " + std::to_string(m.tile) + ", general kernel: " + std::to_string(m.C) + " labels x " +
              std::to_string(m.G) + " lanes per chain, " + ToString(m.launch) + " launch, " +
              std::to_string(m.shared_bytes / 1024) + " KB shared" +
              (m.fast_why.empty() ? std::string() : "; " + m.fast_why) + ")";
  }
  if (!m.note.empty()) text += "; " + m.note;
  return text;
}


namespace {
__global__ void ClockProbeKernel(long long cycles, unsigned long long* out) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  while (clock64() - c0 < cycles) {
  }
  const long long c1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}
}  // namespace

double CudaMeasureSmClockMHz() {
  DeviceBuffer<unsigned long long> out;
  out.Allocate(2, "the clock probe");
  std::vector<unsigned long long> host;
  double mhz = 0;
  for (int i = 0; i < 3; ++i) {  // the last of three (the first ones ramp the clock up)
    ClockProbeKernel<<<1, 1>>>(50000000LL, out.get());
    MRF_CHECK_LAUNCH("clock probe", nullptr, false);
    MRF_CUDA_CHECK(cudaDeviceSynchronize());
    out.Download(host, nullptr);
    MRF_CUDA_CHECK(cudaDeviceSynchronize());
    mhz = host[1] ? 1e3 * static_cast<double>(host[0]) / static_cast<double>(host[1]) : 0;
  }
  return mhz;
}

double CudaDeviceCopyGBs(std::size_t bytes, int repeats) {
  DeviceBuffer<unsigned char> a, b;
  a.Allocate(bytes, "the bandwidth probe");
  b.Allocate(bytes, "the bandwidth probe");
  MRF_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t start, stop;
  MRF_CUDA_CHECK(cudaEventCreate(&start));
  MRF_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < repeats + 2; ++i) {
    MRF_CUDA_CHECK(cudaEventRecord(start));
    MRF_CUDA_CHECK(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    MRF_CUDA_CHECK(cudaEventRecord(stop));
    MRF_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    MRF_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (i >= 2) ms.push_back(t);  // two warm-up copies
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;  // bytes read + written
}

std::size_t CudaMaxSharedBytesPerBlock() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return 0;
  }
  int bytes = 0;
  MRF_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  return static_cast<std::size_t>(bytes);
}

}  // namespace mrf::bp
