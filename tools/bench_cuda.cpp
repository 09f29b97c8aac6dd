// CUDA timing for `normkit bench`, as PEERS.md times the peers: warm up, then per repetition
// flush L2 (cudaMemsetAsync over a scratch buffer of at least twice the L2 size), record an
// event, make one normkit call, record an event; report the median. Before each flush the
// inputs' cached L2 lines go back to normal eviction priority (normkit's kernels read them
// evict-last, and such lines outlive a memset), unless --keep-l2-priority.
#include <stdexcept>

#include "bench_data.h"
#include "bench_runner.h"
#include "dtype_names.h"
#include "text_format.h"

#ifdef NK_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda_memory.h"

namespace nktool {
namespace {

constexpr double kWarmupUs = 25000;  // warm-up time per timed operation (clocks, caches, TLB)
constexpr int kCopyReps = 20;

class CudaRunner final : public BenchRunner {
 public:
  CudaRunner(const BenchConfig& config, size_t pool_elements)
      : config_(config), pool_(config.dtype, pool_elements, 0x5eedULL) {
    cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
    cuda_check(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // At least twice the L2 and never less than 64 MiB, so nothing of the previous call's
    // data survives in L2.
    const size_t l2 = static_cast<size_t>(std::max(prop_.l2CacheSize, 0));
    flush_ = DeviceBuffer(std::max<size_t>(2 * l2, size_t{64} << 20), "the L2 flush buffer");
  }

  ~CudaRunner() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string device_name() const override {
    return strprintf("%s (device %d, compute capability %d.%d, %d SMs, L2 %s)", prop_.name,
                     device_, prop_.major, prop_.minor, prop_.multiProcessorCount,
                     format_bytes(static_cast<size_t>(prop_.l2CacheSize)).c_str());
  }

  std::string timing_method() const override {
    return strprintf("CUDA events around one call, L2 flushed before each (%scudaMemsetAsync of "
                     "%s), after %.0f ms of warm-up; median of %d",
                     config_.demote_inputs ? "the inputs' lines set to normal eviction priority, "
                                             "then "
                                           : "",
                     format_bytes(flush_.size()).c_str(), kWarmupUs / 1000, config_.reps);
  }

  CopyCeiling measure_copy() override {
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    // 512 MiB each way moves 1 GiB per copy; smaller only on a device with little memory.
    const size_t bytes = std::min<size_t>(size_t{512} << 20, (free_bytes / 4) & ~size_t{4095});
    DeviceBuffer src(bytes, "the copy-ceiling source"), dst(bytes, "the copy-ceiling destination");
    cuda_check(cudaMemsetAsync(src.get(), 1, bytes, stream_), "cudaMemsetAsync (copy source)");
    cuda_check(cudaMemsetAsync(dst.get(), 0, bytes, stream_), "cudaMemsetAsync (copy target)");
    const auto copy = [&] {
      cuda_check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpyAsync device to device", "copy ceiling, " + format_bytes(bytes));
    };
    CopyCeiling c;
    c.buffer_bytes = bytes;
    c.reps = kCopyReps;
    c.us = time_calls(copy, kCopyReps, "copy ceiling");
    c.gbps = 2.0 * static_cast<double>(bytes) / (c.us.median * 1e-6) / 1e9;
    c.method = strprintf("device-to-device cudaMemcpyAsync of %s (bytes read + written), L2 "
                         "flushed, median of %d", format_bytes(bytes).c_str(), kCopyReps);
    return c;
  }

  TimingStats time_copy(double bytes) override {
    // Half the bytes each way, whole 16-byte words (the passes' byte counts are even).
    const size_t half = std::max<size_t>(static_cast<size_t>(bytes / 2) & ~size_t{15}, 16);
    const std::string what = "same-size copy of " + format_bytes(2 * half);
    if (copy_src_.size() < half) {
      copy_src_ = DeviceBuffer(half, "the same-size copy source", what);
      copy_dst_ = DeviceBuffer(half, "the same-size copy destination", what);
      cuda_check(cudaMemsetAsync(copy_src_.get(), 1, half, stream_), "cudaMemsetAsync", what);
    }
    return time_calls(
        [&] {
          cuda_check(cudaMemcpyAsync(copy_dst_.get(), copy_src_.get(), half,
                                     cudaMemcpyDeviceToDevice, stream_),
                     "cudaMemcpyAsync device to device", what);
        },
        config_.reps, what);
  }

  ShapeResult run(const Shape& shape, bool explain) override {
    const std::string ctx = "shape " + format_shape(shape) + " " + short_name(config_.dtype);
    const size_t n = static_cast<size_t>(shape.elements());
    const size_t tensor_bytes = n * nk_dtype_size(config_.dtype);
    const size_t vector_bytes =
        static_cast<size_t>(shape.hidden) * nk_dtype_size(config_.weight_dtype);
    ShapeResult result;
    result.shape = shape;

    BenchPointers p;
    DeviceBuffer x(tensor_bytes, "x", ctx), y, residual, residual_out, dy, dx, dweight, dbias,
        bias, workspace;
    DeviceBuffer weight(vector_bytes, "weight", ctx);
    DeviceBuffer rstd(static_cast<size_t>(shape.rows) * sizeof(float), "rstd", ctx);
    upload_random(x, n, 0, ctx);
    const std::vector<unsigned char> w = bench_weight(config_, shape.hidden, 7);
    cuda_check(cudaMemcpy(weight.get(), w.data(), w.size(), cudaMemcpyHostToDevice),
               "cudaMemcpy weight to device", ctx);
    p.x = x.get();
    p.weight = weight.get();
    p.rstd = static_cast<float*>(rstd.get());
    if (config_.bias) {
      bias = DeviceBuffer(vector_bytes, "bias", ctx);
      const std::vector<unsigned char> b = bench_bias(config_, shape.hidden, 11);
      cuda_check(cudaMemcpy(bias.get(), b.data(), b.size(), cudaMemcpyHostToDevice),
                 "cudaMemcpy bias to device", ctx);
      p.bias = bias.get();
    }
    if (config_.residual) {
      residual = DeviceBuffer(tensor_bytes, "residual", ctx);
      residual_out = DeviceBuffer(tensor_bytes, "residual_out", ctx);
      upload_random(residual, n, pool_.elements() / 3, ctx);
      p.residual = residual.get();
      p.residual_out = residual_out.get();
    }
    DeviceBuffer scale, scales, amax, y_t;
    if (config_.fwd) {
      const size_t y_bytes = n * nk_dtype_size(y_dtype(config_));
      y = DeviceBuffer(y_bytes, "y", ctx);
      p.y = y.get();
      if (config_.quant != NK_QUANT_NONE) {
        scale = DeviceBuffer(sizeof(float), "scale", ctx);
        const float one = 1.0f;
        cuda_check(cudaMemcpy(scale.get(), &one, sizeof(one), cudaMemcpyHostToDevice),
                   "cudaMemcpy scale to device", ctx);
        p.scale = static_cast<float*>(scale.get());
        amax = DeviceBuffer(sizeof(float), "amax", ctx);
        p.amax = static_cast<float*>(amax.get());
        const size_t sb = static_cast<size_t>(scales_bytes(shape, config_));
        if (sb) {
          scales = DeviceBuffer(sb, "scales", ctx);
          p.scales = scales.get();
        }
        if (config_.transposed) {
          y_t = DeviceBuffer(y_bytes, "y_t", ctx);
          p.y_t = y_t.get();
        }
      }
    }
    if (config_.bwd) {
      dy = DeviceBuffer(tensor_bytes, "dy", ctx);
      dx = DeviceBuffer(tensor_bytes, "dx", ctx);
      dweight = DeviceBuffer(vector_bytes, "dweight", ctx);
      upload_random(dy, n, pool_.elements() / 2 + 1, ctx);
      p.dy = dy.get();
      p.dx = dx.get();
      p.dweight = dweight.get();
      if (config_.bias) {
        dbias = DeviceBuffer(vector_bytes, "dbias", ctx);
        p.dbias = dbias.get();
      }
    }

    // Every buffer a call reads (the flush demotes their lines first); unset ones are empty.
    // residual_out: the backward's x with --residual (bench_bwd_args).
    const std::vector<const DeviceBuffer*> inputs = {&x,        &weight,       &rstd, &bias,
                                                     &residual, &residual_out, &dy,   &scale};
    if (config_.fwd) {
      const nk_rms_norm_fwd_args args = bench_fwd_args(shape, config_, p);
      result.fwd.us = time_calls([&] { check_bench_status(nk_rms_norm_fwd(&args, NK_BACKEND_CUDA, stream_),
                                                    "nk_rms_norm_fwd", ctx); },
                                 config_.reps, ctx + " forward", inputs);
      result.fwd.measured = true;
      result.fwd.bytes = fwd_bytes(shape, config_);
      if (explain) {
        result.fwd.explain = explain_or_error([&] {
          if (config_.quant != NK_QUANT_NONE && config_.transposed) {
            return normkit::cuda::explain_fwd_quant_transposed(shape.rows, shape.hidden,
                                                               config_.dtype, config_.weight_dtype);
          }
          if (config_.quant != NK_QUANT_NONE) {
            return normkit::cuda::explain_fwd_quant(shape.rows, shape.hidden, config_.dtype,
                                                    config_.weight_dtype, config_.quant,
                                                    static_cast<int>(config_.quant_block),
                                                    config_.bias);
          }
          return normkit::cuda::explain_fwd(shape.rows, shape.hidden, config_.dtype,
                                            config_.weight_dtype, y_dtype(config_),
                                            config_.residual,
                                            config_.bias || config_.zero_centered,
                                            config_.weight);
        });
      }
    }
    if (config_.bwd) {
      // The backward needs the forward's rstd (and residual_out): one untimed forward, writing
      // y into dx when the forward itself is not benchmarked.
      BenchPointers pre = p;
      if (!pre.y) pre.y = dx.get();
      const nk_rms_norm_fwd_args fwd = bench_fwd_args(shape, config_, pre);
      check_bench_status(nk_rms_norm_fwd(&fwd, NK_BACKEND_CUDA, stream_), "nk_rms_norm_fwd", ctx);

      nk_rms_norm_bwd_args args = bench_bwd_args(shape, config_, p);
      check_bench_status(nk_rms_norm_bwd_workspace_size(&args, NK_BACKEND_CUDA, &p.workspace_bytes),
                   "nk_rms_norm_bwd_workspace_size", ctx);
      workspace = DeviceBuffer(p.workspace_bytes, "the backward workspace", ctx);
      args.workspace = workspace.get();
      args.workspace_bytes = p.workspace_bytes;
      result.bwd.us = time_calls([&] { check_bench_status(nk_rms_norm_bwd(&args, NK_BACKEND_CUDA, stream_),
                                                    "nk_rms_norm_bwd", ctx); },
                                 config_.reps, ctx + " backward", inputs);
      result.bwd.measured = true;
      result.bwd.bytes = bwd_bytes(shape, config_);
      result.bwd.workspace_bytes = p.workspace_bytes;
      if (explain) {
        result.bwd.explain = explain_or_error([&] {
          // The plan, and the grid the launcher ran where it capped it.
          const std::string launched = normkit::cuda::last_bwd_launch_note();
          return normkit::cuda::explain_bwd(shape.rows, shape.hidden, config_.dtype,
                                            config_.weight_dtype, config_.dtype, config_.bias,
                                            config_.weight) +
                 (launched.empty() ? "" : "; " + launched);
        });
      }
    }
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", ctx);
    return result;
  }

 private:

  template <typename F>
  static std::string explain_or_error(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return std::string("(explain failed: ") + e.what() + ")";
    }
  }

