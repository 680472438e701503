// CUDA zero-point GEMM (quant/cuda/qgemm.h): the operands' s8 copies with their row sums, the raw
// product by cuBLASLt (quant/cuda/int8_gemm_lt.h) or the DP4A tiles (quant/cuda/int8_dp4a.h), the
// zero-point fold, and qlinear's row quantizer and output. The per-element arithmetic is in
// quant/cuda/qgemm_kernels.h (shared with the host emulation test). Integer sums are exact in any
// order, so every int32 result equals the CPU's; the float steps are one rounding each, as the
// CPU's (built with --fmad=false).
#include <algorithm>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "core/cuda/launch.cuh"
#include "quant/cuda/int8_dp4a.h"
#include "quant/cuda/int8_gemm_lt.h"
#include "quant/cuda/qgemm.h"
#include "quant/cuda/qgemm_kernels.h"

namespace octet::quant::cuda {

namespace {

using ::octet::cuda::first_index;
using ::octet::cuda::grid_stride;
using ::octet::cuda::stream;
using qg::kThreads;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int64_t kMaxGrid = 0x7fffffff;

// Sum over the block of v (integers: exact in any order); every thread gets it.
__device__ int32_t block_sum(int32_t v, int32_t* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  int32_t s = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
  return s;
}

// Block r: row r of src [rows][ld] -> out[r][0, kp) (shifted, zero padded; skipped when out is
// null) and sums[r] = sum of its k raw codes (skipped when sums is null or r >= rows).
__global__ void __launch_bounds__(kThreads)
    operand_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t ld, int64_t k, bool u8, int64_t kp,
                   int8_t* __restrict__ out, int32_t* __restrict__ sums) {
  __shared__ int32_t red[kThreads / 32];
  const int64_t r = blockIdx.x;
  if (out != nullptr)
    for (int64_t t = threadIdx.x; t < kp; t += blockDim.x) out[r * kp + t] = qg::qg_padded(src, rows, ld, k, u8, r, t);
  if (sums == nullptr || r >= rows) return;  // uniform over the block
  int32_t s = 0;
  for (int64_t t = threadIdx.x; t < k; t += blockDim.x) s += qg::qg_raw(src, u8, r * ld + t);
  s = block_sum(s, red);
  if (threadIdx.x == 0) sums[r] = s;
}

// c[i][j] = qg_fold(p[i][j], ...) for i < m, j < n (p with row length ldp).
__global__ void fold_kernel(const int32_t* __restrict__ p, int64_t ldp, int64_t m, int64_t n, int64_t k,
                            const int32_t* __restrict__ za, int32_t zb, const int32_t* __restrict__ sum_a,
                            const int32_t* __restrict__ sum_b, bool ua, bool ub, int32_t* __restrict__ c) {
  for (int64_t e = first_index(); e < m * n; e += grid_stride()) {
    const int64_t i = e / n, j = e - i * n;
    c[e] = qg::qg_fold(p[i * ldp + j], za[i], zb, sum_a[i], sum_b[j], k, ua, ub);
  }
}

// Block b: row b of x [batch][cols] -> codes, scale[b], zero_point[b].
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const float* __restrict__ x, int64_t cols, uint8_t* __restrict__ codes,
                         float* __restrict__ scale, int32_t* __restrict__ zero_point) {
  __shared__ float red_lo[kThreads / 32], red_hi[kThreads / 32];
  __shared__ int red_bad[kThreads / 32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float lo = 0.0f, hi = 0.0f;  // the range always holds 0 (choose_qparams widens it so)
  int bad = 0;
  for (int64_t t = threadIdx.x; t < cols; t += blockDim.x) {
    const float v = xr[t];
    if (!isfinite(v))
      bad = 1;
    else
      lo = fminf(lo, v), hi = fmaxf(hi, v);
  }
  for (int o = 16; o > 0; o >>= 1) {
    lo = fminf(lo, __shfl_xor_sync(kFullMask, lo, o));
    hi = fmaxf(hi, __shfl_xor_sync(kFullMask, hi, o));
    bad |= __shfl_xor_sync(kFullMask, bad, o);
  }
  if (threadIdx.x % 32 == 0)
    red_lo[threadIdx.x / 32] = lo, red_hi[threadIdx.x / 32] = hi, red_bad[threadIdx.x / 32] = bad;
  __syncthreads();
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
    lo = fminf(lo, red_lo[w]), hi = fmaxf(hi, red_hi[w]), bad |= red_bad[w];
  const qg::QgRowParams p = bad ? qg::qg_row_params(0.0f, __int_as_float(0x7fc00000)) : qg::qg_row_params(lo, hi);
  if (threadIdx.x == 0) scale[blockIdx.x] = p.scale, zero_point[blockIdx.x] = p.zero_point;
  uint8_t* cr = codes + static_cast<int64_t>(blockIdx.x) * cols;
  for (int64_t t = threadIdx.x; t < cols; t += blockDim.x) cr[t] = qg::qg_code(xr[t], p);
}

__global__ void output_kernel(const int32_t* __restrict__ acc, int64_t batch, int64_t rows,
                              const float* __restrict__ scale_a, float w_scale, const float* __restrict__ bias,
                              float* __restrict__ y) {
  for (int64_t e = first_index(); e < batch * rows; e += grid_stride()) {
    const int64_t b = e / rows, r = e - b * rows;
    y[e] = qg::qg_output(acc[e], scale_a[b], w_scale, bias, r);
  }
}

DType dtype_of_q(QType t) { return t == QType::u8 ? DType::u8 : DType::i8; }

void check_cuda(const Tensor& t, DType dtype, const Shape& shape, const char* op, const char* what) {
  OCTET_CHECK(t.defined() && t.device().is_cuda() && t.dtype() == dtype && t.shape() == shape && t.is_contiguous(), op,
              ": ", what, " must be a contiguous ", dtype, " CUDA tensor of shape ", shape,
              t.defined() ? "" : " (undefined)");
}

Tensor device_empty(const Shape& shape, DType dtype, Device d) { return empty(shape, TensorOptions(dtype).device(d)); }

unsigned grid_blocks(int64_t n, const char* op) {
  OCTET_CHECK(n <= kMaxGrid, op, ": ", n, " rows exceed the launch grid");
  return static_cast<unsigned>(std::max<int64_t>(n, 1));
}

}  // namespace

