#include "backends/cpu/push_relabel_engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <system_error>

#include <tbb/parallel_for.h>

#include "backends/common/push_relabel_local.h"
#include "mrf/model.h"
#include "mrf/name_values.h"

namespace mrf {

// ---- Tuning --------------------------------------------------------------------------------------

bool PushRelabelTuning::IsValid(std::string* error) const {
  auto fail = [error](const std::string& message) {
    if (error) *error = "push-relabel tuning: " + message;
    return false;
  };
  if (tile_x != 32) return fail("tile_x must be 32 (got " + std::to_string(tile_x) + ")");
  if (tile_y != 8 && tile_y != 16 && tile_y != 32)
    return fail("tile_y must be 8, 16 or 32 (got " + std::to_string(tile_y) + ")");
  const bool cube = tile3d_x == 8 && tile3d_y == 8 && tile3d_z == 8;
  const bool slab = tile3d_x == 32 && tile3d_y == 4 && tile3d_z == 4;
  if (!cube && !slab)
    return fail("3-D tile must be 8x8x8 or 32x4x4 (got " + std::to_string(tile3d_x) + "x" +
                std::to_string(tile3d_y) + "x" + std::to_string(tile3d_z) + ")");
  if (local_iterations < 1 || local_iterations > 100000)
    return fail("local_iterations must be in 1..100000 (got " + std::to_string(local_iterations) + ")");
  if (resolve_local_iterations < 1 || resolve_local_iterations > 100000)
    return fail("resolve_local_iterations must be in 1..100000 (got " + std::to_string(resolve_local_iterations) +
                ")");
  if (rounds_per_global_relabel < 1 || rounds_per_global_relabel > 512)
    return fail("rounds_per_global_relabel must be in 1..512 (got " + std::to_string(rounds_per_global_relabel) + ")");
  if (resolve_push_rounds < -1 || resolve_push_rounds > 512)
    return fail("resolve_push_rounds must be -1 or in 0..512 (got " + std::to_string(resolve_push_rounds) + ")");
  if (bfs_check_every < 2 || bfs_check_every > 512 || bfs_check_every % 2 != 0)
    return fail("bfs_check_every must be even and in 2..512 (got " + std::to_string(bfs_check_every) + ")");
  if (max_push_rounds < 0) return fail("max_push_rounds must not be negative");
  if (local_resolve < -1 || local_resolve > 3)
    return fail("local_resolve must be -1, 0, 1, 2 or 3 (got " + std::to_string(local_resolve) + ")");
  if (settle_hops < 1 || settle_hops > 4096)
    return fail("settle_hops must be in 1..4096 (got " + std::to_string(settle_hops) + ")");
  if (settle_passes < 1 || settle_passes > 16)
    return fail("settle_passes must be in 1..16 (got " + std::to_string(settle_passes) + ")");
  if (repair_violations < 0) return fail("repair_violations must not be negative (got " + std::to_string(repair_violations) + ")");
  if (incremental_relabel < 0 || incremental_relabel > 2)
    return fail("incremental_relabel must be 0, 1 or 2 (got " + std::to_string(incremental_relabel) + ")");
  return true;
}

std::string PushRelabelTuning::Describe() const {
  std::ostringstream s;
  s << "tile " << tile_x << "x" << tile_y << " (3-D " << tile3d_x << "x" << tile3d_y << "x" << tile3d_z << "), "
    << local_iterations << " local iterations (" << resolve_local_iterations
    << " in a re-solve's first push rounds), global relabel every " << rounds_per_global_relabel
    << " push rounds"
    << (resolve_push_rounds >= 0 ? " (" + std::to_string(resolve_push_rounds) + " before a re-solve's first check)" : "")
    << ", BFS batches of " << bfs_check_every << " rounds, CUDA graphs "
    << (cuda_graphs ? "on" : "off") << (fused_bfs_start ? ", fused BFS start" : "")
    << (incremental_relabel == 0   ? ", full relabels"
        : incremental_relabel == 1 ? ", incremental relabels in re-solves"
                                   : ", incremental relabels")
    << (wave_relabel ? ", wave relabels" : "") << (wave_push ? ", wave pushes" : "")
    << (local_resolve == 0   ? ", no local re-solves"
        : local_resolve == 1 ? ", local re-solves"
        : local_resolve == 2 ? ", local fills before re-solves"
        : local_resolve == 3 ? ", local fills and push rounds checked by the certificate before re-solves"
                             : "")
    << (repair_violations == 0 ? ", no repairs after a failed certificate" : "")
    << (settle_hops != pr::kSettleHops ? ", " + std::to_string(settle_hops) + " settling hops" : std::string())
    << (settle_passes != pr::kSettlePasses ? ", " + std::to_string(settle_passes) + " settling passes" : std::string());
  if (max_push_rounds) s << ", stop after " << max_push_rounds << " rounds";
  if (trace) s << ", device timeline traced";
  return s.str();
}

namespace {

int ParseTuningInteger(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < -1000000000L || value > 1000000000L)
    throw Error("push-relabel tuning: " + name + "='" + text + "' is not an integer");
  return static_cast<int>(value);
}

bool ParseTuningFlag(const std::string& name, const std::string& text) { return ParseTuningInteger(name, text) != 0; }

// A field that takes an integer (ranges are IsValid()'s), or a flag (any integer but 0 turns it on).
using T = PushRelabelTuning;
template <int T::*kField>
constexpr auto* ReadInteger = &ReadInto<T, int, kField, ParseTuningInteger>;
template <bool T::*kField>
constexpr auto* ReadFlag = &ReadInto<T, bool, kField, ParseTuningFlag>;

const NamedSetting<T> kTuningNames[] = {
    {"tile_x", ReadInteger<&T::tile_x>},
    {"tile_y", ReadInteger<&T::tile_y>},
    {"tile3d_x", ReadInteger<&T::tile3d_x>},
    {"tile3d_y", ReadInteger<&T::tile3d_y>},
    {"tile3d_z", ReadInteger<&T::tile3d_z>},
    {"local_iterations", ReadInteger<&T::local_iterations>},
    {"resolve_local_iterations", ReadInteger<&T::resolve_local_iterations>},
    {"rounds_per_global_relabel", ReadInteger<&T::rounds_per_global_relabel>},
    {"resolve_push_rounds", ReadInteger<&T::resolve_push_rounds>},
    {"bfs_check_every", ReadInteger<&T::bfs_check_every>},
    {"cuda_graphs", ReadFlag<&T::cuda_graphs>},
    {"fused_bfs_start", ReadFlag<&T::fused_bfs_start>},
    {"incremental_relabel", ReadInteger<&T::incremental_relabel>},
    {"wave_relabel", ReadFlag<&T::wave_relabel>},
    {"wave_push", ReadFlag<&T::wave_push>},
    {"local_resolve", ReadInteger<&T::local_resolve>},
    {"repair_violations", ReadInteger<&T::repair_violations>},
    {"settle_hops", ReadInteger<&T::settle_hops>},
    {"settle_passes", ReadInteger<&T::settle_passes>},
    {"max_push_rounds", ReadInteger<&T::max_push_rounds>},
    {"trace", ReadFlag<&T::trace>},
};

}  // namespace

