// Device helper of the block-wise kernels (quant/cuda/, optim/cuda/): the maximum of K
// non-negative values over a thread block. Only .cu files include it.
#pragma once

namespace octet::quant::cuda {

// Replaces v[k] in every thread by its maximum over the thread block. blockDim.x must be a
// multiple of 32 (at most 1024) and the values >= 0 (0 pads the missing warps). Every thread of
// the block must call it (it holds a __syncthreads); `red` is shared scratch, used once per
// kernel. Max is exact and order-free, so the result is the same as a serial scan's.
template <int K>
__device__ inline void block_max(float (&v)[K], float (&red)[K][32]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v[k], o);
      v[k] = v[k] < w ? w : v[k];
    }
    if (lane == 0) red[k][warp] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    v[k] = lane < warps ? red[k][lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v[k], o);
      v[k] = v[k] < w ? w : v[k];
    }
  }
}

}  // namespace octet::quant::cuda
