// nk_cuda_demote_l2 (what `normkit bench` runs on its inputs before each L2 flush) changes the
// eviction priority of cached lines and nothing else: the bytes it covers, and those around
// them, read back as they were, also where the lines were dirty in L2 when demoted. Without a
// CUDA device it says so.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "normkit/normkit.h"
#include "support.h"

#ifdef NK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

TEST(L2Priority, DemotingLinesKeepsEveryByte) {
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
#ifdef NK_WITH_CUDA
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
  EXPECT_EQ(nk_cuda_demote_l2(buf.data() + offset, length, nullptr), NK_SUCCESS) << nk_last_error();
  EXPECT_EQ(nk_cuda_demote_l2(buf.data(), kBytes, nullptr), NK_SUCCESS) << nk_last_error();
  EXPECT_EQ(nk_cuda_demote_l2(buf.data(), 0, nullptr), NK_SUCCESS) << nk_last_error();
  EXPECT_EQ(nk_cuda_demote_l2(nullptr, kBytes, nullptr), NK_SUCCESS) << nk_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> back = buf.to_host();
  ASSERT_EQ(back.size(), host.size());
  size_t differing = 0;
  for (size_t i = 0; i < kBytes; ++i) differing += back[i] != host[i];
  EXPECT_EQ(differing, 0u) << "bytes changed by nk_cuda_demote_l2 (range " << offset << " + "
                           << length << ")";
#endif
}

TEST(L2Priority, WithoutADeviceSaysSo) {
  if (nk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present (see the test above)";
  std::vector<uint8_t> host(256, 1);
  EXPECT_EQ(nk_cuda_demote_l2(host.data(), host.size(), nullptr), NK_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(nk_last_error()).find("CUDA"), std::string::npos) << nk_last_error();
}

}  // namespace