Tensor qgemm(const Tensor& a, const Tensor& za, QType ta, const Tensor& b, int32_t zb, QType tb,
             const Tensor& b_row_sums, QgemmPath path) {
  constexpr const char* op = "quant::cuda::qgemm";
  OCTET_CHECK(a.defined() && a.dim() == 2 && b.defined() && b.dim() == 2 && a.size(1) == b.size(1), op,
              ": expected a [m, k] and b [n, k]");
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  const Device dev = a.device();
  check_cuda(a, dtype_of_q(ta), {m, k}, op, "a");
  check_cuda(b, dtype_of_q(tb), {n, k}, op, "b");
  check_cuda(za, DType::i32, {m}, op, "za");
  if (b_row_sums.defined()) check_cuda(b_row_sums, DType::i32, {n}, op, "b_row_sums");
  for (const Tensor* t : {&b, &za, &b_row_sums})
    OCTET_CHECK(!t->defined() || t->device() == dev, op, ": operands on ", dev, " and ", t->device());
  OCTET_CHECK(k <= kQGemmMaxK, op, ": k = ", k, " (at most ", kQGemmMaxK, " keep the sums in int32)");
  Tensor c = device_empty({m, n}, DType::i32, dev);
  if (m == 0 || n == 0) return c;
  if (k == 0) {
    OCTET_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0, static_cast<size_t>(m * n) * 4, stream()));
    return c;
  }
  const bool ua = ta == QType::u8, ub = tb == QType::u8;
  const int64_t kp = qg::round_up(k, qg::kRowAlign), np = qg::round_up(n, qg::kRowsAlign);
  const auto* a_raw = static_cast<const uint8_t*>(a.raw_data());
  const auto* b_raw = static_cast<const uint8_t*>(b.raw_data());

  Tensor a_s8 = device_empty({m, kp}, DType::i8, dev), sum_a = device_empty({m}, DType::i32, dev);
  operand_kernel<<<grid_blocks(m, op), kThreads, 0, stream()>>>(a_raw, m, k, k, ua, kp, a_s8.data<int8_t>(),
                                                                sum_a.data<int32_t>());
  OCTET_CUDA_LAUNCH("quant::cuda::qgemm operand_kernel (a)");

  // b in place when it already is rows cuBLASLt takes; else its padded s8 copy.
  const bool b_in_place = !ub && k == kp && n == np && reinterpret_cast<uintptr_t>(b_raw) % qg::kRowAlign == 0;
  Tensor b_s8 = b_in_place ? b : device_empty({np, kp}, DType::i8, dev);
  Tensor sum_b = b_row_sums.defined() ? b_row_sums : device_empty({n}, DType::i32, dev);
  if (!b_in_place || !b_row_sums.defined()) {
    operand_kernel<<<grid_blocks(b_in_place ? n : np, op), kThreads, 0, stream()>>>(
        b_raw, n, k, k, ub, kp, b_in_place ? nullptr : b_s8.data<int8_t>(),
        b_row_sums.defined() ? nullptr : sum_b.data<int32_t>());
    OCTET_CUDA_LAUNCH("quant::cuda::qgemm operand_kernel (b)");
  }

  // P [m][np]: cuBLASLt's column-major np x m output with b' as its A.
  Tensor p = device_empty({m, np}, DType::i32, dev);
  const auto* a8 = a_s8.data<int8_t>();
  const auto* b8 = static_cast<const int8_t*>(b_s8.raw_data());
  const ops::Int8Gemm g{np, m, kp, kp, kp, np};
  if (path == QgemmPath::automatic && int8_gemm_supported(g)) {
    int8_gemm(g, b8, a8, p.data<int32_t>());
  } else {
    const qg::QgemmDp4aOps dop{{}, a8, b8, m, n, kp, p.data<int32_t>(), np};
    const ops::Dp4aGrid grid = ops::dp4a_grid(dop, dop.words());
    OCTET_CHECK(grid.y <= ops::kMaxGridYZ && grid.x <= kMaxGrid, op, ": m = ", m, " exceeds the DP4A grid");
    const dim3 blocks(static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y));
    ops::dp4a_gemm_kernel<<<blocks, ops::kTileThreads, 0, stream()>>>(dop, 0, dop.words(), 1);
    OCTET_CUDA_LAUNCH("quant::cuda::qgemm dp4a_gemm_kernel");
  }
  fold_kernel<<<::octet::cuda::grid_for(m * n, kThreads), kThreads, 0, stream()>>>(
      p.data<int32_t>(), np, m, n, k, za.data<int32_t>(), zb, sum_a.data<int32_t>(), sum_b.data<int32_t>(), ua, ub,
      c.data<int32_t>());
  OCTET_CUDA_LAUNCH("quant::cuda::qgemm fold_kernel");
  return c;
}

