#pragma once
/// @file cuda_push_relabel.h
/// @brief `cuda-pr`: exact grid push-relabel max-flow on an NVIDIA GPU (no CUDA headers here).
///
/// Only builds with CUDA (MRF_HAVE_CUDA) define the factory; callers guard with `#if MRF_HAVE_CUDA`.
///
/// Environment switches (read at each solve):
/// - `MRF_CUDA_DEBUG_SYNC=1`: synchronise and check for errors after every launch (no CUDA graphs);
/// - `MRF_INJECT_CUDA_FAULT=oom` or `=launch`: make the next solve fail as if the GPU ran out of
///   memory (a real, impossible cudaMalloc) or a kernel launch failed (a real launch with a bad
///   configuration), to test the error messages and the CPU fallback;
/// - `MRF_PR_TUNING=name=value,...`: tuning overrides (see PushRelabelTuning).

#include <cstddef>
#include <memory>

#include "backends/cpu/push_relabel_engine.h"

namespace mrf {

/// Creates the CUDA push-relabel engine ("cuda-pr"). Solving throws mrf::Error with a one-line
/// message when no GPU is usable, memory runs out or a launch fails.
std::unique_ptr<PushRelabelEngine> MakeCudaPushRelabelEngine(
    const PushRelabelTuning& tuning = PushRelabelTuning::FromEnvironment());

/// Device-memory bandwidth of GPU 0 by a device-to-device copy of `bytes` (bytes read plus bytes
/// written per second, median of `repeat` timed copies after a warm-up), in GB/s; for benchmark
/// reports. Throws mrf::Error without a usable GPU.
double MeasureCudaCopyBandwidth(std::size_t bytes, int repeat);

}  // namespace mrf