void PushRelabelTuning::Parse(const std::string& overrides) {
  for (const auto& [name, text] : SplitNameValues(overrides, "push-relabel tuning")) {
    const NamedSetting<PushRelabelTuning>* setting = FindSetting(kTuningNames, name);
    if (!setting)
      throw Error("push-relabel tuning: unknown name '" + name + "' (known: " + JoinSettingNames(kTuningNames) + ")");
    setting->read(*this, name, text);
  }
  std::string error;
  if (!IsValid(&error)) throw Error(error);
}

PushRelabelTuning PushRelabelTuning::FromEnvironment() {
  PushRelabelTuning tuning;
  if (const char* env = std::getenv("MRF_PR_TUNING")) tuning.Parse(env);
  return tuning;
}

// ---- Engine --------------------------------------------------------------------------------------

PushRelabelEngine::PushRelabelEngine(const PushRelabelTuning& tuning) { set_tuning(tuning); }
PushRelabelEngine::~PushRelabelEngine() {
  assert(!prepare_ahead_.valid() && "an engine that prepares ahead must wait for it in its own destructor");
}

void PushRelabelEngine::set_tuning(const PushRelabelTuning& tuning) {
  std::string error;
  if (!tuning.IsValid(&error)) throw Error(error);
  tuning_ = tuning;
  solved_ = false;
}

