// The prepared BP problem, its energy, the coarse-to-fine pyramid and the tile geometry shared by the
// TBB and CUDA engines (backends/common/bp_engine.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "backends/common/bp_engine.h"

namespace mrf::bp {

namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

Cost ClampScale(std::int64_t scale) { return static_cast<Cost>(std::min(scale, kInt32Max)); }

// Spread (max - min) of one edge's pairwise costs, from its scale.
std::int64_t EdgeSpread(const Problem& p, Cost scale, std::int64_t table_spread) {
  if (p.kind == kTableMessage) return std::int64_t{scale} * table_spread;
  return MessageCap(p.params(), scale);
}

std::int64_t TableSpread(const Problem& p) {
  if (p.kind != kTableMessage || p.table.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(p.table.begin(), p.table.end());
  return std::int64_t{*hi} - *lo;
}

// R: the largest spread of one edge's pairwise costs over the problem's edges.
std::int64_t LargestEdgeSpread(const Problem& p) {
  const std::int64_t table_spread = TableSpread(p);
  std::int64_t r = 0;
  for (Cost s : p.scale_right) r = std::max(r, EdgeSpread(p, s, table_spread));
  for (Cost s : p.scale_down) r = std::max(r, EdgeSpread(p, s, table_spread));
  return r;
}

// Fills max_message from the edge scales and rejects problems whose messages could overflow, given
// max_unary_spread (set by ShiftUnary).
void CheckBound(Problem& p) {
  const std::int64_t dr = p.max_unary_spread;
  const std::int64_t r = LargestEdgeSpread(p);
  if (dr + 5 * r > kInt32Max)
    throw ModelRefused("belief propagation needs unary spread + 5 x pairwise spread <= 2^31 - 1 for its 32-bit "
                "messages, got " + std::to_string(dr) + " + 5 x " + std::to_string(r));
  p.max_message = static_cast<Cost>(r);
}

// Shifts unary costs so that each node's minimum is 0, into p.unary unless `measure_only` (then only
// p.unary_offset and p.max_unary_spread are set, for an engine that shifts on its device); throws when a
// spread leaves 32 bits. `raw` holds the model's 32-bit costs or the coarse levels' 64-bit sums; nodes are
// shifted in parallel (the model's own array is read in place: a 64-bit copy of it cost more than the shift).
template <typename RawCost>
void ShiftUnary(const std::vector<RawCost>& raw, int L, Problem& p, bool measure_only = false) {
  struct Sums {
    Energy offset = 0;
    std::int64_t widest = 0;
  };
  const std::size_t n = raw.size() / L;
  if (!measure_only) p.unary.resize(raw.size());
  std::atomic<std::size_t> first_too_wide{n};  // the error names the first such node, whatever the threads
  const Sums sums = tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, n, 4096), Sums{},
      [&](const tbb::blocked_range<std::size_t>& nodes, Sums acc) {
        for (std::size_t node = nodes.begin(); node < nodes.end(); ++node) {
          const RawCost* u = &raw[node * L];
          RawCost low = u[0], high = u[0];
          for (int l = 1; l < L; ++l) {  // plain loops vectorise: std::minmax_element took 5x as long (Venus)
            low = std::min(low, u[l]);
            high = std::max(high, u[l]);
          }
          const std::int64_t lo = low, spread = std::int64_t{high} - lo;
          if (spread > kInt32Max) {
            std::size_t seen = first_too_wide.load();
            while (node < seen && !first_too_wide.compare_exchange_weak(seen, node)) {
            }
          }
          acc.widest = std::max(acc.widest, spread);
          if (!measure_only)
            for (int l = 0; l < L; ++l) p.unary[node * L + l] = static_cast<Cost>(std::int64_t{u[l]} - lo);
          acc.offset = CheckedAdd(acc.offset, lo, "belief propagation unary offset");
        }
        return acc;
      },
      [](Sums a, Sums b) {
        return Sums{CheckedAdd(a.offset, b.offset, "belief propagation unary offset"), std::max(a.widest, b.widest)};
      });
  if (const std::size_t node = first_too_wide.load(); node < n) {
    const RawCost* u = &raw[node * L];
    const std::int64_t spread = std::int64_t{*std::max_element(u, u + L)} - *std::min_element(u, u + L);
    throw ModelRefused("belief propagation: unary spread " + std::to_string(spread) + " at node " + std::to_string(node) +
                " does not fit 32 bits");
  }
  p.unary_offset = sums.offset;
  p.max_unary_spread = static_cast<Cost>(sums.widest);
}

