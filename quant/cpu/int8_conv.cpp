// CPU INT8 convolution kernels (quant/cpu/int8_conv.h). Built with -ffp-contract=off (see
// CMakeLists.txt): every clone of the rescale loops rounds float(acc) * scale and + bias apart.
#include "quant/cpu/int8_conv.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/parallel.h"
#include "quant/cpu/int8_gemm.h"
#include "quant/cpu/simd_clones.h"

namespace octet::quant::cpu {

namespace {

// Scratch per thread per block of positions (im2col codes + int32 GEMM output).
constexpr int64_t kChunkBytes = int64_t{1} << 20;
// Products of two codes in [-127, 127] an int32 sum can always hold: 2^17 * 127^2 < 2^31.
constexpr int64_t kMaxInt32Terms = int64_t{1} << 17;

// Uninitialized scratch of n elements of T from octet's caching allocator (fresh pages per call
// would cost as much as the work); `keep` owns it.
template <typename T>
T* scratch(Tensor& keep, int64_t n) {
  keep = empty({std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(T))}, DType::u8);
  return static_cast<T*>(keep.raw_data());
}

// Output positions o in [lo, hi) whose input index o*stride + base falls inside [0, limit).
void valid_range(int64_t base, int64_t stride, int64_t limit, int64_t out_len, int64_t& lo, int64_t& hi) {
  lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
  const int64_t last = limit - 1 - base;
  hi = last < 0 ? 0 : std::min(out_len, last / stride + 1);
  lo = std::min(lo, hi);
}

// fn(p, ih, iw0, q_lo, q_hi) for each output row p of tap (r, s) whose input row ih is inside the
// image; output columns [q_lo, q_hi) read input column iw0 + q*stride_w.
template <typename Fn>
void for_tap_rows(const Conv2dGeometry& g, int64_t r, int64_t s, Fn fn) {
  int64_t q_lo, q_hi;
  const int64_t iw0 = s * g.dil_w - g.pad_w;
  valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
  for (int64_t p = 0; p < g.p; ++p) {
    const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
    if (ih >= 0 && ih < g.h) fn(p, ih, iw0, q_lo, q_hi);
  }
}

bool is_pointwise(const Conv2dGeometry& g) {
  return g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

bool is_depthwise(const Conv2dGeometry& g) { return g.groups == g.c && g.groups > 1 && g.k % g.c == 0; }

// ---------------------------------------------------------------- element loops

// out[i] = float(acc[i]) * scale + bias
OCTET_SIMD_CLONES void rescale_run(const int32_t* acc, int64_t n, float scale, float bias, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]) * scale + bias;
}

// acc[q] += w * x[iw0 + q*stride] for q in [lo, hi)
OCTET_SIMD_CLONES void tap_gather(int32_t* acc, const int8_t* x, int64_t iw0, int64_t lo, int64_t hi, int64_t stride,
                                  int32_t w) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) acc[q] += w * static_cast<int32_t>(x[iw0 + q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) acc[q] += w * static_cast<int32_t>(x[iw0 + q * stride]);
  }
}

// acc[iw0 + q*stride] += w * dy[q] for q in [lo, hi)
OCTET_SIMD_CLONES void tap_scatter(int32_t* acc, const int8_t* dy, int64_t iw0, int64_t lo, int64_t hi, int64_t stride,
                                   int32_t w) {
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) acc[iw0 + q] += w * static_cast<int32_t>(dy[q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) acc[iw0 + q * stride] += w * static_cast<int32_t>(dy[q]);
  }
}

// acc[iw0 + q*stride] += col[q] for q in [lo, hi)
OCTET_SIMD_CLONES void add_scatter(int32_t* acc, const int32_t* col, int64_t iw0, int64_t lo, int64_t hi,
                                   int64_t stride) {
  for (int64_t q = lo; q < hi; ++q) acc[iw0 + q * stride] += col[q];
}

