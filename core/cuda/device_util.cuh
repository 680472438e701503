// Device helpers shared by the CUDA kernel files (nvcc only; internal to core/cuda/): bf16 and
// dtype conversions written like the CPU's, math overloads by type, an elementwise launcher over
// broadcast strided operands, and a device-side "first bad position" for input checks.
//   struct Twice { float* o; const float* a; __device__ void operator()(const Offsets<2>& off) const {
//     o[off.v[0]] = 2 * a[off.v[1]]; } };
//   launch_elementwise<2>("twice", out.shape(), {out.strides(), broadcast_strides(x, out.shape())}, Twice{o, a});
//   FirstHit bad(index.device());  check<<<grid, kThreads, 0, stream()>>>(..., bad.ptr());  bad.position();
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cuda/cuda_util.h"
#include "core/dtype.h"
#include "core/hostdevice.h"
#include "core/tensor.h"

namespace octet::cuda {

// ---------------------------------------------------------------- bf16 and conversions

// Bit-for-bit the conversions of core/dtype.h's BFloat16 (whose members are host-only).
OCTET_HD inline float bf16_to_float(BFloat16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

OCTET_HD inline BFloat16 float_to_bf16(float f) {
#ifdef __CUDA_ARCH__
  uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
#endif
  BFloat16 out;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    out.bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  } else {
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    out.bits = static_cast<uint16_t>((u + rounding) >> 16);
  }
  return out;
}

// The CPU's convert<To>(v) (core/cpu/elementwise.cpp): float -> int saturates and maps NaN to 0.
// One difference: bf16 -> int saturates here too, where the CPU's cast is undefined out of range.
template <typename To, typename From>
OCTET_HD To convert(From v) {
  if constexpr (std::is_same_v<From, BFloat16>) {
    if constexpr (std::is_same_v<To, BFloat16>) {
      return float_to_bf16(bf16_to_float(v));  // through float like the CPU: quiets signaling NaNs
    } else {
      return convert<To>(bf16_to_float(v));
    }
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return float_to_bf16(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (v != v) return 0;
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Element i of p in its compute type opmath_t<D> (f32 for bf16 activations, which kernels load,
// compute on in f32 and round once on the store with convert<D>).
template <typename D>
__device__ inline opmath_t<D> load_opmath(const D* p, int64_t i) {
  return convert<opmath_t<D>>(p[i]);
}

// An unsigned type of the same size as T: kernels that only move elements (where, gather,
// index_select) are instantiated once per element size.
template <typename T>
using Bits = std::conditional_t<
    sizeof(T) == 1, uint8_t,
    std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// ---------------------------------------------------------------- math by type

// Explicit float/double overloads, so a float kernel never silently computes in double.
__device__ inline float dev_exp(float x) { return ::expf(x); }
__device__ inline double dev_exp(double x) { return ::exp(x); }
__device__ inline float dev_log(float x) { return ::logf(x); }
__device__ inline double dev_log(double x) { return ::log(x); }
__device__ inline float dev_sqrt(float x) { return ::sqrtf(x); }
__device__ inline double dev_sqrt(double x) { return ::sqrt(x); }
__device__ inline float dev_tanh(float x) { return ::tanhf(x); }
__device__ inline double dev_tanh(double x) { return ::tanh(x); }
__device__ inline float dev_erf(float x) { return ::erff(x); }
__device__ inline double dev_erf(double x) { return ::erf(x); }
__device__ inline float dev_pow(float x, float y) { return ::powf(x, y); }
__device__ inline double dev_pow(double x, double y) { return ::pow(x, y); }

// ---------------------------------------------------------------- strided elementwise loops

// Most dims an elementwise kernel handles after size-1 dims are dropped and neighbours that are
// contiguous for every operand are merged (only a tensor with 9+ dims all permuted or sliced
// apart needs more).
constexpr int kMaxDims = 8;

// Strides of `t` seen from `shape` (which t broadcasts to): 0 on broadcast dims.
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  int64_t lead = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) st[lead + i] = t.shape()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
  return st;
}

template <int N>
struct Offsets {
  int64_t v[N];
};

// Maps a linear (row-major) output index to each operand's element offset. Dims are stored
// innermost first. I is the type the index arithmetic runs in: uint32_t when the element count
// fits (64-bit division is several times slower on the GPU), else uint64_t.
template <int N>
struct StridedIndexer {
  int ndim = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};

  template <typename I>
  __device__ Offsets<N> at(int64_t linear) const {
    Offsets<N> off;
#pragma unroll
    for (int k = 0; k < N; ++k) off.v[k] = 0;
    I rem = static_cast<I>(linear);
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      I n = static_cast<I>(size[d]);
      I q = rem / n;
      int64_t idx = static_cast<int64_t>(rem - q * n);
      rem = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off.v[k] += idx * stride[k][d];
    }
    return off;
  }
};

// Drops size-1 dims and merges dims that are contiguous for every operand (as the CPU's
// strided_loop does). `contiguous` tells whether every operand ends up as one dense run.
template <int N>
StridedIndexer<N> make_indexer(const char* op, const Shape& shape, const std::array<Shape, N>& strides,
                               bool* contiguous) {
  Shape sh;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sh.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sh.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sh.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  *contiguous = sh.empty() || sh.size() == 1;
  for (int k = 0; k < N && !sh.empty(); ++k) *contiguous = *contiguous && st[k][0] == 1;
  const int nd = static_cast<int>(sh.size());
  OCTET_CHECK(nd <= kMaxDims, op, ": the CUDA kernel handles at most ", kMaxDims, " non-mergeable dims, got shape ",
              shape, " (make the operands contiguous first)");
  StridedIndexer<N> ix;
  ix.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    ix.size[d] = sh[nd - 1 - d];
    for (int k = 0; k < N; ++k) ix.stride[k][d] = st[k][nd - 1 - d];
  }
  return ix;
}

