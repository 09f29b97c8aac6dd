// nk_cpu_paths (include/normkit/normkit.h): the CPU backend's code paths on this CPU, named as
// the dispatchers of half_rows.h and bf16_rows.h chose them.
#include <gtest/gtest.h>

#include <string>

#include "cpu/bf16_rows.h"
#include "cpu/half_rows.h"
#include "normkit/normkit.h"

namespace nktest {
namespace {

TEST(CpuPaths, NameTheLevelAndTheConversionsInUse) {
  const char* text = nk_cpu_paths();
  ASSERT_NE(text, nullptr);
  const std::string paths = text;
  RecordProperty("cpu_paths", paths);
  EXPECT_EQ(paths.rfind("row kernels ", 0), 0u) << paths;
  const char* half = "element-wise";
  if (normkit::cpu::half_path() == normkit::cpu::HalfPath::kAvx512) half = "AVX-512";
  if (normkit::cpu::half_path() == normkit::cpu::HalfPath::kF16c) half = "F16C";
  EXPECT_NE(paths.find(std::string("; float16 ") + half + ";"), std::string::npos) << paths;
  const bool bf16 = normkit::cpu::bf16_path() == normkit::cpu::Bf16Path::kAvx512Bf16;
  EXPECT_NE(paths.find(bf16 ? "; bfloat16 rounding AVX512-BF16"
                            : "; bfloat16 rounding element-wise"),
            std::string::npos)
      << paths;
  EXPECT_EQ(nk_cpu_paths(), text) << "the same string for the life of the process";
}

}  // namespace
}  // namespace nktest
