// The DP4A GEMM of the CUDA INT8 convolution (quant/cuda/int8_conv_ops.h: C[m][n] = sum over
// words u of dp4a(A(m, u), B(u, n))), written as the phases of one thread block so that the CUDA
// kernel (quant/cuda/int8_conv_exec.cu) and the host emulation in the tests run the same tiling:
//   grid    x: 64-column tiles, y: 64-row tiles, z: groups x splits of the words (dw's reduction
//           over positions is split, each split an exact int32 sum, see kDwSplitWords);
//   block   256 threads, thread t owning the 4 x 4 outputs rows 4*(t / 16).., columns 4*(t % 16)..;
//   step    the block stages 8 words of its 64 rows of A and 64 columns of B in shared memory
//           (dp4a_load: every thread loads 2 + 2, the operand functions quantizing x and packing
//           the four codes of a word as they go), waits, then every thread adds its 4 x 4 x 8 dp4a
//           (dp4a_accumulate), and waits again;
//   end     each thread passes its sums to ops.store (dp4a_store).
//   Dp4aGrid grid = dp4a_grid(op, split_words);   // then per block: dp4a_block, the steps, dp4a_store
#pragma once

#include <algorithm>
#include <cstdint>

#include "quant/cuda/int8_conv_ops.h"

// Unrolled on the GPU (the 4 x 4 sums stay in registers); the host compiler has no such pragma.
#ifdef __CUDA_ARCH__
#define OCTET_DP4A_UNROLL _Pragma("unroll")
#else
#define OCTET_DP4A_UNROLL
#endif

namespace octet::quant::cuda::ops {

inline constexpr int kTileRows = 64, kTileCols = 64, kTileWords = 8, kTileThreads = 256;
static_assert(kTileThreads == (kTileRows / 4) * (kTileCols / 4), "one thread per 4 x 4 outputs");
// Blocks along y and z at most (CUDA's limit).
inline constexpr int64_t kMaxGridYZ = 65535;

// The words of one step: 8 of A's 64 rows and of B's 64 columns (shared memory on the GPU).
struct alignas(16) Dp4aTile {
  int32_t a[kTileWords][kTileRows];
  int32_t b[kTileWords][kTileCols];
};

// The launch of a DP4A GEMM: blocks per dimension; z counts groups x splits.
struct Dp4aGrid {
  int64_t x, y, splits, groups;
};

template <class Ops>
Dp4aGrid dp4a_grid(const Ops& op, int64_t split_words) {
  return {ceil_div(op.cols(), kTileCols), ceil_div(op.rows(), kTileRows),
          std::max<int64_t>(1, ceil_div(op.words(), split_words)), op.g.groups};
}

// What a block works on: its group, first row and column, and its split's words [u_begin, u_end).
struct Dp4aBlock {
  int64_t grp, m0, n0, u_begin, u_end;
};

// Block (bx, by, bz) of a launch over groups grp0, grp0 + 1, ...
template <class Ops>
OCTET_HD Dp4aBlock dp4a_block(const Ops& op, int64_t bx, int64_t by, int64_t bz, int64_t grp0, int64_t split_words,
                              int64_t splits) {
  const int64_t split = bz % splits, u_begin = split * split_words;
  const int64_t u_end = u_begin + split_words < op.words() ? u_begin + split_words : op.words();
  return {grp0 + bz / splits, by * kTileRows, bx * kTileCols, u_begin, u_end};
}

// Thread tid's share of staging words [u0, u0 + 8): entries i = tid, tid + 256 of each operand's
// 512, zero past the block's rows, columns or words.
template <class Ops>
OCTET_HD void dp4a_load(const Ops& op, const Dp4aBlock& blk, int64_t u0, int tid, Dp4aTile& tile) {
  const int64_t rows = op.rows(), cols = op.cols();
  for (int i = tid; i < kTileWords * kTileRows; i += kTileThreads) {
    // A: consecutive threads read consecutive words of a row (weights and dy rows are row-major).
    const int mm = i / kTileWords, uu = i % kTileWords;
    const int64_t m = blk.m0 + mm, u = u0 + uu;
    tile.a[uu][mm] = m < rows && u < blk.u_end ? op.a(blk.grp, m, u) : 0;
  }
  for (int i = tid; i < kTileWords * kTileCols; i += kTileThreads) {
    // B: consecutive threads read consecutive columns (neighbouring positions of x or dy).
    const int uu = i / kTileCols, nn = i % kTileCols;
    const int64_t n = blk.n0 + nn, u = u0 + uu;
    tile.b[uu][nn] = n < cols && u < blk.u_end ? op.b(blk.grp, u, n) : 0;
  }
}

// Thread tid's 4 x 4 sums over the staged words.
OCTET_HD inline void dp4a_accumulate(const Dp4aTile& tile, int tid, int32_t (&acc)[4][4]) {
  const int tx = tid % (kTileCols / 4), ty = tid / (kTileCols / 4);
  OCTET_DP4A_UNROLL
  for (int uu = 0; uu < kTileWords; ++uu) {
    int32_t a[4], b[4];
#ifdef __CUDA_ARCH__
    const int4 av = *reinterpret_cast<const int4*>(&tile.a[uu][ty * 4]);  // 16-byte aligned rows
    const int4 bv = *reinterpret_cast<const int4*>(&tile.b[uu][tx * 4]);
    a[0] = av.x, a[1] = av.y, a[2] = av.z, a[3] = av.w;
    b[0] = bv.x, b[1] = bv.y, b[2] = bv.z, b[3] = bv.w;
#else
    for (int k = 0; k < 4; ++k) a[k] = tile.a[uu][ty * 4 + k], b[k] = tile.b[uu][tx * 4 + k];
#endif
    OCTET_DP4A_UNROLL
    for (int i = 0; i < 4; ++i) OCTET_DP4A_UNROLL
    for (int j = 0; j < 4; ++j) acc[i][j] = dp4a(a[i], b[j], acc[i][j]);
  }
}

template <class Ops>
OCTET_HD void dp4a_store(const Ops& op, const Dp4aBlock& blk, int tid, const int32_t (&acc)[4][4]) {
  const int tx = tid % (kTileCols / 4), ty = tid / (kTileCols / 4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t m = blk.m0 + ty * 4 + i, n = blk.n0 + tx * 4 + j;
      if (m < op.rows() && n < op.cols()) op.store(blk.grp, m, n, acc[i][j]);
    }
}

#ifdef __CUDACC__
// The DP4A GEMM kernel: one block per 64 x 64 tile of C and split of the words (the INT8 conv's
// products, quant/cuda/int8_conv_exec.cu, and the zero-point GEMM's fallback, quant/cuda/qgemm.cu).
template <class Ops>
__global__ void __launch_bounds__(kTileThreads)
    dp4a_gemm_kernel(Ops op, int64_t grp0, int64_t split_words, int64_t splits) {
  __shared__ Dp4aTile tile;
  const Dp4aBlock blk = dp4a_block(op, blockIdx.x, blockIdx.y, blockIdx.z, grp0, split_words, splits);
  const int tid = static_cast<int>(threadIdx.x);
  int32_t acc[4][4] = {};
  for (int64_t u0 = blk.u_begin; u0 < blk.u_end; u0 += kTileWords) {
    dp4a_load(op, blk, u0, tid, tile);
    __syncthreads();
    dp4a_accumulate(tile, tid, acc);
    __syncthreads();
  }
  dp4a_store(op, blk, tid, acc);
}
#endif

}  // namespace octet::quant::cuda::ops