std::string PushRelabelEngine::CannotSolve(const Topology& topology) const {
  if (!topology.is_grid()) return "needs a grid-shaped graph (2-D 4- or 8-connected, or 3-D 6-connected)";
  if (topology.num_nodes() > (NodeId{1} << 30))
    return "grid of " + std::to_string(topology.num_nodes()) + " nodes is above the 2^30 supported";
  return {};
}

std::size_t PushRelabelEngine::MemoryBytes() const {
  WaitForPrepareAhead();  // the workspace's sizes are written by it
  return WorkspaceBytes() + sink_caps_.capacity() * 8;
}

pr::TileLayout PushRelabelTuning::Layout(const Topology& topology) const {
  pr::TileLayout layout;
  layout.kind = static_cast<int>(topology.kind());
  layout.width = topology.width();
  layout.height = topology.height();
  layout.depth = topology.depth();
  if (layout.kind == pr::kKindGrid3D6) {
    layout.tile_x = tile3d_x;
    layout.tile_y = tile3d_y;
    layout.tile_z = tile3d_z;
  } else {
    layout.tile_x = tile_x;
    layout.tile_y = tile_y;
    layout.tile_z = 1;
  }
  layout.tiles_x = (layout.width + layout.tile_x - 1) / layout.tile_x;
  layout.tiles_y = (layout.height + layout.tile_y - 1) / layout.tile_y;
  layout.tiles_z = (layout.depth + layout.tile_z - 1) / layout.tile_z;
  layout.num_nodes = topology.num_nodes();
  layout.inf = static_cast<int>(layout.num_nodes + 1);
  return layout;
}

