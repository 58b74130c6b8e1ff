#pragma once
/// @file tbb_push_relabel.h
/// @brief `tbb-pr`: the grid push-relabel of `cuda-pr` run as TBB loops on the CPU.
///
/// Same tiles, same per-node steps, same schedule as the GPU engine, so the two produce identical
/// states step by step; also a parallel push-relabel for machines without a GPU.

#include <memory>

#include "backends/cpu/push_relabel_engine.h"

namespace mrf {

/// Creates the TBB push-relabel engine ("tbb-pr").
std::unique_ptr<PushRelabelEngine> MakeTbbPushRelabelEngine(
    const PushRelabelTuning& tuning = PushRelabelTuning::FromEnvironment());

}  // namespace mrf
