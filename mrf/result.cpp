#include "mrf/result.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mrf {

namespace {
std::string Ms(double ms) {
  if (ms < 0) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(ms < 10 ? 3 : 1) << ms << " ms";
  return out.str();
}
}  // namespace

std::string Result::BriefReport() const {
  std::ostringstream out;
  out << "status:    " << (ok ? "ok" : "FAILED") << " (" << message << ")\n";
  out << "backend:   " << (backend_used.empty() ? "-" : backend_used);
  if (!backend_requested.empty() && backend_requested != backend_used) out << " (requested " << backend_requested << ")";
  out << "\n";
  if (!fallback_reason.empty()) out << "fallback:  " << fallback_reason << "\n";
  if (ok) {
    out << "energy:    " << energy;
    if (cost_scale != 1.0) out << " (costs scaled by " << cost_scale << ")";
    out << "\n";
    if (has_lower_bound) out << "bound:     " << lower_bound << "\n";
    if (flow >= 0) out << "flow:      " << flow << "\n";
  }
  out << "time:      " << Ms(timings.total_ms) << " (solve " << Ms(timings.solve_ms) << ")\n";
  return out.str();
}

std::string Result::FullReport() const {
  std::ostringstream out;
  out << BriefReport();
  out << "timings:   ";
  if (timings.start_ms >= 0) out << "start " << Ms(timings.start_ms) << ", ";
  out << "setup " << Ms(timings.setup_ms) << ", transfer " << Ms(timings.transfer_ms) << ", solve "
      << Ms(timings.solve_ms) << ", total " << Ms(timings.total_ms) << "\n";
  out << "iterations: " << iterations << ", threads: " << threads << "\n";
  for (const IterationRecord& r : log) {
    out << "  [" << r.iteration << "] " << Ms(r.time_ms);
    if (r.energy >= 0) out << "  energy " << r.energy;
    if (!r.note.empty()) out << "  " << r.note;
    out << "\n";
  }
  return out.str();
}

std::string Result::ToJson() const {
  nlohmann::json j;
  j["ok"] = ok;
  j["message"] = message;
  j["backend"] = backend_used;
  j["backend_requested"] = backend_requested;
  j["fallback_reason"] = fallback_reason;
  j["energy"] = energy;
  j["lower_bound"] = has_lower_bound ? nlohmann::json(lower_bound) : nlohmann::json(nullptr);
  j["flow"] = flow >= 0 ? nlohmann::json(flow) : nlohmann::json(nullptr);
  j["cost_scale"] = cost_scale;
  j["start_ms"] = timings.start_ms;
  j["setup_ms"] = timings.setup_ms;
  j["transfer_ms"] = timings.transfer_ms;
  j["solve_ms"] = timings.solve_ms;
  j["time_ms"] = timings.total_ms;
  j["iterations"] = iterations;
  j["threads"] = threads;
  nlohmann::json log_json = nlohmann::json::array();
  for (const IterationRecord& r : log)
    log_json.push_back({{"iteration", r.iteration}, {"energy", r.energy}, {"time_ms", r.time_ms}, {"note", r.note}});
  j["log"] = log_json;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // messages may quote non-UTF-8 paths
}

}  // namespace mrf
