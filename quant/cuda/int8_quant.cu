// CUDA INT8 quantization kernels (quant/cuda/int8_quant.h). Quantizers take four elements per
// thread step, the four words of one Philox block (sr_uniform's draws for elements 4b..4b+3), and
// call the element functions of quant/int8.h. Statistics: each thread accumulates in double, each
// block combines its threads in a fixed shuffle tree into one partial, a one-block kernel adds
// the partials in a fixed order; the grid size depends on n only, so the sums are the same from
// run to run. Maxima of |x| are taken on the bit patterns (a NaN's lie above infinity's, as on the
// CPU) with atomicMax, which is exact in any order.
// Built with --fmad=false (CMakeLists.txt): x * inv + u and the rescales round like the CPU's.
#include <algorithm>
#include <cstring>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "core/cuda/launch.cuh"
#include "quant/cuda/int8_quant.h"

namespace octet::quant::cuda {

namespace {

using ::octet::cuda::first_index;
using ::octet::cuda::grid_stride;
using ::octet::cuda::stream;

constexpr int kThreads = 256;
constexpr int64_t kMaxSumBlocks = 1024;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint32_t kAbsMask = 0x7fffffffu, kInfBits = 0x7f800000u;
constexpr int kClipsPerPass = 8;
constexpr int kNearestWidth = 1 + 2 * kClipsPerPass;  // gg, then gq and qq per clip

// The device copy of the statistics: written by sum_columns_kernel (the sums) and atomicMax (bits).
struct SumsOut {
  double gq, gg, qq;
  unsigned int max_bits, unused;
};
static_assert(sizeof(SumsOut) == 32, "SumsOut: three doubles and two words");

struct Invs {
  float v[kClipsPerPass];
};

Tensor device_buffer(DType dtype, int64_t n) {
  return empty({std::max<int64_t>(n, 1)}, TensorOptions(dtype).device(Device::cuda(::octet::cuda::current_device())));
}

// Blocks of a statistics kernel over `items` items: a function of the size only.
unsigned sum_blocks(int64_t items, int64_t per_thread) {
  const int64_t b = (items + kThreads * per_thread - 1) / (kThreads * per_thread);
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, kMaxSumBlocks));
}

__device__ inline uint32_t abs_bits(float x) { return __float_as_uint(x) & kAbsMask; }

__device__ inline uint32_t warp_max(uint32_t m) {
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t w = __shfl_xor_sync(kFullMask, m, o);
    m = m < w ? w : m;
  }
  return m;
}

// Adds v[k] over the thread block in a fixed tree; thread 0 holds the totals. blockDim.x a multiple
// of 32; every thread must call it.
template <int W>
__device__ void block_sum(double (&v)[W], double (&red)[W][32]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    for (int o = 16; o > 0; o >>= 1) v[k] += __shfl_down_sync(kFullMask, v[k], o);
    if (lane == 0) red[k][warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      v[k] = lane < warps ? red[k][lane] : 0.0;
      for (int o = 16; o > 0; o >>= 1) v[k] += __shfl_down_sync(kFullMask, v[k], o);
    }
  }
  __syncthreads();  // red may be reused right away
}

// fn(i, code) for the elements 4b .. 4b + 3 below n: one Philox block gives their four draws.
template <class Fn>
__device__ void quantize_four(const float* x, int64_t n, int64_t b, float inv, bool stochastic, uint64_t seed, Fn fn) {
  const int64_t i0 = 4 * b;
  if (stochastic) {
    const auto w = philox_at(seed, 0, static_cast<uint64_t>(b));
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i0 + k < n) fn(i0 + k, int8_round_stochastic(x[i0 + k], inv, uniform_float(w[k])));
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i0 + k < n) fn(i0 + k, int8_round_nearest(x[i0 + k], inv));
  }
}

__global__ void absmax_kernel(const float* __restrict__ x, int64_t n, unsigned int* out) {
  uint32_t m = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint32_t b = abs_bits(x[i]);
    m = m < b ? b : m;
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(out, m);
}

__global__ void quantize_kernel(const float* __restrict__ x, int64_t n, float inv, bool stochastic, uint64_t seed,
                                int8_t* __restrict__ codes) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t b = first_index(); b < groups; b += grid_stride())
    quantize_four(x, n, b, inv, stochastic, seed, [&](int64_t i, int8_t q) { codes[i] = q; });
}

__global__ void dequantize_kernel(const int8_t* __restrict__ codes, int64_t n, float scale, float* __restrict__ out) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = static_cast<float>(codes[i]) * scale;
}

