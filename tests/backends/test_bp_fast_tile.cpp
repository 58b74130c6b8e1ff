// The fast tile visit of cuda-bp (backends/common/bp_fast_tile.h), run on the CPU: its packed 16-bit
// messages against ComputeMessage(), and a host emulation of the GPU pipeline (the same phase functions,
// threads run one after the other, blocks interleaved in the serial tile order) against the TBB tiled
// schedule, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "backends/common/bp_engine.h"
#include "backends/common/bp_fast_tile.h"
#include "energies/stereo.h"
#include "support/test_support.h"

namespace mrf {
namespace {

namespace fast = bp::fast;
using fast::Word;

// ---- Dispatch on the compile-time word count and form --------------------------------------------------

template <class F>
void WithWords(int words, F&& f) {
  switch (words) {
    case 2: f(std::integral_constant<int, 2>()); break;
    case 4: f(std::integral_constant<int, 4>()); break;
    case 8: f(std::integral_constant<int, 8>()); break;
    default: f(std::integral_constant<int, 16>()); break;
  }
}

template <class F>
void WithForm(int form, F&& f) {
  switch (form) {
    case fast::kFormClamp: f(std::integral_constant<int, fast::kFormClamp>()); break;
    case fast::kFormNeighbour: f(std::integral_constant<int, fast::kFormNeighbour>()); break;
    case fast::kFormLinearDT: f(std::integral_constant<int, fast::kFormLinearDT>()); break;
    default: f(std::integral_constant<int, fast::kFormQuadWindow>()); break;
  }
}

// Packed message of h (real labels, padded to the support's words with its pad cost).
std::vector<Cost> FastMessage(const fast::Support& s, int L, Cost scale, const std::vector<Cost>& h, int pad) {
  std::vector<Cost> out(L);
  WithWords(s.words, [&](auto nw) {
    constexpr int NW = decltype(nw)::value;
    WithForm(s.form, [&](auto form) {
      constexpr int F = decltype(form)::value;
      Word packed[NW], result[NW];
      for (int w = 0; w < NW; ++w)
        packed[w] = fast::Pack(2 * w < L ? h[2 * w] : pad, 2 * w + 1 < L ? h[2 * w + 1] : pad);
      fast::Message<NW, F>(packed, scale, s.params, result);
      for (int l = 0; l < L; ++l) out[l] = l % 2 ? fast::Hi(result[l / 2]) : fast::Lo(result[l / 2]);
    });
  });
  return out;
}

TEST(BpFastTile, PackedMessagesEqualComputeMessage) {
  std::mt19937_64 rng(41);
  std::vector<Pairwise> families = {{PairwiseKind::kPotts, 1, kMaxCost, {}}};
  for (Cost t : {0, 1, 2, 3, 7, 9, 40, 1000}) families.push_back({PairwiseKind::kTruncatedLinear, 1, t, {}});
  for (Cost t : {0, 1, 2, 5, 10, 26, 50}) families.push_back({PairwiseKind::kTruncatedQuadratic, 1, t, {}});
  int checked = 0;
  for (Label L : {2, 3, 4, 5, 8, 9, 16, 17, 31, 32}) {
    for (const Pairwise& pw : families) {
      const bp::PairwiseParams params{static_cast<int>(pw.kind), L, pw.truncation, nullptr};
      const Cost max_scale = 40;
      const Cost R = static_cast<Cost>(bp::MessageCap(params, max_scale));
      const Cost Dr = 700;
      const fast::Support s = fast::FastSupport(L, static_cast<int>(pw.kind), pw.truncation, Dr, R, 0);
      if (pw.kind == PairwiseKind::kTruncatedQuadratic && !bp::UseQuadraticWindow(params)) {
        EXPECT_FALSE(s.ok);
        continue;
      }
      ASSERT_TRUE(s.ok) << s.why << " L=" << L << " " << ToString(pw.kind) << " t=" << pw.truncation;
      std::vector<Cost> h(L), expected(L);
      std::vector<int> scratch(bp::MessageScratchInts(L));
      for (int trial = 0; trial < 40; ++trial) {
        // h: a unary (<= Dr) plus three messages (<= R each), sometimes flat, sometimes steep.
        const Cost range = trial % 4 == 0 ? 3 : Dr + 3 * R;
        std::uniform_int_distribution<Cost> value(0, range);
        for (Cost& v : h) v = value(rng);
        const Cost scale = std::vector<Cost>{0, 1, 2, 7, 40}[trial % 5];
        bp::ComputeMessage(params, scale, trial % 2 == 1, h.data(), expected.data(), scratch.data());
        ASSERT_EQ(FastMessage(s, L, scale, h, s.pad_cost), expected)
            << ToString(pw.kind) << " L=" << L << " truncation=" << pw.truncation << " scale=" << scale;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

// The GPU splits a chain of a local form over K lanes (fast::LaneGroup): each lane runs LocalMessage on
// its share of the words, with the lanes' minimum combined and the sums next to each split exchanged.
// Here the exchange is computed directly, and the lanes' parts must give the whole message.
struct ExchangedLanes {
  Word other_min, lower, upper;
  Word Min(Word local) const { return fast::Min2(local, other_min); }
  void Edges(Word, Word, Word* l, Word* u) const { *l = lower, *u = upper; }
};

template <int NW, int F, int K>
void SplitMessage(const Word (&h)[NW], int scale, const fast::FormParams& fp, Word (&out)[NW]) {
  constexpr int HW = NW / K;
  Word part[K][HW], mins[K];
  for (int j = 0; j < K; ++j) {
    for (int w = 0; w < HW; ++w) part[j][w] = h[j * HW + w];
    mins[j] = fast::MinTree<HW, 0, HW>(part[j]);
  }
  for (int j = 0; j < K; ++j) {
    Word others = fast::Splat(fast::kMaxPacked);
    for (int i = 0; i < K; ++i)
      if (i != j) others = fast::Min2(others, mins[i]);
    const Word lower = j > 0 ? part[j - 1][HW - 1] : part[j][0] << 16;
    const Word upper = j + 1 < K ? part[j + 1][0] : part[j][HW - 1] >> 16;
    Word m[HW];
    fast::LocalMessage<HW, F>(part[j], scale, fp, ExchangedLanes{others, lower, upper}, m);
    for (int w = 0; w < HW; ++w) out[j * HW + w] = m[w];
  }
}

TEST(BpFastTile, MessagesSplitOverLanesEqualWholeOnes) {
  std::mt19937_64 rng(43);
  int checked = 0;
  for (Label L : {5, 8, 9, 16, 17, 32}) {
    for (Cost truncation : {1, 2}) {  // linear truncated at 1 (clamp form) and at 2 (neighbour form)
      const fast::Support s = fast::FastSupport(L, bp::kLinearMessage, truncation, 700, 80, 0);
      ASSERT_TRUE(s.ok) << s.why;
      ASSERT_GT(fast::ChainLanes(s.words, s.form), 1);
      WithWords(s.words, [&](auto nw) {
        constexpr int NW = decltype(nw)::value;
        WithForm(s.form, [&](auto form) {
          constexpr int F = decltype(form)::value;
          if constexpr (NW >= 4 && fast::LocalForm(F)) {
            for (int trial = 0; trial < 200; ++trial) {
              std::uniform_int_distribution<int> value(0, trial % 3 == 0 ? 4 : 700 + 3 * 80);
              Word h[NW], whole[NW], two[NW], four[NW];
              for (int w = 0; w < NW; ++w)
                h[w] = fast::Pack(2 * w < L ? value(rng) : s.pad_cost, 2 * w + 1 < L ? value(rng) : s.pad_cost);
              const int scale = trial % 5 * 20;
              fast::Message<NW, F>(h, scale, s.params, whole);
              SplitMessage<NW, F, 2>(h, scale, s.params, two);
              for (int w = 0; w < NW; ++w) ASSERT_EQ(two[w], whole[w]) << "2 lanes, L=" << L << " word " << w;
              if constexpr (NW >= 8) {
                SplitMessage<NW, F, 4>(h, scale, s.params, four);
                for (int w = 0; w < NW; ++w) ASSERT_EQ(four[w], whole[w]) << "4 lanes, L=" << L << " word " << w;
              }
              ++checked;
            }
          }
        });
      });
    }
  }
  EXPECT_EQ(checked, 6 * 2 * 200);
}

// The shared arrays' row stride keeps the horizontal chains' first wavefront on distinct banks for every
// word count and lane split the kernels use (one lane, or ChainLanes() for the local forms), but for 32
// labels on two lanes, where no stride avoids two-way conflicts; no smaller stride does better.
TEST(BpFastTile, RowStridesAreConflictFree) {
  for (int words : {2, 4, 8, 16})
    for (int lanes : {1, fast::ChainLanes(words, fast::kFormNeighbour)}) {
      for (int tile : {4, 7, 8, 12, 16, 24, 31, 32, 64}) {
        const int stride = fast::RowStride(tile, words, lanes);
        EXPECT_GE(stride, tile * words);
        EXPECT_EQ(stride % fast::VectorWords(words), 0);
        EXPECT_EQ(fast::BankWays(stride, words, lanes), words == 16 && lanes == 2 ? 2 : 1)
            << words << " words, " << lanes << " lanes, tile " << tile;
        for (int other = tile * words; other < stride; other += fast::VectorWords(words))
          EXPECT_GT(fast::BankWays(other, words, lanes), fast::BankWays(stride, words, lanes));
      }
    }
  // The one-lane rule of the first kernel: rows an odd number of 16-byte vectors apart.
  EXPECT_EQ(fast::RowStride(24, 8, 1), 196);
  EXPECT_EQ(fast::RowStride(24, 8, 2), 200);
}

TEST(BpFastTile, SupportRefusesWhatItCannotTake) {
  EXPECT_FALSE(fast::FastSupport(1, bp::kPottsMessage, kMaxCost, 10, 10, 0).ok);
  EXPECT_FALSE(fast::FastSupport(33, bp::kPottsMessage, kMaxCost, 10, 10, 0).ok);
  EXPECT_FALSE(fast::FastSupport(16, bp::kTableMessage, kMaxCost, 10, 10, 0).ok);
  EXPECT_FALSE(fast::FastSupport(16, bp::kQuadraticMessage, 100000, 10, 10, 0).ok);  // envelope
  EXPECT_FALSE(fast::FastSupport(16, bp::kPottsMessage, kMaxCost, 10, 10, -1).ok);
  const fast::Support big = fast::FastSupport(16, bp::kLinearMessage, 2, 30000, 400, 0);
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.why.find("32767"), std::string::npos) << big.why;
  const fast::Support tsukuba = fast::FastSupport(16, bp::kLinearMessage, 2, 765, 80, 0);
  ASSERT_TRUE(tsukuba.ok) << tsukuba.why;
  EXPECT_EQ(tsukuba.words, 8);
  EXPECT_EQ(tsukuba.form, fast::kFormNeighbour);
  EXPECT_EQ(fast::FastSupport(5, bp::kLinearMessage, 9, 10, 10, 0).words, 4);
  EXPECT_EQ(fast::FastSupport(3, bp::kPottsMessage, kMaxCost, 10, 10, 0).words, 2);
}

// The label phase on random beliefs with many ties, for every word count, odd and even label counts, tiles
// narrower than the block and every way of sharing the pixels between threads (the GPU runs it with the
// block's compute threads, the emulation with one): each pixel gets the least real belief's smallest label.
TEST(BpFastTile, LabelPhaseTakesTheLeastBeliefWithAnyThreadCount) {
  std::mt19937 rng(7);
  for (int words : {2, 4, 8, 16}) {
    WithWords(words, [&](auto nw) {
      constexpr int NW = decltype(nw)::value;
      for (int L = 2; L <= 2 * NW; L += 3) {
        // pad 100: the pad cost, above every real belief; -5: below them, which the pad cost forbids (the
        // phase must still pick a real label).
        for (int pad : {100, -5})
        for (int side : {1, 5, 24}) {
          const int tile = 24, lanes = 1, tw = std::max(1, side - 1), th = side;
          fast::Params P;
          P.width = tw, P.height = th, P.L = L, P.tile = tile, P.row_stride = fast::RowStride(tile, NW, lanes);
          std::vector<Word> shared(fast::SharedWords(tile, NW, lanes), 0);
          const fast::Buffers B = fast::Carve(shared.data(), tile, NW, P.row_stride);
          const fast::Tile t = fast::MakeTile(P, 0, 0);
          std::vector<int> expected(static_cast<std::size_t>(tw) * th);
          std::uniform_int_distribution<int> value(0, 3);  // few values: many ties
          for (int y = 0; y < th; ++y)
            for (int x = 0; x < tw; ++x) {
              Word belief[NW] = {};
              for (Word* array : {B.unary[0], B.fl, B.fr, B.fu, B.fd}) {
                Word v[NW];
                for (int w = 0; w < NW; ++w)
                  v[w] = fast::Pack(2 * w < L ? value(rng) : pad, 2 * w + 1 < L ? value(rng) : pad);
                fast::StoreWords<NW, NW>(array, x, y, P.row_stride, 0, v);
                for (int w = 0; w < NW; ++w) belief[w] += v[w];
              }
              int best = 1 << 30, label = -1;
              for (int l = 0; l < L; ++l) {
                const int b = l % 2 ? fast::Hi(belief[l / 2]) : fast::Lo(belief[l / 2]);
                if (b < best) best = b, label = l;
              }
              expected[static_cast<std::size_t>(y) * tw + x] = label;
            }
          for (int n : {1, 2, 3, tw - 1, tw, tw + 1, 2 * tw + 3, 96, tw * th + 5}) {
            if (n < 1) continue;
            std::vector<int> labels(expected.size(), -1);
            P.labels = labels.data();
            for (int tid = 0; tid < n; ++tid) fast::LabelPhase<NW>(P, t, B, 0, tid, n);
            EXPECT_EQ(labels, expected) << NW << " words, " << L << " labels, pad " << pad << ", " << tw << "x" << th
                                        << " tile, " << n << " threads";
          }
        }
      }
    });
  }
}

TEST(BpFastTile, PipelinePlanVisitsEveryTileInSerialOrder) {
  for (fast::Walk walk : {fast::Walk::kRows, fast::Walk::kColumns})
    for (int tiles_x : {1, 2, 5})
      for (int tiles_y : {1, 3, 7})
        for (int nb : {1, 2, 3, 7}) {
          const bool rows = walk == fast::Walk::kRows;
          if (nb > (rows ? tiles_y : tiles_x)) continue;
          // Each block's raster visits, merged in the serial order of its walk (row-major, or column-major),
          // cover every tile once, and so do the reverse visits; a visit is carried exactly when the previous
          // one of its block is its neighbour, through the edge that neighbour's chains enter by.
          std::vector<int> seen(2 * tiles_x * tiles_y, 0);
          for (int b = 0; b < nb; ++b) {
            const int visits = fast::VisitsOfBlock(walk, b, nb, tiles_x, tiles_y);
            int previous_serial = -1;
            fast::Visit previous;
            for (int n = 0; n < visits; ++n) {
              const fast::Visit v = fast::VisitOfBlock(walk, b, nb, tiles_x, tiles_y, n);
              ASSERT_EQ((rows ? v.ty : v.tx) % nb, b);
              const int in_sweep = rows ? v.ty * tiles_x + v.tx : v.tx * tiles_y + v.ty;
              const int serial = v.sweep == 0 ? in_sweep : 2 * tiles_x * tiles_y - 1 - in_sweep;
              EXPECT_GT(serial, previous_serial) << "block visits out of serial order";
              previous_serial = serial;
              ++seen[serial];
              const int step = v.sweep == 0 ? 1 : -1;  // from the previous tile of a line to this one
              const bool after_neighbour = n > 0 && previous.sweep == v.sweep &&
                                           (rows ? previous.ty == v.ty && previous.tx + step == v.tx
                                                 : previous.tx == v.tx && previous.ty + step == v.ty);
              const int edge = rows ? (v.sweep == 0 ? fast::kEdgeLeft : fast::kEdgeRight)
                                    : (v.sweep == 0 ? fast::kEdgeTop : fast::kEdgeBottom);
              EXPECT_EQ(v.carried_edge, after_neighbour ? edge : -1);
              if (n > 0) EXPECT_EQ(previous.carry_edge, after_neighbour ? edge : -1);
              previous = v;
            }
            if (visits > 0) EXPECT_EQ(previous.carry_edge, -1);
          }
          for (int count : seen) EXPECT_EQ(count, 1);
        }
}

// ---- Host emulation of the GPU pipeline ------------------------------------------------------------------

// The GPU loader's TakeMail (backends/cuda/bp_fast_kernels.cuh) without its spinning: copies the mailed
// message entering tile t by `edge` into the staging buffer once every slot carries at least `stamp`;
// returns whether it had.
template <int NW>
bool TakeMailIfPosted(const fast::Params& P, const fast::Tile& t, Word* stage, int edge, int stamp) {
  for (int i = 0; i < fast::EdgeLines(t, edge); ++i)
    for (int w = 0; w < NW; ++w)
      if (static_cast<int>(fast::MailSlot(P, t, edge, i, false)[w] >> 32) < stamp) return false;
  for (int i = 0; i < fast::EdgeLines(t, edge); ++i)
    for (int w = 0; w < NW; ++w)
      stage[(static_cast<std::size_t>(edge) * P.tile + i) * NW + w] =
          static_cast<Word>(fast::MailSlot(P, t, edge, i, false)[w]);
  return true;
}

struct HostCopy {
  void operator()(Word* dst, const Word* src, int words) const { std::memcpy(dst, src, 4 * words); }
};

struct Emulated {
  Labeling labels;
  std::vector<Energy> energies;
  bp::BorderMessages borders;
  int iterations = 0;
  bool converged = false;
};

// The pipeline launches the emulation runs: by tile columns with the mailbox (the GPU's default) or with
// the tile counters (CudaTuning::mailbox off), by tile rows, split.
enum class Launch { kPipelineRows, kPipelineColumns, kPipelineColumnsCounters, kSplit };

const char* ToString(Launch l) {
  switch (l) {
    case Launch::kPipelineRows: return "pipeline-rows";
    case Launch::kPipelineColumns: return "pipeline";
    case Launch::kPipelineColumnsCounters: return "pipeline with tile counters";
    case Launch::kSplit: return "split";
  }
  return "?";
}

// Runs config.iterations outer iterations of the tiled schedule with the fast visit on `blocks` pipeline
// blocks, each with its own shared arrays, as the GPU may interleave them: the blocks take turns, each
// running the next phase it may run (a visit's chains, once its loader has loaded it), and every loader
// runs as far ahead as the GPU's may (once its buffer set is free and the tiles of fast::LoaderWaits()
// have published, or with the mailbox once the mail it takes is posted). A block publishes its tile where the
// kernel does (fast::PublishesEarly()); with the mailbox, where the kernel would, which is after its mail
// is posted, so the loaders retry then. The split
// launch (rows, one inner iteration): a block's vertical chains run one visit behind its horizontal ones
// (visit n's horizontal chains before visit n - 1's vertical chains and labels), in the split buffers.
// Fails if no block can move (the plan would deadlock).
Emulated EmulatePipeline(const bp::Problem& p, const bp::Config& c, int blocks, Launch launch) {
  const bool split = launch == Launch::kSplit;
  const bool columns = launch == Launch::kPipelineColumns || launch == Launch::kPipelineColumnsCounters;
  const fast::Walk walk = columns ? fast::Walk::kColumns : fast::Walk::kRows;
  const int L = p.num_labels;
  Cost min_scale = 0;
  for (Cost s : p.scale_right) min_scale = std::min(min_scale, s);
  for (Cost s : p.scale_down) min_scale = std::min(min_scale, s);
  const fast::Support s = fast::FastSupport(L, p.kind, p.truncation, p.max_unary_spread, p.max_message, min_scale);
  EXPECT_TRUE(s.ok) << s.why;
  const int NWr = s.words, Lp = 2 * NWr;
  const int tile = c.tile_size > 0 ? c.tile_size : bp::AutoTileSize(L, p.kind);
  const bp::TileGrid grid = bp::TileGrid::Make(p.width, p.height, tile);
  const std::size_t n = static_cast<std::size_t>(p.num_nodes());
  std::vector<Word> unary(n * NWr);
  for (std::size_t node = 0; node < n; ++node)
    for (int w = 0; w < NWr; ++w) {
      auto cost = [&](int l) { return l < L ? p.unary[node * L + l] : s.pad_cost; };
      unary[node * NWr + w] = fast::Pack(cost(2 * w), cost(2 * w + 1));
    }
  const std::size_t vertical = static_cast<std::size_t>(grid.tiles_x - 1) * p.height * Lp;
  const std::size_t horizontal = static_cast<std::size_t>(grid.tiles_y - 1) * p.width * Lp;
  // As on the GPU, a run from zero messages does not clear the border messages: the first launch takes the
  // ones it has not written yet as 0 (fast::FreshVisit()). Stale values, different for each label (a constant
  // message would cancel out), catch any that it reads.
  auto stale = [](std::size_t size) {
    std::vector<Cost> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<Cost>(i * 7919 % 97);
    return v;
  };
  std::vector<Cost> br = stale(vertical), bl = stale(vertical), bd = stale(horizontal), bu = stale(horizontal);
  // The mailbox of the walk by tile columns: a slot per word of the messages crossing vertical tile edges in
  // either direction (as many as the two vertical border arrays' ints), stale words under stamp 0.
  std::vector<std::uint64_t> mailbox(vertical);
  for (std::size_t i = 0; i < mailbox.size(); ++i) mailbox[i] = fast::MailWord(static_cast<Word>(i * 7919 % 97), 0);
  Emulated out;
  out.labels.assign(n, 0);
  int changed = 0;
  fast::Params P;
  P.unary = unary.data();
  P.scale_right = p.scale_right.data();
  P.scale_down = p.scale_down.data();
  P.border_right = br.data(), P.border_left = bl.data(), P.border_down = bd.data(), P.border_up = bu.data();
  P.labels = out.labels.data();
  P.changed = &changed;
  P.mailbox = launch == Launch::kPipelineColumns ? mailbox.data() : nullptr;
  P.form = s.params;
  P.width = p.width, P.height = p.height, P.L = L, P.Lp = Lp;
  P.tile = tile, P.tiles_x = grid.tiles_x, P.tiles_y = grid.tiles_y;
  const int lanes = fast::ChainLanes(NWr, s.form);  // the GPU's layout (the emulation runs one lane a chain)
  P.row_stride = fast::RowStride(tile, NWr, lanes);
  P.inner = c.inner_iterations;
  blocks = std::min(blocks, walk == fast::Walk::kColumns ? grid.tiles_x : grid.tiles_y);
  const int sets = split ? 3 : 2, hsets = split ? 2 : 1;
  EXPECT_TRUE(!split || P.inner == 1);
  std::vector<std::vector<Word>> shared(blocks,
                                        std::vector<Word>(fast::SharedWords(tile, NWr, lanes, sets, hsets), 0xDEADBEEFu));
  std::vector<fast::PipelineBuffers> buffers;
  for (auto& sh : shared) buffers.push_back(fast::CarvePipeline(sh.data(), tile, NWr, P.row_stride, sets, hsets));
  const int threads = 2 * tile;
  HostCopy copy;
  // Per block: visits loaded, visits whose buffers are free again, the visit and phase it runs next.
  // (started: visits whose loads that need no wait are done.)
  std::vector<int> loaded(blocks), started(blocks), freed(blocks), visit(blocks), phase(blocks);
  std::vector<int> tile_done(static_cast<std::size_t>(grid.tiles_x) * grid.tiles_y);
  int sweep_base = 0;  // mail stamps: sweeps run before this launch
  auto visits_of = [&](int b) { return fast::VisitsOfBlock(walk, b, blocks, grid.tiles_x, grid.tiles_y); };
  auto visit_of = [&](int b, int k) { return fast::VisitOfBlock(walk, b, blocks, grid.tiles_x, grid.tiles_y, k); };

  WithWords(NWr, [&](auto nw) {
    constexpr int NW = decltype(nw)::value;
    WithForm(s.form, [&](auto form) {
      constexpr int F = decltype(form)::value;
      // As the GPU's loader: the inputs and the edges that need no wait once the set is free, the waited
      // edges once their tiles have published.
      auto try_load = [&](int b) {
        for (; loaded[b] < visits_of(b); ++loaded[b]) {
          const int k = loaded[b];
          if (k >= sets && freed[b] <= k - sets) return;  // its buffer set is still in use
          const fast::Visit v = visit_of(b, k);
          const fast::Tile t = fast::MakeTile(P, v.tx, v.ty);
          const fast::Buffers B = buffers[b].View(k);
          // With a mailbox the loader waits for mail instead of tile counters.
          fast::LoaderWait waits[2];
          const int count = P.mailbox ? 0 : fast::LoaderWaits(walk, P, v, t, sets, waits);
          unsigned waited = 0;
          for (int i = 0; i < count; ++i) waited |= fast::EdgeBit(waits[i].edge);
          int stamps[4];
          const unsigned mailed = fast::MailedEdges(walk, P, v, t, sweep_base, stamps);
          const unsigned edges = fast::kAllEdges & ~fast::EdgeBit(v.carried_edge);
          const bool fresh = fast::FreshVisit(P, v);
          if (started[b] <= k) {
            fast::LoadTileInputs<NW>(P, t, B.Unary(0), B.Sr(0), B.Sd(0), 0, 1, copy);
            fast::FillStage<NW>(P, t, B.Stage(0), edges & ~waited & ~mailed, 0, 1, fresh);
            if (fresh) fast::ClearOutgoing(P, t, 0, 1);
            started[b] = k + 1;
          }
          for (int i = 0; i < count; ++i)
            if (tile_done[waits[i].tile] < waits[i].sweeps) return;
          for (int e : {fast::kEdgeLeft, fast::kEdgeRight})
            if ((mailed & fast::EdgeBit(e)) && !TakeMailIfPosted<NW>(P, t, B.Stage(0), e, stamps[e])) return;
          fast::FillStage<NW>(P, t, B.Stage(0), edges & waited, 0, 1, fresh);
        }
      };
      auto publish = [&](const fast::Visit& v) {
        tile_done[static_cast<std::size_t>(v.ty) * grid.tiles_x + v.tx] = v.sweep + 1;
        for (int other = 0; other < blocks; ++other) try_load(other);
      };
      auto free_set = [&](int b) {
        ++freed[b];
        try_load(b);
      };
      auto chains = [&](int b, int k, bool vertical_chains, bool first, bool last) {
        const fast::Visit v = visit_of(b, k);
        const fast::Buffers B = buffers[b].View(k);
        const fast::Tile t = fast::MakeTile(P, v.tx, v.ty);
        for (int tid = 0; tid < threads; ++tid)
          fast::ChainPhase<NW, F, 1>(P, t, B, 0, vertical_chains, first, last, B.Stage(1), v.carry_edge, tid,
                                     fast::MailOf(walk, P, v, sweep_base));
      };
      auto labels = [&](int b, int k) {
        const fast::Visit v = visit_of(b, k);
        if (v.sweep == 1) fast::LabelPhase<NW>(P, fast::MakeTile(P, v.tx, v.ty), buffers[b].View(k), 0, 0, 1);
      };
      // Runs block b's next phase if it may; returns whether it did.
      auto step = [&](int b) {
        const int k = visit[b], total = visits_of(b);
        if (split) {  // visit[b]: horizontal chains done; phase[b]: vertical chains (and labels) done
          // Visit k's horizontal chains overwrite the horizontal messages of visit k - 2 (two sets), so they
          // wait for its vertical chains; visit k - 1's vertical chains wait for its horizontal ones. The
          // horizontal chains go first when both may (the order the GPU's crews allow that reuses most).
          if (k < total && loaded[b] > k && phase[b] >= k - 1) {
            chains(b, k, false, true, true);
            ++visit[b];
            return true;
          }
          const int done = phase[b];
          if (done >= k) return false;
          chains(b, done, true, true, true);
          publish(visit_of(b, done));
          labels(b, done);
          free_set(b);
          ++phase[b];
          return true;
        }
        if (k >= total) return false;
        if (phase[b] == 0 && loaded[b] <= k) return false;
        const int it = phase[b] / 2;
        const bool vertical_chains = phase[b] % 2 == 1, first = it == 0, last = it + 1 == P.inner;
        chains(b, k, vertical_chains, first, last);
        const fast::Visit v = visit_of(b, k);
        if (last && !vertical_chains && fast::PublishesEarly(walk)) publish(v);
        if (++phase[b] == 2 * P.inner) {
          if (!fast::PublishesEarly(walk)) publish(v);
          labels(b, k);
          phase[b] = 0;
          ++visit[b];
          free_set(b);
        }
        return true;
      };
      for (int it = 1; it <= c.iterations; ++it) {
        changed = 0;
        P.fresh = it == 1 ? 1 : 0;
        for (int b = 0; b < blocks; ++b) loaded[b] = started[b] = freed[b] = visit[b] = phase[b] = 0;  // a new launch
        std::fill(tile_done.begin(), tile_done.end(), 0);
        for (int b = 0; b < blocks; ++b) try_load(b);
        for (bool moved = true; moved;) {
          moved = false;
          for (int b = 0; b < blocks; ++b) moved |= step(b);
        }
        sweep_base += 2;
        for (int b = 0; b < blocks; ++b)
          ASSERT_TRUE(visit[b] == visits_of(b) && (!split || phase[b] == visits_of(b)))
              << "block " << b << " stalled (" << ToString(launch) << ")";
        out.iterations = it;
        out.energies.push_back(bp::ProblemEnergy(p, out.labels));
        out.converged = changed == 0;
        if (out.converged) break;
      }
    });
  });
  auto unpad = [&](const std::vector<Cost>& padded) {
    std::vector<Cost> v(padded.size() / Lp * L);
    for (std::size_t i = 0; i < padded.size() / Lp; ++i) std::copy_n(&padded[i * Lp], L, &v[i * L]);
    return v;
  };
  out.borders.right = unpad(br), out.borders.left = unpad(bl), out.borders.down = unpad(bd), out.borders.up = unpad(bu);
  return out;
}

bp::Config Tiled(int iterations, int tile, int inner) {
  bp::Config c;
  c.schedule = bp::Schedule::kTiled;
  c.iterations = iterations;
  c.tile_size = tile;
  c.inner_iterations = inner;
  return c;
}

void ExpectSameAsCpu(const Model& m, const bp::Config& c, int blocks, const std::string& what) {
  const bp::Problem p = bp::PrepareProblem(m);
  const bp::RunOutput cpu = bp::RunCpu(p, c);
  for (Launch launch :
       {Launch::kPipelineColumns, Launch::kPipelineColumnsCounters, Launch::kPipelineRows, Launch::kSplit}) {
    if (launch == Launch::kSplit && c.inner_iterations != 1) continue;  // one inner iteration only
    const Emulated emulated = EmulatePipeline(p, c, blocks, launch);
    const std::string how = what + " (" + ToString(launch) + ")";
    EXPECT_EQ(emulated.iterations, cpu.iterations) << how;
    EXPECT_EQ(emulated.converged, cpu.converged) << how;
    EXPECT_EQ(emulated.labels, cpu.labels) << how;
    EXPECT_EQ(emulated.energies, cpu.energies) << how;
    EXPECT_TRUE(emulated.borders == cpu.borders) << how << " (border messages differ)";
  }
}

TEST(BpFastTile, EmulatedPipelineEqualsTheCpuTiledSchedule) {
  std::mt19937_64 rng(42);
  struct Case { int w, h; Label L; int tile, inner, outer, blocks; };
  const std::vector<Pairwise> families = {
      {PairwiseKind::kPotts, 1, kMaxCost, {}},           {PairwiseKind::kTruncatedLinear, 1, 2, {}},
      {PairwiseKind::kTruncatedLinear, 1, 1, {}},        {PairwiseKind::kTruncatedLinear, 1, kMaxCost, {}},
      {PairwiseKind::kTruncatedLinear, 1, 5, {}},        {PairwiseKind::kTruncatedQuadratic, 1, 9, {}},
      {PairwiseKind::kTruncatedQuadratic, 1, 1, {}},
  };
  for (const Case& c : {Case{23, 17, 16, 6, 1, 2, 2}, Case{29, 31, 3, 7, 2, 2, 3}, Case{41, 19, 16, 0, 1, 3, 1},
                        Case{50, 1, 16, 9, 2, 2, 1}, Case{1, 45, 5, 6, 1, 2, 4}, Case{23, 17, 32, 5, 2, 2, 2},
                        Case{13, 9, 9, 4, 3, 2, 2}, Case{3, 2, 2, 1, 1, 2, 2}, Case{20, 14, 16, 24, 2, 2, 1}}) {
    for (const Pairwise& pw : families) {
      Model m = test::RandomModel(rng, Topology::Grid2D(c.w, c.h, 4), c.L, 80, pw, 4);
      m.pairwise.lambda = 3;
      ExpectSameAsCpu(m, Tiled(c.outer, c.tile, c.inner), c.blocks,
                      std::string(ToString(pw.kind)) + " t=" + std::to_string(pw.truncation) + " " +
                          std::to_string(c.w) + "x" + std::to_string(c.h) + " L=" + std::to_string(c.L) + " tile " +
                          std::to_string(c.tile) + " blocks " + std::to_string(c.blocks));
    }
  }
}

TEST(BpFastTile, EmulatedPipelineStopsWhenConvergedLikeTheCpu) {
  std::mt19937_64 rng(14);  // the model of tests/gpu/test_cuda_bp.cpp's FastKernelRunsUntilConvergedLikeTheCpu
  Model m = test::RandomModel(rng, Topology::Grid2D(31, 27, 4), 4, 80, {PairwiseKind::kPotts, 1, kMaxCost, {}}, 4);
  m.pairwise.lambda = 3;
  const bp::RunOutput cpu = bp::RunCpu(bp::PrepareProblem(m), Tiled(60, 8, 2));
  EXPECT_TRUE(cpu.converged);
  EXPECT_LT(cpu.iterations, 60);
  ExpectSameAsCpu(m, Tiled(60, 8, 2), 2, "until converged");
  ExpectSameAsCpu(m, Tiled(60, 8, 1), 3, "until converged, one inner iteration");
  // Zero data costs: every message stays 0 and the first iteration changes nothing. The emulation's border
  // messages start stale, as a second run's do on the GPU: the first launch must count its changes against 0.
  Model flat = m;
  std::fill(flat.unary.begin(), flat.unary.end(), 0);
  EXPECT_EQ(bp::RunCpu(bp::PrepareProblem(flat), Tiled(60, 8, 1)).iterations, 1);
  ExpectSameAsCpu(flat, Tiled(60, 8, 1), 3, "zero costs");
}

TEST(BpFastTile, EmulatedPipelineEqualsTheCpuOnTsukuba) {
  const std::string left = test::SharedDataPath("middlebury/tsukuba-imL.png");
  const std::string right = test::SharedDataPath("middlebury/tsukuba-imR.png");
  if (left.empty() || right.empty()) GTEST_SKIP() << "Tsukuba images not found under the shared data folder";
  const Model m = BuildStereoModel(LoadImage(left, 3), LoadImage(right, 3), StereoParams::Preset("tsukuba"));
  ExpectSameAsCpu(m, Tiled(1, 0, 1), 5, "Tsukuba 1 x 1");
}

}  // namespace
}  // namespace mrf
