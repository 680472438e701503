// CUDA kernels of block-wise quantization (quant/cuda/blockwise.h). Quantization runs one thread
// block per quantization block: the block's absmax over its finite elements (a max, exact in any
// order), then each element's code by the CPU's own steps (quant/block_code.h) on the CPU's own
// code table (quant/code_table.h, read through the cache: one 4-byte entry per element); codes and
// absmax are therefore bit-identical to the CPU's. Dequantization is one table lookup and one
// multiply per element.
#include "core/cuda/cuda_util.h"
#include "quant/block_code.h"
#include "quant/cuda/block_max.cuh"
#include "quant/cuda/blockwise.h"

namespace octet::quant::cuda {
namespace {

constexpr int kThreads = 256;

// Block blockIdx.x: elements [b * block_size, min(n, (b + 1) * block_size)), thread t taking
// t, t + blockDim.x, ... (blockDim.x = min(block_size, kThreads)).
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const float* __restrict__ x, int64_t n, int64_t block_size, const DeviceTables* __restrict__ tables,
                    uint8_t* __restrict__ codes, float* __restrict__ absmax) {
  __shared__ float red[1][32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * block_size;
  const int len = static_cast<int>(min(block_size, n - begin));
  const float* xb = x + begin;
  float m[1] = {0.0f};
  for (int j = threadIdx.x; j < len; j += blockDim.x) m[0] = absmax_step(m[0], xb[j]);
  block_max(m, red);
  uint8_t* cb = codes + begin;
  for (int j = threadIdx.x; j < len; j += blockDim.x) cb[j] = table_code(tables->codes, normalized(xb[j], m[0]));
  if (threadIdx.x == 0) absmax[blockIdx.x] = m[0];
}

// Grid-stride over the elements; block_size = 1 << shift.
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* __restrict__ codes, int64_t n, int shift, const float* __restrict__ absmax,
                      const DeviceTables* __restrict__ tables, float* __restrict__ out) {
  __shared__ float map[256];
  for (int j = threadIdx.x; j < 256; j += blockDim.x) map[j] = tables->map[j];
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = decode(map, codes[i], absmax[i >> shift]);
}

int log2_of(int64_t block_size) {
  int shift = 0;
  while ((int64_t{1} << shift) < block_size) ++shift;
  OCTET_CHECK((int64_t{1} << shift) == block_size, "quant::cuda: block size ", block_size, " is not a power of two");
  return shift;
}

}  // namespace

void quantize_blocks(const float* x, int64_t n, int64_t block_size, const DeviceTables* tables, uint8_t* codes,
                     float* absmax) {
  if (n <= 0) return;
  log2_of(block_size);
  const int64_t blocks = (n + block_size - 1) / block_size;
  OCTET_CHECK(blocks <= 0x7fffffff, "quant::cuda::quantize_blocks: ", blocks, " blocks exceed the grid");
  const int threads = static_cast<int>(std::min<int64_t>(block_size, kThreads));
  quantize_kernel<<<static_cast<unsigned>(blocks), threads, 0, ::octet::cuda::stream()>>>(x, n, block_size, tables,
                                                                                          codes, absmax);
  OCTET_CUDA_LAUNCH("quant::cuda::quantize_kernel");
}

void dequantize_blocks(const uint8_t* codes, int64_t n, int64_t block_size, const float* absmax,
                       const DeviceTables* tables, float* out) {
  if (n <= 0) return;
  const int shift = log2_of(block_size);
  dequantize_kernel<<<::octet::cuda::grid_for(n, kThreads), kThreads, 0, ::octet::cuda::stream()>>>(
      codes, n, shift, absmax, tables, out);
  OCTET_CUDA_LAUNCH("quant::cuda::dequantize_kernel");
}

}  // namespace octet::quant::cuda
