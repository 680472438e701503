// CUDA kernels of PrecisionBatching (quant/cuda/pbatch.h): the activation quantizer writing the
// bit-planes and the AND + popcount product, the per-thread arithmetic in quant/cuda/pbatch_kernels.h
// (shared with the host emulation test). Built with --fmad=false: the double rescale and the float
// bias add round like the CPU's.
#include <algorithm>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "quant/cuda/pbatch.h"
#include "quant/cuda/pbatch_kernels.h"

namespace octet::quant::cuda {

namespace {

using ::octet::cuda::stream;
using pb::kThreads;
using pb::kWarp;

constexpr unsigned kFullMask = 0xffffffffu;
// Chunks of kPbMaxBatch batch rows along grid y at most (CUDA's limit); more run in several launches.
constexpr int64_t kMaxGridY = 65535;

// Block b: batch row b of x [batch, cols] -> planes [b][bits][words], scale[b]. shift >= 0: the paper
// scheme's static scale 2^-shift (the max only finds non-finite rows).
__global__ void __launch_bounds__(kThreads)
    pb_quantize_kernel(const float* __restrict__ x, int64_t cols, int64_t words, int bits, int shift,
                       uint64_t* __restrict__ planes, double* __restrict__ scale) {
  __shared__ uint32_t red[kThreads / kWarp];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  uint32_t m = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = max(m, pb::pb_abs_bits(xr[c]));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int o = kWarp / 2; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(kFullMask, m, o));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = 0;
  for (int k = 0; k < warps; ++k) m = max(m, red[k]);  // max: exact in any order
  const pb::PbRowScale s = shift >= 0 ? pb::pb_row_scale_fixed(m, shift) : pb::pb_row_scale(m, bits);
  if (threadIdx.x == 0) scale[row] = s.scale;
  uint64_t* pr = planes + row * bits * words;
  for (int64_t w = warp; w < words; w += warps) {  // uniform per warp: every lane takes the ballots
    int32_t lo = 0, hi = 0;
    pb::pb_column_codes(xr, cols, w, lane, s, lo, hi);
    uint64_t mine = 0;
    for (int j = 0; j < bits; ++j) {
      const uint32_t bl = __ballot_sync(kFullMask, pb::pb_code_bit(lo, j));
      const uint32_t bh = __ballot_sync(kFullMask, pb::pb_code_bit(hi, j));
      if (lane == j) mine = pb::pb_plane_word(bl, bh);
    }
    if (lane < bits) pr[lane * words + w] = mine;
  }
}

// Block b, one warp: code_sums[b] = sum_K xq[b, K] from batch row b's planes (1-bit weights' plane 0).
__global__ void __launch_bounds__(kWarp)
    pb_code_sum_kernel(const uint64_t* __restrict__ x, int x_planes, int64_t words, int64_t* __restrict__ code_sums) {
  const int64_t b = blockIdx.x;
  int64_t s = pb::pb_lane_code_sum(x + b * x_planes * words, x_planes, words, threadIdx.x, kWarp);
  for (int o = kWarp / 2; o > 0; o >>= 1) s = pb::pb_add(s, __shfl_xor_sync(kFullMask, s, o));
  if (threadIdx.x == 0) code_sums[b] = s;
}

// Threads (blockIdx.x * kThreads + threadIdx.x) / lanes = output row; blockIdx.y = chunk of
// kPbMaxBatch batch rows from batch0 (of `batch`). x holds all rows' planes, scale all rows' s_b,
// code_sums (First = 1 only) all rows' plane-0 parts.
template <int P, int First>
__global__ void __launch_bounds__(kThreads)
    pb_gemm_kernel(const uint64_t* __restrict__ w, int64_t rows, int64_t words, const uint64_t* __restrict__ x,
                   int x_planes, const double* __restrict__ scale, const int64_t* __restrict__ code_sums,
                   int64_t batch0, int64_t batch, int lanes, double step, const double* __restrict__ row_steps,
                   const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t b0 = batch0 + static_cast<int64_t>(blockIdx.y) * kPbMaxBatch;
  const pb::PbThread t = pb::pb_thread(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, lanes);
  const int64_t nb = batch - b0 < kPbMaxBatch ? batch - b0 : kPbMaxBatch;
  pb::PbGemmArgs a{w, rows, words, x + b0 * x_planes * words, nb, x_planes};
  int64_t acc[kPbMaxBatch] = {};
  if (t.row < rows) pb::pb_lane_sums<P, First>(a, t.row, t.lane, lanes, acc);
    // Every lane of the warp takes part (rows past the end with zeros); groups of `lanes` are aligned,
    // so xor offsets below `lanes` stay inside a row's group.
#pragma unroll
  for (int b = 0; b < static_cast<int>(kPbMaxBatch); ++b)
    for (int o = lanes / 2; o > 0; o >>= 1) acc[b] = pb::pb_add(acc[b], __shfl_xor_sync(kFullMask, acc[b], o));
  if (t.row >= rows || t.lane >= nb) return;
  int64_t mine = 0;
#pragma unroll
  for (int b = 0; b < static_cast<int>(kPbMaxBatch); ++b)
    if (t.lane == b) mine = acc[b];
  const int64_t b = b0 + t.lane;
  if constexpr (First == 1) mine = pb::pb_add(mine, code_sums[b]);
  y[b * rows + t.row] = pb::pb_output(mine, step, row_steps, scale[b], bias, t.row);
}

template <int P, int First = 0>
void launch_gemm(dim3 grid, const uint64_t* w, int64_t rows, int64_t words, const uint64_t* x, int x_planes,
                 const double* scale, const int64_t* code_sums, int64_t batch0, int64_t batch, int lanes, double step,
                 const double* row_steps, const float* bias, float* y) {
  pb_gemm_kernel<P, First><<<grid, kThreads, 0, stream()>>>(w, rows, words, x, x_planes, scale, code_sums, batch0,
                                                            batch, lanes, step, row_steps, bias, y);
  OCTET_CUDA_LAUNCH("quant::cuda::pb_gemm_kernel");
}

using GemmLauncher = void (*)(dim3, const uint64_t*, int64_t, int64_t, const uint64_t*, int, const double*,
                              const int64_t*, int64_t, int64_t, int, double, const double*, const float*, float*);

GemmLauncher gemm_launcher(int planes, bool plane0_ones) {
  switch (planes) {
    case 2:  // 1-bit weights: plane 0 from the code sums when it is all ones (a paper-scheme 0 code: read)
      return plane0_ones ? launch_gemm<2, 1> : launch_gemm<2>;
    case 3:
      return launch_gemm<3>;
    case 4:
      return launch_gemm<4>;
    case 5:
      return launch_gemm<5>;
    case 6:
      return launch_gemm<6>;
    case 7:
      return launch_gemm<7>;
    case 8:
      return launch_gemm<8>;
    case 9:
      return launch_gemm<9>;
    default:
      break;
  }
  OCTET_CHECK(false, "quant::cuda::pb_linear: weights with ", planes, " planes (expected 2..", pb::kMaxWeightPlanes,
              ")");
  return nullptr;
}

void check_cuda_tensor(const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  OCTET_CHECK(t.defined() && t.device().is_cuda() && t.dtype() == dtype && t.shape() == shape && t.is_contiguous(),
              "quant::cuda::pb_linear: ", what, " must be a contiguous ", dtype, " CUDA tensor of shape ", shape,
              t.defined() ? "" : " (undefined)");
}

}  // namespace

