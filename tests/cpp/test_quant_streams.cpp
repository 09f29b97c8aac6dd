// The per-tensor quantized forward with y_t on several CUDA streams at once and inside a CUDA
// graph. The ticketed grid (rms_norm_fwd_quant_ticketed) keeps band counters per stream, and
// graphs take the two-kernel path: every launch must give the bits of one launch on the default
// stream (the kernels are deterministic). The values themselves are checked against the float64
// reference by test_quant_fwd.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "support.h"

#include "cuda_stream_support.h"

namespace nktest {
namespace {

#ifdef NK_WITH_CUDA

constexpr int64_t kRows = 2048, kHidden = 4096;  // ticketed: 16-byte rows of y and y_t

// One launch's outputs, poisoned before it (amax too: a launch that left it alone must not
// pass).
struct Outputs {
  Buffer y, y_t, amax;
  Outputs()
      : y(NK_BACKEND_CUDA, static_cast<size_t>(kRows * kHidden)),
        y_t(NK_BACKEND_CUDA, static_cast<size_t>(kRows * kHidden)),
        amax(NK_BACKEND_CUDA, sizeof(float)) {
    std::vector<uint8_t> poisoned(static_cast<size_t>(kRows * kHidden), 0x7f);
    y.upload(poisoned);
    y_t.upload(poisoned);
    amax.upload(poisoned.data(), sizeof(float));
  }
};

class QuantStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
    Matrix xm(NK_BFLOAT16, kRows, kHidden), wm(NK_BFLOAT16, 1, kHidden);
    fill_normal(xm, rng_, 0.0, 1.0);
    fill_normal(wm, rng_, 1.0, 0.1);
    x_ = Buffer(NK_BACKEND_CUDA, xm.bytes.size());
    x_.upload(xm.bytes);
    // Rows of near-constant magnitude (RMSNorm scales each row to rms 1): amax far below x_'s.
    Matrix flat(NK_BFLOAT16, kRows, kHidden);
    fill_normal(flat, rng_, 1.0, 0.01);
    flat_x_ = Buffer(NK_BACKEND_CUDA, flat.bytes.size());
    flat_x_.upload(flat.bytes);
    w_ = Buffer(NK_BACKEND_CUDA, wm.bytes.size());
    w_.upload(wm.bytes);
    const float scale = 2.0f;
    scale_ = Buffer(NK_BACKEND_CUDA, sizeof(float));
    scale_.upload(&scale, sizeof(float));
    x_offset_ = static_cast<size_t>(xm.offset) * 2;
    w_offset_ = static_cast<size_t>(wm.offset) * 2;
    x_stride_ = xm.stride;
  }

  // y_t: with y transposed (the ticketed grid), else y alone (the registers kernel). x: x_, or
  // another buffer of x_'s layout.
  nk_status launch(Outputs& o, cudaStream_t stream, bool y_t = true,
                   const Buffer* x = nullptr) const {
    nk_rms_norm_fwd_args a;
    nk_rms_norm_fwd_args_init(&a);
    a.rows = kRows;
    a.hidden = kHidden;
    a.x = (x ? *x : x_).data() + x_offset_;
    a.x_dtype = NK_BFLOAT16;
    a.x_row_stride = x_stride_;
    a.weight = w_.data() + w_offset_;
    a.weight_dtype = NK_BFLOAT16;
    a.eps = 1e-6f;
    a.y = o.y.data();
    a.y_dtype = NK_FLOAT8_E4M3;
    a.quant = NK_QUANT_TENSOR;
    a.scale = reinterpret_cast<const float*>(scale_.data());
    a.amax = reinterpret_cast<float*>(o.amax.data());
    a.y_t = y_t ? o.y_t.data() : nullptr;
    return nk_rms_norm_fwd(&a, NK_BACKEND_CUDA, stream);
  }

  static float amax_of(const Outputs& o) {
    float v = 0.0f;
    const std::vector<uint8_t> bytes = o.amax.to_host();
    std::memcpy(&v, bytes.data(), sizeof(v));
    return v;
  }

  static void expect_same(const Outputs& got, const Outputs& want, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(got.y.to_host() == want.y.to_host()) << "y differs";
    EXPECT_TRUE(got.y_t.to_host() == want.y_t.to_host()) << "y_t differs";
    EXPECT_TRUE(got.amax.to_host() == want.amax.to_host()) << "amax differs";
  }

  Rng rng_;
  Buffer x_, flat_x_, w_, scale_;
  size_t x_offset_ = 0, w_offset_ = 0;
  int64_t x_stride_ = 0;
};

#else

class QuantStreams : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_SKIP() << "no CUDA device: a build without the CUDA backend"; }
};

#endif  // NK_WITH_CUDA

