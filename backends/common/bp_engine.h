#pragma once
/// @file bp_engine.h
/// @brief Belief-propagation engines below the solver registry: the prepared problem, the schedules,
/// the tile geometry, and the CPU (TBB) and CUDA runners that tests and benchmarks call directly.
///
/// mrf::Solve() reaches these through the registry entries "tbb-bp" and "cuda-bp". The schedules,
/// and what the CPU and the GPU must agree on, are described in docs/bp.md. No CUDA header is
/// included here: the CUDA runner hides its state behind a pointer.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/common/bp_message.h"
#include "mrf/model.h"

namespace mrf::bp {

/// A 4-connected grid model in the form both engines consume.
struct Problem {
  int width = 0;                ///< Grid columns.
  int height = 0;               ///< Grid rows.
  int num_labels = 0;           ///< L.
  int kind = kPottsMessage;     ///< Pairwise family (MessageKind).
  Cost truncation = kMaxCost;   ///< Truncation of the linear / quadratic distance.
  std::vector<Cost> table;      ///< L x L distances for tables (empty otherwise).
  /// Unary costs shifted per node so that their minimum is 0: unary[p * L + l].
  std::vector<Cost> unary;
  Energy unary_offset = 0;      ///< Sum of the removed minima: energy = this + shifted terms.
  /// Scale (edge weight x lambda, clamped to 32 bits) of the edge p -> p+1; 0 in the last column.
  std::vector<Cost> scale_right;
  /// Scale of the edge p -> p+width; 0 in the last row.
  std::vector<Cost> scale_down;
  Cost max_message = 0;         ///< R: the largest spread of one edge's pairwise costs.
  Cost max_unary_spread = 0;    ///< Dr: the largest spread of one node's unary costs.

