// The CTAs per SM that the launch plans of a few sweep shapes rely on, against what the built
// kernels get on this GPU (normkit::cuda::planned_occupancy): a ptxas change that costs a CTA
// per SM fails here rather than only slowing the benchmark.
#include <gtest/gtest.h>

#include "support.h"

#ifdef NK_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace {

TEST(KernelOccupancy, PlannedCtasPerSmFit) {
#ifdef NK_WITH_CUDA
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
  const auto kernels = normkit::cuda::planned_occupancy();
  ASSERT_FALSE(kernels.empty());
  for (const auto& k : kernels) {
    EXPECT_GE(k.ctas_per_sm, k.planned_ctas_per_sm)
        << k.kernel << ": " << k.threads << " threads, " << k.smem_bytes << " bytes of shared "
        << "memory, " << k.registers << " registers per thread";
  }
#else
  GTEST_SKIP() << "no CUDA device: a build without the CUDA backend";
#endif
}

}  // namespace
