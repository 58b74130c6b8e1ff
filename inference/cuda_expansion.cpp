// cuda-expansion and cuda-swap: the host-only parts (tuning, input checks, memory estimates); the GPU
// runner is backends/cuda/cuda_expansion.cpp, and builds without CUDA get runners that say so.
#include "inference/cuda_expansion.h"
#include "inference/cuda_swap.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "backends/common/expansion_steps.h"
#include "inference/move_graph.h"
#include "mrf/config.h"
#include "mrf/name_values.h"

namespace mrf {

bool CudaExpansionTuning::IsValid(std::string* error) const {
  auto fail = [error](const std::string& message) {
    if (error) *error = "cuda-expansion tuning: " + message;
    return false;
  };
  if (!(update_fraction >= 0.0 && update_fraction <= 1000.0))
    return fail("update_fraction must be in 0..1000 (got " + mrf::NumberText(update_fraction) + ")");
  if (memory_limit < 0) return fail("memory_limit must not be negative (got " + std::to_string(memory_limit) + ")");
  if (solve_blocks < 0) return fail("solve_blocks must not be negative (got " + std::to_string(solve_blocks) + ")");
  if (early_cycles < -1)
    return fail("early_cycles must be -1 (automatic) or more (got " + std::to_string(early_cycles) + ")");
  if (!(early_fraction >= 0.0 && early_fraction <= 1.0))
    return fail("early_fraction must be in 0..1 (got " + mrf::NumberText(early_fraction) + ")");
  if (stack_bytes < 0 || stack_bytes > kMaxStackBytes)
    return fail("stack_bytes must be in 0.." + std::to_string(kMaxStackBytes) + " (got " + std::to_string(stack_bytes) + ")");
  if (resolve_push_rounds < 0 || resolve_push_rounds > 512)
    return fail("resolve_push_rounds must be in 0..512 (got " + std::to_string(resolve_push_rounds) + ")");
  std::string why;
  if (!push_relabel.IsValid(&why)) {
    if (error) *error = why;
    return false;
  }
  return true;
}

std::string CudaExpansionTuning::Describe() const {
  std::ostringstream s;
  s << (reuse_flow ? "cuda-expansion's kept residual graphs (cuda-swap keeps none) re-solved while under " + std::to_string(static_cast<int>(update_fraction * 100 + 0.5)) +
                         "% of the nodes changed"
                   : std::string("every move solved afresh"))
    << ", " << (device_loop ? "cycle loop on the device (conditional CUDA graph)" : "cycle loop on the host")
    << (resolve_push_rounds ? ", " + std::to_string(resolve_push_rounds) + " push rounds before a re-solve's first relabel"
                            : std::string())
    << (async_relabel ? ", asynchronous relabels" : ", relabels in rounds")
    << (fused_census ? ", census in the first push round" : ", census apart")
    << (cooperative_launch ? ", cooperative solve launches" : ", plain solve launches")
    << (early_cycles < 0 ? ", max-flows of cuda-expansion's first cycle from label 0 stop at " +
                               mrf::NumberText(early_fraction * 100) + "% of the nodes active"
        : early_cycles > 0 ? ", max-flows of the first " + std::to_string(early_cycles) + " cycles stop at " +
                               mrf::NumberText(early_fraction * 100) + "% of the nodes active"
                           : ", exact max-flows")
    << (local_changes > 0 && reuse_flow
            ? ", cuda-expansion's re-solves of at most " + std::to_string(local_changes) + " changed nodes repaired locally first"
            : std::string())
    << (stack_bytes ? ", " + std::to_string(stack_bytes) + "-byte thread stacks" : std::string())
    << (solve_blocks ? ", " + std::to_string(solve_blocks) + " solve blocks" : std::string())
    << ", memory limit " << (memory_limit ? std::to_string(memory_limit) + " bytes" : std::string("free memory"))
    << (check_energy ? ", energy checked every cycle" : "") << (trace_moves ? ", moves traced" : "")
    << "; push-relabel: " << push_relabel.Describe();
  return s.str();
}

namespace {

bool ParseBool(const std::string& name, const std::string& text) {
  if (text == "1" || text == "true" || text == "on") return true;
  if (text == "0" || text == "false" || text == "off") return false;
  throw Error("cuda-expansion tuning: " + name + "='" + text + "' is not 0 or 1");
}

std::int64_t ParseBytes(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  double scale = 1;
  const std::string unit = end ? std::string(end) : std::string();
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024.0;
  else if (unit == "G") scale = 1024.0 * 1024.0 * 1024.0;
  else if (!unit.empty()) throw Error("cuda-expansion tuning: " + name + "='" + text + "' is not a byte count (n, nK, nM or nG)");
  if (text.empty() || end == text.c_str() || !(value >= 0) || value * scale > 9.0e18)
    throw Error("cuda-expansion tuning: " + name + "='" + text + "' is not a byte count (n, nK, nM or nG)");
  return static_cast<std::int64_t>(value * scale);
}

int ParseCount(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 1000000)
    throw Error("cuda-expansion tuning: " + name + "='" + text + "' is not a non-negative integer");
  return static_cast<int>(value);
}

double ParseNumber(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw Error("cuda-expansion tuning: " + name + "='" + text + "' is not a number");
  return value;  // ranges are IsValid()'s
}

using T = CudaExpansionTuning;
template <bool T::*kField>
constexpr auto* ReadFlag = &ReadInto<T, bool, kField, ParseBool>;
template <int T::*kField>
constexpr auto* ReadCount = &ReadInto<T, int, kField, ParseCount>;
template <double T::*kField>
constexpr auto* ReadNumber = &ReadInto<T, double, kField, ParseNumber>;
void ReadEarlyCycles(T& tuning, const std::string& name, const std::string& text) {
  tuning.early_cycles = text == "auto" ? -1 : ParseCount(name, text);
}
void ReadMemoryLimit(T& tuning, const std::string& name, const std::string& text) {
  tuning.memory_limit = ParseBytes(name, text);
}

// cuda-expansion's own names; the others go to its push-relabel tuning.
const NamedSetting<T> kTuningNames[] = {
    {"reuse_flow", ReadFlag<&T::reuse_flow>},
    {"update_fraction", ReadNumber<&T::update_fraction>},
    {"device_loop", ReadFlag<&T::device_loop>},
    {"resolve_push_rounds", ReadCount<&T::resolve_push_rounds>},
    {"async_relabel", ReadFlag<&T::async_relabel>},
    {"fused_census", ReadFlag<&T::fused_census>},
    {"cooperative_launch", ReadFlag<&T::cooperative_launch>},
    {"early_cycles", ReadEarlyCycles},
    {"early_fraction", ReadNumber<&T::early_fraction>},
    {"local_changes", ReadCount<&T::local_changes>},
    {"stack_bytes", ReadCount<&T::stack_bytes>},
    {"solve_blocks", ReadCount<&T::solve_blocks>},
    {"memory_limit", ReadMemoryLimit},
    {"check_energy", ReadFlag<&T::check_energy>},
    {"trace_moves", ReadFlag<&T::trace_moves>},
};

}  // namespace

