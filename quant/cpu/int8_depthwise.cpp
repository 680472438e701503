// Depthwise INT8 convolution kernels (groups == C, K = m*C: output channel k reads input channel
// k / m), int32 accumulation, codes channel-major (quant/cpu/int8_conv.h). A GEMM does not fit
// them (C GEMMs of one row each), so they are direct loops, in two forms:
//   wide (stride 1): the N planes of a channel are consecutive in the channel-major codes; copied
//     into a zero-padded [nb][H+2ph][W+2pw] block they form one tall image with row stride Wp, and
//     a tap (r, s) is one contiguous loop acc[i] += w * xp[i + r*dh*Wp + s*dw] over the whole block
//     (the outputs at the wrapped columns and across sample seams are computed and dropped). Long
//     vectorized loops instead of P*R*S short rows: on 8x8 and 4x4 planes the row loops were ~10x
//     slower than oneDNN's FP32 depthwise. dx is the same with dy padded by dil*(R-1) - pad and
//     the taps flipped; dw is a dot product of the zero-embedded dy block with the shifted x block.
//   rows (strides > 1, and the rare cases the wide form does not cover): per output row and tap.
// Built with -ffp-contract=off (CMakeLists.txt), like every file compiled per ISA.
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "quant/cpu/int8_conv_detail.h"
#include "core/cpu/isa.h"

namespace octet::quant::cpu::detail {

namespace {

// ---------------------------------------------------------------- rows (any stride)

// acc[q] += w * x[iw0 + q*stride] for q in [lo, hi)
OCTET_SIMD_INLINE void tap_gather(int32_t* acc, const int8_t* x, int64_t iw0, int64_t lo, int64_t hi, int64_t stride,
                                  int32_t w) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) acc[q] += w * static_cast<int32_t>(x[iw0 + q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) acc[q] += w * static_cast<int32_t>(x[iw0 + q * stride]);
  }
}

// acc[iw0 + q*stride] += w * dy[q] for q in [lo, hi)
OCTET_SIMD_INLINE void tap_scatter(int32_t* acc, const int8_t* dy, int64_t iw0, int64_t lo, int64_t hi, int64_t stride,
                                   int32_t w) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) acc[iw0 + q] += w * static_cast<int32_t>(dy[q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) acc[iw0 + q * stride] += w * static_cast<int32_t>(dy[q]);
  }
}

// sum dy[q] * x[iw0 + q*stride] for q in [lo, hi)
OCTET_SIMD_INLINE int32_t tap_dot(const int8_t* dy, const int8_t* x, int64_t iw0, int64_t lo, int64_t hi,
                                  int64_t stride) {
  int32_t s = 0;
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) s += static_cast<int32_t>(dy[q]) * static_cast<int32_t>(x[iw0 + q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) s += static_cast<int32_t>(dy[q]) * static_cast<int32_t>(x[iw0 + q * stride]);
  }
  return s;
}

// Output planes nk in [b0, b1); acc: P*Q scratch.
OCTET_SIMD_CLONES void rows_forward_planes(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale,
                                           const float* bias, float* out, int64_t b0, int64_t b1, int32_t* acc) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  for (int64_t nk = b0; nk < b1; ++nk) {
    const int64_t n = nk / g.k, k = nk % g.k;
    const int8_t* xc = x + ((k / m) * g.n + n) * hw;
    std::fill(acc, acc + pq, 0);
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const int32_t wv = w[k * rs + r * g.s + s];
        if (wv == 0) continue;
        for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
          tap_gather(acc + p * g.q, xc + ih * g.w, iw0, q_lo, q_hi, g.stride_w, wv);
        });
      }
    rescale_run(acc, pq, scale, bias ? bias[k] : 0.0f, out + nk * pq);
  }
}

void rows_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                  float* out) {
  parallel_for(0, g.n * g.k, grain_for(g.p * g.q * g.r * g.s), [&](int64_t b0, int64_t b1) {
    std::vector<int32_t> acc(static_cast<size_t>(g.p * g.q));
    rows_forward_planes(g, x, w, scale, bias, out, b0, b1, acc.data());
  });
}

// dx planes nc in [b0, b1), each gathering from its m output channels; acc: H*W scratch.
OCTET_SIMD_CLONES void rows_backward_input_planes(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w,
                                                  float scale, float* dx, int64_t b0, int64_t b1, int32_t* acc) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  for (int64_t nc = b0; nc < b1; ++nc) {
    const int64_t n = nc / g.c, c = nc % g.c;
    std::fill(acc, acc + hw, 0);
    for (int64_t k = c * m; k < (c + 1) * m; ++k) {
      const int8_t* dyk = dy + (k * g.n + n) * pq;
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) {
          const int32_t wv = w[k * rs + r * g.s + s];
          if (wv == 0) continue;
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            tap_scatter(acc + ih * g.w, dyk + p * g.q, iw0, q_lo, q_hi, g.stride_w, wv);
          });
        }
    }
    rescale_run(acc, hw, scale, 0.0f, dx + nc * hw);
  }
}

