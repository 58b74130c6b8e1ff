#pragma once
/// @file types.h
/// @brief The integer vocabulary shared by every part of mrf.
///
/// Costs are integers so that exact max-flow (CPU and GPU) sees exactly the energy that the reference
/// evaluator scores: one term fits in 32 bits, every sum is taken in 64 bits.

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrf {

using NodeId = std::int32_t;   ///< Index of a node (pixel, voxel or graph vertex).
using EdgeId = std::int64_t;   ///< Index of an edge slot (see Topology).
using Label = std::int32_t;    ///< A label value, 0 <= label < num_labels.
using Cost = std::int32_t;     ///< One unary or pairwise term, or one edge capacity.
using Energy = std::int64_t;   ///< Sums of terms: energies, flows, terminal capacities.
using Labeling = std::vector<Label>;  ///< One label per node.

/// Largest value one term may take.
constexpr Cost kMaxCost = std::numeric_limits<Cost>::max();

/// The error every mrf function throws for bad input; its message is one line that names the problem.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An Error that says a solver cannot represent this model's values (belief propagation's 32-bit
/// messages, say), not that the input or the options are wrong: `auto` may turn to another algorithm.
class ModelRefused : public Error {
 public:
  using Error::Error;
};

/// Adds two energies, throwing mrf::Error naming `what` if the 64-bit sum would overflow.
Energy CheckedAdd(Energy a, Energy b, const char* what);

}  // namespace mrf
