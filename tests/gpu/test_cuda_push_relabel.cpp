// cuda-pr against the CPU engines: flows equal Boost Graph's (and cpu-bk's when built) on hundreds
// of random grids (odd sizes, strips, zero and near-2^31 capacities; 4-, 8- and 6-connected), cuts
// equal tbb-pr's, the GPU state equals the CPU twin's after every step (with wave pushes too),
// re-solving equals solving from scratch, and injected faults end in clear messages with a recorded
// CPU fallback under auto.
// Tests named *Small* are the ones compute-sanitizer runs (--gtest_filter='*Small*').
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "energies/segmentation.h"
#include "energies/synthetic_scene.h"
#include "mrf/binary_graph.h"
#include "mrf/config.h"
#include "mrf/device.h"
#include "mrf/registry.h"
#include "mrf/solve.h"
#include "backends/cpu/tbb_push_relabel.h"
#include "support/grid_flow_cases.h"
#include "support/push_relabel_states.h"
#include "support/test_support.h"
#if MRF_HAVE_CUDA
#include "backends/cuda/cuda_push_relabel.h"
#endif

namespace mrf {
namespace {

using test::CapacityProfile;

#if MRF_HAVE_CUDA
std::unique_ptr<PushRelabelEngine> MakeCuda(const PushRelabelTuning& t = {}) { return MakeCudaPushRelabelEngine(t); }
#else
std::unique_ptr<PushRelabelEngine> MakeCuda(const PushRelabelTuning& = {}) { return nullptr; }
#endif

using test::ScopedEnv;
using test::CopyOfCapacities;

// The exact CPU engines this build has: boost-bk always, cpu-bk when registered.
std::vector<std::string> CpuReferences() {
  std::vector<std::string> names = {"boost-bk"};
  if (Registry::Global().IsAvailable("cpu-bk")) names.push_back("cpu-bk");
  return names;
}

void CheckAgainstCpu(const StGraph& original, const std::string& what) {
  StGraph gpu = CopyOfCapacities(original);
  const Result r = gpu.maxflow("cuda-pr");
  ASSERT_TRUE(r.ok) << what << ": " << r.message;  // ok: the cut's capacity equals the flow
  EXPECT_EQ(r.backend_used, "cuda-pr");
  EXPECT_EQ(r.energy, r.flow) << what;
  for (const std::string& name : CpuReferences()) {
    StGraph cpu = CopyOfCapacities(original);
    const Result ref = cpu.maxflow(name);
    ASSERT_TRUE(ref.ok) << name << ": " << ref.message;
    EXPECT_EQ(r.flow, ref.flow) << what << " vs " << name;
  }
  StGraph twin = CopyOfCapacities(original);
  const Result t = twin.maxflow("tbb-pr");
  ASSERT_TRUE(t.ok) << t.message;
  EXPECT_EQ(r.labels, t.labels) << what << ": cuts differ from tbb-pr's";
}

TEST(CudaPushRelabel, HundredsOfRandomGridsMatchTheCpuEngines) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(21);
  int cases = 0;
  for (const Topology& shape : test::GridFlowShapes(false))
    for (int p = 0; p < test::kNumCapacityProfiles; ++p)
      for (int trial = 0; trial < 3; ++trial) {
        const StGraph g = test::GridFlowCase(rng, shape, static_cast<CapacityProfile>(p));
        CheckAgainstCpu(g, shape.Describe() + ", " + test::ToString(static_cast<CapacityProfile>(p)) + ", trial " +
                               std::to_string(trial));
        ++cases;
      }
  EXPECT_GE(cases, 300);
}

TEST(CudaPushRelabel, LargerGridsMatchTheCpuEngines) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  for (const Topology& shape : {Topology::Grid2D(301, 257, 4), Topology::Grid2D(200, 123, 8), Topology::Grid3D(41, 37, 29)})
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kHuge})
      CheckAgainstCpu(test::GridFlowCase(rng, shape, p), shape.Describe() + ", " + test::ToString(p));
}

// Every compiled tile shape, with and without CUDA graphs, and extreme schedules.
TEST(CudaPushRelabel, SmallEveryTuningGivesTheSameFlow) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(12);
  std::vector<PushRelabelTuning> tunings;
  for (int tile_y : {8, 16, 32})
    for (bool graphs : {true, false}) {
      PushRelabelTuning t;
      t.tile_y = tile_y;
      t.cuda_graphs = graphs;
      t.fused_bfs_start = tile_y != 16;
      t.incremental_relabel = tile_y == 8 ? 0 : 2;
      t.wave_push = tile_y == 32;
      if (tile_y == 8) {
        t.tile3d_x = 32;
        t.tile3d_y = 4;
        t.tile3d_z = 4;
        t.local_iterations = 1;
        t.rounds_per_global_relabel = 1;
        t.bfs_check_every = 2;
      }
      tunings.push_back(t);
    }
  for (const Topology& shape : {Topology::Grid2D(45, 37, 4), Topology::Grid2D(33, 20, 8), Topology::Grid3D(11, 9, 10)}) {
    const StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
    StGraph ref = CopyOfCapacities(g);
    const Result expected = ref.maxflow("boost-bk");
    ASSERT_TRUE(expected.ok) << expected.message;
    for (const PushRelabelTuning& t : tunings) {
      if (shape.kind() == TopologyKind::kGrid8 && t.tile_y == 32) continue;  // not compiled for 8-connected
      auto engine = MakeCuda(t);
      Result r;
      engine->Solve(g, &r);
      EXPECT_EQ(r.flow, expected.flow) << shape.Describe() << ", " << t.Describe();
      EXPECT_EQ(g.CutCapacity(r.labels), expected.flow) << shape.Describe() << ", " << t.Describe();
    }
  }
}

