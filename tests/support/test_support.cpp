#include "support/test_support.h"

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <unistd.h>

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include "mrf/binary_graph.h"
#include "mrf/config.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

namespace mrf::test {

// MRF_DATA_DIR and MRF_APP_DIR override the build-time paths, for test binaries copied to
// another machine (the GPU machine).
static std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string SharedDataPath(const std::string& relative) {
  const std::filesystem::path path = std::filesystem::path(EnvOr("MRF_DATA_DIR", MRF_SHARED_DATA_DIR)) / relative;
  return std::filesystem::exists(path) ? path.string() : std::string();
}

std::string SourcePath(const std::string& relative) {
  return (std::filesystem::path(MRF_SOURCE_DIR) / relative).string();
}

std::string ScratchDir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(MRF_BINARY_DIR) / "test-scratch" / name;
  // A test killed midway may have left a folder no one may enter (the unsearchable-folder test): open
  // every folder up before removing them.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (fs::is_directory(it->symlink_status(ec)))  // (not through links: nothing outside is touched)
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add | fs::perm_options::nofollow, ec);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string AppPath(const std::string& program) {
  const std::string bin = (std::filesystem::path(MRF_BINARY_DIR) / "bin").string();
  return (std::filesystem::path(EnvOr("MRF_APP_DIR", bin.c_str())) / program).string();
}

std::string BigEndian32(std::uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
}

std::string PngChunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : body) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (crc & 1 ? 0xEDB88320u : 0u);
  }
  crc ^= 0xFFFFFFFFu;
  return BigEndian32(static_cast<std::uint32_t>(data.size())) + body + BigEndian32(crc);
}

void ExpectOneLineError(const std::string& program, const std::string& args, const std::string& phrase,
                        int exit_code) {
  const CommandResult r = RunCommand(AppPath(program) + " -q " + args);
  EXPECT_EQ(r.exit_code, exit_code) << args << "\n" << r.out << r.err;
  EXPECT_EQ(r.err.rfind(program + ": error: ", 0), 0u) << args << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << args << ": expected '" << phrase << "' in: " << r.err;
}

void ExpectNoLineSplitByPaths(const CommandResult& r, const std::vector<std::string>& paths) {
  auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  for (const std::string& path : paths)
    for (std::size_t i = 0; i < path.size(); ++i) {
      if (!control(path[i])) continue;
      std::size_t end = i + 1;
      while (end < path.size() && !control(path[end])) ++end;
      const std::string rest = path.substr(i + 1, end - i - 1);  // what would start a line of its own
      if (rest.empty()) continue;
      for (const std::string& text : {r.out, r.err})
        EXPECT_EQ(text.find("\n" + rest), std::string::npos) << "a path split its line:\n" << text;
    }
}

void ExpectGpuSolverRegisteredWithCpuFallback(const std::string& gpu_solver, Algorithm algorithm,
                                              const std::string& cpu_solver) {
  const SolverEntry* e = Registry::Global().Find(gpu_solver);
  ASSERT_NE(e, nullptr) << gpu_solver;
  EXPECT_EQ(e->algorithm, algorithm);
  EXPECT_EQ(e->device, Device::kCuda);
  EXPECT_EQ(e->compiled_in, static_cast<bool>(MRF_HAVE_CUDA));
  if (!CudaUnavailableReason().empty()) {
    std::mt19937_64 rng(3);
    const Model m = RandomModel(rng, Topology::Grid2D(6, 5, 4), 3, 50, Pairwise{PairwiseKind::kPotts, 5, kMaxCost, {}});
    SolveOptions named;
    named.solver = gpu_solver;
    const Result r = Solve(m, named);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find(gpu_solver), std::string::npos) << r.message;
    SolveOptions automatic;
    automatic.algorithm = algorithm;
    const Result a = Solve(m, automatic);
    ASSERT_TRUE(a.ok) << a.message;
    EXPECT_EQ(a.backend_used, cpu_solver);
    SolveOptions on_cuda = automatic;
    on_cuda.device = Device::kCuda;
    EXPECT_FALSE(Solve(m, on_cuda).ok);
  }
}

