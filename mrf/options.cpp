#include "mrf/options.h"

#include <cmath>

#include "mrf/model.h"

namespace mrf {

const char* ToString(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kMaxFlow: return "maxflow";
    case Algorithm::kExpansion: return "expansion";
    case Algorithm::kSwap: return "swap";
    case Algorithm::kIcm: return "icm";
    case Algorithm::kBeliefPropagation: return "bp";
  }
  return "?";
}

const char* ToString(Device d) {
  switch (d) {
    case Device::kAuto: return "auto";
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
  }
  return "?";
}

const char* ToString(LabelOrder o) {
  switch (o) {
    case LabelOrder::kSequential: return "sequential";
    case LabelOrder::kRandom: return "random";
    case LabelOrder::kFrequent: return "frequent";
  }
  return "?";
}

const char* ToString(StartLabels s) {
  switch (s) {
    case StartLabels::kZero: return "zero";
    case StartLabels::kBeliefPropagation: return "bp";
  }
  return "?";
}

namespace {
template <class Enum>
Enum ParseName(const std::string& name, std::initializer_list<Enum> values, const char* what) {
  std::string accepted;
  for (Enum v : values) {
    if (name == ToString(v)) return v;
    accepted += (accepted.empty() ? "" : ", ") + std::string(ToString(v));
  }
  throw Error(std::string("unknown ") + what + " '" + name + "' (expected one of: " + accepted + ")");
}
}  // namespace

Algorithm ParseAlgorithm(const std::string& name) {
  return ParseName(name,
                   {Algorithm::kAuto, Algorithm::kMaxFlow, Algorithm::kExpansion, Algorithm::kSwap, Algorithm::kIcm,
                    Algorithm::kBeliefPropagation},
                   "algorithm");
}

Device ParseDevice(const std::string& name) {
  return ParseName(name, {Device::kAuto, Device::kCpu, Device::kCuda}, "device");
}

LabelOrder ParseLabelOrder(const std::string& name) {
  return ParseName(name, {LabelOrder::kSequential, LabelOrder::kRandom, LabelOrder::kFrequent}, "label order");
}

StartLabels ParseStartLabels(const std::string& name) {
  return ParseName(name, {StartLabels::kZero, StartLabels::kBeliefPropagation}, "start");
}

bool SolveOptions::IsValid(std::string* error) const {
  auto fail = [&](const std::string& msg) {
    if (error) *error = msg;
    return false;
  };
  // Enums cast from numbers outside their named values ("?" by ToString) would pick no solver, or
  // fall silently into some branch.
  auto unnamed = [](const char* field, int value) {
    return std::string("options.") + field + " holds " + std::to_string(value) + ", which is none of its named values";
  };
  if (std::string(ToString(algorithm)) == "?") return fail(unnamed("algorithm", static_cast<int>(algorithm)));
  if (std::string(ToString(device)) == "?") return fail(unnamed("device", static_cast<int>(device)));
  if (std::string(ToString(label_order)) == "?") return fail(unnamed("label_order", static_cast<int>(label_order)));
  if (std::string(ToString(start)) == "?") return fail(unnamed("start", static_cast<int>(start)));
  if (solver.empty()) return fail("options.solver is empty (use \"auto\" or a solver name)");
  if (maxflow_backend.empty()) return fail("options.maxflow_backend is empty (use \"auto\" or an engine name)");
  if (max_iterations < 1) return fail("options.max_iterations must be >= 1 (got " + std::to_string(max_iterations) + ")");
  if (!(time_limit_s >= 0) || std::isinf(time_limit_s))
    return fail("options.time_limit_s must be a finite number >= 0 (got " + mrf::NumberText(time_limit_s) + ")");
  if (num_threads < 0) return fail("options.num_threads must be >= 0 (got " + std::to_string(num_threads) + ")");
  if (bp.schedule != "auto" && bp.schedule != "bpm" && bp.schedule != "sync" && bp.schedule != "tiled")
    return fail("options.bp.schedule must be auto, bpm, sync or tiled (got '" + PrintableText(bp.schedule) + "')");
  if (bp.tile_size < 0) return fail("options.bp.tile_size must be >= 0 (got " + std::to_string(bp.tile_size) + ")");
  if (bp.inner_iterations < 1)
    return fail("options.bp.inner_iterations must be >= 1 (got " + std::to_string(bp.inner_iterations) + ")");
  if (start != StartLabels::kZero && !initial_labels.empty())
    return fail(std::string("options.start is '") + ToString(start) + "' but initial_labels are given too (use one)");
  return true;
}

}  // namespace mrf
