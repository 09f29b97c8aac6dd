// Which of its code paths the CPU backend takes on the CPU it runs on: the row kernels' clone
// (row_kernels.h), the float16 conversions (half_rows.h) and the bfloat16 rounding
// (bf16_rows.h). For `normkit info` (through nk_cpu_paths), so that a CPU timing can be read
// against the instructions behind it.
#pragma once

#include <string>

namespace normkit::cpu {

// One line, e.g. "row kernels x86-64-v4 (AVX-512); float16 AVX-512; bfloat16 rounding
// AVX512-BF16".
std::string cpu_paths_description();

}  // namespace normkit::cpu
