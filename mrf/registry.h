#pragma once
/// @file registry.h
/// @brief Solvers by name, with "compiled in" and "available now" queries and the `auto` choice.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mrf/options.h"
#include "mrf/result.h"
#include "mrf/st_graph.h"

namespace mrf {

struct Model;

/// One registered solver.
struct SolverEntry {
  std::string name;                        ///< Command-line name, e.g. "cpu-bk".
  Algorithm algorithm = Algorithm::kMaxFlow;  ///< What it computes.
  Device device = Device::kCpu;            ///< Where it runs.
  std::string summary;                     ///< One line for listings and --help.
  int priority = 0;                        ///< `auto` prefers higher values among solvers of one device
                                           ///< (with the device on auto, GPU solvers come first).
  bool compiled_in = true;                 ///< False for GPU solvers in a CPU-only build.
  /// Empty when the solver can run now; otherwise why not ("no CUDA device found").
  std::function<std::string()> unavailable_reason;
  /// Binary max-flow engines: creates a fresh engine (null for other solvers).
  std::function<std::unique_ptr<MaxFlowEngine>()> make_engine;
  /// Solves a model; throws mrf::Error on failure. Filled automatically for engines.
  /// Must set labels, and may set lower bound, flow, timings, iterations, log and message.
  std::function<void(const Model&, const SolveOptions&, Result*)> solve;
};

/// The table of solvers. Registry::Global() holds every solver built into the library.
class Registry {
 public:
  /// The registry with every built-in solver (CUDA ones marked not compiled in when absent).
  static const Registry& Global();

  /// Adds an entry; engine entries get a model-level `solve` (one graph cut) when none is given.
  void Add(SolverEntry entry);
  /// All entries, in registration order.
  const std::vector<SolverEntry>& entries() const { return entries_; }
  /// The entry of that name, or null.
  const SolverEntry* Find(const std::string& name) const;
  /// Names of all entries, optionally only those of one algorithm (kAuto = all).
  std::vector<std::string> Names(Algorithm algorithm = Algorithm::kAuto) const;
  /// "cpu-bk, tbb-pr, cuda-pr": for error messages and --help.
  std::string NameList(Algorithm algorithm = Algorithm::kAuto) const;
  /// True when the named solver exists and was compiled into this build.
  bool IsCompiledIn(const std::string& name) const;
  /// True when the named solver can run now; otherwise `why` says why not.
  bool IsAvailable(const std::string& name, std::string* why = nullptr) const;

  /// Chooses a solver. `name` is a solver name or "auto"; with "auto" the highest-priority
  /// available entry of `algorithm` and `device` is taken (device kAuto: GPU first, then CPU),
  /// and `note` records any preferred solver that was skipped and why. Throws mrf::Error with a
  /// one-line message for an unknown name, a solver not compiled in, not available, or of another
  /// algorithm than a specific `algorithm` asked for.
  /// `accepts`, when given, returns "" for an entry that can take the problem at hand, else why
  /// not (a grid-only engine facing an edge list); `auto` skips such entries, a named one fails.
  const SolverEntry& Choose(const std::string& name, Algorithm algorithm, Device device,
                            std::string* note = nullptr,
                            const std::function<std::string(const SolverEntry&)>& accepts = {}) const;

 private:
  std::vector<SolverEntry> entries_;
};

/// Adds every solver built into the library (defined in inference/builtin_solvers.cpp).
void RegisterBuiltinSolvers(Registry& registry);

}  // namespace mrf