RowQuantized quantize_rows_u8(const Tensor& x) {
  constexpr const char* op = "quant::cuda::quantize_rows_u8";
  OCTET_CHECK(x.defined() && x.dim() == 2, op, ": expected x [batch, cols]");
  const int64_t batch = x.size(0), cols = x.size(1);
  check_cuda(x, DType::f32, {batch, cols}, op, "x");
  RowQuantized q;
  q.codes = device_empty({batch, cols}, DType::u8, x.device());
  q.scale = device_empty({batch}, DType::f32, x.device());
  q.zero_point = device_empty({batch}, DType::i32, x.device());
  if (batch == 0) return q;
  quantize_rows_kernel<<<grid_blocks(batch, op), kThreads, 0, stream()>>>(
      x.data<float>(), cols, q.codes.data<uint8_t>(), q.scale.data<float>(), q.zero_point.data<int32_t>());
  OCTET_CUDA_LAUNCH("quant::cuda::quantize_rows_kernel");
  return q;
}

Tensor dequantize_linear(const Tensor& acc, const Tensor& scale_a, float w_scale, const Tensor& bias) {
  constexpr const char* op = "quant::cuda::dequantize_linear";
  OCTET_CHECK(acc.defined() && acc.dim() == 2, op, ": expected acc [batch, rows]");
  const int64_t batch = acc.size(0), rows = acc.size(1);
  check_cuda(acc, DType::i32, {batch, rows}, op, "acc");
  check_cuda(scale_a, DType::f32, {batch}, op, "scale_a");
  if (bias.defined()) check_cuda(bias, DType::f32, {rows}, op, "bias");
  for (const Tensor* t : {&scale_a, &bias})
    OCTET_CHECK(!t->defined() || t->device() == acc.device(), op, ": operands on ", acc.device(), " and ", t->device());
  Tensor y = device_empty({batch, rows}, DType::f32, acc.device());
  if (batch * rows == 0) return y;
  output_kernel<<<::octet::cuda::grid_for(batch * rows, kThreads), kThreads, 0, stream()>>>(
      acc.data<int32_t>(), batch, rows, scale_a.data<float>(), w_scale, bias.defined() ? bias.data<float>() : nullptr,
      y.data<float>());
  OCTET_CUDA_LAUNCH("quant::cuda::dequantize_linear output_kernel");
  return y;
}

}  // namespace octet::quant::cuda