// The GPU engine and its CPU twin run the same steps: their states agree bit for bit after any
// number of push rounds (global relabels included).
TEST(CudaPushRelabel, SmallStateEqualsTheCpuTwinStepByStep) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(31);
  PushRelabelTuning t;
  t.local_iterations = 4;
  t.rounds_per_global_relabel = 3;
  const Topology shapes[] = {Topology::Grid2D(70, 45, 4), Topology::Grid2D(33, 41, 8), Topology::Grid3D(17, 9, 12)};
  for (bool fused : {false, true})
    for (const Topology& shape : shapes)
      for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kHuge}) {
        const StGraph g = test::GridFlowCase(rng, shape, p);
        for (int rounds : {1, 2, 5, 11}) {
          t.fused_bfs_start = fused;
          t.incremental_relabel = fused ? 2 : 0;
          auto gpu = MakeCuda(t);
          auto cpu = MakeTbbPushRelabelEngine(t);
          gpu->RunForTest(g, rounds);
          cpu->RunForTest(g, rounds);
          const PushRelabelState a = gpu->DownloadState(), b = cpu->DownloadState();
          const std::string what = shape.Describe() + ", " + test::ToString(p) + ", " + std::to_string(rounds) +
                                   " rounds" + (fused ? ", fused BFS start" : "");
          test::ExpectSameState(a, b, what);
          EXPECT_EQ(gpu->stats().push_rounds, cpu->stats().push_rounds) << what;
          EXPECT_EQ(gpu->stats().global_relabels, cpu->stats().global_relabels) << what;
        }
      }
}

// Wave relabels (4-connected tiles relax a row or column per step) reach the same local fixpoints
// as hop-by-hop ones, so cuda-pr's state is the same either way after any number of push rounds
// (relabels from scratch and incremental ones), and so are the flows and cuts of solves and re-solves.
// Every 4-connected tile height; sizes that leave partial tiles at the right and bottom edges.
TEST(CudaPushRelabel, SmallWaveRelabelsGiveTheStatesOfHopByHopOnes) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(41);
  for (const Topology& shape : {Topology::Grid2D(45, 37, 4), Topology::Grid2D(70, 45, 4), Topology::Grid2D(1, 97, 4),
                                Topology::Grid2D(131, 3, 4)})
    for (int tile_y : {8, 16, 32})
      for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kHuge}) {
        PushRelabelTuning wave;
        wave.wave_relabel = true;
        wave.tile_y = tile_y;
        wave.incremental_relabel = 2;  // kill rounds in fresh solves too
        wave.rounds_per_global_relabel = 1;
        PushRelabelTuning hop = wave;
        hop.wave_relabel = false;
        const std::string what = shape.Describe() + ", tile 32x" + std::to_string(tile_y) + ", " + test::ToString(p);
        StGraph g = test::GridFlowCase(rng, shape, p);
        for (int rounds : {1, 3, 7}) {
          auto a = MakeCuda(wave), b = MakeCuda(hop);
          a->RunForTest(g, rounds);
          b->RunForTest(g, rounds);
          test::ExpectSameState(a->DownloadState(), b->DownloadState(), what + ", " + std::to_string(rounds) + " rounds");
        }
        auto a = MakeCuda(wave), b = MakeCuda(hop);
        Result ra, rb;
        a->Solve(g, &ra);
        b->Solve(g, &rb);
        EXPECT_EQ(ra.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << what;
        EXPECT_EQ(ra.flow, rb.flow) << what;
        EXPECT_EQ(ra.labels, rb.labels) << what;
        EXPECT_EQ(a->stats().push_rounds, b->stats().push_rounds) << what;
        g.MarkSolved();
        for (NodeId v = 0; v < shape.num_nodes(); v += 5) g.set_tweights(v, (v * 37) % 300, (v * 91) % 300);
        shape.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
          if (e % 7 == 0) g.set_edge(e, static_cast<Cost>(e % 40), static_cast<Cost>(e % 25));
        });
        a->Resolve(g, &ra);  // from the residual graph: kill rounds around the edits
        b->Resolve(g, &rb);
        EXPECT_EQ(ra.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << what << " (re-solve)";
        EXPECT_EQ(ra.flow, rb.flow) << what << " (re-solve)";
        EXPECT_EQ(ra.labels, rb.labels) << what << " (re-solve)";
        test::ExpectSameState(a->DownloadState(), b->DownloadState(), what + " (re-solve)");
      }
}

// Wave pushes (wave_push=1): cuda-pr's warp scans move the same flows as tbb-pr's node-after-node
// loops, so the states agree bit for bit after any number of push rounds, on every 4-connected
// tile height, with hop-by-hop or wave relabels, full or incremental ones; solves and re-solves
// reach the references' flows and tbb-pr's cuts.
TEST(CudaPushRelabel, WavePushStateEqualsTheCpuTwinStepByStep) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(43);
  for (const Topology& shape : {Topology::Grid2D(70, 45, 4), Topology::Grid2D(45, 37, 4), Topology::Grid2D(131, 3, 4),
                                Topology::Grid2D(1, 97, 4)})
    for (int tile_y : {8, 16, 32})
      for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kHuge}) {
        PushRelabelTuning t;
        t.wave_push = true;
        t.tile_y = tile_y;
        t.local_iterations = 4;
        t.rounds_per_global_relabel = 3;
        t.wave_relabel = tile_y != 16;
        t.incremental_relabel = tile_y == 8 ? 2 : 1;
        const std::string what = shape.Describe() + ", " + test::ToString(p) + ", " + t.Describe();
        StGraph g = test::GridFlowCase(rng, shape, p);
        for (int rounds : {1, 2, 5, 11}) {
          auto gpu = MakeCuda(t);
          auto cpu = MakeTbbPushRelabelEngine(t);
          gpu->RunForTest(g, rounds);
          cpu->RunForTest(g, rounds);
          const PushRelabelState a = gpu->DownloadState(), b = cpu->DownloadState();
          test::ExpectSameState(a, b, what + ", " + std::to_string(rounds) + " rounds");
          EXPECT_EQ(gpu->stats().tile_iterations, cpu->stats().tile_iterations) << what << ", " << rounds << " rounds";
        }
        auto gpu = MakeCuda(t);
        auto cpu = MakeTbbPushRelabelEngine(t);
        Result rg, rc;
        gpu->Solve(g, &rg);
        cpu->Solve(g, &rc);
        for (const std::string& name : CpuReferences())
          EXPECT_EQ(rg.flow, CopyOfCapacities(g).maxflow(name).flow) << what << ", " << name;
        EXPECT_EQ(rg.flow, rc.flow) << what;
        EXPECT_EQ(rg.labels, rc.labels) << what;
        EXPECT_EQ(gpu->stats().push_rounds, cpu->stats().push_rounds) << what;
        g.MarkSolved();
        for (NodeId v = 0; v < shape.num_nodes(); v += 5) g.set_tweights(v, (v * 37) % 300, (v * 91) % 300);
        shape.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
          if (e % 7 == 0) g.set_edge(e, static_cast<Cost>(e % 40), static_cast<Cost>(e % 25));
        });
        gpu->Resolve(g, &rg);  // from the residual graph
        cpu->Resolve(g, &rc);
        EXPECT_EQ(rg.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << what << " (re-solve)";
        EXPECT_EQ(rg.labels, rc.labels) << what << " (re-solve)";
        const PushRelabelState a = gpu->DownloadState(), b = cpu->DownloadState();
        EXPECT_EQ(a.x, b.x) << what << " (re-solve): excess differs";
        EXPECT_EQ(a.r, b.r) << what << " (re-solve): residuals differ";
      }
}

