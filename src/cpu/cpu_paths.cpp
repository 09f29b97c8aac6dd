#include "cpu/cpu_paths.h"

#include "cpu/bf16_rows.h"
#include "cpu/half_rows.h"
#include "cpu/row_kernels.h"  // NK_CPU_ROW_CLONES_BUILT

namespace normkit::cpu {
namespace {

// The clone that the row kernels' ifunc resolvers pick: the first level the CPU supports.
const char* row_kernels_level() {
#ifdef NK_CPU_ROW_CLONES_BUILT
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2)";
  return "x86-64 baseline";
#else
  return "one version (the build's target)";
#endif
}

const char* half_path_text(HalfPath path) {
  switch (path) {
    case HalfPath::kAvx512: return "AVX-512";
    case HalfPath::kF16c: return "F16C";
    case HalfPath::kElementWise: break;
  }
  return "element-wise";
}

}  // namespace

std::string cpu_paths_description() {
  return std::string("row kernels ") + row_kernels_level() + "; float16 " +
         half_path_text(half_path()) + "; bfloat16 rounding " +
         (bf16_path() == Bf16Path::kAvx512Bf16 ? "AVX512-BF16" : "element-wise");
}

}  // namespace normkit::cpu