void rows_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const int64_t m = g.k / g.c;
  parallel_for(0, g.n * g.c, grain_for(m * g.p * g.q * g.r * g.s), [&](int64_t b0, int64_t b1) {
    std::vector<int32_t> acc(static_cast<size_t>(g.h * g.w));
    rows_backward_input_planes(g, dy, w, scale, dx, b0, b1, acc.data());
  });
}

// dw[k][r][s] for k in [k0, k1), summed over n, p, q; each row's sum fits int32 (Q < 2^17), the
// total is int64.
OCTET_SIMD_CLONES void rows_backward_weight_channels(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy,
                                                     float scale, float* dw, int64_t k0, int64_t k1) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        int64_t acc = 0;
        for (int64_t n = 0; n < g.n; ++n) {
          const int8_t* xc = x + ((k / m) * g.n + n) * hw;
          const int8_t* dyk = dy + (k * g.n + n) * pq;
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            acc += tap_dot(dyk + p * g.q, xc + ih * g.w, iw0, q_lo, q_hi, g.stride_w);
          });
        }
        dw[k * rs + r * g.s + s] = static_cast<float>(acc) * scale;
      }
}

void rows_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  parallel_for(0, g.k, grain_for(g.n * g.p * g.q * g.r * g.s),
               [&](int64_t k0, int64_t k1) { rows_backward_weight_channels(g, x, dy, scale, dw, k0, k1); });
}

// ---------------------------------------------------------------- wide (stride 1)

// Planes [nb][h][w] copied into a zeroed [nb][hp][wp] block at row oy, column ox.
inline void embed_planes(const int8_t* src, int64_t nb, int64_t h, int64_t w, int64_t hp, int64_t wp, int64_t oy,
                         int64_t ox, int8_t* dst) {
  std::memset(dst, 0, static_cast<size_t>(nb * hp * wp));
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t y = 0; y < h; ++y)
      std::memcpy(dst + (n * hp + y + oy) * wp + ox, src + (n * h + y) * w, static_cast<size_t>(w));
}

OCTET_SIMD_INLINE void wide_tap(int32_t* acc, const int8_t* x, int64_t len, int32_t w) {
  for (int64_t i = 0; i < len; ++i) acc[i] += w * static_cast<int32_t>(x[i]);
}

OCTET_SIMD_INLINE int32_t wide_dot(const int8_t* a, const int8_t* b, int64_t len) {
  int32_t s = 0;
  for (int64_t i = 0; i < len; ++i) s += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return s;
}

// A block of samples of one channel in the wide layout: rows hp, columns wp; `out_h` x `out_w`
// outputs per sample at (n*hp + y)*wp + x.
struct Wide {
  int64_t hp, wp, nb;  // nb samples per block
  int64_t blocks(int64_t n) const { return (n + nb - 1) / nb; }
  // Accumulator length covering the last sample's last output of a block of `count` samples.
  int64_t len(int64_t count, int64_t out_h, int64_t out_w) const { return ((count - 1) * hp + out_h - 1) * wp + out_w; }
};

// Blocks of about 16K positions (codes and int32 sums stay in L2), at least one sample.
Wide make_wide(int64_t hp, int64_t wp, int64_t n) { return {hp, wp, std::clamp<int64_t>(16384 / (hp * wp), 1, n)}; }

// Items (k, block) in [i0, i1): out[n][k] for the block's samples.
OCTET_SIMD_CLONES void wide_forward_items(const Conv2dGeometry& g, const Wide& v, const int8_t* x, const int8_t* w,
                                          float scale, const float* bias, float* out, int64_t i0, int64_t i1,
                                          int8_t* xp, int32_t* acc) {
  const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s, nblocks = v.blocks(g.n);
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t k = item / nblocks, n0 = (item % nblocks) * v.nb, cnt = std::min(v.nb, g.n - n0);
    embed_planes(x + ((k / m) * g.n + n0) * hw, cnt, g.h, g.w, v.hp, v.wp, g.pad_h, g.pad_w, xp);
    const int64_t len = v.len(cnt, g.p, g.q);
    std::fill(acc, acc + len, 0);
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s)
        wide_tap(acc, xp + r * g.dil_h * v.wp + s * g.dil_w, len, w[k * rs + r * g.s + s]);
    const float b = bias ? bias[k] : 0.0f;
    for (int64_t n = 0; n < cnt; ++n)
      for (int64_t p = 0; p < g.p; ++p)
        rescale_run(acc + (n * v.hp + p) * v.wp, g.q, scale, b, out + ((n0 + n) * g.k + k) * pq + p * g.q);
  }
}