bool HasSolver(Algorithm algorithm, std::string* why) {
  try {
    Registry::Global().Choose("auto", algorithm, Device::kAuto);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

CommandResult RunCommand(const std::string& command_line) {
  static std::atomic<int> counter{0};
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("mrf-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++))).string();
  const std::string full = "(" + command_line + ") >" + base + ".out 2>" + base + ".err";
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::filesystem::remove(path);
    return ss.str();
  };
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  return r;
}

namespace {
Cost RandomCap(std::mt19937_64& rng, Cost max_cap) {
  // A quarter of the capacities are zero: zero edges are where bugs hide.
  if (rng() % 4 == 0) return 0;
  return static_cast<Cost>(std::uniform_int_distribution<std::int64_t>(0, max_cap)(rng));
}
}  // namespace

StGraph RandomGeneralGraph(std::mt19937_64& rng, NodeId nodes, EdgeId edges, Cost max_cap) {
  StGraph g;
  g.add_node(nodes);
  for (NodeId v = 0; v < nodes; ++v) g.add_tweights(v, RandomCap(rng, max_cap), RandomCap(rng, max_cap));
  if (nodes < 2) return g;
  std::uniform_int_distribution<NodeId> pick(0, nodes - 1);
  for (EdgeId e = 0; e < edges; ++e) {
    NodeId p = pick(rng), q = pick(rng);
    while (q == p) q = pick(rng);
    g.add_edge(p, q, RandomCap(rng, max_cap), RandomCap(rng, max_cap));
  }
  return g;
}

StGraph RandomGridGraph(std::mt19937_64& rng, const Topology& grid, Cost max_cap) {
  StGraph g(grid);
  for (NodeId v = 0; v < grid.num_nodes(); ++v) g.add_tweights(v, RandomCap(rng, max_cap), RandomCap(rng, max_cap));
  grid.ForEachEdge([&](EdgeId e, NodeId, NodeId) { g.add_to_edge_slot(e, RandomCap(rng, max_cap), RandomCap(rng, max_cap)); });
  return g;
}

Energy BruteForceMinCut(const StGraph& graph) {
  const NodeId n = graph.num_nodes();
  if (n > 20) throw Error("BruteForceMinCut: too many nodes");
  Energy best = 0;
  bool found = false;
  Labeling side(n);
  for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
    for (NodeId v = 0; v < n; ++v) side[v] = (mask >> v) & 1;
    const Energy c = graph.CutCapacity(side);
    if (!found || c < best) best = c;
    found = true;
  }
  return best;
}

Model RandomModel(std::mt19937_64& rng, const Topology& topology, Label labels, Cost max_unary,
                  const Pairwise& pairwise, Cost max_weight) {
  Model m;
  m.topology = topology;
  m.num_labels = labels;
  m.pairwise = pairwise;
  std::uniform_int_distribution<Cost> unary(0, max_unary);
  m.unary.resize(static_cast<std::size_t>(topology.num_nodes()) * labels);
  for (Cost& c : m.unary) c = unary(rng);
  if (max_weight != 1) {
    std::uniform_int_distribution<Cost> weight(0, max_weight);
    m.edge_weights.resize(static_cast<std::size_t>(topology.num_edge_slots()));
    for (Cost& w : m.edge_weights) w = weight(rng);
  }
  return m;
}

Result BpStartByHand(const Model& model) {
  SolveOptions bp;
  bp.solver = "tbb-bp";
  bp.max_iterations = 2;
  bp.bp.schedule = "tiled";
  bp.bp.inner_iterations = 2;
  bp.bp.coarse_to_fine = true;
  return Solve(model, bp);
}

void ExpectSwapRefusesFrequentOrder(const Model& model, SolveOptions options) {
  options.label_order = LabelOrder::kFrequent;
  const Result refused = Solve(model, options);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("label order frequent orders labels, and swap moves are label pairs"),
            std::string::npos)
      << refused.message;
}

