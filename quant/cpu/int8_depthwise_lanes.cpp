// Channels-last depthwise INT8 kernels (groups == C == K), the layout for small planes
// (quant/cpu/int8_conv.h, Int8DepthwiseLayout): vector lanes run across a block of kLanes channels
// instead of along a plane. A block of one sample's channels is transposed from the channel-major
// codes into [H][W][kLanes] (zero lanes past the last channel), so every tap of an output position
// is one contiguous kLanes-wide multiply-add; taps that fall in the padding are skipped, where the
// planar kernels compute and drop whole padded columns and sample seams (5/9 of their work on a 4x4
// plane).
// The integer products and sums run in f32 lanes, exactly: a product of two codes is at most
// 127^2 = 16129 and a sum of at most kExactTerms = 1040 of them stays below 2^24, so every
// intermediate is an integer that a float holds exactly, whatever the order. (Without VNNI -- Zen 1,
// most AVX2 CPUs -- an int8 multiply-add issues no faster than an f32 one, and widening int8 to
// int32 lanes for vpmulld cost more than the arithmetic: measured, an int32 version of these loops
// was 2x slower than the planes layout on 32x32 planes.) The codes stay int8 everywhere else; they
// are widened to f32 as a block is transposed. So the results are the planes layout's bit for bit.
// The transposes (to_lanes / from_lanes) are plain loops GCC leaves scalar; on AVX2 machines they
// run in 4x4 register blocks (quant/cpu/int8_depthwise_x86.cpp).
//   forward  per (sample, block): acc[kLanes] over the R*S taps (R*S <= kExactTerms), rescaled
//            into NCHW by from_lanes.
//   dx       per (sample, block): each dy position adds its taps into an [H][W][kLanes] block (any
//            stride and dilation; a cell gets at most R*S terms), rescaled by from_lanes.
//   dw       per (block, run of samples), tap by tap: sums per lane over at most kExactTerms
//            positions, int64 across; the runs' int64 sums are added after the parallel loop.
// Built with -ffp-contract=off (CMakeLists.txt), like every file compiled per ISA.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/parallel.h"
#include "quant/cpu/int8_conv_detail.h"

namespace octet::quant::cpu::detail {

namespace {

struct LaneBlocks {
  int64_t count;  // blocks of kLanes channels
  int64_t first(int64_t b) const { return b * kLanes; }
  int64_t width(const Conv2dGeometry& g, int64_t b) const { return std::min(kLanes, g.c - first(b)); }
};

LaneBlocks make_blocks(const Conv2dGeometry& g) { return {(g.c + kLanes - 1) / kLanes}; }

// wt[t][j] = w[(c0 + j)*rs + t] for the block's lanes, 0 past its last channel.
void weight_lanes(const int8_t* w, int64_t c0, int64_t cw, int64_t rs, float* wt) {
  std::fill(wt, wt + rs * kLanes, 0.0f);
  for (int64_t j = 0; j < cw; ++j)
    for (int64_t t = 0; t < rs; ++t) wt[t * kLanes + j] = w[(c0 + j) * rs + t];
}

// acc[j] += a[j] * b[j]: exact on integers (see the top of the file).
OCTET_SIMD_INLINE void madd_lanes(float* __restrict acc, const float* __restrict a, const float* __restrict b) {
  for (int64_t j = 0; j < kLanes; ++j) acc[j] += a[j] * b[j];
}

// Input row / column of output row / column o at tap t; outside [0, size): a padding tap, skipped.
OCTET_SIMD_INLINE int64_t tap_at(int64_t o, int64_t stride, int64_t pad, int64_t t, int64_t dil) {
  return o * stride - pad + t * dil;
}
OCTET_SIMD_INLINE bool inside(int64_t i, int64_t size) { return i >= 0 && i < size; }

// sums[p][q][j] = the taps of output (p, q) over the input block xt [h][w][kLanes].
void forward_block(const Conv2dGeometry& g, const float* xt, const float* wt, float* sums) {
  return octet::cpu::simd_dispatch([=] {
    for (int64_t p = 0; p < g.p; ++p)
      for (int64_t q = 0; q < g.q; ++q) {
        float acc[kLanes] = {};
        for (int64_t r = 0; r < g.r; ++r) {
          const int64_t y = tap_at(p, g.stride_h, g.pad_h, r, g.dil_h);
          if (!inside(y, g.h)) continue;
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t x = tap_at(q, g.stride_w, g.pad_w, s, g.dil_w);
            if (inside(x, g.w)) madd_lanes(acc, xt + (y * g.w + x) * kLanes, wt + (r * g.s + s) * kLanes);
          }
        }
        std::copy(acc, acc + kLanes, sums + (p * g.q + q) * kLanes);
      }
  });
}

// The dx block acc [h][w][kLanes] (zeroed here) gets w[t] * dy at every tap's input position.
void backward_input_block(const Conv2dGeometry& g, const float* dyt, const float* wt, float* acc) {
  return octet::cpu::simd_dispatch([=] {
    std::fill(acc, acc + g.h * g.w * kLanes, 0.0f);
    for (int64_t p = 0; p < g.p; ++p)
      for (int64_t q = 0; q < g.q; ++q) {
        const float* d = dyt + (p * g.q + q) * kLanes;
        for (int64_t r = 0; r < g.r; ++r) {
          const int64_t y = tap_at(p, g.stride_h, g.pad_h, r, g.dil_h);
          if (!inside(y, g.h)) continue;
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t x = tap_at(q, g.stride_w, g.pad_w, s, g.dil_w);
            if (inside(x, g.w)) madd_lanes(acc + (y * g.w + x) * kLanes, d, wt + (r * g.s + s) * kLanes);
          }
        }
      }
  });
}

