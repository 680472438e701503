// Depthwise INT8 convolution kernels (groups == C, K = m*C: output channel k reads input channel
// k / m), int32 accumulation, codes channel-major (quant/cpu/int8_conv.h). A GEMM does not fit
// them (C GEMMs of one row each), so they are direct loops over "wide" rows. The N planes of a
// channel are consecutive in the channel-major codes; copied into a zero-padded [nb][H+2ph][W+2pw]
// block they form one tall image with row stride Wp, and a tap (r, s) is one contiguous loop
// acc[i] += w * xp[i + r*dh*Wp + s*dw] over the whole block (the outputs at the wrapped columns and
// across sample seams are computed and dropped). Long vectorized loops instead of P*R*S short
// rows: on 8x8 and 4x4 planes per-row loops were ~10x slower than oneDNN's FP32 depthwise. A
// stride splits the padded input into sh*sw phase planes (every sh-th row from row a, every sw-th
// column from column b), in which each tap is again a stride-1 shift. dx accumulates each phase of
// the padded dx from the taps of that phase; dw is a dot product of the zero-embedded dy block with
// the shifted phase planes.
// Built with -ffp-contract=off (CMakeLists.txt), like every file compiled per ISA.
#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/parallel.h"
#include "quant/cpu/int8_conv_detail.h"

namespace octet::quant::cpu::detail {

namespace {

// Planes [nb][h][w] copied into a zeroed [nb][hp][wp] block at row oy, column ox. Rows of small
// planes are a few bytes: copied inline (a memcpy call per 4- or 8-byte row cost more than the
// convolution of the block).
OCTET_SIMD_INLINE void embed_planes(const int8_t* src, int64_t nb, int64_t h, int64_t w, int64_t hp, int64_t wp,
                                    int64_t oy, int64_t ox, int8_t* dst) {
  std::memset(dst, 0, static_cast<size_t>(nb * hp * wp));
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t y = 0; y < h; ++y) {
      int8_t* __restrict d = dst + (n * hp + y + oy) * wp + ox;
      const int8_t* __restrict s = src + (n * h + y) * w;
      if (w >= 64)
        std::memcpy(d, s, static_cast<size_t>(w));
      else
        for (int64_t x = 0; x < w; ++x) d[x] = s[x];
    }
}

OCTET_SIMD_INLINE void wide_tap(int32_t* acc, const int8_t* x, int64_t len, int32_t w) {
  for (int64_t i = 0; i < len; ++i) acc[i] += w * static_cast<int32_t>(x[i]);
}

OCTET_SIMD_INLINE int32_t wide_dot(const int8_t* a, const int8_t* b, int64_t len) {
  int32_t s = 0;
  for (int64_t i = 0; i < len; ++i) s += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return s;
}

// The stride phases of the zero-padded input: phase (a, b) holds the padded rows a, a + sh, ... and
// columns b, b + sw, ..., so tap (r, s) of a strided conv reads one phase plane at a stride-1 shift:
// padded row p*sh + r*dh = (p + r*dh / sh)*sh + r*dh % sh. Stride 1 has one phase, the padded input.
struct Phases {
  int64_t sh, sw;    // strides; sh * sw phases
  int64_t hph, wph;  // rows and columns of a phase plane
  int64_t nb;        // samples per block
  int64_t count() const { return sh * sw; }
  int64_t plane() const { return hph * wph; }
  int64_t blocks(int64_t n) const { return (n + nb - 1) / nb; }
  // Phase and offset (in a phase plane) of padded row r*dh, column s*dw.
  int64_t phase(const Conv2dGeometry& g, int64_t r, int64_t s) const {
    return (r * g.dil_h % sh) * sw + s * g.dil_w % sw;
  }
  int64_t offset(const Conv2dGeometry& g, int64_t r, int64_t s, int64_t row_stride) const {
    return (r * g.dil_h / sh) * row_stride + s * g.dil_w / sw;
  }
};

// Blocks of about 16K padded input positions (codes and int32 sums stay in L2), one sample or more.
Phases make_phases(const Conv2dGeometry& g) {
  const int64_t hp = g.h + 2 * g.pad_h, wp = g.w + 2 * g.pad_w;
  return {g.stride_h, g.stride_w, (hp + g.stride_h - 1) / g.stride_h, (wp + g.stride_w - 1) / g.stride_w,
          std::clamp<int64_t>(16384 / (hp * wp), 1, g.n)};
}

// xph[phase][n][i][j] = x[n][i*sh + a - ph][j*sw + b - pw] (0 outside) for `cnt` samples [cnt][H][W].
OCTET_SIMD_INLINE void split_phases(const Conv2dGeometry& g, const Phases& v, const int8_t* x, int64_t cnt,
                                    int8_t* xph) {
  if (v.count() == 1) return embed_planes(x, cnt, g.h, g.w, v.hph, v.wph, g.pad_h, g.pad_w, xph);
  std::memset(xph, 0, static_cast<size_t>(v.count() * v.nb * v.plane()));
  for (int64_t a = 0; a < v.sh; ++a)
    for (int64_t b = 0; b < v.sw; ++b) {
      int64_t j_lo, j_hi;  // columns j whose input column j*sw + b - pw is inside the image
      valid_range(b - g.pad_w, v.sw, g.w, v.wph, j_lo, j_hi);
      int8_t* dst = xph + (a * v.sw + b) * v.nb * v.plane();
      for (int64_t n = 0; n < cnt; ++n)
        for (int64_t i = 0; i < v.hph; ++i) {
          const int64_t y = i * v.sh + a - g.pad_h;
          if (y < 0 || y >= g.h) continue;
          const int8_t* row = x + (n * g.h + y) * g.w;
          int8_t* d = dst + (n * v.hph + i) * v.wph;
          for (int64_t j = j_lo; j < j_hi; ++j) d[j] = row[j * v.sw + b - g.pad_w];
        }
    }
}

// Accumulator length for outputs [out_h][out_w] of `cnt` samples in a grid of row stride `stride`
// and `rows` rows per sample: the last sample's last output, plus one.
int64_t grid_len(int64_t cnt, int64_t rows, int64_t stride, int64_t out_h, int64_t out_w) {
  return ((cnt - 1) * rows + out_h - 1) * stride + out_w;
}

// Items (k, block) in [i0, i1): out[n][k] for the block's samples, on the grid of the phase planes.
void wide_forward_items(const Conv2dGeometry& g, const Phases& v, const int8_t* x, const int8_t* w, float scale,
                        const float* bias, float* out, int64_t i0, int64_t i1, int8_t* xph, int32_t* acc) {
  return octet::cpu::simd_dispatch([=] {
    const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s, nblocks = v.blocks(g.n);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t k = item / nblocks, n0 = (item % nblocks) * v.nb, cnt = std::min(v.nb, g.n - n0);
      split_phases(g, v, x + ((k / m) * g.n + n0) * hw, cnt, xph);
      const int64_t len = grid_len(cnt, v.hph, v.wph, g.p, g.q);
      std::fill(acc, acc + len, 0);
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) {
          const int8_t* src = xph + v.phase(g, r, s) * v.nb * v.plane() + v.offset(g, r, s, v.wph);
          wide_tap(acc, src, len, w[k * rs + r * g.s + s]);
        }
      const float b = bias ? bias[k] : 0.0f;
      for (int64_t n = 0; n < cnt; ++n)
        for (int64_t p = 0; p < g.p; ++p)
          rescale_run(acc + (n * v.hph + p) * v.wph, g.q, scale, b, out + ((n0 + n) * g.k + k) * pq + p * g.q);
    }
  });
}