TEST_F(QuantStreams, FourStreamsAtOnceGiveTheBitsOfOneLaunch) {
#ifdef NK_WITH_CUDA
  NK_SEED_TRACE(rng_);
  Outputs one;
  ASSERT_EQ(launch(one, nullptr), NK_SUCCESS) << nk_last_error();
  expect_cuda(cudaDeviceSynchronize(), "first launch");
  std::vector<cudaStream_t> streams(4);
  std::vector<Outputs> outs(streams.size());
  for (cudaStream_t& s : streams) {
    expect_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  for (int round = 0; round < 3; ++round) {  // later rounds find each stream's counters used
    for (size_t i = 0; i < streams.size(); ++i) {
      // Poisoned again on the launch's own stream, so that every round has to write them.
      expect_cuda(cudaMemsetAsync(outs[i].y.data(), 0x7f, kRows * kHidden, streams[i]), "poison");
      expect_cuda(cudaMemsetAsync(outs[i].y_t.data(), 0x7f, kRows * kHidden, streams[i]), "poison");
      ASSERT_EQ(launch(outs[i], streams[i]), NK_SUCCESS) << nk_last_error();
    }
    expect_cuda(cudaDeviceSynchronize(), "four streams");
    for (const Outputs& o : outs) expect_same(o, one, "a stream's launch");
  }
  // cudaStreamPerThread from two host threads: two streams under one handle.
  std::vector<Outputs> per_thread(2);
  std::vector<nk_status> status(2, NK_ERROR_INTERNAL);
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < per_thread.size(); ++i) {
      threads.emplace_back([&, i] {
        status[i] = launch(per_thread[i], cudaStreamPerThread);
        cudaStreamSynchronize(cudaStreamPerThread);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (size_t i = 0; i < per_thread.size(); ++i) {
    ASSERT_EQ(status[i], NK_SUCCESS);
    expect_same(per_thread[i], one, "cudaStreamPerThread");
  }
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
#endif
}

// Launches in a row on one stream, each with its own amax (zeroed before each launch): x's rows
// then near-constant rows, whose amax is far smaller, then x again; through the ticketed grid
// and the registers kernel.
TEST_F(QuantStreams, EachLaunchOnAStreamGetsItsOwnAmax) {
#ifdef NK_WITH_CUDA
  NK_SEED_TRACE(rng_);
  for (const bool y_t : {true, false}) {
    SCOPED_TRACE(y_t ? "with y_t" : "y alone");
    Outputs first, flat, again;
    ASSERT_EQ(launch(first, nullptr, y_t), NK_SUCCESS) << nk_last_error();
    ASSERT_EQ(launch(flat, nullptr, y_t, &flat_x_), NK_SUCCESS) << nk_last_error();
    ASSERT_EQ(launch(again, nullptr, y_t), NK_SUCCESS) << nk_last_error();
    expect_cuda(cudaDeviceSynchronize(), "three launches");
    const float big = amax_of(first), small = amax_of(flat);
    // x's: the largest of 8M normal values (~5.3) times a weight near 1; the flat rows': about
    // the largest weight (1 + 0.1 x ~3.8), neither x's amax nor the poison.
    EXPECT_GT(big, 3.0f);
    EXPECT_GT(small, 1.0f);
    EXPECT_LT(small, 2.0f);
    EXPECT_EQ(amax_of(again), big);
  }
#endif
}

TEST_F(QuantStreams, CapturedIntoAGraphGivesTheBitsOfOneLaunch) {
#ifdef NK_WITH_CUDA
  NK_SEED_TRACE(rng_);
  Outputs one, captured;
  ASSERT_EQ(launch(one, nullptr), NK_SUCCESS) << nk_last_error();
  expect_cuda(cudaDeviceSynchronize(), "first launch");
  cudaStream_t s;
  expect_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  // (A launch outside the capture first: the stream then has band counters of its own.)
  ASSERT_EQ(launch(captured, s), NK_SUCCESS) << nk_last_error();
  expect_cuda(cudaStreamSynchronize(s), "launch before the capture");
  const CapturedGraph graph(s, [&] { return launch(captured, s); });
  ASSERT_EQ(graph.status(), NK_SUCCESS) << nk_last_error();
  for (int replay = 0; replay < 2; ++replay) {
    // The same buffers again, poisoned by copies from a fresh set on the graph's own stream (a
    // device-to-device cudaMemcpy returns before it is done, and s does not wait for the legacy
    // stream: the first version of this test saw the poison land after the replay).
    Outputs poisoned;
    expect_cuda(cudaMemcpyAsync(captured.y.data(), poisoned.y.data(), kRows * kHidden,
                                cudaMemcpyDeviceToDevice, s), "poison y");
    expect_cuda(cudaMemcpyAsync(captured.y_t.data(), poisoned.y_t.data(), kRows * kHidden,
                                cudaMemcpyDeviceToDevice, s), "poison y_t");
    graph.replay();
    expect_same(captured, one, "a graph replay");
  }
  cudaStreamDestroy(s);
#endif
}

}  // namespace
}  // namespace nktest
