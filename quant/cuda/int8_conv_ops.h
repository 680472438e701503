// Operand mapping of the CUDA INT8 convolution (quant/cuda/int8_conv.h): every index computation
// and element function of its kernels, OCTET_HD so that the device kernels and a host emulation
// (tests/quant/test_int8_cuda_emulation.cpp) run the same code; the emulation drives every path
// with them on the CPU and checks the results bit for bit against the CPU kernels, so what only a
// GPU can check is the tiling of the DP4A kernel, the launches and the cuBLASLt call.
//
// Codes the kernels read:
//   x  never stored: quantized on load, int8_round_nearest(x[...], inv_x) -- the paper's fused
//      quantize+convolution, in the forward and again (same codes) in the weight gradient;
//   w  i8 [K, C/g, R, S] (quantized once per forward), repacked per path (a few KB);
//   dy i8 channel-major [K][ld], row k holding positions j = (n*P + p)*Q + q; ld = N*P*Q rounded
//      up to 16, zeros past N*P*Q, so rows start 16-byte aligned (DP4A words, cuBLASLt operands).
// DP4A implicit GEMM: C[m][n] = sum over words u of dp4a(A(m, u), B(u, n)), each word packing four
// int8 codes of the reduction dimension (NC4HW-style: four channels side by side):
//   forward  m = output channel of the group, n = output position j, u = (r*S + s)*C4 + c4: input
//            channels 4c4..4c4+3 at tap (r, s);
//   dx       m = input channel of the group, n = input position (n, h, w), u = (r*S + s)*K4 + k4:
//            output channels 4k4..4k4+3 of dy at the output position tap (r, s) reaches (if any);
//   dw       m = output channel of the group, n = tap t = (c*R + r)*S + s, u = positions 4u..4u+3
//            (one aligned int32 load of a dy row; x's four codes gathered and packed).
// Channels past C/g or K/g and positions past N*P*Q give zero codes. Every sum is an int32 sum of
// at most kMaxInt32Terms products (the dw reduction is split), int64 across splits: exact, so the
// results equal the CPU's bit for bit whatever the order, and rescale once like the CPU:
// y = float(acc) * scale (+ bias).
//   ForwardOps ops{g, x, inv_x, wpack, scale, bias, out};   // C[m][j] -> out
#pragma once

#include <cstdint>

#include "core/hostdevice.h"
#include "core/kernels.h"
#include "quant/int8.h"

namespace octet::quant::cuda::ops {

using kernels::Conv2dGeometry;

// Products of two codes in [-127, 127] an int32 sum can always hold: 2^17 * 127^2 < 2^31.
inline constexpr int64_t kMaxInt32Terms = int64_t{1} << 17;
// Row alignment (elements = bytes) of int8 GEMM operands and dy rows.
inline constexpr int64_t kRowAlign = 16;

OCTET_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
OCTET_HD inline int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

// a / b and a % b (a >= 0, b > 0 here), in 32-bit arithmetic when both fit: the kernels' index
// math is mostly divisions, and a 64-bit division costs several times a 32-bit one on the GPU.
OCTET_HD inline int64_t idiv(int64_t a, int64_t b) {
  if (((a | b) >> 31) == 0) return static_cast<int64_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b));
  return a / b;
}
OCTET_HD inline int64_t imod(int64_t a, int64_t b) { return a - idiv(a, b) * b; }

// Codes q0..q3 (each in [-128, 127]) as the bytes 0..3 of one word, the operand order of dp4a.
OCTET_HD inline int32_t pack4(int32_t q0, int32_t q1, int32_t q2, int32_t q3) {
  const uint32_t w = (static_cast<uint32_t>(q0) & 0xffu) | (static_cast<uint32_t>(q1) & 0xffu) << 8 |
                     (static_cast<uint32_t>(q2) & 0xffu) << 16 | (static_cast<uint32_t>(q3) & 0xffu) << 24;
  return static_cast<int32_t>(w);
}

// c + the dot product of the four signed bytes of a and b (__dp4a on the GPU).
OCTET_HD inline int32_t dp4a(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<int32_t>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
         static_cast<int32_t>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
  return c;
#endif
}