void CudaExpansionTuning::Parse(const std::string& overrides) {
  std::string engine;
  for (const auto& [name, text] : SplitNameValues(overrides, "cuda-expansion tuning")) {
    if (const NamedSetting<CudaExpansionTuning>* setting = FindSetting(kTuningNames, name))
      setting->read(*this, name, text);
    else
      engine += (engine.empty() ? "" : ",") + name + "=" + text;  // a push-relabel name (its parser names unknown ones)
  }
  if (!engine.empty()) {
    try {
      push_relabel.Parse(engine);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + "; cuda-expansion's own names: " + JoinSettingNames(kTuningNames));
    }
  }
  std::string error;
  if (!IsValid(&error)) throw Error(error);
}

CudaExpansionTuning CudaExpansionTuning::FromEnvironment() {
  CudaExpansionTuning t;
  if (const char* env = std::getenv("MRF_PR_TUNING")) t.push_relabel.Parse(env);
  if (const char* env = std::getenv("MRF_CUDA_EXPANSION_TUNING")) t.Parse(env);
  return t;
}

namespace {

// The estimate of either solver: `swap` sizes the per-move arrays by label pairs and adds the pairs
// and label counts.
CudaExpansionMemory EstimateMemory(const Model& model, const CudaExpansionTuning& tuning, bool swap) {
  CudaExpansionMemory m;
  const Topology& t = model.topology;
  if (!t.is_grid()) return m;
  const std::int64_t n = t.num_nodes(), labels = model.num_labels;
  const std::int64_t dirs = 2 * t.num_directions();
  const PushRelabelTuning& pr = tuning.push_relabel;
  const bool three_d = t.kind() == TopologyKind::kGrid3D6;
  const std::int64_t tx = three_d ? pr.tile3d_x : pr.tile_x, ty = three_d ? pr.tile3d_y : pr.tile_y,
                     tz = three_d ? pr.tile3d_z : 1;
  const std::int64_t tiles = ((t.width() + tx - 1) / tx) * ((t.height() + ty - 1) / ty) * ((t.depth() + tz - 1) / tz);
  constexpr std::int64_t kAlign = 256;
  std::int64_t buffers = 0, bytes = 0;
  auto add = [&](std::int64_t b) {
    bytes += b;
    ++buffers;
  };
  add(n * labels * 4);  // label-major unary costs
  add(n * labels * 4);  // the node-major upload
  add(labels * labels * 4);
  if (!model.edge_weights.empty()) add(static_cast<std::int64_t>(model.edge_weights.size()) * 4);
  const std::int64_t moves = swap ? labels * (labels - 1) / 2 : labels;
  add(n * 4);                       // labels
  add(moves * 4);                   // order
  add(sizeof(xp::MoveControl));
  add(moves * static_cast<std::int64_t>(sizeof(xp::MoveRecord)));  // records
  add(moves * 8), add(moves * 8), add(moves * 8), add(moves * 4);  // settled_at, truncated, snapshot, has_state
  if (swap) add(moves * 8), add(labels * 8);                       // pairs, label counts
  add(512);                         // grid barrier
  add(n * 8), add(n * 4), add(n * dirs * 4), add(n), add(n);  // excess, heights, residuals, masks, cut
  add(tiles), add(tiles), add(tiles), add(4 * tiles), add(tiles);  // tile flags, every tile marked
  add(4 * tiles);                                             // each tile's need (asynchronous relabels)
  add(64);                                                    // totals
  if (!swap && tuning.reuse_flow && tuning.local_changes > 0)
    add(std::min<std::int64_t>(tuning.local_changes, n) * 8);  // changed nodes (at most every node)
  m.base_bytes = bytes + buffers * kAlign + 5 * kAlign;       // + the kept graphs' five arrays' alignment
  m.per_kept_graph_bytes = n * (8 + 4 + 4 * dirs + 1 + 4);
  return m;
}

// What cuda-expansion and cuda-swap check before touching a GPU.
void CheckMoveInput(const Model& model, const SolveOptions& options, bool swap) {
  const std::string name = swap ? "cuda-swap" : "cuda-expansion";
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  MoveOrder::CheckUsable(options.label_order, swap);
  model.ValidateOrThrow();
  const Topology& t = model.topology;
  if (!t.is_grid())
    throw Error(name + " needs a grid-shaped model (2-D 4- or 8-connected, or 3-D 6-connected); this model is " +
                t.Describe() + (swap ? " (use cpu-swap)" : " (use cpu-expansion)"));
  if (t.num_nodes() > (NodeId{1} << 30))
    throw Error(name + ": grid of " + std::to_string(t.num_nodes()) + " nodes is above the 2^30 supported");
  const std::string broken = FindNonSubmodularMoveTerm(model, /*expansion=*/!swap);
  if (!broken.empty() && !options.truncate_nonsubmodular)
    throw Error(NonSubmodularRefusal(model, broken, !swap));  // the CPU solvers' message
  // The device keeps lambda * distance in a 32-bit table, and a move's capacities are differences
  // of two pairwise costs: they fit the engine's 32-bit capacities when twice the largest cost does.
  const Label L = model.num_labels;
  const __int128 distance = model.pairwise.MaxDistance(L);
  const __int128 table = static_cast<__int128>(model.pairwise.lambda) * distance;
  if (table > kMaxCost)
    throw Error(name + ": lambda " + std::to_string(model.pairwise.lambda) + " x distance " +
                std::to_string(static_cast<long long>(distance)) + " does not fit 32 bits");
  Cost max_weight = 1;
  if (!model.edge_weights.empty()) {
    max_weight = 0;
    for (Cost w : model.edge_weights) max_weight = w > max_weight ? w : max_weight;
  }
  const __int128 term = static_cast<__int128>(max_weight) * table;
  if (2 * term > kMaxCost)
    throw Error(name + ": a move's edge capacity could reach 2 x " + std::to_string(static_cast<long long>(term)) +
                " (edge weight " + std::to_string(max_weight) + " x lambda " + std::to_string(model.pairwise.lambda) +
                " x distance " + std::to_string(static_cast<long long>(distance)) +
                "), above the 2^31 - 1 of the GPU engine's capacities; scale the costs down or use " +
                (swap ? "cpu-swap" : "cpu-expansion"));
}

}  // namespace

CudaExpansionMemory EstimateCudaExpansionMemory(const Model& model, const CudaExpansionTuning& tuning) {
  return EstimateMemory(model, tuning, false);
}

CudaExpansionMemory EstimateCudaSwapMemory(const Model& model, const CudaExpansionTuning& tuning) {
  return EstimateMemory(model, tuning, true);
}

void CheckCudaExpansionInput(const Model& model, const SolveOptions& options) { CheckMoveInput(model, options, false); }

void CheckCudaSwapInput(const Model& model, const SolveOptions& options) { CheckMoveInput(model, options, true); }

#if !MRF_HAVE_CUDA
void RunCudaExpansion(const Model&, const SolveOptions&, Result*, const CudaExpansionTuning&, CudaExpansionStats*) {
  throw Error("cuda-expansion is not compiled in (this build has no CUDA)");
}
void RunCudaSwap(const Model&, const SolveOptions&, Result*, const CudaExpansionTuning&, CudaExpansionStats*) {
  throw Error("cuda-swap is not compiled in (this build has no CUDA)");
}
#endif

}  // namespace mrf