namespace {

constexpr std::int64_t kMaxTerminal = std::int64_t{1} << 62;

// How a re-solve that the certificate proved optimal without a global relabel begins its message
// (mrf-bench counts those re-solves by it).
constexpr const char* kLocalMessage = "maximum flow found by local repairs";

// Runs f(0..count-1), on all cores when there is more than one chunk (waking the worker threads
// costs more than one chunk's work).
template <class F>
void ForEachChunk(std::size_t count, const F& f) {
  if (count == 1) f(0);
  else if (count > 1) tbb::parallel_for(std::size_t{0}, count, f);
}

// One core's share of reading terminal weights: the sum of its sink weights (a fresh solve) or of their
// changes (a re-solve), whether that sum overflowed, the first node whose weight is above kMaxTerminal
// (the chunk stops there, so its sum covers the nodes before it), and a re-solve's changes.
template <class Change>
struct WeightChunk {
  std::vector<Change> changes;
  std::int64_t sink_sum = 0;
  bool overflow = false;
  NodeId too_large = -1;
};

// Adds the chunks' sums to `sum` in node order and appends their changes, throwing the error a serial
// pass over the nodes would meet first; too_large(v) throws for node v.
template <class Change, class TooLarge>
std::int64_t JoinChunks(const std::vector<WeightChunk<Change>>& chunks, std::int64_t sum, std::vector<Change>* changes,
                        const TooLarge& too_large) {
  for (const WeightChunk<Change>& chunk : chunks) {
    if (chunk.overflow) throw Error("sum of sink capacities overflows a 64-bit sum");
    sum = CheckedAdd(sum, chunk.sink_sum, "sum of sink capacities");
    if (chunk.too_large >= 0) too_large(chunk.too_large);
    if (changes) changes->insert(changes->end(), chunk.changes.begin(), chunk.changes.end());
  }
  return sum;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// Netted initial excess (s - t) into the device's host buffer, and the sink capacities for the flow.
// In chunks on all cores: one core took 56 ms for the 16.8M nodes of the 4096 scene (GPU machine),
// seven times cuda-pr's solve. Errors name the first bad node, as a serial pass would.
void PushRelabelEngine::PrepareHost(const StGraph& graph) {
  const NodeId n = graph.num_nodes();
  std::int64_t* x0 = HostExcessBuffer();
  sink_caps_.resize(n);
  constexpr NodeId kChunk = NodeId{1} << 16;
  std::vector<WeightChunk<NodeChange>> chunks(static_cast<std::size_t>((n + kChunk - 1) / kChunk));
  auto read_chunk = [&](std::size_t c) {
    WeightChunk<NodeChange>& chunk = chunks[c];
    const NodeId end = std::min(n, static_cast<NodeId>(c + 1) * kChunk);
    for (NodeId v = static_cast<NodeId>(c) * kChunk; v < end; ++v) {
      const std::int64_t s = graph.source_cap(v), t = graph.sink_cap(v);
      if (s > kMaxTerminal || t > kMaxTerminal) {
        chunk.too_large = v;
        return;
      }
      x0[v] = s - t;
      sink_caps_[v] = t;
      chunk.overflow |= __builtin_add_overflow(chunk.sink_sum, t, &chunk.sink_sum);
    }
  };
  ForEachChunk(chunks.size(), read_chunk);
  std::vector<NodeChange>* no_changes = nullptr;  // a fresh solve has none
  sum_sink_caps_ = JoinChunks(chunks, 0, no_changes, [&](NodeId v) { ThrowTooLarge(graph, v); });
}

void PushRelabelEngine::ThrowTooLarge(const StGraph& graph, NodeId v) const {
  throw Error(name() + ": terminal capacity of node " + std::to_string(v) + " (" +
              std::to_string(std::max(graph.source_cap(v), graph.sink_cap(v))) +
              ") is above the 2^62 this engine accepts");
}

void PushRelabelEngine::PrepareAhead(const Topology& topology) {
  // Not after a solve: a workspace for another shape would replace the state a Resolve() builds on.
  if (solved_ || !PreparingAheadPays() || prepare_ahead_.valid() || !CannotSolve(topology).empty()) return;
  try {
    prepare_ahead_ = std::async(std::launch::async, [this, layout = tuning_.Layout(topology)] { Prepare(layout); });
  } catch (const std::system_error&) {
    // No thread to be had: the solve prepares as it always did.
  }
}

void PushRelabelEngine::WaitForPrepareAhead() const {
  if (!prepare_ahead_.valid()) return;
  try {
    prepare_ahead_.get();
  } catch (...) {
  }
}

void PushRelabelEngine::Solve(const StGraph& graph, Result* out) {
  const std::string cannot = CannotSolve(graph.topology());
  if (!cannot.empty()) throw Error(name() + " cannot solve this graph: " + cannot);
  const auto start = std::chrono::steady_clock::now();
  WaitForPrepareAhead();  // then Prepare() below finds the workspace made, or fails as the ahead one did
  ClearStop();
  solved_ = false;
  layout_ = tuning_.Layout(graph.topology());
  cut_labels_.Start(static_cast<std::size_t>(layout_.num_nodes));
  Prepare(layout_);
  PrepareHost(graph);
  cut_labels_.Wait();  // made by now, or it would slow the device's solve (LabelingAhead)
  out->timings.setup_ms = MsSince(start);
  Upload(graph);
  RunLoop(out, 0, false);
  solved_ = stop_reason().empty();  // a stopped solve is not a base for re-solves: the next one starts afresh
}

void PushRelabelEngine::Resolve(const StGraph& graph, Result* out) {
  WaitForPrepareAhead();  // a Prepare() for another shape may be running: it must end before the state is read
  ClearStop();
  const pr::TileLayout layout = tuning_.Layout(graph.topology());
  if (!solved_ || graph.changes().structure_changed || layout.kind != layout_.kind || layout.width != layout_.width ||
      layout.height != layout_.height || layout.depth != layout_.depth) {
    Solve(graph, out);
    return;
  }
  // Dense edits of large grids are solved afresh (smaller grids take a few milliseconds either way).
  constexpr std::int64_t kDenseEditMinNodes = std::int64_t{1} << 18;
  const std::size_t changes = graph.changes().nodes.size() + graph.changes().edges.size();
  if (layout.num_nodes >= kDenseEditMinNodes &&
      static_cast<double>(changes) > DenseEditFraction() * static_cast<double>(layout.num_nodes)) {
    Solve(graph, out);
    out->message += "; solved afresh, not re-solved: the edit changed " + std::to_string(changes) +
                    " capacities, more than " + NumberText(DenseEditFraction() * 100) + "% of the " +
                    std::to_string(layout.num_nodes) + " nodes";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  solved_ = false;
  cut_labels_.Start(static_cast<std::size_t>(layout.num_nodes));
  const std::vector<NodeId> nodes = SortedUnique(graph.changes().nodes, layout.num_nodes, &changed_bits_);
  std::int64_t* x0 = HostExcessBuffer();
  // Each changed node costs a cache miss per array (scattered nodes): chunks of them on all cores,
  // joined in node order. The state is invalid from here (solved_ is false) until the re-solve
  // ends, so a bad weight found part way leaves nothing behind that a later solve would trust.
  constexpr std::size_t kChunk = 16384;
  std::vector<WeightChunk<NodeChange>> chunks((nodes.size() + kChunk - 1) / kChunk);
  auto read_chunk = [&](std::size_t c) {
    WeightChunk<NodeChange>& chunk = chunks[c];
    const std::size_t end = std::min(nodes.size(), (c + 1) * kChunk);
    chunk.changes.reserve(end - c * kChunk);
    const Energy* source = graph.source_caps().data();
    const Energy* sink = graph.sink_caps().data();
    for (std::size_t i = c * kChunk; i < end; ++i) {
      // Each change misses the cache in four arrays: ask for a later change's lines now.
      constexpr std::size_t kAhead = 16;
      if (i + kAhead < end) {
        const NodeId u = nodes[i + kAhead];
        __builtin_prefetch(source + u);
        __builtin_prefetch(sink + u);
        __builtin_prefetch(x0 + u, 1);
        __builtin_prefetch(sink_caps_.data() + u, 1);
      }
      const NodeId v = nodes[i];
      const std::int64_t s = source[v], t = sink[v];
      if (s > kMaxTerminal || t > kMaxTerminal) {
        chunk.too_large = v;
        return;
      }
      const std::int64_t delta = (s - t) - x0[v];
      x0[v] = s - t;
      chunk.overflow |= __builtin_add_overflow(chunk.sink_sum, t - sink_caps_[v], &chunk.sink_sum);
      sink_caps_[v] = t;
      if (delta != 0) chunk.changes.push_back({v, delta});
    }
  };
  ForEachChunk(chunks.size(), read_chunk);
  std::vector<NodeChange> node_changes;
  node_changes.reserve(nodes.size());
  sum_sink_caps_ = JoinChunks(chunks, sum_sink_caps_, &node_changes, [&](NodeId v) { ThrowTooLarge(graph, v); });
  std::vector<EdgeId> slots = graph.changes().edges;
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  std::vector<EdgeChange> edge_changes;
  edge_changes.reserve(slots.size());
  NodeId from = 0, to = 0;
  for (EdgeId e : slots)
    if (graph.topology().edge_endpoints(e, &from, &to))
      edge_changes.push_back({e, graph.edge_cap(e), graph.edge_rev_cap(e)});
  const int mode = edge_changes.empty() ? NodeEditMode() : 0;
  RepairSchedule schedule;  // mode 3 fills each change on its own (no order needed: races fail the certificate)
  if (mode == 1 || mode == 2) schedule = ScheduleRepairs(&node_changes);
  cut_labels_.Wait();  // host time too: it would slow the device's re-solve (LabelingAhead)
  out->timings.setup_ms = MsSince(start);
  ApplyChanges(node_changes, edge_changes);
  if (mode > 0) {
    // The last solve left a certified state (push_relabel_local.h): repair around the changes (and check).
    stats_ = PushRelabelStats{};
    if (RepairLocally(node_changes, schedule, mode >= 2)) {
      // The tiles the repairs changed stay flagged `touched`: their residual bitmasks are stale until
      // the next relabel's first kill round refreshes them, so the flags must not be cleared here.
      FinishResult(out, std::string(kLocalMessage) + " of " + std::to_string(stats_.local_repairs) +
                            " changed nodes (optimality certificate checked on every node)");
      solved_ = true;
      return;
    }
    // Not certified: the repaired state is a valid preflow and every tile a repair changed is marked,
    // so the usual re-solve (push rounds, then relabels around the marked tiles) goes on from it.
    const PushRelabelStats local = stats_;
    // Mode 3 checks the certificate even after fills that gave up: the state is a preflow whatever
    // they did, and the nodes they left fail the check (and flag their tiles for the relabels).
    RunLoop(out, 0, true, /*certify_first=*/mode == 3);
    stats_.local_repairs = local.local_repairs;
    if (mode == 3) {
      // tbb-pr counted its fills' failures above; cuda-pr counts them on the device (CheckCertificate).
      stats_.local_failures += local.local_failures;
    } else {
      stats_.local_failures = local.local_failures;
      stats_.local_violations = local.local_violations;
    }
    const std::string changed = std::to_string(local.local_repairs) + " changed";
    const std::string gave_up =
        stats_.local_failures ? "; " + std::to_string(stats_.local_failures) + " fills gave up at their bounds" : "";
    if (mode == 3 && out->message.rfind(kLocalMessage, 0) == 0)
      out->message += "; fills of the changed nodes that could not reach the sink (" + changed + gave_up + ")";
    else if (mode == 3)
      out->message += "; before it, fills of the changed nodes that could not reach the sink (" + changed +
                      ") and push rounds that the certificate did not accept (" +
                      std::to_string(stats_.local_violations) + " nodes failed it" +
                      (stats_.violations_after_repair >= 0
                           ? ", " + std::to_string(stats_.violations_after_repair) + " after their repairs"
                           : std::string()) +
                      gave_up + ")";
    else if (mode == 2)
      out->message += "; before it, local repairs of the changed nodes that could not reach the sink";
    else
      out->message += "; local repairs of " + std::to_string(local.local_repairs) + " changed nodes were not enough (" +
                      (local.local_failures ? std::to_string(local.local_failures) + " gave up at their bounds"
                                            : std::to_string(local.local_violations) + " nodes failed the certificate") +
                      ")";
  } else {
    RunLoop(out, 0, true);
  }
  solved_ = stop_reason().empty();
}

std::vector<NodeId> PushRelabelEngine::SortedUnique(const std::vector<NodeId>& nodes, std::int64_t num_nodes,
                                                     std::vector<std::uint64_t>* bitmap) {
  std::vector<NodeId> out;
  // Few changes on a large grid: sort them. Many: mark them in a bitmap and read it in order (a
  // word per 64 nodes), cheaper than a comparison sort from about one change per 1000 nodes on
  // (the 1% edit of the 2048 scene: 0.5 against 2.3 ms on the 2-core machine).
  if (static_cast<std::int64_t>(nodes.size()) * 1024 < num_nodes) {
    out = nodes;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // The bitmap is all zero between calls: the scan below clears each word it reads. Both passes run
  // on all cores: one core took about 2 ms to mark the 168k changes of a 1% edit at 4096 (2-core
  // machine), each mark a cache miss.
  const auto words = static_cast<std::size_t>((num_nodes + 63) / 64);
  if (bitmap->size() != words) bitmap->assign(words, 0);
  std::uint64_t* bits = bitmap->data();
  constexpr std::size_t kMarks = 16384;
  ForEachChunk((nodes.size() + kMarks - 1) / kMarks, [&](std::size_t c) {
    const std::size_t end = std::min(nodes.size(), (c + 1) * kMarks);
    for (std::size_t i = c * kMarks; i < end; ++i) {
      if (i + 16 < end) __builtin_prefetch(bits + (nodes[i + 16] >> 6), 1);
      __atomic_fetch_or(&bits[nodes[i] >> 6], std::uint64_t{1} << (nodes[i] & 63), __ATOMIC_RELAXED);  // words may be shared
    }
  });
  // Blocks of words: each counts its nodes, then writes them at its offset in node order.
  constexpr std::size_t kWords = 4096;
  const std::size_t blocks = (words + kWords - 1) / kWords;
  std::vector<std::size_t> offset(blocks + 1, 0);
  ForEachChunk(blocks, [&](std::size_t b) {
    std::size_t count = 0;
    for (std::size_t w = b * kWords; w < std::min(words, (b + 1) * kWords); ++w) count += __builtin_popcountll(bits[w]);
    offset[b + 1] = count;
  });
  std::partial_sum(offset.begin(), offset.end(), offset.begin());
  out.resize(offset[blocks]);
  ForEachChunk(blocks, [&](std::size_t b) {
    std::size_t at = offset[b];
    for (std::size_t w = b * kWords; w < std::min(words, (b + 1) * kWords); ++w) {
      for (std::uint64_t word = bits[w]; word != 0; word &= word - 1)
        out[at++] = static_cast<NodeId>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(word)));
      bits[w] = 0;
    }
  });
  return out;
}

PushRelabelEngine::RepairSchedule PushRelabelEngine::ScheduleRepairs(std::vector<NodeChange>* nodes) const {
  const pr::TileLayout& L = layout_;
  const int B = kRepairBlock;
  const std::int64_t blocks_x = (L.width + B - 1) / B, blocks_y = (L.height + B - 1) / B;
  const std::int64_t blocks_z = (L.depth + B - 1) / B;
  const std::int64_t blocks = blocks_x * blocks_y * blocks_z;
  const int colours = L.kind == pr::kKindGrid3D6 ? 8 : 4;
  const std::size_t n = nodes->size();
  // Key: colour, then block in raster order; node order is kept inside a group (a stable sort).
  std::vector<std::int64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = (*nodes)[i].node, row = v / L.width, x = v - row * L.width;
    const std::int64_t z = row / L.height, y = row - z * L.height;
    const std::int64_t bx = x / B, by = y / B, bz = z / B;  // B is a constant: no division
    const std::int64_t colour = (bx & 1) | (by & 1) << 1 | (bz & 1) << 2;
    keys[i] = colour * blocks + bx + blocks_x * (by + blocks_y * bz);
  }
  std::vector<std::int32_t> order(n);  // change indices by key
  if (static_cast<std::int64_t>(n) * 8 < colours * blocks) {
    // Few changes: a comparison sort (a counting sort would walk every block's key).
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return keys[a] < keys[b]; });
  } else {
    // Many (the 168k of a 1% edit at 4096): a counting sort, one pass over the keys.
    std::vector<std::int32_t> next(static_cast<std::size_t>(colours * blocks) + 1, 0);  // sizes, then write positions
    for (std::int64_t k : keys) ++next[k + 1];
    for (std::size_t k = 1; k < next.size(); ++k) next[k] += next[k - 1];
    for (std::size_t i = 0; i < n; ++i) order[next[keys[i]]++] = static_cast<std::int32_t>(i);
  }
  RepairSchedule schedule;
  schedule.colour_start.assign(colours + 1, 0);
  std::vector<NodeChange> ordered(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t key = keys[order[i]];
    ordered[i] = (*nodes)[order[i]];
    if (i > 0 && key == keys[order[i - 1]]) continue;
    for (int c = static_cast<int>(key / blocks) + 1; c <= colours; ++c)
      schedule.colour_start[c] = static_cast<std::int32_t>(schedule.group_start.size() + 1);
    schedule.group_start.push_back(static_cast<std::int32_t>(i));
  }
  schedule.group_start.push_back(static_cast<std::int32_t>(n));
  *nodes = std::move(ordered);
  return schedule;
}