void CheckResolve(const Topology& shape, CapacityProfile profile, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  StGraph g = test::GridFlowCase(rng, shape, profile);
  StGraph twin = CopyOfCapacities(g);
  ASSERT_TRUE(g.maxflow("cuda-pr").ok);
  ASSERT_TRUE(twin.maxflow("tbb-pr").ok);
  auto pick = [&](std::int64_t n) { return std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng); };
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 1 + shape.num_nodes() / 25; ++i) {
      const NodeId v = static_cast<NodeId>(pick(shape.num_nodes()));
      const Energy s = pick(400), t = pick(400);
      g.set_tweights(v, s, t);
      twin.set_tweights(v, s, t);
    }
    for (int i = 0; i < 1 + shape.num_nodes() / 25; ++i) {
      const EdgeId e = pick(shape.num_edge_slots());
      NodeId a, b;
      if (!shape.edge_endpoints(e, &a, &b)) continue;
      const Cost c = static_cast<Cost>(pick(80)), rc = static_cast<Cost>(pick(80));
      g.set_edge(e, c, rc);
      twin.set_edge(e, c, rc);
    }
    const Result again = g.maxflow("cuda-pr");  // from the residual graph
    ASSERT_TRUE(again.ok) << again.message;
    const Result cpu_again = twin.maxflow("tbb-pr");
    ASSERT_TRUE(cpu_again.ok) << cpu_again.message;
    StGraph fresh_graph = CopyOfCapacities(g);
    const Result fresh = fresh_graph.maxflow("cuda-pr");
    ASSERT_TRUE(fresh.ok) << fresh.message;
    StGraph ref_graph = CopyOfCapacities(g);
    const Result ref = ref_graph.maxflow("boost-bk");
    const std::string what = shape.Describe() + ", " + test::ToString(profile) + ", step " + std::to_string(step);
    EXPECT_EQ(again.flow, fresh.flow) << what;
    EXPECT_EQ(again.flow, ref.flow) << what;
    EXPECT_EQ(again.labels, fresh.labels) << what;
    EXPECT_EQ(again.labels, cpu_again.labels) << what;
  }
}

TEST(CudaPushRelabel, SmallResolveEqualsSolveFromScratch) {
  MRF_SKIP_WITHOUT_CUDA();
  CheckResolve(Topology::Grid2D(37, 29, 4), CapacityProfile::kSegmentation, 1);
  CheckResolve(Topology::Grid2D(21, 18, 8), CapacityProfile::kUniform, 2);
  CheckResolve(Topology::Grid3D(9, 7, 8), CapacityProfile::kSegmentation, 3);
}

TEST(CudaPushRelabel, ResolveEqualsSolveFromScratch) {
  MRF_SKIP_WITHOUT_CUDA();
  std::uint64_t seed = 50;
  for (const Topology& shape : {Topology::Grid2D(130, 97, 4), Topology::Grid2D(1, 300, 4), Topology::Grid2D(77, 64, 8),
                                Topology::Grid3D(20, 21, 19)})
    for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kZero,
                              CapacityProfile::kHuge})
      CheckResolve(shape, p, seed++);
}

// cuda-pr solves an edit of more than 1/16 of the nodes of a grid of 2^18 nodes or more afresh on
// its kept workspace, and re-solves smaller ones and every edit of a smaller grid. Over edits that
// accumulate on both sides of the threshold, flows must equal cpu-bk's and cuts a fresh solve's.
TEST(CudaPushRelabel, DenseEditsOfLargeGridsAreSolvedAfresh) {
  MRF_SKIP_WITHOUT_CUDA();
  test::CheckDenseEditRule("cuda-pr", 43, {Topology::Grid2D(1024, 256, 4), Topology::Grid2D(1023, 256, 4)},
                           {0.04, 0.1, 0.05, 1.0}, 16, [](const StGraph& g) {
                             StGraph copy = CopyOfCapacities(g);
                             return copy.maxflow("cpu-bk").flow;
                           });
}

