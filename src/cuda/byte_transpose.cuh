// Byte permutes shared by the kernels that write y transposed (rms_norm_fwd_quant_transposed,
// rms_norm_fwd_quant_ticketed).
#pragma once

namespace normkit::cuda {

// From 4 words holding 4 columns' bytes of 4 consecutive rows (a, b, c, d: byte k = column k),
// the 4 words holding each column's bytes of those rows (out[k]: byte i = row i of column k).
__device__ __forceinline__ void transpose_4x4_bytes(unsigned a, unsigned b, unsigned c, unsigned d,
                                                    unsigned (&out)[4]) {
  const unsigned ab_low = __byte_perm(a, b, 0x5140), ab_high = __byte_perm(a, b, 0x7362);
  const unsigned cd_low = __byte_perm(c, d, 0x5140), cd_high = __byte_perm(c, d, 0x7362);
  out[0] = __byte_perm(ab_low, cd_low, 0x5410);
  out[1] = __byte_perm(ab_low, cd_low, 0x7632);
  out[2] = __byte_perm(ab_high, cd_high, 0x5410);
  out[3] = __byte_perm(ab_high, cd_high, 0x7632);
}

}  // namespace normkit::cuda
