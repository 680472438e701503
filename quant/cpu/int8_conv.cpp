// CPU INT8 convolution kernels (quant/cpu/int8_conv.h). Built with -ffp-contract=off (see
// CMakeLists.txt): every clone of the rescale loops rounds float(acc) * scale and + bias apart.
#include "quant/cpu/int8_conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/parallel.h"
#include "quant/cpu/int8_conv_detail.h"
#include "quant/cpu/int8_gemm.h"

namespace octet::quant::cpu {

using namespace detail;

namespace {

// Scratch per thread per block of positions (im2col codes + int32 GEMM output).
constexpr int64_t kChunkBytes = int64_t{1} << 20;
// Columns of one position block of the weight gradient (whose GEMMs reduce over positions).
constexpr int64_t kDwColBytes = int64_t{8} << 20;

// Uninitialized scratch of n elements of T from octet's caching allocator (fresh pages per call
// would cost as much as the work); `keep` owns it.
template <typename T>
T* scratch(Tensor& keep, int64_t n) {
  keep = empty({std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(T))}, DType::u8);
  return static_cast<T*>(keep.raw_data());
}

// ---------------------------------------------------------------- element loops

// acc[iw0 + q*stride] += col[q] for q in [lo, hi)
OCTET_SIMD_INLINE void add_scatter(int32_t* acc, const int32_t* col, int64_t iw0, int64_t lo, int64_t hi,
                                   int64_t stride) {
  for (int64_t q = lo; q < hi; ++q) acc[iw0 + q * stride] += col[q];
}

// ---------------------------------------------------------------- position blocks

// Blocks of `size` consecutive output positions j = (n*P + p)*Q + q, `count` of them.
struct Chunks {
  int64_t size, count;
};

// Blocks whose scratch (bytes_per_col per position) stays near kChunkBytes, 64..4096 positions;
// a few blocks are evened out to a multiple of the thread count.
Chunks plan_chunks(int64_t total, int64_t bytes_per_col) {
  const int64_t threads = get_num_threads();
  int64_t size = std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(1, bytes_per_col), 64, 4096);
  int64_t count = (total + size - 1) / size;
  if (count > 1 && count < 4 * threads) count = (count + threads - 1) / threads * threads;
  size = (total + count - 1) / count;
  return {size, (total + size - 1) / size};
}

// fn(first_block, end_block): in parallel, one GEMM thread per block range, when every thread gets
// a block; else once over all blocks, the GEMMs and loops inside running threaded.
template <typename Fn>
void for_chunks(const Chunks& ch, Fn fn) {
  if (ch.count >= get_num_threads())
    parallel_for(0, ch.count, 1, fn);
  else
    fn(int64_t{0}, ch.count);
}

// fn(n, pq0, pq1, offset) for the runs of positions [j0, j1) inside one sample; offset is the run's
// first column in the block.
template <typename Fn>
OCTET_SIMD_INLINE void for_sample_runs(const Conv2dGeometry& g, int64_t j0, int64_t j1, Fn fn) {
  const int64_t pq = g.p * g.q;
  for (int64_t j = j0; j < j1;) {
    const int64_t n = j / pq, pq0 = j % pq, pq1 = std::min(pq, pq0 + (j1 - j));
    fn(n, pq0, pq1, j - j0);
    j += pq1 - pq0;
  }
}