// Partials [blockIdx.x][3] of gq, gg, qq; the max |src| bits into *max_bits.
__global__ void __launch_bounds__(kThreads)
    channel_major_kernel(const float* __restrict__ src, int64_t outer, int64_t inner, int64_t len, int64_t ld,
                         float inv, bool stochastic, uint64_t seed, int8_t* __restrict__ dst, double* partials,
                         unsigned int* max_bits) {
  __shared__ double red[3][32];
  const int64_t n = outer * inner * len, groups = (n + 3) / 4;
  double v[3] = {0.0, 0.0, 0.0};
  uint32_t m = 0;
  for (int64_t b = first_index(); b < groups; b += grid_stride())
    quantize_four(src, n, b, inv, stochastic, seed, [&](int64_t i, int8_t q) {
      const int64_t plane = i / len, l = i - plane * len, o = plane / inner, c = plane - o * inner;
      dst[c * ld + o * len + l] = q;
      const double gv = src[i], qv = q;
      v[0] += gv * qv, v[1] += gv * gv, v[2] += qv * qv;
      const uint32_t bits = abs_bits(src[i]);
      m = m < bits ? bits : m;
    });
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(max_bits, m);
  block_sum(v, red);
  if (threadIdx.x == 0)
    for (int k = 0; k < 3; ++k) partials[blockIdx.x * 3 + k] = v[k];
}

// Partials [blockIdx.x][kNearestWidth]: gg, then gq and qq of round-to-nearest at each inverse scale.
__global__ void __launch_bounds__(kThreads)
    nearest_sums_kernel(const float* __restrict__ g, int64_t n, Invs invs, double* partials, unsigned int* max_bits) {
  __shared__ double red[kNearestWidth][32];
  double v[kNearestWidth] = {};
  uint32_t m = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float x = g[i];
    const double gv = x;
    v[0] += gv * gv;
#pragma unroll
    for (int c = 0; c < kClipsPerPass; ++c) {
      const double q = int8_round_nearest(x, invs.v[c]);
      v[1 + 2 * c] += gv * q, v[2 + 2 * c] += q * q;
    }
    const uint32_t bits = abs_bits(x);
    m = m < bits ? bits : m;
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(max_bits, m);
  block_sum(v, red);
  if (threadIdx.x == 0)
    for (int k = 0; k < kNearestWidth; ++k) partials[blockIdx.x * kNearestWidth + k] = v[k];
}

// out[c] = sum over b of partials[b][c], b in order per thread, then a fixed tree. One block.
__global__ void __launch_bounds__(kThreads)
    sum_columns_kernel(const double* partials, int64_t blocks, int width, double* out) {
  __shared__ double red[1][32];
  for (int c = 0; c < width; ++c) {
    double s[1] = {0.0};
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) s[0] += partials[b * width + c];
    block_sum(s, red);
    if (threadIdx.x == 0) out[c] = s[0];
  }
}

// Block i: out[i] = float(sum of channel i's elements).
__global__ void __launch_bounds__(kThreads)
    channel_sums_kernel(const float* __restrict__ src, int64_t outer, int64_t inner, int64_t len, float* out) {
  __shared__ double red[1][32];
  const int64_t i = blockIdx.x, count = outer * len;
  double s[1] = {0.0};
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t o = e / len, l = e - o * len;
    s[0] += src[(o * inner + i) * len + l];
  }
  block_sum(s, red);
  if (threadIdx.x == 0) out[i] = static_cast<float>(s[0]);
}

template <typename T>
void copy_to_host(T* dst, const void* src, size_t bytes) {
  OCTET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  OCTET_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace

std::vector<float> absmax(const std::vector<std::pair<const float*, int64_t>>& arrays) {
  const auto count = static_cast<int64_t>(arrays.size());
  Tensor bits = device_buffer(DType::i32, count);
  auto* p = static_cast<unsigned int*>(bits.raw_data());
  OCTET_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(count) * 4, stream()));
  for (int64_t k = 0; k < count; ++k) {
    const auto& [x, n] = arrays[static_cast<size_t>(k)];
    if (n <= 0) continue;
    absmax_kernel<<<::octet::cuda::grid_for(n, kThreads), kThreads, 0, stream()>>>(x, n, p + k);
    OCTET_CUDA_LAUNCH("quant::cuda::absmax_kernel");
  }
  std::vector<uint32_t> host(static_cast<size_t>(count));
  copy_to_host(host.data(), p, host.size() * 4);
  std::vector<float> out(host.size());
  std::memcpy(out.data(), host.data(), host.size() * 4);  // a NaN pattern stays a NaN
  return out;
}

void quantize(const float* x, int64_t n, float inv, Int8Rounding rounding, uint64_t seed, int8_t* codes) {
  if (n <= 0) return;
  quantize_kernel<<<::octet::cuda::grid_for((n + 3) / 4, kThreads), kThreads, 0, stream()>>>(
      x, n, inv, rounding == Int8Rounding::stochastic, seed, codes);
  OCTET_CUDA_LAUNCH("quant::cuda::quantize_kernel");
}

