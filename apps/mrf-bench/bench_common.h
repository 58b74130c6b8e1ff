#pragma once
// Helpers several suites of mrf-bench share: medians, table cells, --solvers lists, output files,
// and the synthetic scene's s-t graph with its brush-stroke edits (binary and pushrelabel suites).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mrf-bench/suite.h"
#include "mrf/model.h"
#include "mrf/registry.h"
#include "mrf/st_graph.h"

namespace mrf::bench {

/// Median (the mean of the two middle values for an even count); -1 when there is none.
double Median(std::vector<double> values);

/// `value` printed with `format`, or "-" when it is negative (not measured).
std::string Cell(double value, const char* format);

/// The names of a comma-separated list, empty items dropped.
std::vector<std::string> SplitNames(const std::string& list);

/// True when `wanted` is empty (every solver) or names `name`.
bool IsWanted(const std::vector<std::string>& wanted, const std::string& name);

/// True when the file can be opened for reading.
bool Exists(const std::string& path);

/// --repeat, at most 2 with --quick.
int Repeats(const BenchOptions& options);

/// The registry's solvers that `keep` accepts and `wanted` names (all when empty), in registry order;
/// unavailable ones are left out with a line "# NAME skipped: why".
std::vector<const SolverEntry*> AvailableSolvers(const std::vector<std::string>& wanted,
                                                 const std::function<bool(const SolverEntry&)>& keep);

/// Writes `text` to the --json file `path`; throws mrf::Error when it cannot be opened or written.
void WriteJsonFile(const std::string& path, const std::string& text);

/// Writes one-line JSON objects as an array, one object a line, to the --json file `path`.
void WriteJsonRows(const std::string& path, const std::vector<std::string>& objects);

/// --sizes as square sides checked to lie in 4..16384, or `quick_default` / `full_default` when empty.
std::vector<int> SceneSides(const BenchOptions& options, std::vector<int> quick_default, std::vector<int> full_default);

/// The synthetic scene's s-t graph as users of BK libraries build a Potts segmentation: t-links
/// carry the two data costs (background, label 0, on the source side), n-links the contrast weight
/// in both directions. The cut capacity of a mask is its energy, so the flow is the minimum energy.
StGraph SceneGraph(const Model& model);

/// The pseudo-random stream of the re-solve edits (a 64-bit LCG, the same on every platform).
class EditStream {
 public:
  explicit EditStream(std::uint64_t seed) : state_(seed) {}
  /// The next value in 0..bound-1.
  std::int64_t Next(std::int64_t bound) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((state_ >> 33) % static_cast<std::uint64_t>(bound));
  }

 private:
  std::uint64_t state_;
};

/// A brush stroke on a grid graph: the pixels of the disc of `radius` around (cx, cy) are forced to
/// the foreground (label 1, sink side) or the background. Returns how many pixels it changed.
std::int64_t PaintStroke(StGraph* graph, int cx, int cy, int radius, bool foreground);

/// Throws "FLOW MISMATCH" when a fresh solve of the edited graph disagrees with the re-solve's flow.
void CheckResolvedFlow(const std::string& solver, Energy resolved, const Result& fresh, const StGraph& graph);

}  // namespace mrf::bench
