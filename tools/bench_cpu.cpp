// CPU timing for `normkit bench`: std::chrono around one call (median over repetitions, after a
// warm-up call), and a ceiling from a large multithreaded host memcpy. Caches are not flushed
// here; the default CPU shapes are larger than any last-level cache anyway.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench_data.h"
#include "bench_runner.h"
#include "dtype_names.h"
#include "host_tensor.h"
#include "text_format.h"

namespace nktool {
namespace {

constexpr int kCopyReps = 10;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(' '));
        return name;
      }
    }
  }
  return "unknown CPU";
}

unsigned thread_count() { return std::max(1u, std::thread::hardware_concurrency()); }

// memcpy split into one contiguous piece per hardware thread, as the CPU backend spreads rows.
void parallel_copy(unsigned char* dst, const unsigned char* src, size_t bytes) {
  const unsigned threads = thread_count();
  std::vector<std::thread> pool;
  const size_t piece = (bytes + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const size_t begin = std::min(bytes, t * piece), end = std::min(bytes, begin + piece);
    if (begin < end) pool.emplace_back([=] { std::memcpy(dst + begin, src + begin, end - begin); });
  }
  for (std::thread& th : pool) th.join();
}

class CpuRunner final : public BenchRunner {
 public:
  CpuRunner(const BenchConfig& config, size_t pool_elements)
      : config_(config), pool_(config.dtype, pool_elements, 0x5eedULL) {}

  std::string device_name() const override {
    return strprintf("%s (%u logical cores)", cpu_model_name().c_str(), thread_count());
  }

  std::string timing_method() const override {
    return strprintf("std::chrono around one call after one warm-up call, caches not flushed; "
                     "median of %d", config_.reps);
  }

  CopyCeiling measure_copy() override {
    const size_t bytes = size_t{256} << 20;
    AlignedBytes src(bytes), dst(bytes);  // both written once: pages are resident before timing
    auto* s = static_cast<unsigned char*>(src.data());
    auto* d = static_cast<unsigned char*>(dst.data());
    parallel_copy(d, s, bytes);
    std::vector<double> us;
    for (int i = 0; i < kCopyReps; ++i) {
      const Stopwatch sw;
      parallel_copy(d, s, bytes);
      us.push_back(sw.elapsed_us());
    }
    CopyCeiling c;
    c.buffer_bytes = bytes;
    c.reps = kCopyReps;
    c.us = summarize(us);
    c.gbps = 2.0 * static_cast<double>(bytes) / (c.us.median * 1e-6) / 1e9;
    c.method = strprintf("host memcpy of %s on %u threads (bytes read + written), median of %d",
                         format_bytes(bytes).c_str(), thread_count(), kCopyReps);
    return c;
  }

  TimingStats time_copy(double bytes) override {
    const size_t half = std::max<size_t>(static_cast<size_t>(bytes / 2), 1);
    AlignedBytes src(half), dst(half);  // written once on allocation: pages resident
    auto* s = static_cast<unsigned char*>(src.data());
    auto* d = static_cast<unsigned char*>(dst.data());
    return time_calls([&] { parallel_copy(d, s, half); });
  }

