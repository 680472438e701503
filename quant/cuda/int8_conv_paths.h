// The paths of the CUDA INT8 convolution (quant/cuda/int8_conv.h), written once over an executor
// so that the GPU (quant/cuda/int8_conv_exec.cu) and a host emulation in the tests
// (tests/quant/test_int8_cuda_emulation.cpp) run the same steps with the same operand functions
// (quant/cuda/int8_conv_ops.h):
//   dp4a         DP4A implicit GEMM with quantization of x fused into its loads, weights repacked
//                into words of four channels (the paper's design);
//   tensor_core  im2col of int8 codes (x quantized while gathered) + a cuBLASLt int8 GEMM (IMMA
//                tensor cores, int32 accumulation) per group and block of positions, then a
//                rescale (forward), col2im (dx, any stride) or an int64 accumulation (dw);
//   direct       depthwise convolutions (groups == C): one thread per output or dx element, dw
//                as per-(channel, tap) reductions.
// A path returns false when it cannot run a geometry (direct on a non-depthwise conv, or no
// cuBLASLt algorithm for one of the GEMM shapes); it then has launched nothing.
//
// The executor Exec provides:
//   T* scratch<T>(n)               uninitialized device (or host) memory, alive as long as Exec;
//   void zero(T* p, n);
//   void map(n, f)                 f(i) for i in [0, n), f an OCTET_HD functor of int8_conv_ops.h;
//   void dp4a(ops, split_words)    the DP4A GEMM of ops (ForwardOps, ...) over every group, the
//                                  words cut into splits of split_words, each split's int32 sum
//                                  passed to ops.store;
//   void sum_rows(terms, acc)      acc[row] += sum over j of terms(row, j) (int32 within splits of
//                                  at most kMaxInt32Terms terms);
//   bool gemm_supported(G)  void gemm(G, a, b, c)   the int8 GEMM G (ops::Int8Gemm, "TN");
//   int64_t block_bytes()          the scratch one block of the tensor-core path may take
//                                  (kTcBlockBytes on the GPU; the tests make it small to get many).
//   CudaExec ex;  paths::forward_dp4a(ex, args);
#pragma once

#include <algorithm>
#include <cstdint>

#include "quant/cuda/int8_conv_ops.h"