// *p += v on 64-bit integers (an atomic add on the GPU: integer sums are exact in any order).
OCTET_HD inline void add_int64(int64_t* p, int64_t v) {
#ifdef __CUDA_ARCH__
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  *p += v;
#endif
}

// float(acc) * scale + bias: two roundings, never fused (quant/cuda/*.cu build with --fmad=false).
OCTET_HD inline float rescale(int64_t acc, float scale, float bias) { return static_cast<float>(acc) * scale + bias; }

// ---------------------------------------------------------------- geometry

inline bool is_depthwise(const Conv2dGeometry& g) { return g.groups == g.c && g.groups > 1 && g.k % g.c == 0; }

OCTET_HD inline int64_t in_per_group(const Conv2dGeometry& g) { return idiv(g.c, g.groups); }
OCTET_HD inline int64_t out_per_group(const Conv2dGeometry& g) { return idiv(g.k, g.groups); }
OCTET_HD inline int64_t positions(const Conv2dGeometry& g) { return g.n * g.p * g.q; }
// The row length of the channel-major dy codes.
OCTET_HD inline int64_t dy_ld(const Conv2dGeometry& g) { return round_up(positions(g), kRowAlign); }

// The code of input x[n][c][ih][iw], quantized on load; 0 outside the image (padding).
struct InputCodes {
  const float* x;
  float inv;
  OCTET_HD int32_t at(const Conv2dGeometry& g, int64_t n, int64_t c, int64_t ih, int64_t iw) const {
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0;
    return int8_round_nearest(x[((n * g.c + c) * g.h + ih) * g.w + iw], inv);
  }
  // im2col element: reduction index t = (c*R + r)*S + s of group grp at output position j.
  OCTET_HD int32_t im2col(const Conv2dGeometry& g, int64_t grp, int64_t t, int64_t j) const {
    const int64_t ts = idiv(t, g.s), s = t - ts * g.s, c = grp * in_per_group(g) + idiv(ts, g.r), r = imod(ts, g.r);
    const int64_t jq = idiv(j, g.q), q = j - jq * g.q, n = idiv(jq, g.p), p = jq - n * g.p;
    return at(g, n, c, p * g.stride_h - g.pad_h + r * g.dil_h, q * g.stride_w - g.pad_w + s * g.dil_w);
  }
};

// The output position (p, q) of tap (r, s) that reads input (h, w), if there is one: stride and
// padding inverted, h + pad - r*dil must be a non-negative multiple of the stride below P*stride.
OCTET_HD inline bool tap_source(const Conv2dGeometry& g, int64_t h, int64_t w, int64_t r, int64_t s, int64_t& p,
                                int64_t& q) {
  const int64_t hp = h + g.pad_h - r * g.dil_h, wp = w + g.pad_w - s * g.dil_w;
  if (hp < 0 || wp < 0) return false;
  p = idiv(hp, g.stride_h), q = idiv(wp, g.stride_w);
  return p * g.stride_h == hp && q * g.stride_w == wp && p < g.p && q < g.q;
}

// ---------------------------------------------------------------- DP4A operands

// Word u of forward weight row k (a global output channel): w[k][4c4 + i][r][s], i = 0..3.
OCTET_HD inline int32_t forward_weight_word(const Conv2dGeometry& g, const int8_t* wq, int64_t k, int64_t u) {
  const int64_t cg = in_per_group(g), c4s = ceil_div(cg, 4), tap = idiv(u, c4s), c0 = (u - tap * c4s) * 4;
  int32_t q[4];
  for (int i = 0; i < 4; ++i) q[i] = c0 + i < cg ? wq[(k * cg + c0 + i) * g.r * g.s + tap] : 0;
  return pack4(q[0], q[1], q[2], q[3]);
}