  void upload_random(const DeviceBuffer& dst, size_t elements, size_t start,
                     const std::string& ctx) {
    pool_.tile_into(elements, start, [&](size_t offset, const void* src, size_t bytes) {
      cuda_check(cudaMemcpy(dst.bytes() + offset, src, bytes, cudaMemcpyHostToDevice),
                 "cudaMemcpy random inputs to device", ctx);
    });
  }

  // inputs: the buffers the timed call reads, demoted first (none for the copies).
  void flush_l2(const std::string& what, const std::vector<const DeviceBuffer*>& inputs) {
    if (config_.demote_inputs) {
      for (const DeviceBuffer* input : inputs) {
        check_bench_status(nk_cuda_demote_l2(input->get(), input->size(), stream_),
                           "nk_cuda_demote_l2 (before the L2 flush)", what);
      }
    }
    cuda_check(cudaMemsetAsync(flush_.get(), 0, flush_.size(), stream_),
               "cudaMemsetAsync (L2 flush)", what);
  }

  // Warm-up, then `reps` x (flush L2, event, call, event); microseconds per call. inputs: what
  // the call reads (flush_l2).
  template <typename Call>
  TimingStats time_calls(Call&& call, int reps, const std::string& what,
                         const std::vector<const DeviceBuffer*>& inputs = {}) {
    const Stopwatch warmup;
    for (int i = 0; i < 5 || (warmup.elapsed_us() < kWarmupUs && i < 10000); ++i) {
      flush_l2(what, inputs);
      call();
      if (i % 8 == 7) cuda_check(cudaStreamSynchronize(stream_), "warm-up", what);
    }
    cuda_check(cudaStreamSynchronize(stream_), "warm-up (cudaStreamSynchronize)", what);

    std::vector<CudaEvent> start(static_cast<size_t>(reps)), stop(static_cast<size_t>(reps));
    for (int i = 0; i < reps; ++i) {
      flush_l2(what, inputs);
      cuda_check(cudaEventRecord(start[i].get(), stream_), "cudaEventRecord", what);
      call();
      cuda_check(cudaEventRecord(stop[i].get(), stream_), "cudaEventRecord", what);
    }
    cuda_check(cudaStreamSynchronize(stream_), "timed calls (cudaStreamSynchronize)", what);
    std::vector<double> us(static_cast<size_t>(reps));
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, start[i].get(), stop[i].get()), "cudaEventElapsedTime",
                 what);
      us[static_cast<size_t>(i)] = 1000.0 * ms;
    }
    return summarize(us);
  }

  BenchConfig config_;
  RandomPool pool_;
  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  DeviceBuffer flush_;
  DeviceBuffer copy_src_, copy_dst_;  // time_copy's, kept for the next shape
};

}  // namespace

std::unique_ptr<BenchRunner> make_cuda_runner(const BenchConfig& config, size_t pool_elements) {
  if (nk_cuda_device_count() == 0) {
    throw std::runtime_error("the CUDA backend was requested but no CUDA device is available");
  }
  return std::make_unique<CudaRunner>(config, pool_elements);
}

}  // namespace nktool

#else  // !NK_WITH_CUDA

namespace nktool {

std::unique_ptr<BenchRunner> make_cuda_runner(const BenchConfig&, size_t) {
  throw std::runtime_error("the CUDA backend was requested but this normkit was built without "
                           "CUDA");
}

}  // namespace nktool

#endif