// One row (c, r, s) of the columns of a "same" stride-1 conv (P = H, Q = W) for the positions
// [pq0, pq1) of one sample: the input plane shifted by (r*dh - ph)*W + (s*dw - pw), so a single copy
// of the overlapping span; the padding rows fall outside the plane and the columns that wrapped
// around a row edge are zeroed afterwards.
void im2col_same_run(const Conv2dGeometry& g, const int8_t* plane, int64_t r, int64_t s, int64_t pq0, int64_t pq1,
                     int8_t* dst) {
  const int64_t hw = g.h * g.w, d = s * g.dil_w - g.pad_w, shift = (r * g.dil_h - g.pad_h) * g.w + d;
  const int64_t a = std::clamp(-shift, pq0, pq1), b = std::clamp(hw - shift, pq0, pq1);  // copy [a, b)
  std::memset(dst, 0, static_cast<size_t>(a - pq0));
  if (b > a) std::memcpy(dst + (a - pq0), plane + a + shift, static_cast<size_t>(b - a));
  std::memset(dst + (std::max(a, b) - pq0), 0, static_cast<size_t>(pq1 - std::max(a, b)));
  if (d == 0) return;
  // Columns q with q + d outside [0, W): [0, -d) on the left or [W - d, W) on the right.
  const int64_t z0 = d < 0 ? 0 : g.w - d, z1 = d < 0 ? std::min(-d, g.w) : g.w;
  for (int64_t row = pq0 / g.w; row * g.w < pq1; ++row) {
    const int64_t lo = std::max(pq0, row * g.w + std::max<int64_t>(z0, 0)), hi = std::min(pq1, row * g.w + z1);
    if (hi > lo) std::memset(dst + (lo - pq0), 0, static_cast<size_t>(hi - lo));
  }
}

// col[(c*R + r)*S + s][j - j0] = x[c][n][ih][iw] of position j = (n, p, q), 0 in the padding;
// x is [C][N][H][W].
void im2col_chunk(const Conv2dGeometry& g, const int8_t* x, int64_t j0, int64_t j1, int8_t* col) {
  const int64_t nc = j1 - j0, rows = g.c * g.r * g.s, hw = g.h * g.w, pq = g.p * g.q;
  const bool same = g.stride_h == 1 && g.stride_w == 1 && g.p == g.h && g.q == g.w;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / nc), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t s = row % g.s, r = (row / g.s) % g.r, c = row / (g.r * g.s);
      const int8_t* xc = x + c * g.n * hw;
      int8_t* dst = col + row * nc;
      if (same) {
        for_sample_runs(g, j0, j1, [&](int64_t n, int64_t pq0, int64_t pq1, int64_t off) {
          im2col_same_run(g, xc + n * hw, r, s, pq0, pq1, dst + off);
        });
        continue;
      }
      int64_t q_lo, q_hi;
      const int64_t iw0 = s * g.dil_w - g.pad_w;
      valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
      // Walk the positions row by row: (n, p, q0) advance without divisions.
      int64_t n = j0 / pq, p = (j0 % pq) / g.q, q0 = j0 % g.q;
      for (int64_t j = j0; j < j1;) {
        const int64_t q1 = std::min(g.q, q0 + (j1 - j));
        int8_t* d = dst + (j - j0);  // d[q - q0] for q in [q0, q1)
        const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
        const int64_t a = std::max(q0, q_lo), b = std::min(q1, q_hi);
        if (ih < 0 || ih >= g.h || a >= b) {
          std::memset(d, 0, static_cast<size_t>(q1 - q0));
        } else {
          const int8_t* xr = xc + (n * g.h + ih) * g.w;
          std::memset(d, 0, static_cast<size_t>(a - q0));
          if (g.stride_w == 1)
            std::memcpy(d + (a - q0), xr + iw0 + a, static_cast<size_t>(b - a));
          else
            for (int64_t q = a; q < b; ++q) d[q - q0] = xr[iw0 + q * g.stride_w];
          std::memset(d + (b - q0), 0, static_cast<size_t>(q1 - b));
        }
        j += q1 - q0;
        q0 = 0;
        if (++p == g.p) p = 0, ++n;
      }
    }
  });
}