// Word u of dx weight row c (a global input channel): w[grp*K/g + 4k4 + i][c % (C/g)][r][s].
OCTET_HD inline int32_t backward_input_weight_word(const Conv2dGeometry& g, const int8_t* wq, int64_t c, int64_t u) {
  const int64_t cg = in_per_group(g), kg = out_per_group(g), k4s = ceil_div(kg, 4);
  const int64_t grp = idiv(c, cg), tap = idiv(u, k4s), k0 = (u - tap * k4s) * 4;
  int32_t q[4];
  for (int i = 0; i < 4; ++i) q[i] = k0 + i < kg ? wq[((grp * kg + k0 + i) * cg + c - grp * cg) * g.r * g.s + tap] : 0;
  return pack4(q[0], q[1], q[2], q[3]);
}

// The packed weight words of the dp4a path: `rows` rows of `words` words, row k of the forward
// (forward_weight_word) or, for dx, row c (backward_input_weight_word).
struct PackedWeights {
  Conv2dGeometry g;
  const int8_t* wq;
  int64_t words;
  bool for_dx;
  int32_t* out;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t row = idiv(i, words), u = i - row * words;
    out[i] = for_dx ? backward_input_weight_word(g, wq, row, u) : forward_weight_word(g, wq, row, u);
  }
};

// Forward: out[n][grp*K/g + m][p][q] = float(C[m][j]) * scale + bias. wpack holds the words of
// every output channel, row k = grp*K/g + m of length words().
struct ForwardOps {
  Conv2dGeometry g;
  InputCodes x;
  const int32_t* wpack;
  float scale;
  const float* bias;  // or null
  float* out;

  OCTET_HD int64_t rows() const { return out_per_group(g); }
  OCTET_HD int64_t cols() const { return positions(g); }
  OCTET_HD int64_t words() const { return g.r * g.s * ceil_div(in_per_group(g), 4); }
  OCTET_HD int32_t a(int64_t grp, int64_t m, int64_t u) const { return wpack[(grp * rows() + m) * words() + u]; }
  OCTET_HD int32_t b(int64_t grp, int64_t u, int64_t j) const {
    const int64_t cg = in_per_group(g), c4s = ceil_div(cg, 4), tap = idiv(u, c4s), c0 = grp * cg + (u - tap * c4s) * 4;
    const int64_t r = idiv(tap, g.s), s = tap - r * g.s;
    const int64_t jq = idiv(j, g.q), q = j - jq * g.q, n = idiv(jq, g.p), p = jq - n * g.p;
    const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h, iw = q * g.stride_w - g.pad_w + s * g.dil_w;
    const int64_t c_end = (grp + 1) * cg;
    int32_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = c0 + i < c_end ? x.at(g, n, c0 + i, ih, iw) : 0;
    return pack4(v[0], v[1], v[2], v[3]);
  }
  OCTET_HD void store(int64_t grp, int64_t m, int64_t j, int32_t acc) const {
    const int64_t k = grp * rows() + m, pq = g.p * g.q, n = idiv(j, pq);
    out[(n * g.k + k) * pq + j - n * pq] = rescale(acc, scale, bias ? bias[k] : 0.0f);
  }
};

// dx: dx[n][grp*C/g + m][h][w] = float(C[m][j]) * scale + 0 (the CPU's rescale adds a zero bias).
// wpack holds row c (a global input channel) of length words().
struct BackwardInputOps {
  Conv2dGeometry g;
  const int8_t* dy;  // [K][ld]
  int64_t ld;
  const int32_t* wpack;
  float scale;
  float* dx;

  OCTET_HD int64_t rows() const { return in_per_group(g); }
  OCTET_HD int64_t cols() const { return g.n * g.h * g.w; }
  OCTET_HD int64_t words() const { return g.r * g.s * ceil_div(out_per_group(g), 4); }
  OCTET_HD int32_t a(int64_t grp, int64_t m, int64_t u) const { return wpack[(grp * rows() + m) * words() + u]; }
  OCTET_HD int32_t b(int64_t grp, int64_t u, int64_t j) const {
    const int64_t kg = out_per_group(g), k4s = ceil_div(kg, 4), tap = idiv(u, k4s), k0 = (u - tap * k4s) * 4;
    const int64_t jw = idiv(j, g.w), w = j - jw * g.w, n = idiv(jw, g.h), h = jw - n * g.h, r = idiv(tap, g.s);
    int64_t p, q;
    if (!tap_source(g, h, w, r, tap - r * g.s, p, q)) return 0;
    const int8_t* col = dy + (grp * kg + k0) * ld + (n * g.p + p) * g.q + q;
    int32_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = k0 + i < kg ? col[i * ld] : 0;
    return pack4(v[0], v[1], v[2], v[3]);
  }
  OCTET_HD void store(int64_t grp, int64_t m, int64_t j, int32_t acc) const {
    const int64_t hw = g.h * g.w, n = idiv(j, hw);
    dx[(n * g.c + grp * rows() + m) * hw + j - n * hw] = rescale(acc, scale, 0.0f);
  }
};