// The repairs' stack frame (about 2 KiB a thread) is above the driver's default stack (1 KiB). cuda-pr
// raises the limit when it sizes its workspace, so that the driver's own growth at the first repair
// (frame x resident threads: hundreds of MiB) does not come after the fit check. With local re-solves
// off nothing needs it, and the limit stays. (Not *Small*: compute-sanitizer's kernels have other frames.)
TEST(CudaPushRelabel, StackIsRaisedBeforeTheWorkspaceIsSized) {
  MRF_SKIP_WITHOUT_CUDA();
  const std::size_t driver_default = 1024;
  for (const bool local : {true, false}) {
    SCOPED_TRACE(local ? "local re-solves (the default)" : "local_resolve=0");
    std::optional<ScopedEnv> tuning;
    if (!local) tuning.emplace("MRF_PR_TUNING", "local_resolve=0");
    SetCudaStackLimitBytes(driver_default);
    ASSERT_EQ(CudaStackLimitBytes(), driver_default);
    std::mt19937_64 rng(7);
    StGraph g = test::GridFlowCase(rng, Topology::Grid2D(64, 48, 4), CapacityProfile::kSegmentation);
    ASSERT_TRUE(g.maxflow("cuda-pr").ok);
    const std::size_t after_solve = CudaStackLimitBytes();
    if (local) EXPECT_GT(after_solve, driver_default);
    else EXPECT_EQ(after_solve, driver_default);
    for (int i = 0; i < 60; ++i)
      g.set_tweights(static_cast<NodeId>(rng() % g.num_nodes()), static_cast<Energy>(rng() % 400),
                     static_cast<Energy>(rng() % 400));
    const Result again = g.maxflow("cuda-pr");
    ASSERT_TRUE(again.ok) << again.message;
    EXPECT_EQ(CudaStackLimitBytes(), after_solve) << "a re-solve's launches needed more stack than was reserved";
    StGraph reference = CopyOfCapacities(g);
    EXPECT_EQ(again.flow, reference.maxflow("boost-bk").flow);
  }
}

TEST(CudaPushRelabel, SmallWorkspaceIsReused) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(4);
  auto engine = MakeCuda();
  const StGraph a = test::GridFlowCase(rng, Topology::Grid2D(64, 48, 4), CapacityProfile::kUniform);
  const StGraph b = test::GridFlowCase(rng, Topology::Grid2D(64, 48, 4), CapacityProfile::kSegmentation);
  Result ra, rb;
  engine->Solve(a, &ra);
  const std::size_t bytes = engine->MemoryBytes();
  engine->Solve(b, &rb);
  EXPECT_EQ(engine->MemoryBytes(), bytes);
  EXPECT_GT(bytes, 64u * 48u * 8u);
  EXPECT_EQ(rb.flow, CopyOfCapacities(b).maxflow("boost-bk").flow);
  EXPECT_GE(rb.timings.solve_ms, 0.0);
  EXPECT_GE(rb.timings.transfer_ms, 0.0);
  EXPECT_FALSE(rb.log.empty());
}

// mrf::Solve asks cuda-pr to prepare (context, workspace) on a thread of its own while it builds the
// graph. The workspace must then exist without a solve; a solve after it must equal a plain one;
// preparing for another shape than the one solved, or destroying the engine before any solve, must be
// harmless; an engine holding a solved graph must ignore it, so that a re-solve still equals a fresh
// solve. (A failure while preparing ahead: the next test.)
TEST(CudaPushRelabel, SmallSolvesPreparedAheadEqualPlainOnes) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(17);
  const Topology shapes[] = {Topology::Grid2D(70, 45, 4), Topology::Grid2D(33, 31, 8), Topology::Grid3D(12, 9, 7)};
  for (int k = 0; k < 3; ++k) {
    const StGraph g = test::GridFlowCase(rng, shapes[k], CapacityProfile::kSegmentation);
    Result plain, ahead, other;
    MakeCuda()->Solve(g, &plain);
    auto engine = MakeCuda();
    engine->PrepareAhead(shapes[k]);
    EXPECT_GT(engine->MemoryBytes(), static_cast<std::size_t>(shapes[k].num_nodes()) * 8) << shapes[k].Describe();
    engine->Solve(g, &ahead);
    EXPECT_EQ(ahead.flow, plain.flow) << shapes[k].Describe();
    EXPECT_EQ(ahead.labels, plain.labels) << shapes[k].Describe();
    EXPECT_EQ(ahead.flow, CopyOfCapacities(g).maxflow("boost-bk").flow - g.constant()) << shapes[k].Describe();
    auto elsewhere = MakeCuda();
    elsewhere->PrepareAhead(shapes[(k + 1) % 3]);  // a workspace of another shape: remade by the solve
    elsewhere->Solve(g, &other);
    EXPECT_EQ(other.flow, plain.flow) << shapes[k].Describe();
    EXPECT_EQ(other.labels, plain.labels) << shapes[k].Describe();
    for (int i = 0; i < 4; ++i) MakeCuda()->PrepareAhead(shapes[(k + i) % 3]);  // destroyed while preparing

    // A solved engine keeps its workspace: preparing for another shape must not touch it.
    StGraph edited = CopyOfCapacities(g);
    edited.MarkSolved();  // the engine's state is g's solve: the edits below are what Resolve() reads
    const std::size_t held = engine->MemoryBytes();
    engine->PrepareAhead(shapes[(k + 1) % 3]);
    EXPECT_EQ(engine->MemoryBytes(), held) << shapes[k].Describe();
    for (NodeId v = 0; v < edited.num_nodes(); v += 7) edited.set_tweights(v, static_cast<Energy>(rng() % 300), static_cast<Energy>(rng() % 300));
    Result again, fresh;
    engine->Resolve(edited, &again);
    MakeCuda()->Solve(edited, &fresh);
    EXPECT_EQ(again.flow, fresh.flow) << shapes[k].Describe();
    EXPECT_EQ(again.labels, fresh.labels) << shapes[k].Describe();
  }
  MakeCuda()->PrepareAhead(Topology::EdgeList(3, {0, 1}, {1, 2}));  // not a shape cuda-pr takes: nothing
}