// out[n][k][pq] = float(y[k][j - j0]) * scale + bias[k] for the positions of the block, k in [k0, k1).
void rescale_rows(const Conv2dGeometry& g, const int32_t* y, int64_t j0, int64_t j1, float scale, const float* bias,
                  float* out, int64_t k0, int64_t k1) {
  return octet::cpu::simd_dispatch([=] {
    const int64_t nc = j1 - j0, pq = g.p * g.q;
    if (pq == 1) {
      // One position per sample (a Linear's rows): out [N, K] is y [K, nc] transposed. Tiles of
      // positions keep the rows being written in L1 across the k loop.
      constexpr int64_t kTile = 256;
      for (int64_t t0 = 0; t0 < nc; t0 += kTile) {
        const int64_t t1 = std::min(nc, t0 + kTile);
#ifdef OCTET_CPU_X86
        if (octet::cpu::active_isa() != octet::cpu::Isa::portable) {
          detail::rescale_transposed_avx2(y, nc, t0, t1, k0, k1, scale, bias, out + j0 * g.k, g.k);
          continue;
        }
#endif
        detail::rescale_transposed(y, nc, t0, t1, k0, k1, scale, bias, out + j0 * g.k, g.k);
      }
      return;
    }
    for (int64_t k = k0; k < k1; ++k) {
      const float b = bias ? bias[k] : 0.0f;
      for_sample_runs(g, j0, j1, [&](int64_t n, int64_t pq0, int64_t pq1, int64_t off) {
        rescale_run(y + k * nc + off, pq1 - pq0, scale, b, out + (n * g.k + k) * pq + pq0);
      });
    }
  });
}

void rescale_chunk(const Conv2dGeometry& g, const int32_t* y, int64_t j0, int64_t j1, float scale, const float* bias,
                   float* out) {
  parallel_for(0, g.k, std::max<int64_t>(1, 16384 / (j1 - j0)),
               [&](int64_t k0, int64_t k1) { rescale_rows(g, y, j0, j1, scale, bias, out, k0, k1); });
}

// ---------------------------------------------------------------- general path

// out [N,K,P,Q] = conv(x [C,N,H,W], w [K,C/g,R,S]) * scale + bias by im2col + GEMM per block.
void gemm_conv(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias, float* out) {
  const int64_t total = g.n * g.p * g.q, cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  const bool pointwise = is_pointwise(g);
  const Chunks ch = plan_chunks(total, (pointwise ? 0 : g.c * g.r * g.s) + 4 * g.k);
  for_chunks(ch, [&](int64_t c0, int64_t c1) {
    Tensor keep_col, keep_y;
    int8_t* col = pointwise ? nullptr : scratch<int8_t>(keep_col, g.c * g.r * g.s * ch.size);
    int32_t* y = scratch<int32_t>(keep_y, g.k * ch.size);
    for (int64_t chunk = c0; chunk < c1; ++chunk) {
      const int64_t j0 = chunk * ch.size, j1 = std::min(total, j0 + ch.size), nc = j1 - j0;
      if (!pointwise) im2col_chunk(g, x, j0, j1, col);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        // 1x1: the input itself is the column matrix [C, N*H*W].
        const int8_t* b = pointwise ? x + grp * cg * total + j0 : col + grp * crs * nc;
        int8_gemm(false, false, kg, nc, crs, w + grp * kg * crs, crs, b, pointwise ? total : nc, y + grp * kg * nc, nc,
                  false);
      }
      rescale_chunk(g, y, j0, j1, scale, bias, out);
    }
  });
}

// dx of a stride-1 conv: the conv of dy with w transposed and flipped,
// wt[grp*cg + c][k][r][s] = w[grp*kg + k][c][R-1-r][S-1-s], padding dil*(R-1) - pad.
void backward_input_transposed(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, rs = g.r * g.s;
  std::vector<int8_t> wt(static_cast<size_t>(g.c * kg * rs));
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t k = 0; k < kg; ++k)
        for (int64_t i = 0; i < rs; ++i)
          wt[((grp * cg + c) * kg + k) * rs + i] = w[((grp * kg + k) * cg + c) * rs + (rs - 1 - i)];
  Conv2dGeometry t = g;
  t.c = g.k, t.h = g.p, t.w = g.q;
  t.k = g.c, t.p = g.h, t.q = g.w;
  t.pad_h = g.dil_h * (g.r - 1) - g.pad_h, t.pad_w = g.dil_w * (g.s - 1) - g.pad_w;
  gemm_conv(t, dy, wt.data(), scale, nullptr, dx);
}

