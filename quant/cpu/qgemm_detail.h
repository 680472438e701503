// Internal to quant/cpu/qgemm*.cpp: the raw u8 x s8 dot-product kernels of the x86 paths.
//   d[i * ldd + j] = sum_k a[i * lda + k] * b[j * ldb + k]   for i < m, j0 <= j < j1
// Exact int32 sums (|d| <= k * 255 * 128 < 2^31 for k <= kQGemmMaxK). Call only where
// qgemm_path_supported says the path runs.
#pragma once

#include <cstdint>

namespace octet::quant::cpu::detail {

// Whether the CPU has AVX-512 F/BW/DQ/VL and AVX512_VNNI (and the build compiled the kernel).
bool vnni_available();
bool avx2_available();

void raw_dot_avx512_vnni(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                         int64_t ldb, int32_t* d, int64_t ldd);
void raw_dot_avx2(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                  int64_t ldb, int32_t* d, int64_t ldd);

}  // namespace octet::quant::cpu::detail