// A failure while preparing ahead must come out of Solve() as a plain solve's does. Apart from the test
// above, so that memcheck runs (filter '*Small*:-*Inject*') leave out its deliberate allocation failures.
TEST(CudaPushRelabel, SmallInjectedFaultWhilePreparingAheadGivesThePlainMessage) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(18);
  const Topology shape = Topology::Grid2D(70, 45, 4);
  const StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kUniform);
  // The message names the free memory, which another process may change: compare up to it.
  auto up_to_sizes = [](const std::string& message) { return message.substr(0, message.find(" needs ")); };
  std::string plain_message;
  for (bool prepare_ahead : {false, true}) {
    ScopedEnv inject("MRF_INJECT_CUDA_FAULT", "oom");
    auto engine = MakeCuda();
    if (prepare_ahead) engine->PrepareAhead(shape);
    Result r;
    try {
      engine->Solve(g, &r);
      ADD_FAILURE() << "the injected fault was not reported, prepare_ahead " << prepare_ahead;
    } catch (const Error& e) {
      if (!prepare_ahead) plain_message = up_to_sizes(e.what());
      EXPECT_NE(std::string(e.what()).find("out of GPU memory"), std::string::npos) << e.what();
      EXPECT_EQ(up_to_sizes(e.what()), plain_message);
    }
  }
  CheckAgainstCpu(g, "after preparing ahead");
}

TEST(CudaPushRelabel, SmallDebugSyncGivesTheSameFlow) {
  MRF_SKIP_WITHOUT_CUDA();
  ScopedEnv sync("MRF_CUDA_DEBUG_SYNC", "1");
  std::mt19937_64 rng(6);
  CheckAgainstCpu(test::GridFlowCase(rng, Topology::Grid2D(40, 33, 8), CapacityProfile::kSegmentation), "debug sync");
}

Model SmallBinaryModel(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return test::RandomModel(rng, Topology::Grid2D(5, 4, 4), 2, 30, Pairwise{}, 7);
}

TEST(CudaPushRelabel, SmallAutoPrefersTheGpu) {
  MRF_SKIP_WITHOUT_CUDA();
  const Model m = SmallBinaryModel(1);
  const Result r = Solve(m, SolveOptions{});
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.backend_used, "cuda-pr");
  EXPECT_EQ(r.energy, test::BruteForceMinEnergy(m));
}

TEST(CudaPushRelabel, SmallInjectedFaultsGiveClearMessagesAndAutoFallsBack) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(5);
  const StGraph g = test::GridFlowCase(rng, Topology::Grid2D(30, 20, 4), CapacityProfile::kUniform);
  const Model m = SmallBinaryModel(2);
  const Energy best = test::BruteForceMinEnergy(m);
  {  // A debugging switch with a value it does not know is refused, not silently ignored.
    ScopedEnv debug("MRF_CUDA_DEBUG_SYNC", "yes");
    StGraph named = CopyOfCapacities(g);
    const Result r = named.maxflow("cuda-pr");
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("cuda-pr: MRF_CUDA_DEBUG_SYNC must be 0 or 1 (got 'yes')"), std::string::npos) << r.message;
  }
  const std::pair<const char*, const char*> faults[] = {{"oom", "out of GPU memory"}, {"launch", "kernel launch failed"}};
  for (const auto& [fault, expected] : faults) {
    ScopedEnv inject("MRF_INJECT_CUDA_FAULT", fault);
    StGraph named = CopyOfCapacities(g);
    const Result r = named.maxflow("cuda-pr");
    EXPECT_FALSE(r.ok) << fault;
    EXPECT_NE(r.message.find("cuda-pr"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(expected), std::string::npos) << r.message;
    SolveOptions by_name;
    by_name.solver = "cuda-pr";
    const Result failed = Solve(m, by_name);
    EXPECT_FALSE(failed.ok);
    EXPECT_NE(failed.message.find(expected), std::string::npos) << failed.message;
    StGraph graph_auto = CopyOfCapacities(g);
    const Result graph_fallback = graph_auto.maxflow("auto");
    ASSERT_TRUE(graph_fallback.ok) << graph_fallback.message;
    EXPECT_NE(graph_fallback.backend_used, "cuda-pr");
    EXPECT_NE(graph_fallback.fallback_reason.find("cuda-pr failed"), std::string::npos) << graph_fallback.fallback_reason;
    const Result automatic = Solve(m, SolveOptions{});
    ASSERT_TRUE(automatic.ok) << automatic.message;
    EXPECT_NE(automatic.backend_used, "cuda-pr");
    EXPECT_EQ(automatic.energy, best);
    EXPECT_NE(automatic.fallback_reason.find("cuda-pr failed"), std::string::npos) << automatic.fallback_reason;
    EXPECT_NE(automatic.fallback_reason.find(expected), std::string::npos) << automatic.fallback_reason;
  }
  // Afterwards the GPU works again.
  CheckAgainstCpu(g, "after the injected faults");
}

// A GPU failure in a sequence of solves sharing a KeptCut, with auto: the failed round runs on the CPU
// and keeps the CPU's graph; the next rounds go back to the GPU. Every round equals cpu-bk's plain
// solve. The fault strikes in the dense re-solve of round 2 (solved afresh, so the engine prepares).
TEST(CudaPushRelabel, InjectedFaultInAKeptCutSequenceFallsBackForThatRoundOnly) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(29);
  Model m = test::RandomModel(rng, Topology::Grid2D(520, 520, 4), 2, 60, Pairwise{PairwiseKind::kPotts, 9, 0, {}}, 6);
  SolveOptions automatic;
  automatic.kept_cut = std::make_shared<KeptCut>();
  SolveOptions cpu;
  cpu.solver = "cpu-bk";
  for (int round = 1; round <= 4; ++round) {
    if (round > 1) {  // rounds 2 and 3 change every unary cost (dense edits), round 4 a few
      const std::size_t step = round == 4 ? 997 : 1;
      for (std::size_t i = 0; i < m.unary.size(); i += step) m.unary[i] = static_cast<Cost>(rng() % 61);
    }
    std::optional<ScopedEnv> inject;
    if (round == 2) inject.emplace("MRF_INJECT_CUDA_FAULT", "oom");
    const Result r = Solve(m, automatic);
    inject.reset();
    const Result reference = Solve(m, cpu);
    const std::string what = "round " + std::to_string(round);
    ASSERT_TRUE(r.ok) << what << ": " << r.message;
    ASSERT_TRUE(reference.ok) << reference.message;
    EXPECT_EQ(r.energy, reference.energy) << what;
    EXPECT_EQ(r.flow, reference.flow) << what;
    EXPECT_EQ(r.backend_used, round == 2 ? "cpu-bk" : "cuda-pr") << what << ": " << r.fallback_reason;
    EXPECT_EQ(r.fallback_reason.find("cuda-pr failed") != std::string::npos, round == 2) << what << ": " << r.fallback_reason;
    EXPECT_EQ(automatic.kept_cut->engine_name, r.backend_used) << what;
    const bool on_kept = r.message.find("on the kept graph") != std::string::npos;
    EXPECT_EQ(on_kept, round == 4) << what << ": " << r.message;
  }
}