  ShapeResult run(const Shape& shape, bool /*explain: CUDA only*/) override {
    const std::string ctx = "shape " + format_shape(shape) + " " + short_name(config_.dtype);
    const size_t n = static_cast<size_t>(shape.elements());
    const size_t tensor_bytes = n * nk_dtype_size(config_.dtype);
    const size_t vector_bytes =
        static_cast<size_t>(shape.hidden) * nk_dtype_size(config_.weight_dtype);
    ShapeResult result;
    result.shape = shape;

    // Every buffer is written once on allocation (poison), so no page faults land in timings.
    std::vector<AlignedBytes> keep;
    keep.reserve(16);
    auto alloc = [&](size_t bytes) { return keep.emplace_back(bytes).data(); };
    BenchPointers p;
    p.x = alloc(tensor_bytes);
    fill_random(p.x, n, 0);
    p.weight = alloc(vector_bytes);
    const std::vector<unsigned char> w = bench_weight(config_, shape.hidden, 7);
    std::memcpy(p.weight, w.data(), w.size());
    if (config_.bias) {
      p.bias = alloc(vector_bytes);
      const std::vector<unsigned char> b = bench_bias(config_, shape.hidden, 11);
      std::memcpy(p.bias, b.data(), b.size());
    }
    p.rstd = static_cast<float*>(alloc(static_cast<size_t>(shape.rows) * sizeof(float)));
    if (config_.residual) {
      p.residual = alloc(tensor_bytes);
      fill_random(p.residual, n, pool_.elements() / 3);
      p.residual_out = alloc(tensor_bytes);
    }
    if (config_.fwd) {
      const size_t y_bytes = n * nk_dtype_size(y_dtype(config_));
      p.y = alloc(y_bytes);
      if (config_.quant != NK_QUANT_NONE) {
        p.scale = static_cast<float*>(alloc(sizeof(float)));
        *p.scale = 1.0f;
        p.amax = static_cast<float*>(alloc(sizeof(float)));
        const size_t sb = static_cast<size_t>(scales_bytes(shape, config_));
        if (sb) p.scales = alloc(sb);
        if (config_.transposed) p.y_t = alloc(y_bytes);
      }
    }
    if (config_.bwd) {
      p.dy = alloc(tensor_bytes);
      fill_random(p.dy, n, pool_.elements() / 2 + 1);
      p.dx = alloc(tensor_bytes);
      p.dweight = alloc(vector_bytes);
      if (config_.bias) p.dbias = alloc(vector_bytes);
    }

    if (config_.fwd) {
      const nk_rms_norm_fwd_args args = bench_fwd_args(shape, config_, p);
      result.fwd.us = time_calls(
          [&] { check_bench_status(nk_rms_norm_fwd(&args, NK_BACKEND_CPU, nullptr), "nk_rms_norm_fwd", ctx); });
      result.fwd.measured = true;
      result.fwd.bytes = fwd_bytes(shape, config_);
    }
    if (config_.bwd) {
      // rstd (and residual_out) from one untimed forward; y goes to dx if y was not allocated.
      BenchPointers pre = p;
      if (!pre.y) pre.y = p.dx;
      const nk_rms_norm_fwd_args fwd = bench_fwd_args(shape, config_, pre);
      check_bench_status(nk_rms_norm_fwd(&fwd, NK_BACKEND_CPU, nullptr), "nk_rms_norm_fwd", ctx);

      nk_rms_norm_bwd_args args = bench_bwd_args(shape, config_, p);
      check_bench_status(nk_rms_norm_bwd_workspace_size(&args, NK_BACKEND_CPU, &p.workspace_bytes),
                   "nk_rms_norm_bwd_workspace_size", ctx);
      args.workspace = p.workspace_bytes ? alloc(p.workspace_bytes) : nullptr;
      args.workspace_bytes = p.workspace_bytes;
      result.bwd.us = time_calls(
          [&] { check_bench_status(nk_rms_norm_bwd(&args, NK_BACKEND_CPU, nullptr), "nk_rms_norm_bwd", ctx); });
      result.bwd.measured = true;
      result.bwd.bytes = bwd_bytes(shape, config_);
      result.bwd.workspace_bytes = p.workspace_bytes;
    }
    return result;
  }

 private:

  void fill_random(void* dst, size_t elements, size_t start) {
    pool_.tile_into(elements, start, [&](size_t offset, const void* src, size_t bytes) {
      std::memcpy(static_cast<unsigned char*>(dst) + offset, src, bytes);
    });
  }

  template <typename Call>
  TimingStats time_calls(Call&& call) {
    call();  // warm-up
    std::vector<double> us;
    for (int i = 0; i < config_.reps; ++i) {
      const Stopwatch sw;
      call();
      us.push_back(sw.elapsed_us());
    }
    return summarize(us);
  }

  BenchConfig config_;
  RandomPool pool_;
};

}  // namespace

std::unique_ptr<BenchRunner> make_cpu_runner(const BenchConfig& config, size_t pool_elements) {
  return std::make_unique<CpuRunner>(config, pool_elements);
}

}  // namespace nktool
