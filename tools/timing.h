// Summaries of repeated timings, and a host stopwatch.
#pragma once

#include <chrono>
#include <vector>

namespace nktool {

// Order statistics of a set of timings (any unit; the caller keeps it consistent).
struct TimingStats {
  double median = 0;
  double min = 0;
  double p90 = 0;  // 90th percentile, nearest rank
  int count = 0;
};

// Throws std::invalid_argument if `samples` is empty.
TimingStats summarize(std::vector<double> samples);

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double elapsed_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace nktool