// dx[c] for c in [c0, c1) of one sample from its columns dcol [C*R*S, PQ]; acc: H*W scratch.
void col2im_planes(const Conv2dGeometry& g, const int32_t* dcol, float scale, float* dx, int64_t c0, int64_t c1,
                   int32_t* acc) {
  return octet::cpu::simd_dispatch([=] {
    const int64_t pq = g.p * g.q, hw = g.h * g.w;
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(acc, acc + hw, 0);
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) {
          const int32_t* src = dcol + ((c * g.r + r) * g.s + s) * pq;
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            add_scatter(acc + ih * g.w, src + p * g.q, iw0, q_lo, q_hi, g.stride_w);
          });
        }
      rescale_run(acc, hw, scale, 0.0f, dx + c * hw);
    }
  });
}

// dx for strides > 1, per sample: dcol [C*R*S, PQ] = W_g^T dy_g (int32), col2im into int32 planes.
void backward_input_col2im(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const int64_t pq = g.p * g.q, total = g.n * pq, hw = g.h * g.w;
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  auto samples = [&](int64_t n0, int64_t n1) {
    Tensor keep;
    int32_t* dcol = scratch<int32_t>(keep, g.c * g.r * g.s * pq);
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp)
        int8_gemm(true, false, crs, pq, kg, w + grp * kg * crs, crs, dy + grp * kg * total + n * pq, total,
                  dcol + grp * crs * pq, pq, false);
      parallel_for(0, g.c, 1, [&](int64_t c0, int64_t c1) {
        std::vector<int32_t> acc(static_cast<size_t>(hw));
        col2im_planes(g, dcol, scale, dx + n * g.c * hw, c0, c1, acc.data());
      });
    }
  };
  if (g.n >= get_num_threads())
    parallel_for(0, g.n, 1, samples);
  else
    samples(0, g.n);
}

// dw [K, C/g*R*S] = sum over position blocks of dy_g [kg, block] . col_g^T [block, crs]. The GEMMs
// reduce over positions, so the blocks are large (a few MB of columns, at most kMaxInt32Terms
// positions) and taken in order; each block's GEMM is split across the threads by disjoint tiles
// of the int32 accumulator (rows of dW or columns, whichever is longer), so no thread needs a
// private dW. Past kMaxInt32Terms positions the int32 sums move into int64.
void gemm_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  const int64_t total = g.n * g.p * g.q, cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  const int64_t wn = g.k * crs, col_rows = g.c * g.r * g.s;
  const bool pointwise = is_pointwise(g);
  const int64_t block = std::min({total, kMaxInt32Terms, std::max<int64_t>(1024, kDwColBytes / col_rows)});
  Tensor keep_col, keep_part;
  int8_t* col = pointwise ? nullptr : scratch<int8_t>(keep_col, col_rows * block);
  int32_t* part = scratch<int32_t>(keep_part, wn);
  std::vector<int64_t> sum(total > kMaxInt32Terms ? static_cast<size_t>(wn) : 0, 0);
  // Tiles: per group, the longer of dW's kg rows and crs columns cut into `tiles` pieces.
  const int64_t threads = get_num_threads();
  const int64_t tiles = std::max<int64_t>(1, (threads + g.groups - 1) / g.groups);
  const bool split_rows = kg >= crs;
  const int64_t tile = ((split_rows ? kg : crs) + tiles - 1) / tiles;
  int64_t terms = 0;  // positions summed into `part`
  for (int64_t j0 = 0; j0 < total; j0 += block) {
    const int64_t j1 = std::min(total, j0 + block), nc = j1 - j0;
    if (terms > 0 && terms + nc > kMaxInt32Terms) {
      for (int64_t i = 0; i < wn; ++i) sum[i] += part[i];
      terms = 0;
    }
    if (!pointwise) im2col_chunk(g, x, j0, j1, col);
    const int64_t ldb = pointwise ? total : nc;
    parallel_for(0, g.groups * tiles, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t grp = t / tiles, lo = (t % tiles) * tile, hi = std::min(split_rows ? kg : crs, lo + tile);
        if (lo >= hi) continue;
        const int8_t* a = dy + grp * kg * total + j0;                                    // [kg, nc], ld total
        const int8_t* b = pointwise ? x + grp * cg * total + j0 : col + grp * crs * nc;  // [crs, nc]
        int32_t* c = part + grp * kg * crs;
        if (split_rows)
          int8_gemm(false, true, hi - lo, crs, nc, a + lo * total, total, b, ldb, c + lo * crs, crs, terms > 0);
        else
          int8_gemm(false, true, kg, hi - lo, nc, a, total, b + lo * ldb, ldb, c + lo, crs, terms > 0);
      }
    });
    terms += nc;
  }
  for (int64_t i = 0; i < wn; ++i)
    dw[i] = static_cast<float>(sum.empty() ? int64_t{part[i]} : sum[i] + part[i]) * scale;
}

