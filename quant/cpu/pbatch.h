// CPU kernels of PrecisionBatching (definition in quant/pbatch.h): the activation quantizer that
// bit-transposes x into planes, and the AND + popcount product. Three paths, the same int64 sums
// bit for bit (integer arithmetic): the active one is picked from the CPU's features unless set.
//   portable        plain C++ with std::popcount on 64-bit words
//   avx2            256-bit AND, popcount by nibble lookup (vpshufb) and vpsadbw
//   avx512_vpopcnt  512-bit AND + VPOPCNTQ (AVX-512 VPOPCNTDQ)
//   cpu::pb_quantize(x, batch, cols, bits, planes, scale);
//   cpu::pb_gemm(w_planes, rows, n_planes, words, x_planes, batch, k_planes, acc);   // int64 [batch, rows]
#pragma once

#include <cstdint>
#include <string_view>

#include "core/selector.h"

namespace octet::quant::cpu {

enum class PbKernel : uint8_t { portable, avx2, avx512_vpopcnt };

std::string_view pb_kernel_name(PbKernel k);
// Compiled in and supported by this CPU (portable always).
bool pb_kernel_supported(PbKernel k);
// The path pb_gemm uses (core/selector.h): the fastest supported unless set or named by
// OCTET_PB_KERNEL (process-wide; tests and benchmarks switch it). set_pb_kernel throws octet::Error
// for an unsupported path and returns the previous one.
Selector<PbKernel>& pb_kernel_selector();
PbKernel pb_kernel();
PbKernel set_pb_kernel(PbKernel k);

// x f32 [batch, cols] (row stride cols) -> planes u64 [batch, bits, pb_words(cols)] and scale f64
// [batch], per quant/pbatch.h.
void pb_quantize(const float* x, int64_t batch, int64_t cols, int bits, uint64_t* planes, double* scale);
// The same with the paper scheme's static scale: code = the low `bits` bits of int32(trunc(x 2^shift))
// (saturated), scale 2^-shift (NaN for a row with a NaN or an infinity, its codes 0).
void pb_quantize_fixed(const float* x, int64_t batch, int64_t cols, int bits, int shift, uint64_t* planes,
                       double* scale);

// acc[b * rows + r] = sum_K q[r,K] xq[b,K] for b < batch (<= kPbMaxBatch), r < rows, from the weight
// planes u64 [rows, w_planes, words] and the activation planes u64 [batch, x_planes, words]; both
// top planes negative. Threads over rows.
void pb_gemm(const uint64_t* w, int64_t rows, int w_planes, int64_t words, const uint64_t* x, int64_t batch,
             int x_planes, int64_t* acc);
void pb_gemm(PbKernel k, const uint64_t* w, int64_t rows, int w_planes, int64_t words, const uint64_t* x, int64_t batch,
             int x_planes, int64_t* acc);
// The same for 1-bit weights as pb_preprocess makes them (codes +-1, so plane 0 is all ones on the
// valid columns): w_planes is 2 and plane 0 is not read, since popcount(W_0 AND X_j) = popcount(X_j)
// (X is zero past the columns), a number per batch row. Exact; half the weight traffic and popcounts.
void pb_gemm_1bit(const uint64_t* w, int64_t rows, int64_t words, const uint64_t* x, int64_t batch, int x_planes,
                  int64_t* acc);
void pb_gemm_1bit(PbKernel k, const uint64_t* w, int64_t rows, int64_t words, const uint64_t* x, int64_t batch,
                  int x_planes, int64_t* acc);

}  // namespace octet::quant::cpu