void PushRelabelEngine::RunForTest(const StGraph& graph, int push_rounds) {
  const std::string cannot = CannotSolve(graph.topology());
  if (!cannot.empty()) throw Error(name() + " cannot solve this graph: " + cannot);
  solved_ = false;
  layout_ = tuning_.Layout(graph.topology());
  WaitForPrepareAhead();
  Prepare(layout_);
  PrepareHost(graph);
  Upload(graph);
  Result scratch;
  RunLoop(&scratch, push_rounds, false);
}

void PushRelabelEngine::RunLoop(Result* out, int max_push_rounds, bool resolve, bool certify_first) {
  stats_ = PushRelabelStats{};
  const auto start = std::chrono::steady_clock::now();
  // A fresh solve has no heights to start from. A re-solve keeps those of the last solve (exact
  // distances, or after local repairs or a certified re-solve valid ones backed by residual paths):
  // they guide the flow of the changed nodes at once, and the relabels after start from them.
  bool full = resolve ? tuning_.incremental_relabel == 0 : true;
  if (resolve) {
    const int first_rounds =
        tuning_.resolve_push_rounds < 0 ? tuning_.rounds_per_global_relabel : tuning_.resolve_push_rounds;
    if (first_rounds > 0)
      Cycle(first_rounds, tuning_.resolve_local_iterations, Relabel::kNone, /*wait=*/!certify_first);
    stats_.push_rounds += first_rounds;
    // After local fills, the push rounds often leave a state that the certificate proves optimal
    // once the nodes they left without support have risen: no global relabel is needed then.
    if (certify_first) {
      Settle();
      if (CheckCertificate(/*narrow_touched=*/true)) {
        FinishResult(out, std::string(kLocalMessage) + " and " + std::to_string(stats_.push_rounds) +
                              " push rounds from the kept heights (optimality certificate checked on every node)");
        return;
      }
      // A few nodes left failing it (excess still on its way, a region cut off from the sink across
      // two tiles): repairing them where they stand is far cheaper than the relabels that would start
      // at their tiles. H200, 1% edits: 0.36-0.38 against 0.58-0.60 ms at 1024 and 2.4-2.8 against
      // 4.2-4.3 ms at 4096 (docs/benchmarks.md).
      const std::int64_t failed = stats_.local_violations;
      if (failed <= tuning_.repair_violations && RepairViolations()) {
        FinishResult(out, std::string(kLocalMessage) + " and " + std::to_string(stats_.push_rounds) +
                              " push rounds from the kept heights, then of the " + std::to_string(failed) +
                              " nodes that failed the certificate (checked again around their repairs)");
        return;
      }
    }
  }
  // A generous bound: every cycle either finishes or moves flow; far more cycles than nodes means
  // a bug, which must not hang the caller.
  const std::int64_t max_cycles = 4 * layout_.num_nodes + 1000;
  constexpr std::size_t kMaxLogRecords = 40;
  bool stopped = false;
  for (;;) {
    int rounds = tuning_.rounds_per_global_relabel;
    if (max_push_rounds > 0) rounds = static_cast<int>(std::min<std::int64_t>(rounds, max_push_rounds - stats_.push_rounds));
    const CycleResult cycle =
        Cycle(rounds, tuning_.local_iterations, full ? Relabel::kFull : Relabel::kIncremental, true);
    full = resolve ? tuning_.incremental_relabel == 0 : tuning_.incremental_relabel < 2;
    ++stats_.global_relabels;
    stats_.bfs_rounds += cycle.bfs_rounds;
    if (out->log.size() < kMaxLogRecords) {
      IterationRecord record;
      record.iteration = static_cast<int>(stats_.global_relabels);
      record.time_ms = MsSince(start);
      record.note = "global relabel after " + std::to_string(stats_.push_rounds) + " push rounds: " +
                    std::to_string(cycle.bfs_rounds) + " BFS rounds, " + std::to_string(cycle.active_nodes) +
                    " active nodes";
      out->log.push_back(record);
    }
    if (cycle.active_nodes == 0) break;
    stats_.push_rounds += rounds;
    if (max_push_rounds > 0 && stats_.push_rounds >= max_push_rounds) {
      stopped = true;
      break;
    }
    // The stop check, once per cycle: the cut and the sink residual of this cycle's global relabel
    // (what Finish() returns) are a valid cut and the flow that has reached the sink so far.
    if (HasStopCheck()) {
      IterationRecord progress;
      progress.iteration = static_cast<int>(stats_.global_relabels);
      progress.note = std::to_string(stats_.global_relabels) + " global relabels, " +
                      std::to_string(stats_.push_rounds) + " push rounds";
      if (PollStop(progress)) break;
    }
    if (stats_.global_relabels > max_cycles)
      throw Error(name() + ": no convergence after " + std::to_string(stats_.global_relabels) +
                  " global relabels (internal error)");
  }
  if (stopped) return;  // step-by-step test: no cut wanted
  FinishResult(out, (stop_reason().empty() ? "maximum flow found: " : "stopped early: ") +
                        std::to_string(stats_.push_rounds) + " push rounds, " +
                        std::to_string(stats_.global_relabels) + " global relabels (" +
                        std::to_string(stats_.bfs_rounds) + " BFS rounds)");
}

bool PushRelabelEngine::RepairViolations() {
  const std::int64_t first = stats_.local_violations;
  std::int64_t failed = first;
  for (int round = 0; round < pr::kRepairRounds; ++round) {
    const bool certified = RepairListedViolations();
    const bool progress = stats_.local_violations < failed;
    failed = stats_.local_violations;
    // Past the list's size the next round would repair only some of the failing nodes.
    if (certified || !progress || failed > tuning_.repair_violations) break;
  }
  stats_.violations_after_repair = failed;
  stats_.local_violations = first;
  return failed == 0;
}

void PushRelabelEngine::FinishResult(Result* out, const std::string& message) {
  // Made while the solve ran (Finish() writes every entry of a labelling of the right size).
  std::vector<Label> sink_side = cut_labels_.Take(static_cast<std::size_t>(layout_.num_nodes));
  const std::int64_t residual = Finish(&sink_side);
  out->labels = std::move(sink_side);
  out->flow = sum_sink_caps_ - residual;
  out->iterations = stats_.push_rounds;
  const PhaseTimes times = Times();
  out->timings.transfer_ms = times.upload_ms + times.download_ms;
  out->timings.solve_ms = times.solve_ms;
  out->message = message;
}

}  // namespace mrf
