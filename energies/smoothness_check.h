#pragma once
/// @file smoothness_check.h
/// @brief Checks of a smoothness term shared by the stereo and restoration parameters (internal to energies/).

#include <cstdint>
#include <string>

#include "mrf/model.h"

namespace mrf {

/// Throws mrf::Error with a one-line message prefixed by `what` ("stereo", "restoration") when
/// lambda or the truncation Vmax is negative, or a table term does not hold num_labels^2 values.
inline void ValidateSmoothness(const Pairwise& smoothness, Label num_labels, const std::string& what) {
  if (smoothness.lambda < 0)
    throw Error(what + ": lambda must be non-negative (got " + std::to_string(smoothness.lambda) + ")");
  if (smoothness.truncation < 0)
    throw Error(what + ": smoothness truncation (Vmax) must be non-negative (got " +
                std::to_string(smoothness.truncation) + ")");
  if (smoothness.kind == PairwiseKind::kTable &&
      static_cast<std::int64_t>(smoothness.table.size()) != std::int64_t{num_labels} * num_labels)
    throw Error(what + ": smoothness table has " + std::to_string(smoothness.table.size()) + " values, expected " +
                std::to_string(num_labels) + " x " + std::to_string(num_labels));
}

}  // namespace mrf
