// Host time of one C API call on the CPU backend, bf16, as a caller sees it (thread hand-off
// included): `cpu_call_times ROWS HIDDEN [fwd|bwd|fwd_residual|fwd_tensor] [REPS]` prints the median, p10 and p90 in
// microseconds of REPS calls (default 400) after one warm-up call, inputs random and never
// zero, caches not flushed. Built and run by bench/cpu_ab.sh, which alternates two builds of
// the library:
//   g++ -O2 -std=c++17 -Iinclude bench/cpu_call_times.cpp -Lbuild/src -lnormkit -o cpu_call_times
#include <normkit/normkit.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ROWS HIDDEN [fwd|bwd|fwd_residual|fwd_tensor] [REPS]\n",
                 argv[0]);
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), hidden = std::atoll(argv[2]);
  const std::string pass = argc > 3 ? argv[3] : "fwd";
  // fwd_tensor: the forward with per-tensor e4m3 codes (scale 1) and amax.
  const bool bwd = pass == "bwd", residual = pass == "fwd_residual", tensor = pass == "fwd_tensor";
  if (!bwd && !residual && !tensor && pass != "fwd") {
    std::fprintf(stderr, "the pass is fwd, bwd, fwd_residual or fwd_tensor, not %s\n",
                 pass.c_str());
    return 2;
  }
  const int reps = argc > 4 ? std::atoi(argv[4]) : 400;
  if (rows < 1 || hidden < 1 || reps < 1) {
    std::fprintf(stderr, "ROWS, HIDDEN and REPS must be positive\n");
    return 2;
  }
  // bf16 values in [1, 2) with random mantissas (the top 7 bits), weight near 1.
  std::mt19937 rng(1234);
  auto random_bf16 = [&] { return static_cast<uint16_t>(0x3f80 + (rng() & 0x7f)); };
  const size_t n = static_cast<size_t>(rows * hidden);
  std::vector<uint16_t> x(n), dy(n), y(n), dx(n), res(n), res_out(n),
      w(static_cast<size_t>(hidden)), dw(static_cast<size_t>(hidden));
  for (auto& v : x) v = random_bf16();
  for (auto& v : res) v = random_bf16();
  for (auto& v : dy) v = random_bf16();
  for (auto& v : w) v = random_bf16();
  std::vector<float> rstd(static_cast<size_t>(rows));

  nk_rms_norm_fwd_args f;
  nk_rms_norm_fwd_args_init(&f);
  f.rows = rows;
  f.hidden = hidden;
  f.x = x.data();
  f.x_dtype = NK_BFLOAT16;
  f.weight = w.data();
  f.weight_dtype = NK_BFLOAT16;
  f.y = y.data();
  f.y_dtype = NK_BFLOAT16;
  f.rstd = rstd.data();
  f.eps = 1e-6f;
  if (residual) {
    f.residual = res.data();
    f.residual_out = res_out.data();
  }
  std::vector<uint8_t> codes(tensor ? n : 0);
  const float unit_scale = 1.0f;
  float amax = 0.0f;
  if (tensor) {
    f.quant = NK_QUANT_TENSOR;
    f.y = codes.data();
    f.y_dtype = NK_FLOAT8_E4M3;
    f.scale = &unit_scale;
    f.amax = &amax;
  }
  nk_rms_norm_bwd_args b;
  nk_rms_norm_bwd_args_init(&b);
  b.rows = rows;
  b.hidden = hidden;
  b.x = x.data();
  b.x_dtype = NK_BFLOAT16;
  b.weight = w.data();
  b.weight_dtype = NK_BFLOAT16;
  b.dy = dy.data();
  b.dy_dtype = NK_BFLOAT16;
  b.rstd = rstd.data();
  b.dx = dx.data();
  b.dweight = dw.data();
  size_t workspace_bytes = 0;
  if (nk_rms_norm_fwd(&f, NK_BACKEND_CPU, nullptr) != NK_SUCCESS ||
      nk_rms_norm_bwd_workspace_size(&b, NK_BACKEND_CPU, &workspace_bytes) != NK_SUCCESS) {
    std::fprintf(stderr, "normkit: %s\n", nk_last_error());
    return 1;
  }
  std::vector<unsigned char> workspace(workspace_bytes + 1);
  b.workspace = workspace.data();
  b.workspace_bytes = workspace_bytes;

  auto call = [&] {
    return bwd ? nk_rms_norm_bwd(&b, NK_BACKEND_CPU, nullptr)
               : nk_rms_norm_fwd(&f, NK_BACKEND_CPU, nullptr);
  };
  if (call() != NK_SUCCESS) {
    std::fprintf(stderr, "normkit: %s\n", nk_last_error());
    return 1;
  }
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const nk_status status = call();
    const auto end = std::chrono::steady_clock::now();
    if (status != NK_SUCCESS) {
      std::fprintf(stderr, "normkit: %s\n", nk_last_error());
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("%lldx%lld %s median %.1f us p10 %.1f p90 %.1f\n", static_cast<long long>(rows),
              static_cast<long long>(hidden), pass.c_str(), us[us.size() / 2],
              us[us.size() / 10], us[us.size() * 9 / 10]);
  return 0;
}
