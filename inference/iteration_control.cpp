#include "inference/iteration_control.h"

#include <sstream>

namespace mrf {

IterationControl::IterationControl(const SolveOptions& options, Result* out)
    : start_(std::chrono::steady_clock::now()),
      time_limit_ms_(options.time_limit_s * 1000.0),
      options_(options),
      out_(out) {}

double IterationControl::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

bool IterationControl::TimeUp() const { return time_limit_ms_ > 0 && elapsed_ms() >= time_limit_ms_; }

bool IterationControl::Record(int iteration, Energy energy, const std::string& note) {
  IterationRecord record;
  record.iteration = iteration;
  record.energy = energy;
  record.time_ms = elapsed_ms();
  record.note = note;
  out_->log.push_back(record);
  out_->iterations = iteration;
  return !options_.callback || options_.callback(out_->log.back());
}

std::string SecondsText(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

}  // namespace mrf