// dw: acc[grp*K/g + m][t] += C[m][t] over position words [u0, u1) of one split (the caller zeroes
// acc and converts it once all splits are in: dw = float(acc) * scale).
struct BackwardWeightOps {
  Conv2dGeometry g;
  InputCodes x;
  const int8_t* dy;  // [K][ld], ld a multiple of 4: rows of whole words
  int64_t ld;
  int64_t* acc;  // [K][C/g*R*S]

  OCTET_HD int64_t rows() const { return out_per_group(g); }
  OCTET_HD int64_t cols() const { return in_per_group(g) * g.r * g.s; }
  OCTET_HD int64_t words() const { return ld / 4; }
  OCTET_HD int32_t a(int64_t grp, int64_t m, int64_t u) const {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(dy + (grp * rows() + m) * ld + 4 * u);
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const int32_t*>(p);  // 4-byte aligned: ld % 4 == 0
#else
    return pack4(static_cast<int8_t>(p[0]), static_cast<int8_t>(p[1]), static_cast<int8_t>(p[2]),
                 static_cast<int8_t>(p[3]));
#endif
  }
  OCTET_HD int32_t b(int64_t grp, int64_t u, int64_t t) const {
    const int64_t total = positions(g);
    int32_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = 4 * u + i < total ? x.im2col(g, grp, t, 4 * u + i) : 0;
    return pack4(v[0], v[1], v[2], v[3]);
  }
  OCTET_HD void store(int64_t grp, int64_t m, int64_t t, int32_t part) const {
    add_int64(acc + (grp * rows() + m) * cols() + t, part);
  }
};

// Words per split of the dw reduction: at most kMaxInt32Terms products in one int32 sum, and
// small enough that a few hundred blocks share the work of a layer with a small dW.
inline constexpr int64_t kDwSplitWords = 1024;
static_assert(4 * kDwSplitWords <= kMaxInt32Terms, "a dw split must fit an int32 sum");

// ---------------------------------------------------------------- tensor-core (im2col + GEMM) operands

// One int8 GEMM as cuBLASLt computes it with A transposed ("TN", the layout its IMMA kernels take):
// C[j*ldc + i] = sum_t A[i*lda + t] * B[j*ldb + t] for i < m, j < n, t < k (column-major m x n C).
// m, k, lda, ldb, ldc multiples of 4 (here of 16) and 16-byte aligned pointers.
struct Int8Gemm {
  int64_t m, n, k, lda, ldb, ldc;
};

// cuBLASLt's rules for int8 GEMMs in this layout (its documentation of cublasLtMatmul: "TN" only,
// m and k and the leading dimensions multiples of 4; pointers 4-byte aligned, 16 for speed).
inline bool follows_int8_gemm_rules(const Int8Gemm& g) {
  return g.m > 0 && g.n > 0 && g.k > 0 && g.m % 4 == 0 && g.k % 4 == 0 && g.lda % 4 == 0 && g.ldb % 4 == 0 &&
         g.ldc % 4 == 0 && g.lda >= g.k && g.ldb >= g.k && g.ldc >= g.m;
}

// Forward, per group and block of `rows` output positions from j0: colT [m_pad][kr], row jl holding
// the reduction elements t = (c*R + r)*S + s (zero past C/g*R*S and past `rows`).
struct ForwardColumns {
  Conv2dGeometry g;
  InputCodes x;
  int64_t grp, j0, rows, kr;
  int8_t* colt;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t jl = idiv(i, kr), t = i - jl * kr;
    colt[i] = static_cast<int8_t>(jl < rows && t < in_per_group(g) * g.r * g.s ? x.im2col(g, grp, t, j0 + jl) : 0);
  }
};