// sum dy[q] * x[iw0 + q*stride] for q in [lo, hi)
OCTET_SIMD_CLONES int32_t tap_dot(const int8_t* dy, const int8_t* x, int64_t iw0, int64_t lo, int64_t hi,
                                  int64_t stride) {
  int32_t s = 0;
  if (stride == 1) {
    for (int64_t q = lo; q < hi; ++q) s += static_cast<int32_t>(dy[q]) * static_cast<int32_t>(x[iw0 + q]);
  } else {
    for (int64_t q = lo; q < hi; ++q) s += static_cast<int32_t>(dy[q]) * static_cast<int32_t>(x[iw0 + q * stride]);
  }
  return s;
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
void for_sample_runs(const Conv2dGeometry& g, int64_t j0, int64_t j1, Fn fn) {
  const int64_t pq = g.p * g.q;
  for (int64_t j = j0; j < j1;) {
    const int64_t n = j / pq, pq0 = j % pq, pq1 = std::min(pq, pq0 + (j1 - j));
    fn(n, pq0, pq1, j - j0);
    j += pq1 - pq0;
  }
}

// col[(c*R + r)*S + s][j - j0] = x[c][n][ih][iw] of position j = (n, p, q), 0 in the padding;
// x is [C][N][H][W].
void im2col_chunk(const Conv2dGeometry& g, const int8_t* x, int64_t j0, int64_t j1, int8_t* col) {
  const int64_t nc = j1 - j0, rows = g.c * g.r * g.s, hw = g.h * g.w;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / nc), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t s = row % g.s, r = (row / g.s) % g.r, c = row / (g.r * g.s);
      const int8_t* xc = x + c * g.n * hw;
      int8_t* dst = col + row * nc;
      int64_t q_lo, q_hi;
      const int64_t iw0 = s * g.dil_w - g.pad_w;
      valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
      for (int64_t j = j0; j < j1;) {
        const int64_t n = j / (g.p * g.q), pq = j % (g.p * g.q), p = pq / g.q, q0 = pq % g.q;
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
      }
    }
  });
}

// out[n][k][pq] = float(y[k][j - j0]) * scale + bias[k] for the positions of the block.
void rescale_chunk(const Conv2dGeometry& g, const int32_t* y, int64_t j0, int64_t j1, float scale, const float* bias,
                   float* out) {
  const int64_t nc = j1 - j0, pq = g.p * g.q;
  parallel_for(0, g.k, std::max<int64_t>(1, 16384 / nc), [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const float b = bias ? bias[k] : 0.0f;
      for_sample_runs(g, j0, j1, [&](int64_t n, int64_t pq0, int64_t pq1, int64_t off) {
        rescale_run(y + k * nc + off, pq1 - pq0, scale, b, out + (n * g.k + k) * pq + pq0);
      });
    }
  });
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
        for (int64_t c = c0; c < c1; ++c) {
          std::fill(acc.begin(), acc.end(), 0);
          for (int64_t r = 0; r < g.r; ++r)
            for (int64_t s = 0; s < g.s; ++s) {
              const int32_t* src = dcol + ((c * g.r + r) * g.s + s) * pq;
              for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
                add_scatter(acc.data() + ih * g.w, src + p * g.q, iw0, q_lo, q_hi, g.stride_w);
              });
            }
          rescale_run(acc.data(), hw, scale, 0.0f, dx + (n * g.c + c) * hw);
        }
      });
    }
  };
  if (g.n >= get_num_threads())
    parallel_for(0, g.n, 1, samples);
  else
    samples(0, g.n);
}

// dw [K, C/g*R*S] = sum over blocks of dy_g [kg, block] . col_g^T [block, crs]: int32 per stretch
// of at most kMaxInt32Terms positions, int64 beyond.
void gemm_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  const int64_t total = g.n * g.p * g.q, cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  const int64_t wn = g.k * crs;
  const bool pointwise = is_pointwise(g);
  const Chunks ch = plan_chunks(total, pointwise ? 64 : g.c * g.r * g.s);
  std::vector<int64_t> sum(static_cast<size_t>(wn), 0);
  std::mutex sum_mutex;
  for_chunks(ch, [&](int64_t c0, int64_t c1) {
    Tensor keep_col, keep_part;
    int8_t* col = pointwise ? nullptr : scratch<int8_t>(keep_col, g.c * g.r * g.s * ch.size);
    int32_t* part = scratch<int32_t>(keep_part, wn);
    std::vector<int64_t> local(static_cast<size_t>(wn), 0);
    int64_t terms = 0;  // positions summed into `part` so far
    auto flush = [&] {
      for (int64_t i = 0; i < wn; ++i) local[i] += part[i];
      terms = 0;
    };
    for (int64_t chunk = c0; chunk < c1; ++chunk) {
      const int64_t j0 = chunk * ch.size, j1 = std::min(total, j0 + ch.size), nc = j1 - j0;
      if (terms > 0 && terms + nc > kMaxInt32Terms) flush();
      if (!pointwise) im2col_chunk(g, x, j0, j1, col);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const int8_t* b = pointwise ? x + grp * cg * total + j0 : col + grp * crs * nc;
        int8_gemm(false, true, kg, crs, nc, dy + grp * kg * total + j0, total, b, pointwise ? total : nc,
                  part + grp * kg * crs, crs, terms > 0);
      }
      terms += nc;
    }
    if (terms > 0) flush();
    std::lock_guard<std::mutex> lock(sum_mutex);  // integer sums: the order does not matter
    for (int64_t i = 0; i < wn; ++i) sum[i] += local[i];
  });
  for (int64_t i = 0; i < wn; ++i) dw[i] = static_cast<float>(sum[i]) * scale;
}

