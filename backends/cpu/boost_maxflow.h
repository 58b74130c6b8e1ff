#pragma once
/// @file boost_maxflow.h
/// @brief Boost Graph's boykov_kolmogorov_max_flow behind the binary-cut interface ("boost-bk").
///
/// An independent reference: tests and benchmarks compare every engine with it.

#include <memory>

#include "mrf/st_graph.h"

namespace mrf {

/// Creates the Boost Graph reference engine.
std::unique_ptr<MaxFlowEngine> MakeBoostMaxFlowEngine();

}  // namespace mrf