namespace octet::quant::cuda::paths {

using kernels::Conv2dGeometry;
using ops::ceil_div;
using ops::Int8Gemm;
using ops::round_up;

// Raw device pointers of one product; shapes as in quant/cpu/int8_conv.h except the dy codes,
// channel-major [K][ld] (ops::dy_ld).
struct ForwardArgs {
  Conv2dGeometry g;
  const float* x;  // [N,C,H,W] f32, quantized on load with inv
  float inv;
  const int8_t* wq;  // [K,C/g,R,S]
  float scale;
  const float* bias;  // [K] or null
  float* out;         // [N,K,P,Q]
};

struct BackwardInputArgs {
  Conv2dGeometry g;
  const int8_t* dy;  // [K][ld]
  int64_t ld;
  const int8_t* wq;
  float scale;
  float* dx;  // [N,C,H,W]
};

struct BackwardWeightArgs {
  Conv2dGeometry g;
  const float* x;
  float inv;
  const int8_t* dy;  // [K][ld]
  int64_t ld;
  float scale;
  float* dw;  // [K,C/g,R,S]
};

// Bytes of im2col codes and int32 GEMM output one block of the tensor-core path may take on the GPU.
inline constexpr int64_t kTcBlockBytes = int64_t{64} << 20;

// ---------------------------------------------------------------- dp4a

// Packs the weights into dp4a words (one row per GEMM row of every group), then the GEMM.
template <class Exec, class Ops>
bool dp4a_with_packed_weights(Exec& ex, Ops op, const int8_t* wq, bool for_dx) {
  const int64_t rows = op.rows() * op.g.groups, words = op.words();
  int32_t* wpack = ex.template scratch<int32_t>(rows * words);
  ex.map(rows * words, ops::PackedWeights{op.g, wq, words, for_dx, wpack});
  op.wpack = wpack;
  ex.dp4a(op, words);
  return true;
}

template <class Exec>
bool forward_dp4a(Exec& ex, const ForwardArgs& a) {
  return dp4a_with_packed_weights(ex, ops::ForwardOps{a.g, {a.x, a.inv}, nullptr, a.scale, a.bias, a.out}, a.wq, false);
}

template <class Exec>
bool backward_input_dp4a(Exec& ex, const BackwardInputArgs& a) {
  return dp4a_with_packed_weights(ex, ops::BackwardInputOps{a.g, a.dy, a.ld, nullptr, a.scale, a.dx}, a.wq, true);
}

template <class Exec>
bool backward_weight_dp4a(Exec& ex, const BackwardWeightArgs& a) {
  const int64_t n = a.g.k * ops::in_per_group(a.g) * a.g.r * a.g.s;
  int64_t* acc = ex.template scratch<int64_t>(n);
  ex.zero(acc, n);
  ex.dp4a(ops::BackwardWeightOps{a.g, {a.x, a.inv}, a.dy, a.ld, acc}, ops::kDwSplitWords);
  ex.map(n, ops::FinishWeights{acc, a.scale, a.dw});
  return true;
}

// ---------------------------------------------------------------- tensor_core

// Samples per block: whole samples (the rescale and col2im map a block's positions back to
// NCHW), as many as keep bytes_per_sample * count within block_bytes, at least one.
inline int64_t samples_per_block(const Conv2dGeometry& g, int64_t bytes_per_sample, int64_t block_bytes) {
  return std::clamp<int64_t>(block_bytes / std::max<int64_t>(bytes_per_sample, 1), 1, g.n);
}

// The GEMMs of blocks of `per_block` samples: the full block's and, if the last is shorter, its.
template <class Exec, class GemmFor>
bool gemms_supported(Exec& ex, int64_t count, int64_t per_block, const GemmFor& gemm_for) {
  if (!ex.gemm_supported(gemm_for(std::min(per_block, count)))) return false;
  return count % per_block == 0 || ex.gemm_supported(gemm_for(count % per_block));
}

template <class Exec>
bool forward_tensor_core(Exec& ex, const ForwardArgs& a) {
  const Conv2dGeometry& g = a.g;
  const int64_t kg = ops::out_per_group(g), crs = ops::in_per_group(g) * g.r * g.s, pq = g.p * g.q;
  const int64_t kr = round_up(crs, ops::kRowAlign);
  // C[j][kk] = sum_t colT[j][t] * w[kk][t]: m = positions of the block, n = K/g, k = kr.
  auto gemm_for = [&](int64_t samples) {
    const int64_t m = round_up(samples * pq, ops::kRowAlign);
    return Int8Gemm{m, kg, kr, kr, kr, m};
  };
  const int64_t per_block = samples_per_block(g, pq * (kr + 4 * kg), ex.block_bytes());
  if (!gemms_supported(ex, g.n, per_block, gemm_for)) return false;
  int8_t* wpad = ex.template scratch<int8_t>(g.k * kr);
  ex.map(g.k * kr, ops::PaddedWeights{a.wq, crs, kr, wpad});
  const Int8Gemm full = gemm_for(per_block);
  int8_t* colt = ex.template scratch<int8_t>(full.m * kr);
  int32_t* c = ex.template scratch<int32_t>(full.m * kg);
  for (int64_t n0 = 0; n0 < g.n; n0 += per_block) {
    const int64_t count = std::min(per_block, g.n - n0), rows = count * pq, j0 = n0 * pq;
    const Int8Gemm gm = gemm_for(count);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      ex.map(gm.m * kr, ops::ForwardColumns{g, {a.x, a.inv}, grp, j0, rows, kr, colt});
      ex.gemm(gm, colt, wpad + grp * kg * kr, c);
      ex.map(kg * rows, ops::ForwardRescale{g, c, gm.ldc, grp, j0, rows, a.scale, a.bias, a.out});
    }
  }
  return true;
}

