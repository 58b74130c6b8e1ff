#pragma once
// Shared helpers for the tests: random problems, brute-force references, data paths, GPU skips.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "mrf/device.h"
#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/result.h"
#include "mrf/st_graph.h"

namespace mrf::test {

/// Sets an environment variable for the object's lifetime, then restores its earlier value (or unsets it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

/// Path of a file under ../shared/data, or "" when the shared data is absent.
std::string SharedDataPath(const std::string& relative);
/// Path under the source tree.
std::string SourcePath(const std::string& relative);
/// A fresh scratch directory under the build tree for this test.
std::string ScratchDir(const std::string& name);

/// What a program printed and how it ended.
struct CommandResult {
  int exit_code = -1;   ///< Exit status (-1 if it did not exit normally).
  std::string out;      ///< Standard output.
  std::string err;      ///< Standard error.
};
/// Runs a shell command line and captures its output. Programs are in AppPath().
CommandResult RunCommand(const std::string& command_line);
/// Path of a built program, e.g. AppPath("mrf-maxflow").
std::string AppPath(const std::string& program);
/// Runs `program -q ARGS` and expects bad-input handling: exit `exit_code` (1, or 2 for a command
/// line CLI11 rejects) and exactly one line on stderr, "PROGRAM: error: ...", containing `phrase`.
void ExpectOneLineError(const std::string& program, const std::string& args, const std::string& phrase,
                        int exit_code = 1);
/// For a run given paths that hold control characters (a newline, say): checks that no line of its stdout
/// or stderr was split by one, that is, that no line starts with what follows such a character in one of
/// `paths`. The lines that name a path show it with '?' (app::OneLine); callers check those lines.
void ExpectNoLineSplitByPaths(const CommandResult& r, const std::vector<std::string>& paths);
/// The four bytes of v, most significant first (PNG fields and lengths).
std::string BigEndian32(std::uint32_t v);
/// One PNG chunk (length, type, data, CRC-32), for crafting PNG files in tests. Computes the CRC bit by
/// bit, independently of the image reader's table.
std::string PngChunk(const std::string& type, const std::string& data);
/// True when the registry's `auto` choice finds a solver of this algorithm on some device; otherwise the
/// registry's reason goes to *why (when given).
bool HasSolver(Algorithm algorithm, std::string* why = nullptr);
/// Checks a GPU move solver's registry entry (algorithm, device, compiled in exactly when CUDA is) and, where no GPU
/// is usable, that asking for it by name fails naming it while `auto` runs `cpu_solver` instead.
void ExpectGpuSolverRegisteredWithCpuFallback(const std::string& gpu_solver, Algorithm algorithm,
                                              const std::string& cpu_solver);

/// A general graph with random terminal and edge capacities in [0, max_cap] (some zero).
StGraph RandomGeneralGraph(std::mt19937_64& rng, NodeId nodes, EdgeId edges, Cost max_cap);
/// A grid-shaped graph with random capacities in [0, max_cap].
StGraph RandomGridGraph(std::mt19937_64& rng, const Topology& grid, Cost max_cap);
/// Minimum cut by enumerating all 2^n cuts (n <= 20).
Energy BruteForceMinCut(const StGraph& graph);

/// A random model with random unary costs in [0, max_unary] and the given pairwise term.
Model RandomModel(std::mt19937_64& rng, const Topology& topology, Label labels, Cost max_unary,
                  const Pairwise& pairwise, Cost max_weight = 1);
/// tbb-bp run as SolveOptions::start documents its belief-propagation start (tiled, 2 outer x 2 inner
/// iterations, coarse-to-fine): the labelling expansion and swap must start from with --start bp.
Result BpStartByHand(const Model& model);
/// The minimum energy over all labellings (L^n <= a few million), and one minimiser.
Energy BruteForceMinEnergy(const Model& model, Labeling* best = nullptr);

/// Solving `model` with `options` (a swap solver) in label order frequent is refused in one line saying
/// why: the order ranks labels, and swap's moves are label pairs.
void ExpectSwapRefusesFrequentOrder(const Model& model, SolveOptions options);

/// Solves through one KeptCut with `solver` that the callback stops at its first poll, each followed by
/// a solve run to the end: of the same model (no capacity changed), of new unary costs, and after a
/// stopped solve on the kept graph itself. Every finished solve must equal a plain solve of its model
/// (energy, flow, bound): a stopped cut is never taken for a solved one.
void ExpectStoppedSolvesLeaveTheKeptCutUsable(const std::string& solver);

/// How a test limits a solve's threads: options.num_threads = 1; a caller's tbb::task_arena(1) around
/// Solve with num_threads 0; or num_threads five above the cores (which must give the cores).
enum class ThreadLimit { kNumThreads, kCallersArena, kAboveTheCores };
/// "num_threads", "caller's arena" or "above the cores", for messages.
const char* ToString(ThreadLimit limit);
/// The most threads a solve under `limit` may use: 1, or the cores above them.
int ThreadsAllowed(ThreadLimit limit);
/// Solves `model` under `limit`. `*most` gets the largest tbb::this_task_arena::max_concurrency() any
/// iteration callback saw: a solver's callback runs where its loops do (options.callback is replaced).
Result SolveUnderThreadLimit(const Model& model, SolveOptions options, ThreadLimit limit, int* most);

}  // namespace mrf::test

/// Skips the current test, printing why, when no CUDA device can be used.
#define MRF_SKIP_WITHOUT_CUDA()                                                        \
  do {                                                                                 \
    const std::string mrf_why_no_cuda = ::mrf::CudaUnavailableReason();                \
    if (!mrf_why_no_cuda.empty()) GTEST_SKIP() << "no GPU: " << mrf_why_no_cuda;        \
  } while (0)
