#include "timing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace nktool {

TimingStats summarize(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("summarize: no timing samples");
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  TimingStats stats;
  stats.count = static_cast<int>(n);
  stats.min = samples.front();
  stats.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  // Nearest-rank percentile: the smallest sample with at least 90% of samples <= it.
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  stats.p90 = samples[std::max<size_t>(rank, 1) - 1];
  return stats;
}

bool spread_too_wide_us(const TimingStats& us) {
  constexpr double kRelative = 1.15, kAbsoluteUs = 2.0;
  return us.count > 0 && us.median > kRelative * us.min && us.median - us.min > kAbsoluteUs;
}

}  // namespace nktool