namespace {

PbActivations quantize(const Tensor& x, int bits, int shift) {
  OCTET_CHECK(x.defined() && x.device().is_cuda() && x.dtype() == DType::f32 && x.dim() == 2 && x.is_contiguous(),
              "quant::cuda::pb_quantize: expected a contiguous f32 CUDA tensor [batch, cols]");
  OCTET_CHECK(shift <= kPbMaxActShift, "quant::cuda::pb_quantize_fixed: shift ", shift, " (at most ", kPbMaxActShift,
              ")");
  OCTET_CHECK(bits >= kPbMinActivationBits && bits <= kPbMaxActivationBits, "quant::cuda::pb_quantize: ", bits,
              " activation bits (expected ", kPbMinActivationBits, "..", kPbMaxActivationBits, ")");
  const int64_t batch = x.size(0), cols = x.size(1), words = pb_words(cols);
  OCTET_CHECK(cols < kPbMaxCols, "quant::cuda::pb_quantize: ", cols, " columns (at most ", kPbMaxCols - 1, ")");
  OCTET_CHECK(batch <= 0x7fffffff, "quant::cuda::pb_quantize: batch ", batch, " exceeds the launch grid");
  PbActivations a;
  a.batch = batch, a.cols = cols, a.bits = bits;
  a.planes = empty({batch, bits, words}, TensorOptions(DType::i64).device(x.device()));
  a.scale = empty({batch}, TensorOptions(DType::f64).device(x.device()));
  if (batch == 0) return a;
  pb_quantize_kernel<<<static_cast<unsigned>(batch), kThreads, 0, stream()>>>(
      x.data<float>(), cols, words, bits, shift, static_cast<uint64_t*>(a.planes.raw_data()), a.scale.data<double>());
  OCTET_CUDA_LAUNCH("quant::cuda::pb_quantize_kernel");
  return a;
}

}  // namespace