void dequantize(const int8_t* codes, int64_t n, float scale, float* out) {
  if (n <= 0) return;
  dequantize_kernel<<<::octet::cuda::grid_for(n, kThreads), kThreads, 0, stream()>>>(codes, n, scale, out);
  OCTET_CUDA_LAUNCH("quant::cuda::dequantize_kernel");
}

cpu::CosineSums DeviceSums::read() const {
  SumsOut s{};
  copy_to_host(&s, buffer_.raw_data(), sizeof s);
  cpu::CosineSums out;
  out.gq = s.gq, out.gg = s.gg, out.qq = s.qq;
  out.finite = s.max_bits < kInfBits;
  return out;
}

DeviceSums quantize_channel_major(const float* src, int64_t outer, int64_t inner, int64_t len, int64_t ld, float inv,
                                  Int8Rounding rounding, uint64_t seed, int8_t* dst) {
  OCTET_CHECK(ld >= outer * len, "quant::cuda::quantize_channel_major: row length ", ld, " is below ", outer * len);
  Tensor out = device_buffer(DType::f64, 4);  // a SumsOut
  auto* so = static_cast<SumsOut*>(out.raw_data());
  OCTET_CUDA_CHECK(cudaMemsetAsync(so, 0, sizeof(SumsOut), stream()));
  if (ld > outer * len && inner > 0)
    OCTET_CUDA_CHECK(cudaMemset2DAsync(dst + outer * len, static_cast<size_t>(ld), 0,
                                       static_cast<size_t>(ld - outer * len), static_cast<size_t>(inner), stream()));
  const int64_t n = outer * inner * len;
  if (n == 0) return DeviceSums(out);
  const unsigned blocks = sum_blocks((n + 3) / 4, 4);
  Tensor partials = device_buffer(DType::f64, int64_t{blocks} * 3);
  channel_major_kernel<<<blocks, kThreads, 0, stream()>>>(src, outer, inner, len, ld, inv,
                                                          rounding == Int8Rounding::stochastic, seed, dst,
                                                          partials.data<double>(), &so->max_bits);
  OCTET_CUDA_LAUNCH("quant::cuda::channel_major_kernel");
  sum_columns_kernel<<<1, kThreads, 0, stream()>>>(partials.data<double>(), blocks, 3, &so->gq);
  OCTET_CUDA_LAUNCH("quant::cuda::sum_columns_kernel");
  return DeviceSums(out);
}

std::vector<cpu::CosineSums> cosine_sums_nearest(const float* g, int64_t n, const std::vector<float>& invs) {
  std::vector<cpu::CosineSums> result;
  const unsigned blocks = sum_blocks(n, 8);
  Tensor partials = device_buffer(DType::f64, int64_t{blocks} * kNearestWidth);
  Tensor out = device_buffer(DType::f64, kNearestWidth + 1);  // the sums, then the max bits
  auto* po = out.data<double>();
  auto* bits = reinterpret_cast<unsigned int*>(po + kNearestWidth);
  for (size_t c0 = 0; c0 < invs.size(); c0 += kClipsPerPass) {
    Invs pass{};
    for (int c = 0; c < kClipsPerPass && c0 + c < invs.size(); ++c) pass.v[c] = invs[c0 + c];
    OCTET_CUDA_CHECK(cudaMemsetAsync(po, 0, (kNearestWidth + 1) * sizeof(double), stream()));
    if (n > 0) {
      nearest_sums_kernel<<<blocks, kThreads, 0, stream()>>>(g, n, pass, partials.data<double>(), bits);
      OCTET_CUDA_LAUNCH("quant::cuda::nearest_sums_kernel");
      sum_columns_kernel<<<1, kThreads, 0, stream()>>>(partials.data<double>(), blocks, kNearestWidth, po);
      OCTET_CUDA_LAUNCH("quant::cuda::sum_columns_kernel");
    }
    double host[kNearestWidth + 1];
    copy_to_host(host, po, sizeof host);
    uint32_t max_bits = 0;
    std::memcpy(&max_bits, host + kNearestWidth, 4);
    for (int c = 0; c < kClipsPerPass && c0 + c < invs.size(); ++c) {
      cpu::CosineSums s;
      s.gg = host[0], s.gq = host[1 + 2 * c], s.qq = host[2 + 2 * c];
      s.finite = max_bits < kInfBits;
      result.push_back(s);
    }
  }
  return result;
}

void channel_sums(const float* src, int64_t outer, int64_t inner, int64_t len, float* out) {
  if (inner <= 0) return;
  OCTET_CHECK(inner <= 0x7fffffff, "quant::cuda::channel_sums: ", inner, " channels exceed the launch grid");
  channel_sums_kernel<<<static_cast<unsigned>(inner), kThreads, 0, stream()>>>(src, outer, inner, len, out);
  OCTET_CUDA_LAUNCH("quant::cuda::channel_sums_kernel");
}

}  // namespace octet::quant::cuda
