// Small bf16 products for the tiled CPU kernels (attention's tiles, core/cpu/attention.cpp) on
// CPUs with AVX512-BF16: C = alpha A B, or C += alpha A B, with A bf16 row-major and B "packed in
// pairs along k" as vdpbf16ps takes it: 32-bit word (p, j) of a packed B holds B[2p][j] in its low
// half and B[2p+1][j] in its high half (0 past k's end). The products are exact in f32 and summed
// in f32, pair by pair along k (the instruction treats subnormal inputs as 0 and flushes subnormal
// sums to 0). gemm_bf16_packed_plain is the plain loop in the same order, the tests' reference.
//   std::vector<uint32_t> kt(packed_words(d, tk));
//   pack_transposed(k, tk, d, d, kt.data(), packed_ld(tk));        // B = K^T, K [Tk, D]
//   gemm_bf16_packed(rows, tk, d, scale, q, d, kt.data(), packed_ld(tk), false, s, tk);  // S = scale Q K^T
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace octet::cpu {

// Compiled into this build and supported by this CPU (AVX-512 with BF16).
bool bf16_tiles_supported();

// A packed B's row length in words for n columns (a multiple of 16, so whole vectors load), and
// the words a packed [k, n] B takes.
inline int64_t packed_ld(int64_t n) { return (n + 15) / 16 * 16; }
inline int64_t packed_words(int64_t k, int64_t n) { return (k + 1) / 2 * packed_ld(n); }

// B = X, X [k, n] row-major (leading dimension ldx): word (p, j) = X[2p][j], X[2p+1][j].
void pack_rows(const BFloat16* x, int64_t k, int64_t n, int64_t ldx, uint32_t* out, int64_t ld);
// B = X^T, X [n, k] row-major: word (p, j) = X[j][2p], X[j][2p+1].
void pack_transposed(const BFloat16* x, int64_t n, int64_t k, int64_t ldx, uint32_t* out, int64_t ld);
// B = X from f32 rows, each rounded to bf16 as the BFloat16 constructor rounds: word (p, j) =
// bf16(X[2p][j]), bf16(X[2p+1][j]).
void pack_rows_rounded(const float* x, int64_t k, int64_t n, int64_t ldx, uint32_t* out, int64_t ld);

// C[m, n] (leading dimension ldc) = alpha A B (+ C where accumulate); A [m, k] bf16 with leading
// dimension lda; b packed with row length ldb (>= packed_ld(n)). Needs bf16_tiles_supported().
void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, bool accumulate, float* c, int64_t ldc);
void gemm_bf16_packed_plain(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                            const uint32_t* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace octet::cpu
