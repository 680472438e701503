// int8 x int8 -> int32 matrix product on the CPU, the core of the INT8 convolution:
//   C[M,N] (+)= op(A)[M,K] . op(B)[K,N], row-major with leading dimensions, op = transpose or not.
// Paths (every one gives the same int32 results, tested on random data with -128/127 extremes and
// odd sizes):
//   dnnl       oneDNN's dnnl_gemm_s8s8s32 (JIT, VNNI). Measured on the Zen 5 dev machine, one thread:
//              580-890 GOP/s on 1024^3 and the conv shapes (M 64-512, K 64-4608, N 196-2048), ~3.3x
//              oneDNN's SGEMM; 1024^3 on two threads 1.4-1.6 TOP/s. dnnl_gemm_u8s8s32 with the
//              zero-point compensation (codes + 128, A offset 128) ran within 3% of it (interleaved
//              runs), and oneDNN's matmul primitive (brgemm) was not faster on these shapes and
//              needs a primitive per shape: s8s8s32 it is, with no offset bookkeeping.
//   avx2       int8_gemm_x86.cpp: the codes widened to int16 while packing, pairs multiplied by
//              vpmaddwd into int32 (exact: no int16 sum). The path of CPUs with AVX2 but no VNNI,
//              where oneDNN saturates (below); measured on Zen 1 in tools/bench/RESULTS.md.
//   reference  plain loops (int32 accumulation), portable; the fallback and the tests' reference.
// oneDNN and saturation: without VNNI (AVX-512 or AVX2 but no vpdpbusd), oneDNN computes s8 x s8
// as (a + 128) x b with vpmaddubsw, whose pairwise s16 sums saturate: measured here with
// dnnl_set_max_cpu_isa(avx512_core / avx2 / sse41), 1390 of 1517 results of a 37x41x129 product
// on random codes in [-127, 127] were wrong -- so the quantizers' never producing -128 does NOT
// avoid it (a + 128 still reaches 255). With AVX-512 VNNI or AVX-VNNI every result was exact,
// extremes included. dnnl_int8_gemm_exact() checks this once per process on a product that would
// saturate, and the dnnl path is only used (and only "supported") where it passed; elsewhere the
// avx2 kernel runs (or, without AVX2, the reference loops).
// Sums must fit in int32: |sum over K of a*b| < 2^31 (K <= 133,143 at full range); the INT8 conv
// keeps its GEMMs well below that.
//   cpu::int8_gemm(false, true, m, n, k, a, k, b, k, c, n, /*accumulate=*/false);
#pragma once

#include <cstdint>
#include <string_view>

#include "core/selector.h"

namespace octet::quant::cpu {

enum class Int8GemmPath : uint8_t { reference, avx2, dnnl };

std::string_view int8_gemm_path_name(Int8GemmPath path);
// reference always; avx2 on x86 CPUs with AVX2; dnnl when oneDNN's s8s8s32 GEMM is exact on this
// CPU (dnnl_int8_gemm_exact).
bool int8_gemm_path_supported(Int8GemmPath path);
// Whether oneDNN's s8s8s32 GEMM gives exact results here (probed once, on a saturating product).
bool dnnl_int8_gemm_exact();
// The same probe for oneDNN's u8s8s32 GEMM (the zero-point GEMM's dnnl path, quant/cpu/qgemm.h).
bool dnnl_u8s8_gemm_exact();

// The path int8_gemm() uses (core/selector.h): the fastest supported one unless set or named by
// OCTET_INT8_GEMM_PATH (process-wide; tests and benchmarks switch it). set_int8_gemm_path throws
// octet::Error for an unsupported path (dnnl where oneDNN's s8s8s32 GEMM saturates: no VNNI) and
// returns the previous one.
Selector<Int8GemmPath>& int8_gemm_selector();
Int8GemmPath int8_gemm_path();
Int8GemmPath set_int8_gemm_path(Int8GemmPath path);

// C = op(A) op(B), or C += op(A) op(B) with `accumulate`. op(A) is M x K: A is stored M x K
// (lda >= K) or, transposed, K x M (lda >= M); likewise op(B) is K x N from B stored K x N or N x K.
// C is M x N with ldc >= N. Threads: the current thread count, or one thread when called inside a
// parallel region (the conv runs one GEMM per thread on its own column block).
void int8_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);
void int8_gemm(Int8GemmPath path, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a,
               int64_t lda, const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);

}  // namespace octet::quant::cpu