// A few tiny solves and re-solves of each grid kind: what compute-sanitizer's racecheck runs
// (--gtest_filter='*Sanitizer*'); memcheck runs every *Small* test.
TEST(CudaPushRelabel, SmallSanitizerSolvesAndResolves) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(77);
  for (const Topology& shape : {Topology::Grid2D(40, 20, 4), Topology::Grid2D(33, 17, 8), Topology::Grid3D(9, 7, 10)}) {
    StGraph g = test::GridFlowCase(rng, shape, CapacityProfile::kSegmentation);
    const Result r = g.maxflow("cuda-pr");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << shape.Describe();
    for (NodeId v = 0; v < shape.num_nodes(); v += 7) g.set_tweights(v, (v * 37) % 500, (v * 91) % 500);
    shape.ForEachEdge([&](EdgeId e, NodeId, NodeId) {
      if (e % 11 == 0) g.set_edge(e, static_cast<Cost>(e % 50), static_cast<Cost>(e % 30));
    });
    const Result again = g.maxflow("cuda-pr");
    ASSERT_TRUE(again.ok) << again.message;
    EXPECT_EQ(again.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << shape.Describe() << " (re-solve)";
  }
}

// Local re-solves (terminal changes only): a thread per block of changes repairs around them, then the
// certificate is checked on every node; the flow equals Boost's and the cut tbb-pr's (which repairs
// the same changes one after another) and a fresh solve's, on both the local and the fallback path.
// `repaired` (optional) counts the re-solves that repaired the nodes failing the certificate after
// push rounds (local_resolve = 3), whether that certified them or they went on with relabels.
void CheckLocalResolve(const Topology& shape, CapacityProfile profile, std::uint64_t seed, int* local, int* fallback,
                       int* repaired = nullptr) {
  std::mt19937_64 rng(seed);
  StGraph g = test::GridFlowCase(rng, shape, profile);
  StGraph twin = CopyOfCapacities(g);
  ASSERT_TRUE(g.maxflow("cuda-pr").ok);
  ASSERT_TRUE(twin.maxflow("tbb-pr").ok);
  const NodeId n = shape.num_nodes();
  auto pick = [&](std::int64_t k) { return std::uniform_int_distribution<std::int64_t>(0, k - 1)(rng); };
  for (int step = 0; step < 5; ++step) {
    const std::int64_t count = step == 4 ? n / 2 : step % 2 ? 1 + n / 100 : 1 + n / 20;
    for (std::int64_t i = 0; i < count; ++i) {
      const NodeId v = static_cast<NodeId>(step == 4 ? i : pick(n)), donor = static_cast<NodeId>(pick(n));
      const Energy s = step == 4 ? 5000 : g.source_cap(donor), t = step == 4 ? 0 : g.sink_cap(donor);
      g.set_tweights(v, s, t);
      twin.set_tweights(v, s, t);
    }
    const std::string what = shape.Describe() + ", " + test::ToString(profile) + ", step " + std::to_string(step);
    const Result again = g.maxflow("cuda-pr");
    ASSERT_TRUE(again.ok) << what << ": " << again.message;
    (again.message.rfind("maximum flow found by local repairs", 0) == 0 ? *local : *fallback) += 1;
    if (repaired && (test::RepairedFailingNodes(again.message, true) || test::RepairedFailingNodes(again.message, false)))
      ++*repaired;
    const Result cpu_again = twin.maxflow("tbb-pr");
    ASSERT_TRUE(cpu_again.ok) << cpu_again.message;
    const Result fresh = CopyOfCapacities(g).maxflow("cuda-pr");
    EXPECT_EQ(again.flow, CopyOfCapacities(g).maxflow("boost-bk").flow) << what << ": " << again.message;
    EXPECT_EQ(again.flow, cpu_again.flow) << what;
    EXPECT_EQ(again.labels, cpu_again.labels) << what;
    EXPECT_EQ(again.labels, fresh.labels) << what;
  }
}

// These tests ask for each re-solve mode (both engines read MRF_PR_TUNING when the registry makes them).
struct LocalResolveMode : ScopedEnv {
  explicit LocalResolveMode(int mode) : ScopedEnv("MRF_PR_TUNING", ("local_resolve=" + std::to_string(mode)).c_str()) {}
};

TEST(CudaPushRelabel, SmallSanitizerLocalResolves) {
  MRF_SKIP_WITHOUT_CUDA();
  for (int m : {1, 3}) {
    const LocalResolveMode mode(m);
    int local = 0, fallback = 0;
    CheckLocalResolve(Topology::Grid2D(40, 31, 4), CapacityProfile::kSegmentation, 5, &local, &fallback);
    CheckLocalResolve(Topology::Grid2D(23, 19, 8), CapacityProfile::kUniform, 6, &local, &fallback);
    CheckLocalResolve(Topology::Grid3D(9, 8, 7), CapacityProfile::kSegmentation, 7, &local, &fallback);
    EXPECT_GT(local, 0) << "local_resolve=" << m;
  }
}

