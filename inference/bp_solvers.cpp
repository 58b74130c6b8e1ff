// Model-level BP solvers: options in, Result out, one log record per iteration.
#include "inference/bp_solvers.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "backends/common/bp_engine.h"
#include "mrf/device.h"

namespace mrf {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// `schedule` "auto" is BP-M on the CPU and the tiled schedule on the GPU (which has no BP-M).
bp::Config ConfigFrom(const SolveOptions& options, bool gpu) {
  bp::Config c;
  if (options.bp.schedule == "auto")
    c.schedule = gpu ? bp::Schedule::kTiled : bp::Schedule::kBpm;
  else
    c.schedule = bp::ParseSchedule(options.bp.schedule);
  c.iterations = options.max_iterations;
  c.tile_size = options.bp.tile_size;
  c.inner_iterations = options.bp.inner_iterations;
  c.coarse_to_fine = options.bp.coarse_to_fine;
  // num_threads stays 0 (the calling arena's): mrf::Solve runs every solver on options.num_threads.
  return c;
}

// The per-iteration callback: log, user callback, time limit. `stop_note` says why it stopped early.
bp::IterationCallback Logger(const SolveOptions& options, Result* result, Clock::time_point start,
                             std::string* stop_note) {
  return [&options, result, start, stop_note](const bp::IterationState& s) {
    IterationRecord record;
    record.iteration = s.iteration;
    record.energy = s.energy;
    record.time_ms = MsSince(start);
    if (s.converged) record.note = "converged";
    result->log.push_back(record);
    if (options.callback && !options.callback(record)) {
      *stop_note = "stopped by the callback";
      return false;
    }
    if (options.time_limit_s > 0 && record.time_ms >= options.time_limit_s * 1000.0) {
      *stop_note = "time limit reached";
      return false;
    }
    return true;
  };
}

std::string Describe(const SolveOptions& o, const bp::Config& c, const bp::RunOutput& out, const std::string& stop_note) {
  std::string text = std::string(bp::ToString(c.schedule)) + " BP" +
                     (o.bp.schedule == "auto" ? " (the automatic schedule)" : "") + ", " + std::to_string(out.iterations) +
                     " iteration" + (out.iterations == 1 ? "" : "s");
  if (c.schedule == bp::Schedule::kTiled)
    text += " (tile " + std::to_string(out.grid.tile) + ", " + std::to_string(c.inner_iterations) + " inner)";
  if (c.coarse_to_fine) text += ", coarse-to-fine start";
  if (out.converged) text += ", converged";
  if (!stop_note.empty()) text += ", " + stop_note;
  return text;
}

}  // namespace

void SolveBpCpu(const Model& model, const SolveOptions& options, Result* result) {
  const auto start = Clock::now();
  const bp::Problem problem = bp::PrepareProblem(model);
  const bp::Config config = ConfigFrom(options, false);
  result->timings.setup_ms = MsSince(start);
  const auto solve_start = Clock::now();
  std::string stop_note;
  bp::RunOutput out = bp::RunCpu(problem, config, Logger(options, result, start, &stop_note));
  result->timings.solve_ms = MsSince(solve_start);
  result->labels = std::move(out.best_labels);
  result->iterations = out.iterations;
  result->message = Describe(options, config, out, stop_note);
}

void SolveBpCuda(const Model& model, const SolveOptions& options, Result* result) {
  const auto start = Clock::now();
  const bp::Config config = ConfigFrom(options, true);
  bp::CudaTuning tuning;
  if (const char* launch = std::getenv("MRF_BP_CUDA_LAUNCH")) tuning.launch = bp::ParseCudaLaunch(launch);
  if (const char* kernel = std::getenv("MRF_BP_CUDA_KERNEL")) tuning.kernel = bp::ParseCudaKernel(kernel);
  if (const char* lanes = std::getenv("MRF_BP_LABELS_PER_LANE")) {
    const std::string text = lanes;
    if (text != "2" && text != "4" && text != "8" && text != "16")
      throw Error("MRF_BP_LABELS_PER_LANE must be 2, 4, 8 or 16 (got '" + text + "')");
    tuning.labels_per_lane = std::atoi(lanes);
  }
  if (const char* setup = std::getenv("MRF_BP_CUDA_SETUP")) {
    const std::string text = setup;
    if (text != "host" && text != "device")
      throw Error("MRF_BP_CUDA_SETUP must be host or device (got '" + text + "')");
    tuning.host_setup = text == "host";
  }
  if (const char* mail = std::getenv("MRF_BP_CUDA_MAIL")) {
    const std::string text = mail;
    if (text != "0" && text != "1") throw Error("MRF_BP_CUDA_MAIL must be 0 or 1 (got '" + text + "')");
    tuning.mailbox = text == "1";
  }
  bp::CudaRunner runner(model, config, tuning);
  result->timings.setup_ms = MsSince(start) - runner.times().upload_ms;
  std::string stop_note;
  bp::RunOutput out = runner.Run(Logger(options, result, start, &stop_note));
  result->timings.transfer_ms = runner.times().upload_ms + runner.times().download_ms;
  result->timings.solve_ms = runner.times().solve_ms;
  result->labels = std::move(out.best_labels);
  result->iterations = out.iterations;
  result->message = Describe(options, config, out, stop_note) + " on " + runner.Describe();
}

std::string CudaBpUnavailableReason() {
  if (CudaCompiledIn()) {
    const char* inject = std::getenv("MRF_INJECT_CUDA_FAULT");
    if (inject && std::string(inject) == "nodevice")
      return "no CUDA device found (injected by MRF_INJECT_CUDA_FAULT=nodevice)";
  }
  return CudaUnavailableReason();
}

}  // namespace mrf
