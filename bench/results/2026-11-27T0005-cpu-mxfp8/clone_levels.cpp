#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "cpu/quantize_span.h"
int main() {
  const int64_t n = 4096, rows = 256;
  std::vector<float> v(n * rows); std::mt19937 rng(1); std::normal_distribution<float> d(0, 1);
  for (auto& x : v) x = d(rng);
  std::vector<uint8_t> y(n * rows), s(n * rows / 32);
  float sink = 0; double best[2] = {1e9, 1e9};
  for (int rep = 0; rep < 30; ++rep) {
    for (int m = 0; m < 2; ++m) {
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < rows; ++r) {
        if (m == 0) sink += normkit::cpu::quantize_mx_blocks(y.data() + r * n, s.data() + r * n / 32, v.data() + r * n, n, NK_FLOAT8_E4M3);
        else { normkit::cpu::quantize_span(y.data() + r * n, v.data() + r * n, n, 0.5f, NK_FLOAT8_E4M3); sink += normkit::cpu::abs_max(v.data() + r * n, n); }
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (us < best[m]) best[m] = us;
    }
  }
  std::printf("ns/element: mx %.3f  tensor(span+absmax) %.3f  (%g)\n", best[0] * 1e3 / (n * rows), best[1] * 1e3 / (n * rows), sink);
}
