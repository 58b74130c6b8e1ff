#pragma once
/// @file options.h
/// @brief Options for mrf::Solve, with validation that names the broken field.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mrf/result.h"
#include "mrf/types.h"

namespace mrf {

/// Which inference algorithm to run.
enum class Algorithm {
  kAuto,       ///< Max-flow for submodular two-label models, else expansion for metrics, else BP (swap or ICM off 4-connected grids: AutoAlgorithm()).
  kMaxFlow,    ///< One exact graph cut (two labels, submodular).
  kExpansion,  ///< Alpha-expansion.
  kSwap,       ///< Alpha-beta swap.
  kIcm,        ///< Iterated conditional modes.
  kBeliefPropagation,  ///< Min-sum loopy belief propagation.
};
/// Where to run.
enum class Device {
  kAuto,  ///< The GPU when one is present and a GPU solver fits, else the CPU.
  kCpu,   ///< CPU only.
  kCuda,  ///< NVIDIA GPU only.
};
/// Order in which expansion/swap visit labels.
enum class LabelOrder {
  kSequential,  ///< 0, 1, ..., L-1 every cycle.
  kRandom,      ///< A fresh permutation every cycle, from `seed`.
  /// Expansion only: the labels by how many nodes have their lowest data cost there (the lowest
  /// label where several tie), most first, equal counts by label; the same every cycle. Early moves
  /// then take the labels most of the image ends with, and later ones change less (on Tsukuba the
  /// first cycle changed 224k node labels against sequential order's 704k; docs/benchmarks.md).
  kFrequent,
};

/// Where expansion and swap start when no initial labelling is given.
enum class StartLabels {
  kZero,  ///< Every node at label 0 (the reference implementations' start).
  /// The labelling of tiled belief propagation (2 outer x 2 inner iterations, coarse-to-fine start) on
  /// the device the moves run on (cuda-bp falling back to tbb-bp when it cannot take the model): lower
  /// final energies on stereo (docs/benchmarks.md).
  /// 4-connected 2-D grids only.
  kBeliefPropagation,
};

const char* ToString(Algorithm a);   ///< auto, maxflow, expansion, swap, icm, bp
const char* ToString(Device d);      ///< auto, cpu, cuda
const char* ToString(LabelOrder o);  ///< sequential, random, frequent
const char* ToString(StartLabels s);  ///< zero, bp
/// Parses a command-line name; throws mrf::Error listing the accepted names.
Algorithm ParseAlgorithm(const std::string& name);
/// Parses a command-line name; throws mrf::Error listing the accepted names.
Device ParseDevice(const std::string& name);
/// Parses a command-line name; throws mrf::Error listing the accepted names.
LabelOrder ParseLabelOrder(const std::string& name);
/// Parses a command-line name; throws mrf::Error listing the accepted names.
StartLabels ParseStartLabels(const std::string& name);

/// Belief-propagation specific settings.
struct BpOptions {
  /// Message schedule: "bpm" (right, left, down, up sweeps), "sync" (all messages at once),
  /// "tiled" (tiles swept raster then reverse raster, inner iterations inside each tile) or "auto"
  /// (bpm on the CPU, tiled on the GPU, which has no bpm).
  std::string schedule = "auto";
  int tile_size = 0;          ///< Tiled schedule: tile side in pixels; 0 picks one.
  int inner_iterations = 1;   ///< Tiled schedule: BP-M iterations inside a tile per visit.
  bool coarse_to_fine = false;  ///< Initialise messages from a coarser grid (GPU BP).
};

struct KeptCut;  // mrf/binary_graph.h

/// Everything mrf::Solve can be told. Defaults give a sensible solve.
struct SolveOptions {
  /// A solver name from the registry ("cpu-bk", "cuda-pr", "cpu-expansion", ...) or "auto"
  /// to choose from `algorithm` and `device`.
  std::string solver = "auto";
  Algorithm algorithm = Algorithm::kAuto;  ///< Used when solver is "auto".
  Device device = Device::kAuto;           ///< Used when solver is "auto".
  /// Binary max-flow engine used inside expansion and swap moves ("auto", "cpu-bk", ...).
  std::string maxflow_backend = "auto";
  int max_iterations = 100;        ///< Cycles (expansion, swap), iterations (BP, ICM).
  LabelOrder label_order = LabelOrder::kSequential;  ///< Expansion/swap label order.
  std::uint64_t seed = 0;          ///< Seed for every random choice; same seed, same result.
  /// Starting labelling; empty means all label 0 (ICM: every node's cheapest data label), or for
  /// expansion and swap the labelling `start` names.
  Labeling initial_labels;
  /// Expansion and swap without initial_labels: label 0 everywhere, or a belief-propagation labelling.
  StartLabels start = StartLabels::kZero;
  double time_limit_s = 0;         ///< Stop after this many seconds (0 = no limit).
  /// CPU threads for the whole solve (mrf/threads.h: at most the cores); 0 = the calling thread's TBB
  /// arena's, every core unless the caller limited it.
  int num_threads = 0;
  /// Expansion/swap: truncate terms that break submodularity instead of rejecting the model.
  bool truncate_nonsubmodular = false;
  BpOptions bp;                    ///< Belief-propagation settings.
  /// Called after each iteration; return false to stop (the best labelling so far is kept).
  std::function<bool(const IterationRecord&)> callback;
  /// Max-flow solvers of two-label models: where a solve keeps its s-t graph and engine for the
  /// next one given the same KeptCut, which re-solves when only the unary costs changed (KeptCut).
  std::shared_ptr<KeptCut> kept_cut;

  /// True when every field is in range; otherwise writes a message naming the field.
  bool IsValid(std::string* error) const;
};

}  // namespace mrf