// Weights rows [K][kr] for the forward GEMM (zero past C/g*R*S).
struct PaddedWeights {
  const int8_t* wq;
  int64_t crs, kr;
  int8_t* out;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t k = idiv(i, kr), t = i - k * kr;
    out[i] = t < crs ? wq[k * crs + t] : int8_t{0};
  }
};

// out[n][grp*K/g + kk][pq] = float(c[kk*ldc + jl]) * scale + bias for the block's positions.
struct ForwardRescale {
  Conv2dGeometry g;
  const int32_t* c;
  int64_t ldc, grp, j0, rows;
  float scale;
  const float* bias;
  float* out;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t kk = idiv(i, rows), jl = i - kk * rows, k = grp * out_per_group(g) + kk, j = j0 + jl, pq = g.p * g.q;
    const int64_t n = idiv(j, pq);
    out[(n * g.k + k) * pq + j - n * pq] = rescale(c[kk * ldc + jl], scale, bias ? bias[k] : 0.0f);
  }
};

// dx, per group and block of whole samples (positions j0 = n0*P*Q ..): dyT [m_pad][kgp], row jl
// holding dy's codes of the group's output channels at position j0 + jl.
struct GradientRows {
  Conv2dGeometry g;
  const int8_t* dy;
  int64_t ld, grp, j0, rows, kgp;
  int8_t* dyt;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t jl = idiv(i, kgp), kk = i - jl * kgp;
    dyt[i] = jl < rows && kk < out_per_group(g) ? dy[(grp * out_per_group(g) + kk) * ld + j0 + jl] : int8_t{0};
  }
};

// Transposed weights [groups][C/g*R*S][kgp]: row t of group grp holds w[grp*K/g + kk][t].
struct TransposedWeights {
  Conv2dGeometry g;
  const int8_t* wq;
  int64_t kgp;
  int8_t* out;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t crs = in_per_group(g) * g.r * g.s, ik = idiv(i, kgp), kk = i - ik * kgp, grp = idiv(ik, crs),
                  t = ik - grp * crs;
    out[i] = kk < out_per_group(g) ? wq[(grp * out_per_group(g) + kk) * crs + t] : int8_t{0};
  }
};

// dx of the block's samples from the GEMM's columns dcol[t*ldc + jl] (t = (c*R + r)*S + s of the
// group, jl the position in the block): each dx element gathers the taps that read it.
struct Col2im {
  Conv2dGeometry g;
  const int32_t* dcol;
  int64_t ldc, grp, n0, count;  // samples n0 .. n0 + count
  float scale;
  float* dx;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t cg = in_per_group(g), iw = idiv(i, g.w), w = i - iw * g.w, ih = idiv(iw, g.h), h = iw - ih * g.h,
                  nl = idiv(ih, cg), c = ih - nl * cg, hw = g.h * g.w;
    int64_t acc = 0;
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        int64_t p, q;
        if (tap_source(g, h, w, r, s, p, q)) acc += dcol[((c * g.r + r) * g.s + s) * ldc + (nl * g.p + p) * g.q + q];
      }
    dx[((n0 + nl) * g.c + grp * cg + c) * hw + h * g.w + w] = rescale(acc, scale, 0.0f);
  }
};

// dw, per group and block of positions [j0, j0 + len): col [m_pad][len], row t holding x's codes of
// reduction element t at the block's positions (zero past C/g*R*S and past N*P*Q).
struct WeightColumns {
  Conv2dGeometry g;
  InputCodes x;
  int64_t grp, j0, len;
  int8_t* col;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t t = idiv(i, len), j = j0 + i - t * len;
    col[i] = static_cast<int8_t>(t < in_per_group(g) * g.r * g.s && j < positions(g) ? x.im2col(g, grp, t, j) : 0);
  }
};

