// normkit::cuda::demote_l2_lines (what `normkit bench` runs on its inputs before each L2 flush)
// changes the eviction priority of cached lines and nothing else: the bytes it covers, and those
// around them, read back as they were, also where the lines were dirty in L2 when demoted.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support.h"

#ifdef NK_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#endif

namespace {

TEST(L2Priority, DemotingLinesKeepsEveryByte) {
#ifdef NK_WITH_CUDA
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
  nktest::Rng rng;
  SCOPED_TRACE(nktest::seed_message(rng));
  constexpr size_t kBytes = (size_t{3} << 20) + 777;  // (not whole 128-byte lines)
  std::vector<uint8_t> host(kBytes);
  for (auto& b : host) b = static_cast<uint8_t>(rng.below(256));
  nktest::Buffer buf(NK_BACKEND_CUDA, kBytes);
  buf.upload(host);
  // The upload's lines may sit dirty in L2: demote ranges that start and end mid-line, the
  // whole buffer, and nothing at all.
  const size_t offset = 1 + static_cast<size_t>(rng.below(4000));
  const size_t length = 1 + static_cast<size_t>(rng.below(static_cast<int64_t>(kBytes - offset)));
  normkit::cuda::demote_l2_lines(buf.data() + offset, length, nullptr);
  normkit::cuda::demote_l2_lines(buf.data(), kBytes, nullptr);
  normkit::cuda::demote_l2_lines(buf.data(), 0, nullptr);
  normkit::cuda::demote_l2_lines(nullptr, kBytes, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> back = buf.to_host();
  ASSERT_EQ(back.size(), host.size());
  size_t differing = 0;
  for (size_t i = 0; i < kBytes; ++i) differing += back[i] != host[i];
  EXPECT_EQ(differing, 0u) << "bytes changed by demote_l2_lines (range " << offset << " + "
                           << length << ")";
#else
  GTEST_SKIP() << "no CUDA device: a build without the CUDA backend";
#endif
}

}  // namespace