// ---------------------------------------------------------------- depthwise (direct)
// Output channel k reads input channel k / m, m = K / C the channel multiplier.

int64_t grain_for(int64_t work_per_item) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item)); }

void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.n * g.k, grain_for(pq * rs), [&](int64_t b0, int64_t b1) {
    std::vector<int32_t> acc(static_cast<size_t>(pq));
    for (int64_t nk = b0; nk < b1; ++nk) {
      const int64_t n = nk / g.k, k = nk % g.k;
      const int8_t* xc = x + ((k / m) * g.n + n) * hw;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s) {
          const int32_t wv = w[k * rs + r * g.s + s];
          if (wv == 0) continue;
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            tap_gather(acc.data() + p * g.q, xc + ih * g.w, iw0, q_lo, q_hi, g.stride_w, wv);
          });
        }
      rescale_run(acc.data(), pq, scale, bias ? bias[k] : 0.0f, out + nk * pq);
    }
  });
}

// dx plane (n, c) gathers from its m output channels.
void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.n * g.c, grain_for(m * pq * rs), [&](int64_t b0, int64_t b1) {
    std::vector<int32_t> acc(static_cast<size_t>(hw));
    for (int64_t nc = b0; nc < b1; ++nc) {
      const int64_t n = nc / g.c, c = nc % g.c;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t k = c * m; k < (c + 1) * m; ++k) {
        const int8_t* dyk = dy + (k * g.n + n) * pq;
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            const int32_t wv = w[k * rs + r * g.s + s];
            if (wv == 0) continue;
            for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
              tap_scatter(acc.data() + ih * g.w, dyk + p * g.q, iw0, q_lo, q_hi, g.stride_w, wv);
            });
          }
      }
      rescale_run(acc.data(), hw, scale, 0.0f, dx + nc * hw);
    }
  });
}

// dw[k][r][s] = sum over n, p, q; each row's sum fits int32 (Q < 2^17), the total is int64.
void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.k, grain_for(g.n * pq * rs), [&](int64_t k0, int64_t k1) {
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
  });
}

// ---------------------------------------------------------------- operand checks

void check_codes(const char* op, const char* what, const Tensor& t, int64_t numel) {
  OCTET_CHECK(t.defined() && t.device().is_cpu() && t.dtype() == DType::i8 && t.is_contiguous() && t.numel() == numel,
              op, ": expected ", what, " as contiguous i8 CPU codes of ", numel, " elements, got ",
              t.defined() ? detail::str_cat(t.dtype(), " ", t.shape(), " on ", t.device()) : std::string("undefined"));
}

void check_f32(const char* op, const char* what, const Tensor& t, int64_t numel) {
  OCTET_CHECK(t.defined() && t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == numel,
              op, ": expected ", what, " as a contiguous f32 CPU tensor of ", numel, " elements, got ",
              t.defined() ? detail::str_cat(t.dtype(), " ", t.shape(), " on ", t.device()) : std::string("undefined"));
}

void check_geometry(const char* op, const Conv2dGeometry& g) {
  OCTET_CHECK(g.groups > 0 && g.c % g.groups == 0 && g.k % g.groups == 0 && g.stride_h > 0 && g.stride_w > 0 &&
                  g.dil_h > 0 && g.dil_w > 0,
              op, ": invalid convolution geometry");
}

}  // namespace

void int8_conv2d_forward(const Conv2dGeometry& g, const Tensor& xq, const Tensor& wq, float scale, const Tensor& bias,
                         const Tensor& out) {
  const char* op = "int8_conv2d_forward";
  check_geometry(op, g);
  check_codes(op, "input", xq, g.n * g.c * g.h * g.w);
  check_codes(op, "weight", wq, g.k * (g.c / g.groups) * g.r * g.s);
  check_f32(op, "output", out, g.n * g.k * g.p * g.q);
  if (bias.defined()) check_f32(op, "bias", bias, g.k);
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (is_depthwise(g))
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
  if (is_depthwise(g))
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
  if (is_depthwise(g))
    depthwise_backward_weight(g, xq.data<int8_t>(), dyq.data<int8_t>(), scale, dw.data<float>());
  else
    gemm_backward_weight(g, xq.data<int8_t>(), dyq.data<int8_t>(), scale, dw.data<float>());
}

}  // namespace octet::quant::cpu