// Items (c, block): dx[n][c] = sum over c's m output channels of dy padded by dil*(R-1) - pad,
// correlated with the flipped taps.
OCTET_SIMD_CLONES void wide_backward_input_items(const Conv2dGeometry& g, const Wide& v, const int8_t* dy,
                                                 const int8_t* w, float scale, float* dx, int64_t i0, int64_t i1,
                                                 int8_t* dyp, int32_t* acc) {
  const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s, nblocks = v.blocks(g.n);
  const int64_t top = g.dil_h * (g.r - 1) - g.pad_h, left = g.dil_w * (g.s - 1) - g.pad_w;
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t c = item / nblocks, n0 = (item % nblocks) * v.nb, cnt = std::min(v.nb, g.n - n0);
    const int64_t len = v.len(cnt, g.h, g.w);
    std::fill(acc, acc + len, 0);
    for (int64_t k = c * m; k < (c + 1) * m; ++k) {
      embed_planes(dy + (k * g.n + n0) * pq, cnt, g.p, g.q, v.hp, v.wp, top, left, dyp);
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s)
          wide_tap(acc, dyp + r * g.dil_h * v.wp + s * g.dil_w, len, w[k * rs + (rs - 1 - (r * g.s + s))]);
    }
    for (int64_t n = 0; n < cnt; ++n)
      for (int64_t y = 0; y < g.h; ++y)
        rescale_run(acc + (n * v.hp + y) * v.wp, g.w, scale, 0.0f, dx + ((n0 + n) * g.c + c) * hw + y * g.w);
  }
}

// Channels k in [k0, k1): dw[k][r][s] = sum over blocks of dot(dy block embedded at (0, 0),
// x block padded and shifted by the tap). A block's dot has at most 16K nonzero terms (int32);
// blocks add up in int64.
OCTET_SIMD_CLONES void wide_backward_weight_channels(const Conv2dGeometry& g, const Wide& v, const int8_t* x,
                                                     const int8_t* dy, float scale, float* dw, int64_t k0, int64_t k1,
                                                     int8_t* xp, int8_t* dyw, int64_t* acc) {
  const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s;
  for (int64_t k = k0; k < k1; ++k) {
    std::fill(acc, acc + rs, 0);
    for (int64_t n0 = 0; n0 < g.n; n0 += v.nb) {
      const int64_t cnt = std::min(v.nb, g.n - n0), len = v.len(cnt, g.p, g.q);
      embed_planes(x + ((k / m) * g.n + n0) * hw, cnt, g.h, g.w, v.hp, v.wp, g.pad_h, g.pad_w, xp);
      embed_planes(dy + (k * g.n + n0) * pq, cnt, g.p, g.q, v.hp, v.wp, 0, 0, dyw);
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) acc[r * g.s + s] += wide_dot(dyw, xp + r * g.dil_h * v.wp + s * g.dil_w, len);
    }
    for (int64_t i = 0; i < rs; ++i) dw[k * rs + i] = static_cast<float>(acc[i]) * scale;
  }
}

bool stride_one(const Conv2dGeometry& g) { return g.stride_h == 1 && g.stride_w == 1; }

}  // namespace

void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out) {
  const int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  if (!stride_one(g) || hp * wp > kMaxInt32Terms) return rows_forward(g, x, w, scale, bias, out);
  const Wide v = make_wide(hp, wp, g.n);
  parallel_for(0, g.k * v.blocks(g.n), grain_for(v.nb * hp * wp * g.r * g.s), [&](int64_t i0, int64_t i1) {
    std::vector<int8_t> xp(static_cast<size_t>(v.nb * hp * wp));
    std::vector<int32_t> acc(xp.size());
    wide_forward_items(g, v, x, w, scale, bias, out, i0, i1, xp.data(), acc.data());
  });
}

void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const int64_t hp = g.h + g.dil_h * (g.r - 1), wp = g.w + g.dil_w * (g.s - 1);
  const bool padded_less_than_kernel = g.pad_h <= g.dil_h * (g.r - 1) && g.pad_w <= g.dil_w * (g.s - 1);
  if (!stride_one(g) || !padded_less_than_kernel || hp * wp > kMaxInt32Terms)
    return rows_backward_input(g, dy, w, scale, dx);
  const Wide v = make_wide(hp, wp, g.n);
  const int64_t m = g.k / g.c;
  parallel_for(0, g.c * v.blocks(g.n), grain_for(m * v.nb * hp * wp * g.r * g.s), [&](int64_t i0, int64_t i1) {
    std::vector<int8_t> dyp(static_cast<size_t>(v.nb * hp * wp));
    std::vector<int32_t> acc(dyp.size());
    wide_backward_input_items(g, v, dy, w, scale, dx, i0, i1, dyp.data(), acc.data());
  });
}

void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  const int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  if (!stride_one(g) || hp * wp > kMaxInt32Terms) return rows_backward_weight(g, x, dy, scale, dw);
  const Wide v = make_wide(hp, wp, g.n);
  parallel_for(0, g.k, grain_for(g.n * hp * wp * g.r * g.s), [&](int64_t k0, int64_t k1) {
    std::vector<int8_t> xp(static_cast<size_t>(v.nb * hp * wp)), dyw(xp.size());
    std::vector<int64_t> acc(static_cast<size_t>(g.r * g.s));
    wide_backward_weight_channels(g, v, x, dy, scale, dw, k0, k1, xp.data(), dyw.data(), acc.data());
  });
}

}  // namespace octet::quant::cpu::detail