// ---------------------------------------------------------------- operand checks

void check_codes(const char* op, const char* what, const Tensor& t, int64_t numel) {
  OCTET_CHECK(
      t.defined() && t.device().is_cpu() && t.dtype() == DType::i8 && t.is_contiguous() && t.numel() == numel, op,
      ": expected ", what, " as contiguous i8 CPU codes of ", numel, " elements, got ",
      t.defined() ? ::octet::detail::str_cat(t.dtype(), " ", t.shape(), " on ", t.device()) : std::string("undefined"));
}

void check_f32(const char* op, const char* what, const Tensor& t, int64_t numel) {
  OCTET_CHECK(
      t.defined() && t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == numel, op,
      ": expected ", what, " as a contiguous f32 CPU tensor of ", numel, " elements, got ",
      t.defined() ? ::octet::detail::str_cat(t.dtype(), " ", t.shape(), " on ", t.device()) : std::string("undefined"));
}

void check_geometry(const char* op, const Conv2dGeometry& g) {
  OCTET_CHECK(g.groups > 0 && g.c % g.groups == 0 && g.k % g.groups == 0 && g.stride_h > 0 && g.stride_w > 0 &&
                  g.dil_h > 0 && g.dil_w > 0,
              op, ": invalid convolution geometry");
}

// Whether depthwise geometry g runs the channels-last kernels.
bool lanes(const Conv2dGeometry& g) { return depthwise_layout_for(g) == Int8DepthwiseLayout::channels_last; }

}  // namespace

// The plain loops of a Linear's transposed rescale (quant/cpu/int8_conv_detail.h); rescale_rows
// runs them, or their AVX2 blocks.
void detail::rescale_transposed(const int32_t* y, int64_t ny, int64_t j0, int64_t j1, int64_t k0, int64_t k1,
                                float scale, const float* bias, float* out, int64_t ldo) {
  for (int64_t k = k0; k < k1; ++k) {
    const float b = bias ? bias[k] : 0.0f;
    const int32_t* yk = y + k * ny;
    for (int64_t j = j0; j < j1; ++j) out[j * ldo + k] = static_cast<float>(yk[j]) * scale + b;
  }
}

Selector<Int8DepthwiseLayout>& int8_depthwise_selector() {
  static Selector<Int8DepthwiseLayout> selector{"int8 depthwise layout",
                                                "OCTET_INT8_DEPTHWISE",
                                                {{Int8DepthwiseLayout::automatic, "auto"},
                                                 {Int8DepthwiseLayout::planes, "planes"},
                                                 {Int8DepthwiseLayout::channels_last, "channels_last"}},
                                                [](Int8DepthwiseLayout) { return true; },
                                                [] { return Int8DepthwiseLayout::automatic; }};
  return selector;
}

Int8DepthwiseLayout int8_depthwise_layout() { return int8_depthwise_selector().active(); }
Int8DepthwiseLayout set_int8_depthwise_layout(Int8DepthwiseLayout layout) {
  return int8_depthwise_selector().set(layout);
}