// sums[t][j] += dy . x over tap t's positions of one sample, tap by tap (the tap's sums stay in
// registers), in floats per stretch of at most kExactTerms positions, int64 across.
void backward_weight_block(const Conv2dGeometry& g, const float* xt, const float* dyt, int64_t* sums) {
  return octet::cpu::simd_dispatch([=] {
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        int64_t* sum = sums + (r * g.s + s) * kLanes;
        float acc[kLanes] = {};
        int64_t terms = 0;
        for (int64_t p = 0; p < g.p; ++p) {
          const int64_t y = tap_at(p, g.stride_h, g.pad_h, r, g.dil_h);
          if (!inside(y, g.h)) continue;
          for (int64_t q = 0; q < g.q; ++q) {
            const int64_t x = tap_at(q, g.stride_w, g.pad_w, s, g.dil_w);
            if (!inside(x, g.w)) continue;
            if (terms == kExactTerms) {
              for (int64_t j = 0; j < kLanes; ++j) sum[j] += static_cast<int64_t>(acc[j]), acc[j] = 0.0f;
              terms = 0;
            }
            ++terms;
            madd_lanes(acc, dyt + (p * g.q + q) * kLanes, xt + (y * g.w + x) * kLanes);
          }
        }
        for (int64_t j = 0; j < kLanes; ++j) sum[j] += static_cast<int64_t>(acc[j]);
      }
  });
}

}  // namespace

void to_lanes(const int8_t* src, int64_t stride, int64_t cw, int64_t len, float* dst) {
#ifdef OCTET_CPU_X86
  if (octet::cpu::active_isa() != octet::cpu::Isa::portable) return to_lanes_avx2(src, stride, cw, len, dst);
#endif
  to_lanes_tail(src, stride, cw, 0, len, dst);
}

void to_lanes_tail(const int8_t* src, int64_t stride, int64_t cw, int64_t i0, int64_t len, float* dst) {
  for (int64_t i = i0; i < len; ++i)
    for (int64_t j = 0; j < kLanes; ++j) dst[i * kLanes + j] = j < cw ? src[j * stride + i] : 0.0f;
}

void from_lanes(const float* src, int64_t len, int64_t cw, float scale, const float* bias, float* dst,
                int64_t stride) {
#ifdef OCTET_CPU_X86
  if (octet::cpu::active_isa() != octet::cpu::Isa::portable)
    return from_lanes_avx2(src, len, cw, scale, bias, dst, stride);
#endif
  from_lanes_tail(src, 0, len, 0, cw, scale, bias, dst, stride);
}