TEST(CudaPushRelabel, LocalResolvesEqualTheCpuAndFreshSolves) {
  MRF_SKIP_WITHOUT_CUDA();
  // none; repairs and certificate; fills only, then the usual re-solve; fills and push rounds, then
  // the certificate, without and with (the default) repairs of the nodes that fail it, and with
  // settling cut short after two hops a tile (more tiles searched for regions cut off from the sink),
  // with no or one push round between the fills and the certificate, and with one settling pass
  struct Mode {
    int local_resolve;
    bool repairs;
    const char* tuning;
  };
  for (const Mode mode : {Mode{0, false, "local_resolve=0"}, Mode{1, false, "local_resolve=1"},
                          Mode{2, false, "local_resolve=2"}, Mode{3, false, "local_resolve=3,repair_violations=0"},
                          Mode{3, true, "local_resolve=3"}, Mode{3, true, "local_resolve=3,settle_hops=2"},
                          Mode{3, true, "local_resolve=3,resolve_push_rounds=0"},
                          Mode{3, true, "local_resolve=3,resolve_push_rounds=1"},
                          Mode{3, true, "local_resolve=3,settle_passes=1"}}) {
    const ScopedEnv tuning("MRF_PR_TUNING", mode.tuning);
    const int m = mode.local_resolve;
    int local = 0, fallback = 0, repaired = 0;
    std::uint64_t seed = 90;
    // (Widths that are multiples of 4 keep the residual bitmasks in the push rounds: 132, 300, 76, 20, 400.)
    for (const Topology& shape : {Topology::Grid2D(130, 97, 4), Topology::Grid2D(132, 97, 4), Topology::Grid2D(300, 1, 4),
                                  Topology::Grid2D(77, 64, 8), Topology::Grid2D(76, 64, 8), Topology::Grid3D(20, 21, 19)})
      for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kUniform, CapacityProfile::kSparse,
                                CapacityProfile::kHuge})
        CheckLocalResolve(shape, p, seed++, &local, &fallback, &repaired);
    CheckLocalResolve(Topology::Grid2D(400, 300, 4), CapacityProfile::kSegmentation, seed++, &local, &fallback,
                      &repaired);
    std::printf("%s: re-solves certified locally %d, went on with relabels %d, repaired the nodes failing the "
                "certificate %d\n", mode.tuning, local, fallback, repaired);
    if (m == 0 || m == 2) EXPECT_EQ(local, 0);
    else EXPECT_GT(local, m == 1 ? 20 : 10);
    EXPECT_GT(fallback, 0);
    EXPECT_EQ(repaired > 0, mode.repairs) << mode.tuning << ": repairs of the nodes failing the certificate";
  }
}

// cuda-pr's residual bitmasks may be stale only in tiles flagged touched: relabels refresh the masks
// of those tiles only, and a re-solve's settling and certificate read masks instead of residuals once
// its push rounds kept them current (grids whose width is a multiple of 4) or its first settling pass
// stored them. After every solve and re-solve, each node outside a touched tile must hold the mask of
// its residuals. Widths 132, 76, 20 and 400 keep masks in the push rounds; 130 does not. The tunings
// cover the push kernels that keep masks (wave pushes, the 32x4x4 3-D tile) and a replayed CUDA graph;
// a re-solve without changes after one that repaired failing nodes starts from the touched tiles
// those repairs left, whose masks only the push rounds can refresh before settling reads them.
TEST(CudaPushRelabel, ResidualMasksAreCurrentOutsideTouchedTiles) {
  MRF_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(71);
  auto pick = [&](std::int64_t k) { return std::uniform_int_distribution<std::int64_t>(0, k - 1)(rng); };
  struct Case {
    int local_resolve;
    const char* name;
    void (*adjust)(PushRelabelTuning*);
  };
  const Case cases[] = {
      {3, "default", [](PushRelabelTuning*) {}},
      {3, "cuda_graphs=1", [](PushRelabelTuning* t) { t->cuda_graphs = true; }},
      {3, "wave_push=1,tile3d 32x4x4",
       [](PushRelabelTuning* t) {
         t->wave_push = true;
         t->tile3d_x = 32;
         t->tile3d_y = t->tile3d_z = 4;
       }},
      {0, "local_resolve=0", [](PushRelabelTuning*) {}},
      {3, "resolve_push_rounds=0", [](PushRelabelTuning* t) { t->resolve_push_rounds = 0; }},
      {3, "settle_passes=1", [](PushRelabelTuning* t) { t->settle_passes = 1; }},
  };
  int certified = 0, resolves = 0, after_repairs = 0;
  for (const Case& c : cases)
    for (const Topology& shape : {Topology::Grid2D(132, 97, 4), Topology::Grid2D(130, 97, 4),
                                  Topology::Grid2D(76, 64, 8), Topology::Grid3D(20, 21, 19),
                                  Topology::Grid2D(400, 300, 4)})
      for (CapacityProfile p : {CapacityProfile::kSegmentation, CapacityProfile::kSparse}) {
        PushRelabelTuning tuning;
        tuning.local_resolve = c.local_resolve;
        c.adjust(&tuning);
        auto engine = MakeCuda(tuning);
        StGraph g = test::GridFlowCase(rng, shape, p);
        const NodeId n = shape.num_nodes();
        const int dirs = pr::NumDirs(static_cast<int>(shape.kind()));
        auto expect_current_masks = [&](const std::string& what) {
          const PushRelabelState state = engine->DownloadState();
          ASSERT_EQ(state.mask.size(), static_cast<std::size_t>(n));
          std::int64_t stale = 0, first = -1;
          for (NodeId v = 0; v < n; ++v) {
            if (state.in_touched_tile[v]) continue;
            std::uint8_t mask = 0;
            for (int d = 0; d < dirs; ++d) mask |= state.r[static_cast<std::size_t>(d) * n + v] > 0 ? 1u << d : 0u;
            if (mask == state.mask[v]) continue;
            if (stale++ == 0) first = v;
          }
          EXPECT_EQ(stale, 0) << what << ": stale bitmasks outside touched tiles, the first at node " << first;
        };
        auto resolve = [&](const std::string& what) {
          Result again;
          engine->Resolve(g, &again);
          g.MarkSolved();
          ASSERT_EQ(again.flow, test::ReferenceFlow(g)) << what << ": " << again.message;
          ++resolves;
          certified += again.message.rfind("maximum flow found by local repairs", 0) == 0 ? 1 : 0;
          expect_current_masks(what + " (" + again.message + ")");
          if (!test::RepairedFailingNodes(again.message, true)) return;
          ++after_repairs;
          Result unchanged;  // from the tiles those repairs left touched
          engine->Resolve(g, &unchanged);
          g.MarkSolved();
          ASSERT_EQ(unchanged.flow, again.flow) << what << ", again without changes: " << unchanged.message;
          expect_current_masks(what + ", again without changes (" + unchanged.message + ")");
        };
        Result result;
        engine->Solve(g, &result);
        ASSERT_EQ(result.flow, test::ReferenceFlow(g)) << shape.Describe() << ": " << result.message;
        g.MarkSolved();
        expect_current_masks(shape.Describe() + ", " + c.name + ", solve");
        for (int step = 0; step < 8; ++step) {
          const std::int64_t count = step % 3 == 0 ? 1 + pick(3) : step % 3 == 1 ? 1 + n / 100 : 1 + n / 30;
          for (std::int64_t i = 0; i < count; ++i) {
            const NodeId v = static_cast<NodeId>(pick(n)), donor = static_cast<NodeId>(pick(n));
            g.set_tweights(v, g.source_cap(donor), g.sink_cap(donor));
          }
          resolve(shape.Describe() + ", " + test::ToString(p) + ", " + c.name + ", step " + std::to_string(step));
        }
      }
  std::printf("re-solves certified without relabels: %d of %d; after repairs of failing nodes: %d\n", certified,
              resolves, after_repairs);
  EXPECT_GT(certified, 10) << "too few re-solves took the certificate's path";
  EXPECT_GT(after_repairs, 3) << "too few re-solves left touched tiles from repairs of failing nodes";
}

