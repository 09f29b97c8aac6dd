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

// Whether timings in microseconds spread too widely for their median to stand for the pass:
// the median more than 15% and more than 2 us above the fastest sample. On the H100 a steady
// pass keeps its median within ~1-2 us of its minimum (within 15% at the launch-bound small
// shapes); twice in 2026-11-27's runs a whole stretch of one shape's samples ran 15 us slower
// (median 64 us against a minimum of 50), which read as a regression until the run was repeated.
bool spread_too_wide_us(const TimingStats& us);

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
