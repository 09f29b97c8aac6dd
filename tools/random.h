// Fast deterministic pseudo-random numbers for test inputs and benchmark data (SplitMix64:
// tiny state, good enough statistics, and the same stream on every platform).
#pragma once

#include <cstdint>

namespace nktool {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 24 random bits (exact in float32).
  float uniform01() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform01(); }

  // Magnitude uniform in [lo, hi) with a random sign: never zero when lo > 0.
  float signed_magnitude(float lo, float hi) {
    const float m = uniform(lo, hi);
    return (next_u64() & 1) ? m : -m;
  }

  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }

  bool coin() { return next_u64() & 1; }

 private:
  uint64_t state_;
};

}  // namespace nktool
