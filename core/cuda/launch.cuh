// Shared by the hand-written CUDA kernels with grid-stride loops (pooling, batch norm, depthwise
// convolution): the f32/f64 x int32/int64 dispatch and the loop bounds.
//   dispatch_float_index("max_pool2d", x.dtype(), x.numel() <= INT32_MAX, [&](auto t, auto i) {
//     using T = decltype(t); using I = decltype(i); ... });
//   for (int64_t i = first_index(); i < total; i += grid_stride()) { ... }
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace octet::cuda {

// fn(T{}, I{}) for the dtype (f32/f64) and index type (int32 when `small`: every index involved
// fits, which makes the per-element division and modulo much cheaper).
template <typename Fn>
void dispatch_float_index(const char* op, DType dtype, bool small, Fn&& fn) {
  OCTET_CHECK(dtype == DType::f32 || dtype == DType::f64, op, ": expected dtype f32 or f64, got ", dtype);
  if (dtype == DType::f32) {
    if (small) return fn(float{}, int32_t{});
    return fn(float{}, int64_t{});
  }
  if (small) return fn(double{}, int32_t{});
  fn(double{}, int64_t{});
}

// Grid-stride loops count in int64, so i + stride cannot overflow; per-element index math is in I.
__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace octet::cuda