// acc[grp*K/g + kk][t] += c[kk*ldc + t] (one block's partial dW of the group).
struct AccumulateWeights {
  const int32_t* c;
  int64_t ldc, crs, kg, grp;
  int64_t* acc;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t kk = idiv(i, crs), t = i - kk * crs;
    acc[(grp * kg + kk) * crs + t] += c[kk * ldc + t];
  }
};

// dw[i] = float(acc[i]) * scale (no bias term, as the CPU).
struct FinishWeights {
  const int64_t* acc;
  float scale;
  float* dw;
  OCTET_HD void operator()(int64_t i) const { dw[i] = static_cast<float>(acc[i]) * scale; }
};

// ---------------------------------------------------------------- depthwise (direct) operands

// Depthwise (groups == C, K = m*C: output channel k reads input channel k / m), one output each.
struct DepthwiseForward {
  Conv2dGeometry g;
  InputCodes x;
  const int8_t* wq;  // [K][R*S]
  float scale;
  const float* bias;
  float* out;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t iq = idiv(i, g.q), q = i - iq * g.q, ip = idiv(iq, g.p), p = iq - ip * g.p, n = idiv(ip, g.k),
                  k = ip - n * g.k, c = idiv(k, idiv(g.k, g.c));
    int32_t acc = 0;
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s)
        acc += x.at(g, n, c, p * g.stride_h - g.pad_h + r * g.dil_h, q * g.stride_w - g.pad_w + s * g.dil_w) *
               static_cast<int32_t>(wq[k * g.r * g.s + r * g.s + s]);
    out[i] = rescale(acc, scale, bias ? bias[k] : 0.0f);
  }
};

// One dx element: the taps of the m output channels of its input channel that read it. The CPU's
// depthwise kernel adds a zero bias in its rescale except for column strides > 1 (it writes
// float(acc) * scale there); mirrored, so that even the sign of an underflowing zero agrees.
struct DepthwiseBackwardInput {
  Conv2dGeometry g;
  const int8_t* dy;  // [K][ld]
  int64_t ld;
  const int8_t* wq;
  float scale;
  float* dx;
  OCTET_HD void operator()(int64_t i) const {
    const int64_t iw = idiv(i, g.w), w = i - iw * g.w, ih = idiv(iw, g.h), h = iw - ih * g.h, n = idiv(ih, g.c),
                  c = ih - n * g.c, mult = idiv(g.k, g.c);
    int32_t acc = 0;
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        int64_t p, q;
        if (!tap_source(g, h, w, r, s, p, q)) continue;
        for (int64_t k = c * mult; k < (c + 1) * mult; ++k)
          acc += static_cast<int32_t>(dy[k * ld + (n * g.p + p) * g.q + q]) *
                 static_cast<int32_t>(wq[k * g.r * g.s + r * g.s + s]);
      }
    const float v = static_cast<float>(acc) * scale;
    dx[i] = g.stride_w == 1 ? v + 0.0f : v;
  }
};

// The terms of depthwise dw[k][t] (row = k*R*S + t): dy[k][j] * x's code at tap t of position j.
struct DepthwiseWeightTerms {
  Conv2dGeometry g;
  InputCodes x;
  const int8_t* dy;  // [K][ld]
  int64_t ld;
  OCTET_HD int64_t rows() const { return g.k * g.r * g.s; }
  OCTET_HD int64_t cols() const { return positions(g); }
  OCTET_HD int32_t operator()(int64_t row, int64_t j) const {
    const int64_t rs = g.r * g.s, k = idiv(row, rs), t = row - k * rs;
    const int8_t d = dy[k * ld + j];
    if (d == 0) return 0;
    // In-group reduction index t = (0*R + r)*S + s: the group is input channel k / m.
    const int64_t jq = idiv(j, g.q), q = j - jq * g.q, n = idiv(jq, g.p), p = jq - n * g.p, r = idiv(t, g.s);
    return static_cast<int32_t>(d) * x.at(g, n, idiv(k, idiv(g.k, g.c)), p * g.stride_h - g.pad_h + r * g.dil_h,
                                          q * g.stride_w - g.pad_w + (t - r * g.s) * g.dil_w);
  }
};

}  // namespace octet::quant::cuda::ops