void from_lanes_tail(const float* src, int64_t i0, int64_t len, int64_t j0, int64_t cw, float scale,
                     const float* bias, float* dst, int64_t stride) {
  for (int64_t j = j0; j < cw; ++j) {
    const float b = bias ? bias[j] : 0.0f;
    for (int64_t i = i0; i < len; ++i) dst[j * stride + i] = src[i * kLanes + j] * scale + b;
  }
}

namespace {

// Items (sample n, block of channels) in parallel: the block's codes of src (channel-major
// [C][N][in_len]) into lanes, its weights, block(in, wt, out) into out [out_len][kLanes], and out
// rescaled into dst [N][C][out_len] (+ bias). The forward and dx (K == C, so both are C channels).
template <typename Block>
void per_sample_block(const Conv2dGeometry& g, const int8_t* src, int64_t in_len, const int8_t* w, float scale,
                      const float* bias, float* dst, int64_t out_len, Block block) {
  const LaneBlocks v = make_blocks(g);
  const int64_t rs = g.r * g.s;
  parallel_for(0, g.n * v.count, grain_for(g.p * g.q * rs * kLanes), [&](int64_t i0, int64_t i1) {
    std::vector<float> in(static_cast<size_t>(in_len * kLanes)), out(static_cast<size_t>(out_len * kLanes)),
        wt(static_cast<size_t>(rs * kLanes));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / v.count, c0 = v.first(item % v.count), cw = v.width(g, item % v.count);
      to_lanes(src + (c0 * g.n + n) * in_len, g.n * in_len, cw, in_len, in.data());
      weight_lanes(w, c0, cw, rs, wt.data());
      block(in.data(), wt.data(), out.data());
      from_lanes(out.data(), out_len, cw, scale, bias ? bias + c0 : nullptr, dst + (n * g.c + c0) * out_len, out_len);
    }
  });
}

}  // namespace

void depthwise_lanes_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale,
                             const float* bias, float* out) {
  per_sample_block(g, x, g.h * g.w, w, scale, bias, out, g.p * g.q,
                   [&](const float* xt, const float* wt, float* sums) { forward_block(g, xt, wt, sums); });
}

void depthwise_lanes_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale,
                                    float* dx) {
  per_sample_block(g, dy, g.p * g.q, w, scale, nullptr, dx, g.h * g.w,
                   [&](const float* dyt, const float* wt, float* acc) { backward_input_block(g, dyt, wt, acc); });
}

void depthwise_lanes_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale,
                                     float* dw) {
  const LaneBlocks v = make_blocks(g);
  const int64_t rs = g.r * g.s, hw = g.h * g.w, pq = g.p * g.q;
  // Runs of samples per block, so that every thread has work when there are few blocks.
  const int64_t runs = std::clamp<int64_t>((4 * get_num_threads() + v.count - 1) / v.count, 1, g.n);
  const int64_t per_run = (g.n + runs - 1) / runs;
  std::vector<int64_t> sums(static_cast<size_t>(v.count * runs * rs * kLanes), 0);
  parallel_for(0, v.count * runs, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xt(static_cast<size_t>(hw * kLanes)), dyt(static_cast<size_t>(pq * kLanes));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t b = item / runs, c0 = v.first(b), cw = v.width(g, b);
      for (int64_t n = (item % runs) * per_run; n < std::min(g.n, (item % runs + 1) * per_run); ++n) {
        to_lanes(x + (c0 * g.n + n) * hw, g.n * hw, cw, hw, xt.data());
        to_lanes(dy + (c0 * g.n + n) * pq, g.n * pq, cw, pq, dyt.data());
        backward_weight_block(g, xt.data(), dyt.data(), sums.data() + item * rs * kLanes);
      }
    }
  });
  for (int64_t b = 0; b < v.count; ++b)
    for (int64_t j = 0; j < v.width(g, b); ++j)
      for (int64_t t = 0; t < rs; ++t) {
        int64_t total = 0;
        for (int64_t run = 0; run < runs; ++run) total += sums[((b * runs + run) * rs + t) * kLanes + j];
        dw[(v.first(b) + j) * rs + t] = static_cast<float>(total) * scale;
      }
}

}  // namespace octet::quant::cpu::detail