  /// Number of nodes.
  int num_nodes() const { return width * height; }
  /// Pairwise parameters pointing at this problem's table (host memory).
  PairwiseParams params() const {
    return PairwiseParams{kind, num_labels, truncation, table.empty() ? nullptr : table.data()};
  }
};

/// Builds the engine's problem from a model. Throws mrf::Error for a topology other than a 4-connected
/// 2-D grid, and when Dr + 5 R does not fit 32 bits (see bp_message.h), naming both numbers.
Problem PrepareProblem(const Model& model);

/// PrepareProblem() without the shifted unary costs (`unary` stays empty; unary_offset, max_unary_spread and
/// every check are as PrepareProblem() has them), for an engine that shifts the model's costs itself: cuda-bp
/// uploads them as they are and shifts them on the device, sparing the host a pass that writes every cost.
Problem PrepareProblemWithoutCosts(const Model& model);

/// Energy of a labelling of the problem (identical to mrf::EvaluateEnergy on the model it came from).
Energy ProblemEnergy(const Problem& problem, const Labeling& labels);

/// The 2x coarser problem of coarse-to-fine BP: a coarse node sums the unary costs of its (up to)
/// 2 x 2 children, a coarse edge's scale sums the scales of the fine edges it stands for, and the edges
/// inside a block add their V(a, a) (0 except for tables) to the block's unary. Its energy equals the
/// fine energy of the block-constant labelling. Throws mrf::Error if a sum leaves the 32-bit bound.
Problem CoarsenProblem(const Problem& fine);

/// Whether coarse-to-fine adds a level above `p`: both its sides are at least 16.
inline bool CanCoarsen(const Problem& p) { return p.width >= 16 && p.height >= 16; }

/// The coarser levels coarse-to-fine BP runs first: levels[0] is 2x coarser than `fine`, levels[1]
/// 4x, and so on; a level is added while the current one has both sides >= 16, at most 4 levels.
std::vector<Problem> CoarseLevels(const Problem& fine);

/// The levels of CoarseLevels() without their unary costs (empty, unary_offset 0), for an engine that sums
/// them itself (cuda-bp, on the device): sizes, edge scales and max_message as CoarseLevels() has them, and
/// max_unary_spread an upper bound of the true spread. Empty when that bound cannot rule out the 32-bit
/// overflow CoarseLevels() checks for: then the host must build the levels (and name the error).
std::vector<Problem> CoarseShapes(const Problem& fine);

/// The message schedules.
enum class Schedule {
  kBpm,    ///< Right, left, down, up passes over the whole grid, in turn (BP-M).
  kSync,   ///< Every message from the previous iteration's messages at once.
  kTiled,  ///< Tiles swept raster then reverse raster, BP-M inside a tile (docs/bp.md).
};

/// Parses bpm | sync | tiled; throws mrf::Error naming the bad value.
Schedule ParseSchedule(const std::string& name);
/// bpm, sync or tiled.
const char* ToString(Schedule schedule);

/// How a run is organised. One iteration: one BP-M iteration (bpm), one synchronous update (sync), or
/// one outer iteration = a raster sweep then a reverse-raster sweep over the tiles (tiled).
struct Config {
  Schedule schedule = Schedule::kBpm;  ///< Which schedule.
  int iterations = 1;                  ///< Iterations to run (fewer when converged or stopped).
  int tile_size = 0;                   ///< Tiled: tile side; 0 picks AutoTileSize().
  int inner_iterations = 1;            ///< Tiled: BP-M iterations inside a tile per visit.
  bool coarse_to_fine = false;         ///< Initialise messages from coarser levels (see docs/bp.md).
  int num_threads = 0;                 ///< CPU: TBB threads (0 = the calling arena's; mrf/threads.h).
};

/// Checks a config against a problem; throws mrf::Error naming the field.
void CheckConfig(const Problem& problem, const Config& config);

/// Shared memory budget of AutoTileSize(): under the 227 KB a Hopper block may take.
constexpr std::size_t kAutoTileSharedBytes = 200 * 1024;
/// Most threads a CUDA tile block may have (2 x tile x lanes per chain).
constexpr int kMaxTileThreads = 512;

/// Tile side the tiled schedule uses when none is given: the largest side up to 64 whose CUDA block
/// fits kAutoTileSharedBytes and kMaxTileThreads for these labels, so CPU and GPU pick the same one
/// (16 labels: 24).
int AutoTileSize(int num_labels, int kind);
/// The tile side `config` asks for on a width x height grid, 0 when it leaves the choice to the engine.
/// A side beyond the grid's longer side is that side: the same single tile (a larger one only grew the
/// engines' scratch, and overflowed the tile count near the int limit).
inline int RequestedTileSize(int tile_size, int width, int height) {
  return tile_size > 0 ? std::min(tile_size, std::max({width, height, 1})) : 0;
}

/// Labels per lane (C) the CUDA tiled kernel uses by default for L labels (4 up to 128 labels, else 8).
int DefaultLabelsPerLane(int num_labels);
/// Labels padded to C x G, the lanes of one chain (G a power of two <= 32); 0 if L > 32 C.
int PaddedLabels(int num_labels, int labels_per_lane);
/// Ints between tile rows in the CUDA kernel's shared arrays (padded against bank conflicts).
int TileRowStride(int tile, int padded_labels);
/// Shared memory one CUDA tile block needs: unary and four message arrays of tile^2 x padded labels,
/// the tile's edge scales, and per-chain scratch (tables, linear and quadratic windows, envelopes).
std::size_t TileSharedBytes(int tile, int padded_labels, int kind, bool quadratic_envelope);

/// Geometry of the tiles: tile (tx, ty) covers columns [tx T, min(W, (tx + 1) T)) and likewise rows.
struct TileGrid {
  int width = 0, height = 0;  ///< Grid size.
  int tile = 1;               ///< Tile side T.
  int tiles_x = 0, tiles_y = 0;  ///< Tiles per row and per column.
  /// The geometry of a width x height grid cut into tiles of side `tile`.
  static TileGrid Make(int width, int height, int tile) {
    TileGrid g;
    g.width = width;
    g.height = height;
    g.tile = tile;
    g.tiles_x = static_cast<int>((std::int64_t{width} + tile - 1) / tile);
    g.tiles_y = static_cast<int>((std::int64_t{height} + tile - 1) / tile);
    return g;
  }
  /// Number of tile anti-diagonals tx + ty = d: the wavefront steps of one sweep.
  int num_diagonals() const { return tiles_x + tiles_y - 1; }
};

/// Tiled schedule state: the messages that cross tile borders, in both directions (docs/bp.md).
/// A vertical border b (1 <= b < tiles_x) lies between columns bT - 1 and bT; `right[((b - 1) H + y) L + l]`
/// is the message from (bT - 1, y) to (bT, y), `left` the one back. Horizontal border b lies between
/// rows bT - 1 and bT; `down[((b - 1) W + x) L + l]` and `up` likewise.
struct BorderMessages {
  std::vector<Cost> right, left, down, up;  ///< Border messages, layout above.
  /// Zeroed buffers sized for a tile grid and L labels.
  static BorderMessages Zero(const TileGrid& grid, int num_labels);
  /// True when all four arrays are equal.
  bool operator==(const BorderMessages& o) const {
    return right == o.right && left == o.left && down == o.down && up == o.up;
  }
};

/// All messages of the grid by receiver: `from_left[p * L + l]` is the message p - 1 sends to p, and so
/// on (bpm and sync state; zero where there is no neighbour).
struct GridMessages {
  std::vector<Cost> from_left, from_right, from_up, from_down;  ///< Messages into each node.
  /// Zeroed buffers for a problem.
  static GridMessages Zero(const Problem& problem);
  /// True when all four arrays are equal.
  bool operator==(const GridMessages& o) const {
    return from_left == o.from_left && from_right == o.from_right && from_up == o.from_up &&
           from_down == o.from_down;
  }
};

/// Takes the messages of a coarse problem to the 2x finer one: a fine node receives from each direction
/// what its parent receives from that direction.
GridMessages UpsampleMessages(const Problem& coarse, const GridMessages& coarse_messages, const Problem& fine);
/// The border messages of a tile grid read off full grid messages (tiled coarse-to-fine start).
BorderMessages BordersFromGrid(const Problem& problem, const TileGrid& grid, const GridMessages& messages);

/// Progress of a run, reported after each iteration.
struct IterationState {
  int iteration = 0;          ///< 1-based.
  Energy energy = -1;         ///< Energy of the labelling after this iteration.
  bool converged = false;     ///< No message changed in this iteration.
};

/// Called after every iteration; return false to stop.
using IterationCallback = std::function<bool(const IterationState&)>;

/// What a run leaves behind.
struct RunOutput {
  Labeling labels;             ///< Labels after the last iteration run.
  Labeling best_labels;        ///< The labelling of least energy met after any iteration.
  Energy best_energy = 0;      ///< Its energy (valid when best_labels is not empty).
  std::vector<Energy> energies;  ///< Energy after each iteration (only the last without per-iteration checks).
  int iterations = 0;          ///< Iterations run.
  bool converged = false;      ///< Stopped because no message changed.
  GridMessages messages;       ///< bpm / sync: final messages.
  BorderMessages borders;      ///< tiled: final border messages.
  TileGrid grid;               ///< tiled: the tiles used.
};

/// Runs BP on the CPU with TBB: deterministic, the same labels and messages with any thread count.
RunOutput RunCpu(const Problem& problem, const Config& config, const IterationCallback& callback = {});

/// How the CUDA tiled schedule steps from one tile diagonal to the next.
enum class CudaLaunch {
  kAuto,         ///< The one measured fastest (docs/bp.md).
  kPerDiagonal,  ///< One kernel launch per diagonal.
  kGraph,        ///< The per-diagonal launches of one outer iteration captured once as a CUDA graph.
  kCooperative,  ///< One cooperative launch per outer iteration, a grid barrier between diagonals.
  kPipeline,     ///< Fast kernel only: one cooperative launch per outer iteration, a block per tile column,
                 ///< each tile waiting only for the horizontal chains of the tile on its left (right)
                 ///< through a flag in global memory.
  kPipelineRows, ///< The pipeline with a block per tile row, each tile waiting for the tile above (below).
  kSplit,        ///< Fast kernel, one inner iteration only: the pipeline with the horizontal chains of a
                 ///< block's next tile running while the vertical chains of its current tile do.
};
/// Parses auto | diagonal | graph | cooperative | pipeline | pipeline-rows | split.
CudaLaunch ParseCudaLaunch(const std::string& name);
/// auto, diagonal, graph, cooperative, pipeline, pipeline-rows or split.
const char* ToString(CudaLaunch launch);

/// Which CUDA tile kernel runs the tiled schedule.
enum class CudaKernel {
  kAuto,     ///< The fast one when it takes the problem (bp_fast_tile.h), else the general one.
  kFast,     ///< A chain per thread, labels packed in 16-bit pairs (2..32 labels, bounded costs).
  kGeneral,  ///< A chain per group of lanes (any metric family or table, up to 256 labels).
};
/// Parses auto | fast | general.
CudaKernel ParseCudaKernel(const std::string& name);
/// auto, fast or general.
const char* ToString(CudaKernel kernel);

/// CUDA-only knobs (tuning; results never depend on them).
struct CudaTuning {
  CudaLaunch launch = CudaLaunch::kAuto;  ///< Diagonal stepping.
  CudaKernel kernel = CudaKernel::kAuto;  ///< Tile kernel.
  int labels_per_lane = 0;                ///< General kernel: C in {2, 4, 8, 16}; 0 = DefaultLabelsPerLane().
  /// Testing: pretend that only this many bytes of device memory are free (0: ask the device).
  std::size_t free_bytes_override = 0;
  /// Pipeline launches: blocks (0: one per tile column, or row, as many as can be resident); fewer make
  /// each block take several.
  int pipeline_blocks = 0;
  /// Pipeline by tile columns: blocks hand each other border messages through the mailbox, stamped slots
  /// that need no fence (docs/bp.md, "Stepping between tiles"); false: through tile counters (release /
  /// acquire), as the other pipelines do.
  bool mailbox = true;
  /// The setup before 2026-11-28, for tests and measurements (MRF_BP_CUDA_SETUP=host): the costs shifted
  /// on the host (also by CudaRunner(const Model&)), the coarse-to-fine levels built there (CoarseLevels)
  /// even where the device could sum them, padded costs uploaded by a pitched copy, and a cudaMalloc per
  /// buffer instead of one for all.
  bool host_setup = false;
  /// Testing: costs per piece of a padded upload through the staging buffer (0: 8 Mi costs, 32 MB).
  std::size_t upload_piece_costs = 0;
};

/// Times of a CUDA run in milliseconds (CUDA events).
struct CudaTimes {
  double upload_ms = 0;    ///< Problem and buffers to the device.
  double solve_ms = 0;     ///< All iterations (per-iteration energies and checks included).
  double download_ms = 0;  ///< Labels and messages back.
};

/// Belief propagation on one CUDA device. Construction estimates the device memory it needs and
/// refuses (naming both numbers) a problem that does not fit the free memory, then uploads the problem
/// and sizes every buffer once; runs reuse them. Throws mrf::Error for CUDA failures (out of memory,
/// launch failure) and for problems the device cannot take (too many labels, a tile that does not fit
/// shared memory). `MRF_INJECT_CUDA_FAULT=nodevice|oom|launch` makes construction (nodevice, oom) or the
/// first iteration (launch) fail as the real fault would, for tests of the messages and the fallback.
class CudaRunner {
 public:
  /// Uploads `problem` and prepares the schedule of `config` (pass an rvalue to spare a copy).
  CudaRunner(Problem problem, const Config& config, const CudaTuning& tuning = {});
  /// The same runner for PrepareProblem(model), prepared with less host work: the model's unary costs go up
  /// as they are and are shifted on the device (PrepareProblemWithoutCosts), and the coarse-to-fine levels'
  /// costs are summed there (CoarseShapes), unless `tuning` asks for the host's levels.
  CudaRunner(const Model& model, const Config& config, const CudaTuning& tuning = {});
  ~CudaRunner();
  CudaRunner(const CudaRunner&) = delete;
  CudaRunner& operator=(const CudaRunner&) = delete;