PbActivations pb_quantize(const Tensor& x, int bits) { return quantize(x, bits, -1); }

PbActivations pb_quantize_fixed(const Tensor& x, int bits, int shift) {
  OCTET_CHECK(shift >= 0, "quant::cuda::pb_quantize_fixed: shift ", shift, " (expected 0..", kPbMaxActShift, ")");
  return quantize(x, bits, shift);
}

Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias) {
  OCTET_CHECK(w.cols == x.cols, "quant::cuda::pb_linear: weights with ", w.cols, " columns, activations with ", x.cols);
  const int64_t words = w.words(), batch = x.batch, rows = w.rows;
  check_cuda_tensor(w.planes, DType::i64, {rows, w.num_planes(), words}, "the weight planes");
  check_cuda_tensor(x.planes, DType::i64, {batch, x.bits, words}, "the activation planes");
  check_cuda_tensor(x.scale, DType::f64, {batch}, "the activation scales");
  OCTET_CHECK(x.bits >= kPbMinActivationBits && x.bits <= kPbMaxActivationBits, "quant::cuda::pb_linear: ", x.bits,
              " activation bits");
  const Device dev = w.planes.device();
  OCTET_CHECK(x.planes.device() == dev && x.scale.device() == dev, "quant::cuda::pb_linear: weights on ", dev,
              ", activations on ", x.planes.device());
  if (bias.defined()) {
    check_cuda_tensor(bias, DType::f32, {rows}, "the bias");
    OCTET_CHECK(bias.device() == dev, "quant::cuda::pb_linear: weights on ", dev, ", bias on ", bias.device());
  }
  const GemmLauncher launch = gemm_launcher(w.num_planes(), w.plane0_ones);
  if (w.row_steps.defined()) check_cuda_tensor(w.row_steps, DType::f64, {rows}, "the row steps");
  OCTET_CHECK(!w.row_steps.defined() || w.row_steps.device() == dev, "quant::cuda::pb_linear: weights on ", dev,
              ", row steps on ", w.row_steps.device());
  Tensor y = empty({batch, rows}, TensorOptions(DType::f32).device(dev));
  if (batch == 0 || rows == 0) return y;
  const int lanes = pb::pb_lanes_per_row(words);
  const int64_t blocks = pb::pb_gemm_blocks(rows, lanes);
  OCTET_CHECK(blocks <= 0x7fffffff, "quant::cuda::pb_linear: ", rows, " rows exceed the launch grid");
  const int64_t chunks = (batch + kPbMaxBatch - 1) / kPbMaxBatch;
  const auto* wp = static_cast<const uint64_t*>(w.planes.raw_data());
  const auto* xp = static_cast<const uint64_t*>(x.planes.raw_data());
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  Tensor code_sums;  // 1-bit weights: sum_K xq[b, K] per batch row
  if (w.bits == 1 && w.plane0_ones) {
    OCTET_CHECK(batch <= 0x7fffffff, "quant::cuda::pb_linear: batch ", batch, " exceeds the launch grid");
    code_sums = empty({batch}, TensorOptions(DType::i64).device(dev));
    pb_code_sum_kernel<<<static_cast<unsigned>(batch), kWarp, 0, stream()>>>(xp, x.bits, words,
                                                                             code_sums.data<int64_t>());
    OCTET_CUDA_LAUNCH("quant::cuda::pb_code_sum_kernel");
  }
  for (int64_t c0 = 0; c0 < chunks; c0 += kMaxGridY) {
    const int64_t n = std::min(kMaxGridY, chunks - c0);
    launch(dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n)), wp, rows, words, xp, x.bits,
           x.scale.data<double>(), code_sums.defined() ? code_sums.data<int64_t>() : nullptr, c0 * kPbMaxBatch, batch,
           lanes, w.step, w.row_steps.defined() ? w.row_steps.data<double>() : nullptr, bp, y.data<float>());
  }
  return y;
}

}  // namespace octet::quant::cuda