// Items (c, block): the padded dx of phase (a, b) at (i, j) sums w[r][s] * dy[i - oy][j - ox] over
// the taps of that phase (oy, ox their offsets): dy sits at (oy_max, ox_max) in a zeroed block of
// rows hd = hph + oy_max and columns wd = wph + ox_max, and each tap is one loop over the block.
void wide_backward_input_items(const Conv2dGeometry& g, const Phases& v, const int8_t* dy, const int8_t* w, float scale,
                               float* dx, int64_t i0, int64_t i1, int8_t* dyp, int32_t* acc) {
  return octet::cpu::simd_dispatch([=] {
    const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s, nblocks = v.blocks(g.n);
    const int64_t oy_max = (g.r - 1) * g.dil_h / v.sh, ox_max = (g.s - 1) * g.dil_w / v.sw;
    const int64_t hd = v.hph + oy_max, wd = v.wph + ox_max, phase_len = v.nb * hd * wd;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t c = item / nblocks, n0 = (item % nblocks) * v.nb, cnt = std::min(v.nb, g.n - n0);
      const int64_t len = grid_len(cnt, hd, wd, v.hph, v.wph);
      for (int64_t ph = 0; ph < v.count(); ++ph) std::fill(acc + ph * phase_len, acc + ph * phase_len + len, 0);
      for (int64_t k = c * m; k < (c + 1) * m; ++k) {
        embed_planes(dy + (k * g.n + n0) * pq, cnt, g.p, g.q, hd, wd, oy_max, ox_max, dyp);
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t back = oy_max * wd + ox_max - v.offset(g, r, s, wd);  // >= 0
            wide_tap(acc + v.phase(g, r, s) * phase_len, dyp + back, len, w[k * rs + r * g.s + s]);
          }
      }
      // dx[h][x] is padded (h + ph, x + pw): phase ((h + ph) % sh, (x + pw) % sw), cell ((h + ph) / sh, ...).
      for (int64_t n = 0; n < cnt; ++n)
        for (int64_t h = 0; h < g.h; ++h) {
          const int64_t y = h + g.pad_h;
          const int32_t* row = acc + (y % v.sh) * v.sw * phase_len + (n * hd + y / v.sh) * wd;
          float* d = dx + ((n0 + n) * g.c + c) * hw + h * g.w;
          if (v.sw == 1) {
            rescale_run(row + g.pad_w, g.w, scale, 0.0f, d);
          } else {  // padded column j*sw + b is dx column j*sw + b - pw
            for (int64_t b = 0; b < v.sw; ++b) {
              int64_t j_lo, j_hi;
              valid_range(b - g.pad_w, v.sw, g.w, v.wph, j_lo, j_hi);
              const int32_t* src = row + b * phase_len;
              for (int64_t j = j_lo; j < j_hi; ++j) d[j * v.sw + b - g.pad_w] = static_cast<float>(src[j]) * scale;
            }
          }
        }
    }
  });
}