// Everything of PrepareProblem but the unary costs.
Problem PrepareShape(const Model& model) {
  model.ValidateOrThrow();
  const Topology& t = model.topology;
  if (t.kind() != TopologyKind::kGrid4)
    throw Error("belief propagation runs on 4-connected 2-D grids only, not on a " + t.Describe());
  Problem p;
  p.width = t.width();
  p.height = t.height();
  p.num_labels = model.num_labels;
  p.kind = static_cast<int>(model.pairwise.kind);
  p.truncation = model.pairwise.truncation;
  if (model.pairwise.kind == PairwiseKind::kTable) p.table = model.pairwise.table;
  const std::size_t n = static_cast<std::size_t>(p.num_nodes());
  p.scale_right.assign(n, 0);
  p.scale_down.assign(n, 0);
  const std::int64_t lambda = model.pairwise.lambda;
  t.ForEachEdge([&](EdgeId slot, NodeId from, NodeId) {
    const Cost scale = ClampScale(lambda * model.edge_weight(slot));
    (slot < static_cast<EdgeId>(n) ? p.scale_right : p.scale_down)[static_cast<std::size_t>(from)] = scale;
  });
  return p;
}

}  // namespace

Problem PrepareProblem(const Model& model) {
  Problem p = PrepareShape(model);
  ShiftUnary(model.unary, p.num_labels, p);
  CheckBound(p);
  return p;
}

Problem PrepareProblemWithoutCosts(const Model& model) {
  Problem p = PrepareShape(model);
  ShiftUnary(model.unary, p.num_labels, p, true);
  CheckBound(p);
  return p;
}

Energy ProblemEnergy(const Problem& p, const Labeling& labels) {
  const int W = p.width, H = p.height, L = p.num_labels;
  const PairwiseParams params = p.params();
  Energy e = p.unary_offset;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const int node = y * W + x;
      const int a = labels[node];
      e += p.unary[static_cast<std::size_t>(node) * L + a];
      if (x + 1 < W) e += PairwiseCost(params, p.scale_right[node], a, labels[node + 1]);
      if (y + 1 < H) e += PairwiseCost(params, p.scale_down[node], a, labels[node + W]);
    }
  return e;
}

namespace {

// A coarse level's geometry and edge scales: everything CoarsenProblem builds except the unary costs.
// A coarse edge's scale sums the fine edges between its two blocks.
Problem CoarsenShape(const Problem& f) {
  Problem c;
  c.width = (f.width + 1) / 2;
  c.height = (f.height + 1) / 2;
  c.num_labels = f.num_labels;
  c.kind = f.kind;
  c.truncation = f.truncation;
  c.table = f.table;
  const int W = f.width, H = f.height, CW = c.width;
  const std::size_t cn = static_cast<std::size_t>(c.num_nodes());
  c.scale_right.assign(cn, 0);
  c.scale_down.assign(cn, 0);
  tbb::parallel_for(tbb::blocked_range<int>(0, c.height), [&](const tbb::blocked_range<int>& coarse_rows) {
    for (int cy = coarse_rows.begin(); cy < coarse_rows.end(); ++cy)
      for (int cx = 0; cx < CW; ++cx) {
        std::int64_t right = 0, down = 0;
        for (int y = 2 * cy; y < std::min(H, 2 * cy + 2); ++y)  // the block's right column, if it has a neighbour
          if (2 * cx + 2 < W) right += f.scale_right[static_cast<std::size_t>(y) * W + 2 * cx + 1];
        for (int x = 2 * cx; x < std::min(W, 2 * cx + 2); ++x)  // its bottom row
          if (2 * cy + 2 < H) down += f.scale_down[static_cast<std::size_t>(2 * cy + 1) * W + x];
        if (right > kInt32Max || down > kInt32Max)
          throw ModelRefused("coarse-to-fine: a coarse edge scale does not fit 32 bits");
        c.scale_right[static_cast<std::size_t>(cy) * CW + cx] = static_cast<Cost>(right);
        c.scale_down[static_cast<std::size_t>(cy) * CW + cx] = static_cast<Cost>(down);
      }
  });
  return c;
}

}  // namespace

