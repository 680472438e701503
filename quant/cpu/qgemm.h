// CPU paths of the zero-point GEMM (definition in quant/qgemm.h):
//   C[i, j] = sum_k (A[i, k] - za[i]) (B[j, k] - zb)
// Every path computes the raw u8 x s8 product D[i, j] = sum_k A'[i, k] B'[j, k] (an s8 A is shifted
// to u8 by +128, a u8 B to s8 by -128, their zero points with them) and folds the offsets in:
//   C = D - za sum_k B' - zb sum_k A' + k za zb
// all in integers, so every path gives the same int32 results (tested against qgemm_reference).
//   portable     plain loops (the compiler vectorizes them for the active ISA)
//   avx2         u8 and s8 widened to 16 bits (the activations once per call), vpmaddwd pairs
//                into 32-bit lanes (no saturation: vpmaddubsw's s16 pair sums would saturate,
//                2 * 255 * 127 > 32767); tiles of weight rows outermost, each read once
//   avx512_vnni  vpdpbusd (u8 x s8 -> s32, four products per lane, no intermediate saturation);
//                activation rows in blocks of up to 8, each weight row loaded once per block
//   dnnl         oneDNN's dnnl_gemm_u8s8s32 (offsets 0; ours are per row): only where its probe
//                (quant/cpu/int8_gemm.h) shows it exact, i.e. with VNNI
// automatic picks per call: for m <= kQGemmKernelMaxM the fastest supported of avx512_vnni, avx2,
// portable; for larger m dnnl where exact, else the same order.
// Threads over the output columns j (the weights' rows); integer sums, so deterministic.
// Measured (tools/bench/RESULTS.md, qlinear, one thread, Zen 5, 2048x2048): batch 1 in 53 us
// (FP32 SGEMM 282 us), batch 8 in 120 us (dnnl 280 us), batch 32 in 436 us (dnnl 555 us); at
// batch 64 and 128 dnnl was ahead (4096: 4.7 vs 5.7 ms, 7.5 vs 15.9 ms), hence the switch.
//   cpu::set_qgemm_path(cpu::QgemmPath::portable);   // tests and benchmarks run every path
//   cpu::qgemm(cpu::qgemm_path(), m, n, k, QType::u8, a, k, za, QType::s8, b, k, 0, c, n, nullptr);
#pragma once

#include <cstdint>
#include <string_view>

#include "core/selector.h"
#include "quant/qgemm.h"

namespace octet::quant::cpu {

enum class QgemmPath : uint8_t { automatic, portable, avx2, avx512_vnni, dnnl };

// automatic runs the own kernels up to this many activation rows and oneDNN above.
inline constexpr int64_t kQGemmKernelMaxM = 32;

std::string_view qgemm_path_name(QgemmPath p);
// automatic and portable always; avx2 / avx512_vnni when compiled in and the CPU has them (VNNI:
// AVX-512 F/BW/DQ/VL plus AVX512_VNNI); dnnl where oneDNN's u8s8s32 GEMM is exact.
bool qgemm_path_supported(QgemmPath p);
// The path quant::qgemm uses (core/selector.h): auto unless set or named by OCTET_QGEMM_PATH
// (process-wide). set_qgemm_path throws octet::Error for an unsupported path (dnnl where oneDNN's
// u8s8s32 GEMM saturates: no VNNI) and returns the previous one.
Selector<QgemmPath>& qgemm_selector();
QgemmPath qgemm_path();
QgemmPath set_qgemm_path(QgemmPath p);

// quant/qgemm.h's qgemm on path p, arguments already checked (k <= kQGemmMaxK, zero points in their
// types' ranges, leading dimensions). b_row_sums: sum_k B[j, k] of the raw codes, or null.
void qgemm(QgemmPath p, int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za,
           QType tb, const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc, const int32_t* b_row_sums);

// sum_k b[j, k] for j < n (s8 or u8 codes).
void qgemm_row_sums(int64_t n, int64_t k, QType tb, const void* b, int64_t ldb, int32_t* sums);

// x f32 [batch, cols] -> u8 codes [batch, cols] with each row's choose_qparams(min, max, u8)
// (scale[b], zero_point[b]); a row with a NaN or an infinity gets scale NaN, zero point 0, codes 0.
void quantize_rows_u8(const float* x, int64_t batch, int64_t cols, uint8_t* codes, float* scale, int32_t* zero_point);

}  // namespace octet::quant::cpu