Int8DepthwiseLayout depthwise_layout_for(const Conv2dGeometry& g) {
  if (g.k != g.c || g.r * g.s > kExactTerms) return Int8DepthwiseLayout::planes;
  switch (int8_depthwise_layout()) {
    case Int8DepthwiseLayout::planes:
      return Int8DepthwiseLayout::planes;
    case Int8DepthwiseLayout::channels_last:
      return Int8DepthwiseLayout::channels_last;
    case Int8DepthwiseLayout::automatic:
      break;
  }
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  return g.h * g.w <= (strided ? kDepthwiseLanesMaxStridedPlane : kDepthwiseLanesMaxPlane)
             ? Int8DepthwiseLayout::channels_last
             : Int8DepthwiseLayout::planes;
}

void int8_conv2d_forward(const Conv2dGeometry& g, const Tensor& xq, const Tensor& wq, float scale, const Tensor& bias,
                         const Tensor& out) {
  const char* op = "int8_conv2d_forward";
  check_geometry(op, g);
  check_codes(op, "input", xq, g.n * g.c * g.h * g.w);
  check_codes(op, "weight", wq, g.k * (g.c / g.groups) * g.r * g.s);
  check_f32(op, "output", out, g.n * g.k * g.p * g.q);
  if (bias.defined()) check_f32(op, "bias", bias, g.k);
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (is_depthwise(g) && lanes(g))
    depthwise_lanes_forward(g, xq.data<int8_t>(), wq.data<int8_t>(), scale, b, out.data<float>());
  else if (is_depthwise(g))
    depthwise_forward(g, xq.data<int8_t>(), wq.data<int8_t>(), scale, b, out.data<float>());
  else
    gemm_conv(g, xq.data<int8_t>(), wq.data<int8_t>(), scale, b, out.data<float>());
}

void int8_conv2d_backward_input(const Conv2dGeometry& g, const Tensor& dyq, const Tensor& wq, float scale,
                                const Tensor& dx) {
  const char* op = "int8_conv2d_backward_input";
  check_geometry(op, g);
  check_codes(op, "output gradient", dyq, g.n * g.k * g.p * g.q);
  check_codes(op, "weight", wq, g.k * (g.c / g.groups) * g.r * g.s);
  check_f32(op, "input gradient", dx, g.n * g.c * g.h * g.w);
  if (is_depthwise(g) && lanes(g))
    depthwise_lanes_backward_input(g, dyq.data<int8_t>(), wq.data<int8_t>(), scale, dx.data<float>());
  else if (is_depthwise(g))
    depthwise_backward_input(g, dyq.data<int8_t>(), wq.data<int8_t>(), scale, dx.data<float>());
  else if (g.stride_h == 1 && g.stride_w == 1)
    backward_input_transposed(g, dyq.data<int8_t>(), wq.data<int8_t>(), scale, dx.data<float>());
  else
    backward_input_col2im(g, dyq.data<int8_t>(), wq.data<int8_t>(), scale, dx.data<float>());
}

void int8_conv2d_backward_weight(const Conv2dGeometry& g, const Tensor& xq, const Tensor& dyq, float scale,
                                 const Tensor& dw) {
  const char* op = "int8_conv2d_backward_weight";
  check_geometry(op, g);
  check_codes(op, "input", xq, g.n * g.c * g.h * g.w);
  check_codes(op, "output gradient", dyq, g.n * g.k * g.p * g.q);
  check_f32(op, "weight gradient", dw, g.k * (g.c / g.groups) * g.r * g.s);
  if (is_depthwise(g) && lanes(g))
    depthwise_lanes_backward_weight(g, xq.data<int8_t>(), dyq.data<int8_t>(), scale, dw.data<float>());
  else if (is_depthwise(g))
    depthwise_backward_weight(g, xq.data<int8_t>(), dyq.data<int8_t>(), scale, dw.data<float>());
  else
    gemm_backward_weight(g, xq.data<int8_t>(), dyq.data<int8_t>(), scale, dw.data<float>());
}

}  // namespace octet::quant::cpu