// body(offsets) handles one element; offsets are in elements from each operand's base pointer.
template <int N, typename Body>
__global__ void contiguous_kernel(int64_t n, Body body) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Offsets<N> off;
#pragma unroll
    for (int k = 0; k < N; ++k) off.v[k] = i;
    body(off);
  }
}

template <int N, typename I, typename Body>
__global__ void strided_kernel(int64_t n, StridedIndexer<N> ix, Body body) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    body(ix.template at<I>(i));
}

// Runs body over every element of `shape`, operand k at strides[k] (0 where it broadcasts).
template <int N, typename Body>
void launch_elementwise(const char* op, const Shape& shape, const std::array<Shape, N>& strides, const Body& body) {
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  bool contiguous = false;
  StridedIndexer<N> ix = make_indexer<N>(op, shape, strides, &contiguous);
  if (contiguous) {
    contiguous_kernel<N><<<grid_for(n), kThreads, 0, stream()>>>(n, body);
  } else if (n <= std::numeric_limits<uint32_t>::max()) {
    strided_kernel<N, uint32_t><<<grid_for(n), kThreads, 0, stream()>>>(n, ix, body);
  } else {
    strided_kernel<N, uint64_t><<<grid_for(n), kThreads, 0, stream()>>>(n, ix, body);
  }
  OCTET_CUDA_LAUNCH(op);
}

// ---------------------------------------------------------------- device-side checks

// The smallest position at which a check kernel found a bad value (an index out of range, a zero
// divisor). Kernels record with atomicMin, so the answer does not depend on thread order;
// found() and position() wait for the current stream.
class FirstHit {
 public:
  static constexpr unsigned long long kNone = ~0ull;

  explicit FirstHit(Device device) : slot_(empty({1}, TensorOptions(DType::i64).device(device))) {
    OCTET_CUDA_CHECK(cudaMemsetAsync(slot_.raw_data(), 0xff, sizeof(unsigned long long), stream()));  // kNone
  }
  unsigned long long* ptr() const { return static_cast<unsigned long long*>(slot_.raw_data()); }
  unsigned long long position() const {
    unsigned long long p = kNone;
    OCTET_CUDA_CHECK(cudaMemcpyAsync(&p, ptr(), sizeof p, cudaMemcpyDeviceToHost, stream()));
    OCTET_CUDA_CHECK(cudaStreamSynchronize(stream()));
    return p;
  }

 private:
  Tensor slot_;
};

// Reads one element of a device tensor's data (for an error message).
template <typename T>
T read_element(const T* device_ptr, int64_t i) {
  T v{};
  OCTET_CUDA_CHECK(cudaMemcpyAsync(&v, device_ptr + i, sizeof(T), cudaMemcpyDeviceToHost, stream()));
  OCTET_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return v;
}

}  // namespace octet::cuda
