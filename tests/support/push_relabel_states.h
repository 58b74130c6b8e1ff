#pragma once
// Comparing the raw states of two grid push-relabel engines (cuda-pr against its CPU twin, or one
// schedule against another), shared by the TBB and CUDA push-relabel tests.

#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/push_relabel_engine.h"

namespace mrf::test {

/// Expects the two states to be equal field by field; a failure names `what` and the field.
inline void ExpectSameState(const PushRelabelState& a, const PushRelabelState& b, const std::string& what) {
  EXPECT_EQ(a.x, b.x) << what << ": excess differs";
  EXPECT_EQ(a.h, b.h) << what << ": heights differ";
  EXPECT_EQ(a.r, b.r) << what << ": residuals differ";
}

}  // namespace mrf::test