  /// Runs config.iterations iterations from zero messages (or the coarse-to-fine start). With
  /// `per_iteration` false no energy is computed between iterations and the callback is not called.
  RunOutput Run(const IterationCallback& callback = {}, bool per_iteration = true,
                bool download_messages = false);
  /// Runs `iterations` iterations from zero messages without any host round trip and returns the time
  /// (CUDA events) of the iterations alone, labels of the last one included.
  double TimeIterations(int iterations);
  /// Energy of the current device labels, computed on the device.
  Energy DeviceEnergy();
  /// The current device labels.
  Labeling DeviceLabels();
  /// Timings of the last Run().
  const CudaTimes& times() const { return times_; }
  /// Tile side in use (tiled schedule) and labels per lane, for reports.
  std::string Describe() const;
  /// Device memory the runner estimated before allocating, and what it then allocated, in bytes.
  std::size_t estimated_bytes() const;
  /// Device memory allocated by the runner, in bytes (at most estimated_bytes()).
  std::size_t allocated_bytes() const;
  /// True when the tiled schedule runs on the fast kernel.
  bool uses_fast_kernel() const;
  /// The unary costs of level `level` (0: the fine one, then the coarse-to-fine levels) as the device holds
  /// them, without padding: for tests.
  std::vector<Cost> LevelUnary(int level);

 private:
  void ReadUploadTime();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  CudaTimes times_;
};

/// Shared memory a CUDA block may use on device 0 (opt-in maximum), or 0 without CUDA.
std::size_t CudaMaxSharedBytesPerBlock();

/// Measured device-memory bandwidth of device 0 in GB/s: the median of `repeats` device-to-device
/// copies of `bytes` bytes, counting bytes read plus bytes written. Throws without CUDA.
double CudaDeviceCopyGBs(std::size_t bytes = std::size_t{1} << 28, int repeats = 9);

/// SM clock of device 0 in MHz while one thread spins (clock64 cycles over globaltimer time).
double CudaMeasureSmClockMHz();

}  // namespace mrf::bp
