// One thread, 256 rows of 4096 normal(0,1) floats read from 2 rows (in L1, as the forward's row buffer), e4m3, best of 30, ns per element.
// Built against build/src/libnormkit.a (the clones) or against quantize_span.cpp compiled alone per -march level (micro_levels.txt).
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "cpu/quantize_span.h"
int main() {
  const int64_t n = 4096, rows = 256;
  std::vector<float> v(n * rows); std::mt19937 rng(1); std::normal_distribution<float> d(0, 1);
  for (auto& x : v) x = d(rng);
  std::vector<uint8_t> y(n * rows), s(n * rows / 32); std::vector<float> fs(n * rows / 32);
  float sink = 0; double best[4] = {1e9, 1e9, 1e9, 1e9};
  for (int rep = 0; rep < 30; ++rep) {
    for (int m = 0; m < 4; ++m) {
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < rows; ++r) {
        const float* vr = v.data() + (r % 2) * n; uint8_t* yr = y.data() + r * n;
        if (m == 0) sink += normkit::cpu::quantize_mx_blocks(yr, s.data() + r * n / 32, vr, n, NK_FLOAT8_E4M3);
        else if (m == 1) { normkit::cpu::quantize_span(yr, vr, n, 0.5f, NK_FLOAT8_E4M3); sink += normkit::cpu::abs_max(vr, n); }
        else if (m == 2) sink += normkit::cpu::quantize_scaled_blocks(yr, fs.data(), vr, n, n, 448.f, 0.f, NK_FLOAT8_E4M3);
        else sink += normkit::cpu::quantize_scaled_blocks(yr, fs.data() + r * n / 128, vr, n, 128, 448.f, 0.f, NK_FLOAT8_E4M3);
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (us < best[m]) best[m] = us;
    }
  }
  std::printf("ns/element: mx %.3f  tensor %.3f  token %.3f  block %.3f (%g)\n", best[0] * 1e3 / (n * rows), best[1] * 1e3 / (n * rows), best[2] * 1e3 / (n * rows), best[3] * 1e3 / (n * rows), sink);
}