template <class Exec>
bool backward_input_tensor_core(Exec& ex, const BackwardInputArgs& a) {
  const Conv2dGeometry& g = a.g;
  const int64_t kg = ops::out_per_group(g), cg = ops::in_per_group(g), crs = cg * g.r * g.s, pq = g.p * g.q;
  const int64_t kgp = round_up(kg, ops::kRowAlign);
  // dcol[t][j] = sum_kk dyT[j][kk] * wT[t][kk]: m = positions of the block, n = C/g*R*S, k = kgp.
  auto gemm_for = [&](int64_t samples) {
    const int64_t m = round_up(samples * pq, ops::kRowAlign);
    return Int8Gemm{m, crs, kgp, kgp, kgp, m};
  };
  const int64_t per_block = samples_per_block(g, pq * (kgp + 4 * crs), ex.block_bytes());
  if (!gemms_supported(ex, g.n, per_block, gemm_for)) return false;
  int8_t* wt = ex.template scratch<int8_t>(g.groups * crs * kgp);
  ex.map(g.groups * crs * kgp, ops::TransposedWeights{g, a.wq, kgp, wt});
  const Int8Gemm full = gemm_for(per_block);
  int8_t* dyt = ex.template scratch<int8_t>(full.m * kgp);
  int32_t* dcol = ex.template scratch<int32_t>(full.m * crs);
  for (int64_t n0 = 0; n0 < g.n; n0 += per_block) {
    const int64_t count = std::min(per_block, g.n - n0), rows = count * pq, j0 = n0 * pq;
    const Int8Gemm gm = gemm_for(count);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      ex.map(gm.m * kgp, ops::GradientRows{g, a.dy, a.ld, grp, j0, rows, kgp, dyt});
      ex.gemm(gm, dyt, wt + grp * crs * kgp, dcol);
      ex.map(count * cg * g.h * g.w, ops::Col2im{g, dcol, gm.ldc, grp, n0, count, a.scale, a.dx});
    }
  }
  return true;
}

template <class Exec>
bool backward_weight_tensor_core(Exec& ex, const BackwardWeightArgs& a) {
  const Conv2dGeometry& g = a.g;
  const int64_t kg = ops::out_per_group(g), crs = ops::in_per_group(g) * g.r * g.s;
  const int64_t mp = round_up(crs, ops::kRowAlign);
  // part[kk][t] = sum_j col[t][j] * dy[kk][j] over a block of positions: m = mp, n = K/g, k = the
  // block's length (a multiple of 16 starting at a multiple of 16: dy's rows are ld = N*P*Q
  // rounded up to 16, zero-padded), at most kMaxInt32Terms so the int32 sums are exact.
  const int64_t len_max = std::clamp<int64_t>(ex.block_bytes() / mp / ops::kRowAlign * ops::kRowAlign, ops::kRowAlign,
                                              std::min(ops::kMaxInt32Terms, a.ld));
  auto gemm_for = [&](int64_t len) { return Int8Gemm{mp, kg, len, len, a.ld, mp}; };
  if (!gemms_supported(ex, a.ld, len_max, gemm_for)) return false;
  const int64_t n = g.k * crs;
  int64_t* acc = ex.template scratch<int64_t>(n);
  ex.zero(acc, n);
  int8_t* col = ex.template scratch<int8_t>(mp * len_max);
  int32_t* c = ex.template scratch<int32_t>(mp * kg);
  for (int64_t j0 = 0; j0 < a.ld; j0 += len_max) {
    const int64_t len = std::min(len_max, a.ld - j0);
    const Int8Gemm gm = gemm_for(len);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      ex.map(mp * len, ops::WeightColumns{g, {a.x, a.inv}, grp, j0, len, col});
      ex.gemm(gm, col, a.dy + grp * kg * a.ld + j0, c);
      ex.map(kg * crs, ops::AccumulateWeights{c, gm.ldc, crs, kg, grp, acc});
    }
  }
  ex.map(n, ops::FinishWeights{acc, a.scale, a.dw});
  return true;
}

// ---------------------------------------------------------------- direct (depthwise)

template <class Exec>
bool forward_direct(Exec& ex, const ForwardArgs& a) {
  if (!ops::is_depthwise(a.g)) return false;
  ex.map(a.g.n * a.g.k * a.g.p * a.g.q, ops::DepthwiseForward{a.g, {a.x, a.inv}, a.wq, a.scale, a.bias, a.out});
  return true;
}

template <class Exec>
bool backward_input_direct(Exec& ex, const BackwardInputArgs& a) {
  if (!ops::is_depthwise(a.g)) return false;
  ex.map(a.g.n * a.g.c * a.g.h * a.g.w, ops::DepthwiseBackwardInput{a.g, a.dy, a.ld, a.wq, a.scale, a.dx});
  return true;
}

template <class Exec>
bool backward_weight_direct(Exec& ex, const BackwardWeightArgs& a) {
  if (!ops::is_depthwise(a.g)) return false;
  const ops::DepthwiseWeightTerms terms{a.g, {a.x, a.inv}, a.dy, a.ld};
  const int64_t n = terms.rows();
  int64_t* acc = ex.template scratch<int64_t>(n);
  ex.zero(acc, n);
  ex.sum_rows(terms, acc);
  ex.map(n, ops::FinishWeights{acc, a.scale, a.dw});
  return true;
}

}  // namespace octet::quant::cuda::paths