Problem CoarsenProblem(const Problem& f) {
  Problem c = CoarsenShape(f);
  const int L = f.num_labels, W = f.width, H = f.height, CW = c.width;
  const std::size_t cn = static_cast<std::size_t>(c.num_nodes());
  std::vector<std::int64_t> raw(cn * L, 0);
  auto self_cost = [&](std::int64_t scale, int a) {  // V(a, a): 0 except for tables
    return f.kind == kTableMessage ? scale * f.table[static_cast<std::size_t>(a) * L + a] : 0;
  };
  // Coarse rows in parallel: each gathers its two fine rows, so no two threads add into one parent.
  tbb::parallel_for(tbb::blocked_range<int>(0, c.height), [&](const tbb::blocked_range<int>& coarse_rows) {
    for (int y = 2 * coarse_rows.begin(); y < std::min(H, 2 * coarse_rows.end()); ++y)
      for (int x = 0; x < W; ++x) {
        const int node = y * W + x;
        const std::size_t parent = static_cast<std::size_t>(y / 2) * CW + x / 2;
        for (int l = 0; l < L; ++l) raw[parent * L + l] += f.unary[static_cast<std::size_t>(node) * L + l];
        if (x + 1 < W && x % 2 == 0)  // an edge inside the block
          for (int l = 0; l < L; ++l) raw[parent * L + l] += self_cost(f.scale_right[node], l);
        if (y + 1 < H && y % 2 == 0)
          for (int l = 0; l < L; ++l) raw[parent * L + l] += self_cost(f.scale_down[node], l);
      }
  });
  ShiftUnary(raw, L, c);
  c.unary_offset = CheckedAdd(c.unary_offset, f.unary_offset, "coarse unary offset");
  CheckBound(c);
  return c;
}

std::vector<Problem> CoarseLevels(const Problem& fine) {
  std::vector<Problem> levels;
  while (levels.size() < 4) {
    const Problem& current = levels.empty() ? fine : levels.back();
    if (!CanCoarsen(current)) break;
    Problem next = CoarsenProblem(current);  // built before push_back can move `current`
    levels.push_back(std::move(next));
  }
  return levels;
}

std::vector<Problem> CoarseShapes(const Problem& fine) {
  std::int64_t diagonal = 0;  // the largest |V(a, a)| of a table
  if (fine.kind == kTableMessage)
    for (int a = 0; a < fine.num_labels; ++a)
      diagonal = std::max<std::int64_t>(
          diagonal, std::abs(std::int64_t{fine.table[static_cast<std::size_t>(a) * fine.num_labels + a]}));
  std::vector<Problem> levels;
  std::int64_t spread = fine.max_unary_spread;  // bounds the current level's unary spread
  while (levels.size() < 4) {
    const Problem& current = levels.empty() ? fine : levels.back();
    if (!CanCoarsen(current)) break;
    Problem next = CoarsenShape(current);
    // A coarse node's costs sum four children's (each spread at most `spread`) and V(a, a) of the up to four
    // edges inside its block (each within +-diagonal x the widest scale).
    std::int64_t widest_scale = 0;
    for (Cost s : current.scale_right) widest_scale = std::max<std::int64_t>(widest_scale, s);
    for (Cost s : current.scale_down) widest_scale = std::max<std::int64_t>(widest_scale, s);
    if (diagonal > 0 && widest_scale > kInt32Max / diagonal) return {};
    spread = 4 * spread + 8 * diagonal * widest_scale;
    const std::int64_t r = LargestEdgeSpread(next);
    if (spread + 5 * r > kInt32Max) return {};
    next.max_unary_spread = static_cast<Cost>(spread);
    next.max_message = static_cast<Cost>(r);
    levels.push_back(std::move(next));
  }
  return levels;
}

