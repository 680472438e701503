// Internal to quant/cpu/int8_gemm*.cpp: the AVX2 kernel of the int8 GEMM (int8_gemm_x86.cpp),
// with int8_gemm's arguments, already checked. Call only where the CPU has AVX2 (OCTET_CPU_X86
// builds; cpu::isa_supported(Isa::avx2)).
#pragma once

#include <cstdint>

#include "core/cpu/isa.h"

namespace octet::quant::cpu::detail {

#ifdef OCTET_CPU_X86
void int8_gemm_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
                    const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);
#endif

}  // namespace octet::quant::cpu::detail
