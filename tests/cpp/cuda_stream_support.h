// CUDA runtime plumbing of the tests that run calls on streams and in graphs
// (test_quant_streams.cpp, test_bwd_streams.cpp). Only in builds with the CUDA backend.
#pragma once

#ifdef NK_WITH_CUDA

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "normkit/normkit.h"

namespace nktest {

inline void expect_cuda(cudaError_t status, const char* what) {
  ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorString(status);
}

// What one normkit call queues on `stream`, captured into a CUDA graph and instantiated where
// the call succeeded. The capture ends whatever the call returned (a failed call must not leave
// the stream capturing); the test asserts status() before replaying.
class CapturedGraph {
 public:
  template <typename Call>
  CapturedGraph(cudaStream_t stream, Call&& call) : stream_(stream) {
    expect_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
                "cudaStreamBeginCapture");
    status_ = call();
    expect_cuda(cudaStreamEndCapture(stream, &graph_), "cudaStreamEndCapture");
    if (status_ == NK_SUCCESS) {
      expect_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
    }
  }
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  nk_status status() const { return status_; }

  // Launches the graph on its stream and waits for it.
  void replay() const {
    expect_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    expect_cuda(cudaStreamSynchronize(stream_), "replay");
  }

 private:
  cudaStream_t stream_;
  nk_status status_ = NK_ERROR_INTERNAL;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace nktest

#endif  // NK_WITH_CUDA