Schedule ParseSchedule(const std::string& name) {
  for (Schedule s : {Schedule::kBpm, Schedule::kSync, Schedule::kTiled})
    if (name == ToString(s)) return s;
  throw Error("unknown BP schedule '" + name + "' (expected bpm, sync or tiled)");
}

const char* ToString(Schedule s) {
  switch (s) {
    case Schedule::kBpm: return "bpm";
    case Schedule::kSync: return "sync";
    case Schedule::kTiled: return "tiled";
  }
  return "?";
}

CudaLaunch ParseCudaLaunch(const std::string& name) {
  for (CudaLaunch l : {CudaLaunch::kAuto, CudaLaunch::kPerDiagonal, CudaLaunch::kGraph, CudaLaunch::kCooperative,
                       CudaLaunch::kPipeline, CudaLaunch::kPipelineRows, CudaLaunch::kSplit})
    if (name == ToString(l)) return l;
  throw Error("unknown CUDA launch mode '" + name +
              "' (expected auto, diagonal, graph, cooperative, pipeline, pipeline-rows or split)");
}

const char* ToString(CudaLaunch l) {
  switch (l) {
    case CudaLaunch::kAuto: return "auto";
    case CudaLaunch::kPerDiagonal: return "diagonal";
    case CudaLaunch::kGraph: return "graph";
    case CudaLaunch::kCooperative: return "cooperative";
    case CudaLaunch::kPipeline: return "pipeline";
    case CudaLaunch::kPipelineRows: return "pipeline-rows";
    case CudaLaunch::kSplit: return "split";
  }
  return "?";
}

CudaKernel ParseCudaKernel(const std::string& name) {
  for (CudaKernel k : {CudaKernel::kAuto, CudaKernel::kFast, CudaKernel::kGeneral})
    if (name == ToString(k)) return k;
  throw Error("unknown CUDA BP kernel '" + name + "' (expected auto, fast or general)");
}

const char* ToString(CudaKernel k) {
  switch (k) {
    case CudaKernel::kAuto: return "auto";
    case CudaKernel::kFast: return "fast";
    case CudaKernel::kGeneral: return "general";
  }
  return "?";
}

void CheckConfig(const Problem& p, const Config& c) {
  if (p.num_labels < 1) throw Error("belief propagation needs at least one label");
  if (c.iterations < 1) throw Error("BP iterations must be >= 1 (got " + std::to_string(c.iterations) + ")");
  if (c.tile_size < 0) throw Error("BP tile size must be >= 0 (got " + std::to_string(c.tile_size) + ")");
  if (c.inner_iterations < 1)
    throw Error("BP inner iterations must be >= 1 (got " + std::to_string(c.inner_iterations) + ")");
  if (c.num_threads < 0) throw Error("BP threads must be >= 0 (got " + std::to_string(c.num_threads) + ")");
  if (p.kind == kTableMessage && static_cast<std::int64_t>(p.table.size()) != std::int64_t{p.num_labels} * p.num_labels)
    throw Error("BP pairwise table has " + std::to_string(p.table.size()) + " entries, expected L x L");
}

int DefaultLabelsPerLane(int num_labels) { return num_labels <= 128 ? 4 : 8; }

int PaddedLabels(int num_labels, int c) {
  const int lanes_needed = (num_labels + c - 1) / c;
  int g = 1;
  while (g < lanes_needed) g *= 2;
  return g > 32 ? 0 : g * c;
}

namespace {
// Row stride (ints) of a tile array: rows start 16 ints apart modulo 32 banks when a pixel holds fewer
// than 32 labels, so two chains reading neighbouring rows at one column hit different banks.
int RowStride(int tile, int padded) {
  int stride = tile * padded;
  if (padded < 32) stride += ((16 - stride % 32) + 32) % 32;
  return stride;
}
}  // namespace

int TileRowStride(int tile, int padded_labels) { return RowStride(tile, padded_labels); }

std::size_t TileSharedBytes(int tile, int padded, int kind, bool envelope) {
  // Unary and four message arrays, the scales of the tile's edges (one extra column / row for the
  // edges into the tile from the left / above), and per-chain scratch.
  std::size_t ints = 5 * static_cast<std::size_t>(tile) * RowStride(tile, padded);
  ints += 2 * static_cast<std::size_t>(tile) * (tile + 1);
  int per_chain = 0;
  if (kind == kTableMessage || kind == kLinearMessage) per_chain = padded;
  if (kind == kQuadraticMessage) per_chain = envelope ? 4 * padded : padded;
  ints += static_cast<std::size_t>(2 * tile) * per_chain;
  return ints * sizeof(Cost);
}