// cuda-pr's second check after repairs of the failing nodes covers only the tiles around them, and
// corrects the sink residual there: the states it certifies pass the certificate on every node.
TEST(CudaPushRelabel, StatesCertifiedAfterRepairsPassTheCertificateOnEveryNode) {
  MRF_SKIP_WITHOUT_CUDA();
  test::ExpectStatesCertifiedAfterRepairsPassEverywhere([](const PushRelabelTuning& t) { return MakeCuda(t); }, 32);
}

// GrabCut rounds on cuda-pr's kept graph and workspace: small scenes re-solve, a scene of 2^18
// pixels or more is solved afresh on the kept graph (every unary cost changes: a dense edit). Every
// round must equal a run that builds each graph afresh, and the first round cpu-bk's energy (later
// rounds may differ: the two engines may pick different minimum cuts, so the models differ).
TEST(CudaPushRelabel, GrabCutRoundsOnTheKeptGraphEqualRoundsBuiltAfresh) {
  MRF_SKIP_WITHOUT_CUDA();
  for (const int side : {160, 520}) {
    SyntheticSceneOptions so;
    so.width = side;
    so.height = side;
    so.seed = 8;
    const SyntheticScene scene = MakeSyntheticScene(so);
    const Seeds seeds = SeedsFromRectangle(side, side, Rect{side / 10, side / 10, side * 8 / 10, side * 8 / 10});
    SegmentationOptions o;
    o.iterations = 4;
    o.stop_when_converged = false;
    SolveOptions gpu;
    gpu.solver = "cuda-pr";
    const Segmentation kept = SegmentImage(scene.image, seeds, o, gpu);
    o.keep_graph = false;
    const Segmentation afresh = SegmentImage(scene.image, seeds, o, gpu);
    SolveOptions cpu;
    cpu.solver = "cpu-bk";
    o.iterations = 1;
    const Segmentation reference = SegmentImage(scene.image, seeds, o, cpu);
    ASSERT_EQ(kept.rounds.size(), afresh.rounds.size());
    for (std::size_t i = 0; i < kept.rounds.size(); ++i) {
      EXPECT_EQ(kept.rounds[i].energy, afresh.rounds[i].energy) << side << ", round " << i + 1;
      EXPECT_EQ(kept.rounds[i].changed, afresh.rounds[i].changed) << side << ", round " << i + 1;
    }
    EXPECT_EQ(kept.rounds[0].energy, reference.rounds[0].energy) << side;
    EXPECT_EQ(kept.mask, afresh.mask) << side;
    EXPECT_NE(kept.result.message.find("on the kept graph"), std::string::npos) << kept.result.message;
    const bool dense = kept.result.message.find("solved afresh, not re-solved") != std::string::npos;
    EXPECT_EQ(dense, side * side >= (1 << 18)) << kept.result.message;
  }
}

// A cuda-pr solve that the callback stops keeps its graph and workspace; what follows must be exact.
TEST(CudaPushRelabel, StoppedSolvesLeaveTheKeptCutUsable) {
  MRF_SKIP_WITHOUT_CUDA();
  test::ExpectStoppedSolvesLeaveTheKeptCutUsable("cuda-pr");
}

// The segmentation program runs on cuda-pr by name and through auto, with the CPU's energy.
TEST(CudaPushRelabel, MrfSegmentRunsOnTheGpu) {
  MRF_SKIP_WITHOUT_CUDA();
  auto run = [](const std::string& backend) {
    const test::CommandResult r =
        test::RunCommand(test::AppPath("mrf-segment") + " --size 200x150 --seed 3 --json -q --backend " + backend);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json cpu = run("cpu-bk"), gpu = run("cuda-pr"), automatic = run("auto");
  EXPECT_EQ(gpu["backend"], "cuda-pr");
  EXPECT_EQ(automatic["backend"], "cuda-pr");
  EXPECT_EQ(gpu["energy"], cpu["energy"]);
  EXPECT_EQ(automatic["energy"], cpu["energy"]);
}

TEST(CudaPushRelabel, EdgeListsAreRefused) {
  MRF_SKIP_WITHOUT_CUDA();
  StGraph g;
  g.add_node(2);
  g.add_edge(0, 1, 3, 3);
  const Result r = g.maxflow("cuda-pr");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("needs a grid-shaped graph"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace mrf