// Channels k in [k0, k1): dw[k][r][s] = sum over blocks of dot(dy embedded at (0, 0) in the phase
// grid, the tap's phase plane shifted by its offset), in int32 over stretches of at most 2^17
// positions and int64 across them.
void wide_backward_weight_channels(const Conv2dGeometry& g, const Phases& v, const int8_t* x, const int8_t* dy,
                                   float scale, float* dw, int64_t k0, int64_t k1, int8_t* xph, int8_t* dyw,
                                   int64_t* acc) {
  return octet::cpu::simd_dispatch([=] {
    const int64_t m = g.k / g.c, hw = g.h * g.w, pq = g.p * g.q, rs = g.r * g.s;
    for (int64_t k = k0; k < k1; ++k) {
      std::fill(acc, acc + rs, 0);
      for (int64_t n0 = 0; n0 < g.n; n0 += v.nb) {
        const int64_t cnt = std::min(v.nb, g.n - n0), len = grid_len(cnt, v.hph, v.wph, g.p, g.q);
        split_phases(g, v, x + ((k / m) * g.n + n0) * hw, cnt, xph);
        embed_planes(dy + (k * g.n + n0) * pq, cnt, g.p, g.q, v.hph, v.wph, 0, 0, dyw);
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            const int8_t* src = xph + v.phase(g, r, s) * v.nb * v.plane() + v.offset(g, r, s, v.wph);
            for (int64_t i = 0; i < len; i += kMaxInt32Terms)  // int32 per stretch, int64 across
              acc[r * g.s + s] += wide_dot(dyw + i, src + i, std::min(kMaxInt32Terms, len - i));
          }
      }
      for (int64_t i = 0; i < rs; ++i) dw[k * rs + i] = static_cast<float>(acc[i]) * scale;
    }
  });
}

}  // namespace

void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out) {
  const Phases v = make_phases(g);
  parallel_for(0, g.k * v.blocks(g.n), grain_for(v.nb * v.count() * v.plane() * g.r * g.s),
               [&](int64_t i0, int64_t i1) {
                 std::vector<int8_t> xph(static_cast<size_t>(v.count() * v.nb * v.plane()));
                 std::vector<int32_t> acc(static_cast<size_t>(v.nb * v.plane()));
                 wide_forward_items(g, v, x, w, scale, bias, out, i0, i1, xph.data(), acc.data());
               });
}

void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const Phases v = make_phases(g);
  const int64_t m = g.k / g.c;
  const int64_t hd = v.hph + (g.r - 1) * g.dil_h / v.sh, wd = v.wph + (g.s - 1) * g.dil_w / v.sw;
  parallel_for(0, g.c * v.blocks(g.n), grain_for(m * v.nb * v.count() * hd * wd * g.r * g.s),
               [&](int64_t i0, int64_t i1) {
                 std::vector<int8_t> dyp(static_cast<size_t>(v.nb * hd * wd));
                 std::vector<int32_t> acc(static_cast<size_t>(v.count()) * dyp.size());
                 wide_backward_input_items(g, v, dy, w, scale, dx, i0, i1, dyp.data(), acc.data());
               });
}

void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  const Phases v = make_phases(g);
  parallel_for(0, g.k, grain_for(g.n * v.count() * v.plane() * g.r * g.s), [&](int64_t k0, int64_t k1) {
    std::vector<int8_t> xph(static_cast<size_t>(v.count() * v.nb * v.plane())),
        dyw(static_cast<size_t>(v.nb * v.plane()));
    std::vector<int64_t> acc(static_cast<size_t>(g.r * g.s));
    wide_backward_weight_channels(g, v, x, dy, scale, dw, k0, k1, xph.data(), dyw.data(), acc.data());
  });
}

}  // namespace octet::quant::cpu::detail
