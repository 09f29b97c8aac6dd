// The backward on a CUDA stream followed by more work, and inside a CUDA graph. Its kernels run
// as programmatic dependents of one another: at few rows the column sums beside the main kernel
// (rms_norm_bwd_column_sums), at many the reduction of the slots after it. Work queued after
// the call must see every output, and a graph replay must give the bits of one launch (the
// kernels are deterministic). The values themselves are checked against the float64 reference
// by test_bwd.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "bwd_harness.h"
#include "cuda_stream_support.h"
#include "support.h"

namespace nktest {
namespace {

#ifdef NK_WITH_CUDA

// One bf16 backward with dweight and dbias on the device: inputs uploaded once, the outputs
// (dx, dweight, dbias) in `out`, poisoned on a stream before each launch.
class DeviceBwd {
 public:
  DeviceBwd(int64_t rows, int64_t hidden, Rng& rng) {
    c_.rows = rows;
    c_.hidden = hidden;
    c_.x = c_.w = c_.dy = NK_BFLOAT16;
    c_.dweight = c_.dbias = true;
    const BwdInputs in = make_bwd_inputs(c_, rng);
    dy_ = Tensor(NK_BACKEND_CUDA, in.dy);
    x_ = Tensor(NK_BACKEND_CUDA, in.x);
    rstd_ = Tensor(NK_BACKEND_CUDA, in.rstd);
    weight_ = Tensor(NK_BACKEND_CUDA, in.weight);
    for (size_t i = 0; i < 3; ++i) out[i] = Buffer(NK_BACKEND_CUDA, bytes(i));
    size_t workspace_bytes = 0;
    nk_rms_norm_bwd_args a = args();
    EXPECT_EQ(nk_rms_norm_bwd_workspace_size(&a, NK_BACKEND_CUDA, &workspace_bytes), NK_SUCCESS);
    workspace_ = Buffer(NK_BACKEND_CUDA, workspace_bytes);
  }

  // Bytes of output i: dx, then dweight, then dbias (bf16, dense).
  size_t bytes(size_t i) const {
    return static_cast<size_t>(i == 0 ? c_.rows * c_.hidden : c_.hidden) * 2;
  }

  nk_rms_norm_bwd_args args() const {
    nk_rms_norm_bwd_args a;
    nk_rms_norm_bwd_args_init(&a);
    a.rows = c_.rows;
    a.hidden = c_.hidden;
    a.dy = dy_.ptr();
    a.dy_dtype = NK_BFLOAT16;
    a.dy_row_stride = dy_.host.stride;
    a.x = x_.ptr();
    a.x_dtype = NK_BFLOAT16;
    a.x_row_stride = x_.host.stride;
    a.rstd = static_cast<const float*>(rstd_.ptr());
    a.weight = weight_.ptr();
    a.weight_dtype = NK_BFLOAT16;
    a.dx = out[0].data();
    a.dweight = out[1].data();
    a.dbias = out[2].data();
    a.workspace = workspace_.data();
    a.workspace_bytes = workspace_.size();
    return a;
  }

  nk_status launch(cudaStream_t stream) const {
    const nk_rms_norm_bwd_args a = args();
    return nk_rms_norm_bwd(&a, NK_BACKEND_CUDA, stream);
  }

  void poison(cudaStream_t stream) const {
    for (const Buffer& b : out) {
      expect_cuda(cudaMemsetAsync(b.data(), 0x7f, b.size(), stream), "poison");
    }
  }

  std::vector<std::vector<uint8_t>> fetch() const {
    return {out[0].to_host(), out[1].to_host(), out[2].to_host()};
  }

  Buffer out[3];

 private:
  BwdCase c_;
  Tensor dy_, x_, rstd_, weight_;
  Buffer workspace_;
};

void expect_same(const std::vector<std::vector<uint8_t>>& got,
                 const std::vector<std::vector<uint8_t>>& want, const char* what) {
  SCOPED_TRACE(what);
  const char* names[] = {"dx", "dweight", "dbias"};
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(got[i] == want[i]) << names[i] << " differs";
}

// Few rows (column sums beside the main kernel: 128 x 4096 pipelined, 29 x 17389 on a cluster
// of 2-byte accesses) and many (the slots' reduction after it).
const RowsHidden kShapes[] = {{128, 4096}, {29, 17389}, {4096, 1024}};

// check(bwd, want, s) for each of kShapes: the backward on the device, its outputs from one
// launch on the default stream, and a stream of the test's own.
template <typename Check>
void for_each_shape(Check&& check) {
  Rng rng;
  NK_SEED_TRACE(rng);
  cudaStream_t s;
  expect_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (const RowsHidden& shape : kShapes) {
    SCOPED_TRACE(std::to_string(shape.first) + "x" + std::to_string(shape.second));
    const DeviceBwd bwd(shape.first, shape.second, rng);
    ASSERT_EQ(bwd.launch(nullptr), NK_SUCCESS) << nk_last_error();
    expect_cuda(cudaDeviceSynchronize(), "first launch");
    check(bwd, bwd.fetch(), s);
  }
  cudaStreamDestroy(s);
}

#endif  // NK_WITH_CUDA

// Copies queued on the same stream right after the call, into buffers of their own, must hold
// the call's outputs, not the poison laid down before it: the call's last kernel completes only
// after every other one.
TEST(BwdStreams, WorkQueuedAfterTheCallSeesEveryOutput) {
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
#ifdef NK_WITH_CUDA
  for_each_shape([](const DeviceBwd& bwd, const std::vector<std::vector<uint8_t>>& want,
                    cudaStream_t s) {
    std::vector<Buffer> copies;
    for (size_t i = 0; i < 3; ++i) copies.emplace_back(NK_BACKEND_CUDA, bwd.bytes(i));
    for (int round = 0; round < 5; ++round) {
      bwd.poison(s);
      ASSERT_EQ(bwd.launch(s), NK_SUCCESS) << nk_last_error();
      for (size_t i = 0; i < 3; ++i) {
        expect_cuda(cudaMemcpyAsync(copies[i].data(), bwd.out[i].data(), bwd.bytes(i),
                                    cudaMemcpyDeviceToDevice, s),
                    "copy after the call");
      }
      expect_cuda(cudaStreamSynchronize(s), "round");
      expect_same({copies[0].to_host(), copies[1].to_host(), copies[2].to_host()}, want,
                  "copies queued after the call");
    }
  });
#endif
}

TEST(BwdStreams, CapturedIntoAGraphGivesTheBitsOfOneLaunch) {
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
#ifdef NK_WITH_CUDA
  for_each_shape([](const DeviceBwd& bwd, const std::vector<std::vector<uint8_t>>& want,
                    cudaStream_t s) {
    const CapturedGraph graph(s, [&] { return bwd.launch(s); });
    ASSERT_EQ(graph.status(), NK_SUCCESS) << nk_last_error();
    for (int replay = 0; replay < 2; ++replay) {
      bwd.poison(s);  // on the graph's own stream, so that the replay has to write them again
      graph.replay();
      expect_same(bwd.fetch(), want, "a graph replay");
    }
  });
#endif
}

}  // namespace
}  // namespace nktest