int AutoTileSize(int num_labels, int kind) {
  const int c = DefaultLabelsPerLane(num_labels);
  const int padded = PaddedLabels(num_labels, c);
  if (padded == 0) return 8;  // more labels than the CUDA kernel takes: any side works on the CPU
  const int lanes = padded / c;
  const bool envelope = true;  // budget for the larger quadratic scratch whatever the truncation
  int best = 1;
  for (int t = 1; t <= 64; ++t)
    if (TileSharedBytes(t, padded, kind, envelope) <= kAutoTileSharedBytes &&
        2 * t * lanes <= kMaxTileThreads)
      best = t;
  return best;
}

BorderMessages BorderMessages::Zero(const TileGrid& g, int L) {
  BorderMessages b;
  const std::size_t vertical = static_cast<std::size_t>(std::max(0, g.tiles_x - 1)) * g.height * L;
  const std::size_t horizontal = static_cast<std::size_t>(std::max(0, g.tiles_y - 1)) * g.width * L;
  b.right.assign(vertical, 0);
  b.left.assign(vertical, 0);
  b.down.assign(horizontal, 0);
  b.up.assign(horizontal, 0);
  return b;
}

GridMessages GridMessages::Zero(const Problem& p) {
  GridMessages m;
  const std::size_t size = static_cast<std::size_t>(p.num_nodes()) * p.num_labels;
  m.from_left.assign(size, 0);
  m.from_right.assign(size, 0);
  m.from_up.assign(size, 0);
  m.from_down.assign(size, 0);
  return m;
}

GridMessages UpsampleMessages(const Problem& coarse, const GridMessages& cm, const Problem& fine) {
  GridMessages m = GridMessages::Zero(fine);
  const int L = fine.num_labels, W = fine.width, H = fine.height;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const std::size_t dst = (static_cast<std::size_t>(y) * W + x) * L;
      const std::size_t src = (static_cast<std::size_t>(y / 2) * coarse.width + x / 2) * L;
      // Only where the fine node has that neighbour: elsewhere messages stay 0.
      for (int l = 0; l < L; ++l) {
        if (x > 0) m.from_left[dst + l] = cm.from_left[src + l];
        if (x + 1 < W) m.from_right[dst + l] = cm.from_right[src + l];
        if (y > 0) m.from_up[dst + l] = cm.from_up[src + l];
        if (y + 1 < H) m.from_down[dst + l] = cm.from_down[src + l];
      }
    }
  return m;
}

BorderMessages BordersFromGrid(const Problem& p, const TileGrid& g, const GridMessages& m) {
  BorderMessages b = BorderMessages::Zero(g, p.num_labels);
  const int L = p.num_labels, W = p.width, H = p.height, T = g.tile;
  for (int border = 1; border < g.tiles_x; ++border)
    for (int y = 0; y < H; ++y) {
      const std::size_t slot = (static_cast<std::size_t>(border - 1) * H + y) * L;
      const std::size_t right_node = static_cast<std::size_t>(y) * W + border * T;  // receives from the left
      const std::size_t left_node = right_node - 1;                                  // receives from the right
      for (int l = 0; l < L; ++l) {
        b.right[slot + l] = m.from_left[right_node * L + l];
        b.left[slot + l] = m.from_right[left_node * L + l];
      }
    }
  for (int border = 1; border < g.tiles_y; ++border)
    for (int x = 0; x < W; ++x) {
      const std::size_t slot = (static_cast<std::size_t>(border - 1) * W + x) * L;
      const std::size_t lower_node = static_cast<std::size_t>(border * T) * W + x;
      const std::size_t upper_node = lower_node - W;
      for (int l = 0; l < L; ++l) {
        b.down[slot + l] = m.from_up[lower_node * L + l];
        b.up[slot + l] = m.from_down[upper_node * L + l];
      }
    }
  return b;
}

}  // namespace mrf::bp