void ExpectStoppedSolvesLeaveTheKeptCutUsable(const std::string& solver) {
  std::mt19937_64 rng(41);
  Model m = RandomModel(rng, Topology::Grid2D(96, 80, 4), 2, 40, Pairwise{PairwiseKind::kPotts, 6, 0, {}}, 5);
  SolveOptions kept;
  kept.solver = solver;
  kept.kept_cut = std::make_shared<KeptCut>();
  SolveOptions stopping = kept;
  stopping.callback = [](const IterationRecord&) { return false; };
  SolveOptions plain;
  plain.solver = solver;
  // A solve on the kept graph may finish before the engine first polls (local repairs, no change at
  // all); then it must be exact like any finished solve. A fresh solve of this model always stops.
  auto solve_stopped = [&](const std::string& what, bool must_stop) {
    const Result r = Solve(m, stopping);
    ASSERT_TRUE(r.ok) << what << ": " << r.message;
    const bool stopped = r.message.find("stopped early") != std::string::npos;
    EXPECT_TRUE(stopped || !must_stop) << what << ": " << r.message;
    EXPECT_EQ(r.has_lower_bound, !stopped) << what << ": " << r.message;
    if (!stopped) EXPECT_EQ(r.energy, Solve(m, plain).energy) << what << ": " << r.message;
  };
  auto expect_as_plain = [&](const std::string& what) {
    const Result r = Solve(m, kept);
    const Result reference = Solve(m, plain);
    ASSERT_TRUE(r.ok) << what << ": " << r.message;
    ASSERT_TRUE(reference.ok) << reference.message;
    EXPECT_EQ(r.energy, reference.energy) << what << ": " << r.message;
    EXPECT_EQ(r.flow, reference.flow) << what;
    EXPECT_TRUE(r.has_lower_bound) << what;
    EXPECT_EQ(r.lower_bound, reference.lower_bound) << what;
  };
  auto new_unary_costs = [&] {
    for (std::size_t i = 0; i < m.unary.size(); i += 7) m.unary[i] = static_cast<Cost>(rng() % 41);
  };
  solve_stopped(solver + ", a first solve", true);
  expect_as_plain(solver + ", the same model after it");
  new_unary_costs();
  solve_stopped(solver + ", a solve on the kept graph", false);
  expect_as_plain(solver + ", the same model after it");
  new_unary_costs();
  expect_as_plain(solver + ", new unary costs");
  expect_as_plain(solver + ", the same model again");
}

Energy BruteForceMinEnergy(const Model& model, Labeling* best) {
  const NodeId n = model.num_nodes();
  double count = 1;
  for (NodeId i = 0; i < n; ++i) count *= model.num_labels;
  if (count > 2e7) throw Error("BruteForceMinEnergy: too many labellings");
  Labeling labels(n, 0), best_labels;
  Energy best_energy = 0;
  bool found = false;
  while (true) {
    const Energy e = EvaluateEnergy(model, labels).total;
    if (!found || e < best_energy) {
      found = true;
      best_energy = e;
      best_labels = labels;
    }
    NodeId i = 0;
    while (i < n && ++labels[i] == model.num_labels) labels[i++] = 0;
    if (i == n) break;
  }
  if (best) *best = best_labels;
  return best_energy;
}

const char* ToString(ThreadLimit limit) {
  switch (limit) {
    case ThreadLimit::kNumThreads: return "num_threads";
    case ThreadLimit::kCallersArena: return "caller's arena";
    case ThreadLimit::kAboveTheCores: return "above the cores";
  }
  return "?";
}

int ThreadsAllowed(ThreadLimit limit) {
  return limit == ThreadLimit::kAboveTheCores ? tbb::info::default_concurrency() : 1;
}

Result SolveUnderThreadLimit(const Model& model, SolveOptions options, ThreadLimit limit, int* most) {
  *most = 0;
  options.num_threads = limit == ThreadLimit::kNumThreads       ? 1
                        : limit == ThreadLimit::kAboveTheCores ? tbb::info::default_concurrency() + 5
                                                               : 0;
  options.callback = [most](const IterationRecord&) {
    *most = std::max(*most, tbb::this_task_arena::max_concurrency());
    return true;
  };
  if (limit != ThreadLimit::kCallersArena) return Solve(model, options);
  Result r;
  tbb::task_arena(1).execute([&] { r = Solve(model, options); });
  return r;
}

}  // namespace mrf::test
