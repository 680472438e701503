// Shared by the hand-written CUDA kernels with grid-stride loops (pooling, batch norm, depthwise
// convolution): the f32/f64 (and bf16 activations) x int32/int64 dispatch and the loop bounds.
//   dispatch_float_index("max_pool2d", x.dtype(), x.numel() <= INT32_MAX, [&](auto t, auto i) {
//     using T = decltype(t); using I = decltype(i); ... });
//   for (int64_t i = first_index(); i < total; i += grid_stride()) { ... }
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace octet::cuda {

// fn(T{}, I{}) with the index type I (int32 when `small`: every index involved fits, which makes
// the per-element division and modulo much cheaper).
template <typename T, typename Fn>
void with_index_type(bool small, Fn& fn) {
  if (small) return fn(T{}, int32_t{});
  fn(T{}, int64_t{});
}

// fn(T{}, I{}) for the dtype (f32/f64) and the index type.
template <typename Fn>
void dispatch_float_index(const char* op, DType dtype, bool small, Fn&& fn) {
  OCTET_CHECK(dtype == DType::f32 || dtype == DType::f64, op, ": expected dtype f32 or f64, got ", dtype);
  if (dtype == DType::f32) return with_index_type<float>(small, fn);
  with_index_type<double>(small, fn);
}

// fn(D{}, I{}) for an activation's dtype: f32, f64, or bf16 (D = BFloat16: autocast's activations,
// loaded into opmath_t<D> = float, computed there and rounded once on the store, as the CPU's
// kernels do) and the index type.
template <typename Fn>
void dispatch_activation_index(const char* op, DType dtype, bool small, Fn&& fn) {
  OCTET_CHECK(dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16, op,
              ": expected dtype f32, f64 or bf16, got ", dtype);
  if (dtype == DType::bf16) return with_index_type<BFloat16>(small, fn);
  dispatch_float_index(op, dtype, small, fn);
}

// Grid-stride loops count in int64, so i + stride cannot overflow; per-element index math is in I.
__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace octet::cuda
