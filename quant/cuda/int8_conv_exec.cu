// The GPU executor of the CUDA INT8 convolution's paths (quant/cuda/int8_conv_paths.h) and its
// three kernels, each a template over the operand functions of quant/cuda/int8_conv_ops.h:
//   map_kernel       f(i) over [0, n) in a grid-stride loop (packing, im2col, rescale, col2im,
//                    the depthwise forward and dx);
//   dp4a_gemm_kernel the DP4A GEMM, a block per 64 x 64 tile of C and split of the words, its phases
//                    in quant/cuda/int8_dp4a.h (shared with the host emulation of the tests);
//   sum_rows_kernel  a block per (row, run of kSumRun terms): int32 sum in a fixed tree, then one
//                    64-bit atomic add (the depthwise dw).
// Built with --fmad=false (CMakeLists.txt), so the rescales round like the CPU's.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "core/cuda/launch.cuh"
#include "quant/cuda/int8_conv_kernels.h"
#include "quant/cuda/int8_dp4a.h"
#include "quant/cuda/int8_gemm_lt.h"

namespace octet::quant::cuda {

namespace {

using ::octet::cuda::first_index;
using ::octet::cuda::grid_stride;
using ::octet::cuda::stream;

constexpr int kSumThreads = 256;
constexpr int64_t kSumRun = 4096;  // terms per block of sum_rows: an exact int32 sum
static_assert(kSumRun <= ops::kMaxInt32Terms, "sum_rows runs must fit an int32 sum");
using ops::kMaxGridYZ;

template <class F>
__global__ void map_kernel(F f, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) f(i);
}

using ops::dp4a_gemm_kernel;

// Block (x, y): row x, terms [y * kSumRun, (y + 1) * kSumRun) of it.
template <class Terms>
__global__ void __launch_bounds__(kSumThreads) sum_rows_kernel(Terms terms, int64_t* acc) {
  __shared__ int32_t warp_sums[kSumThreads / 32];
  const int64_t row = blockIdx.x, j0 = static_cast<int64_t>(blockIdx.y) * kSumRun;
  const int64_t j1 = min(terms.cols(), j0 + kSumRun);
  int32_t s = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += kSumThreads) s += terms(row, j);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t total = 0;
    for (int w = 0; w < kSumThreads / 32; ++w) total += warp_sums[w];
    if (total != 0) ops::add_int64(acc + row, total);
  }
}

class CudaExec {
 public:
  CudaExec() : device_(Device::cuda(::octet::cuda::current_device())) {}

  template <class T>
  T* scratch(int64_t n) {
    keep_.push_back(
        empty({std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(T))}, TensorOptions(DType::u8).device(device_)));
    return static_cast<T*>(keep_.back().raw_data());
  }

  template <class T>
  void zero(T* p, int64_t n) {
    OCTET_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * sizeof(T), stream()));
  }

  template <class F>
  void map(int64_t n, const F& f) {
    if (n <= 0) return;
    map_kernel<<<::octet::cuda::grid_for(n), ::octet::cuda::kThreads, 0, stream()>>>(f, n);
    OCTET_CUDA_LAUNCH("quant::cuda::int8 map_kernel");
  }

  template <class Ops>
  void dp4a(const Ops& op, int64_t split_words) {
    const ops::Dp4aGrid grid = ops::dp4a_grid(op, split_words);
    if (grid.x <= 0 || grid.y <= 0 || op.words() <= 0) return;
    OCTET_CHECK(grid.x <= 0x7fffffff && grid.y <= kMaxGridYZ && grid.splits <= kMaxGridYZ,
                "quant::cuda int8 DP4A GEMM: ", op.rows(), " x ", op.cols(), " outputs in ", grid.splits,
                " splits exceed the launch grid");
    const int64_t groups_per_launch = std::max<int64_t>(1, kMaxGridYZ / grid.splits);
    for (int64_t g0 = 0; g0 < grid.groups; g0 += groups_per_launch) {
      const int64_t z = std::min(groups_per_launch, grid.groups - g0) * grid.splits;
      const dim3 blocks(static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y), static_cast<unsigned>(z));
      dp4a_gemm_kernel<<<blocks, ops::kTileThreads, 0, stream()>>>(op, g0, split_words, grid.splits);
      OCTET_CUDA_LAUNCH("quant::cuda::dp4a_gemm_kernel");
    }
  }

  template <class Terms>
  void sum_rows(const Terms& terms, int64_t* acc) {
    const int64_t rows = terms.rows(), runs = ops::ceil_div(terms.cols(), kSumRun);
    if (rows <= 0 || runs <= 0) return;
    OCTET_CHECK(rows <= 0x7fffffff && runs <= kMaxGridYZ, "quant::cuda int8 sum_rows: ", rows, " rows of ",
                terms.cols(), " terms exceed the launch grid");
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(runs));
    sum_rows_kernel<<<grid, kSumThreads, 0, stream()>>>(terms, acc);
    OCTET_CUDA_LAUNCH("quant::cuda::sum_rows_kernel");
  }

  int64_t block_bytes() const { return paths::kTcBlockBytes; }
  bool gemm_supported(const ops::Int8Gemm& g) { return int8_gemm_supported(g); }
  void gemm(const ops::Int8Gemm& g, const int8_t* a, const int8_t* b, int32_t* c) { int8_gemm(g, a, b, c); }

 private:
  Device device_;
  std::vector<Tensor> keep_;  // scratch: freed (back to the stream-ordered cache) with the executor
};

}  // namespace

bool run_forward(Int8ConvPath path, const paths::ForwardArgs& args) {
  CudaExec ex;
  switch (path) {
    case Int8ConvPath::dp4a:
      return paths::forward_dp4a(ex, args);
    case Int8ConvPath::tensor_core:
      return paths::forward_tensor_core(ex, args);
    case Int8ConvPath::direct:
      return paths::forward_direct(ex, args);
    default:
      return false;
  }
}

bool run_backward_input(Int8ConvPath path, const paths::BackwardInputArgs& args) {
  CudaExec ex;
  switch (path) {
    case Int8ConvPath::dp4a:
      return paths::backward_input_dp4a(ex, args);
    case Int8ConvPath::tensor_core:
      return paths::backward_input_tensor_core(ex, args);
    case Int8ConvPath::direct:
      return paths::backward_input_direct(ex, args);
    default:
      return false;
  }
}

bool run_backward_weight(Int8ConvPath path, const paths::BackwardWeightArgs& args) {
  CudaExec ex;
  switch (path) {
    case Int8ConvPath::dp4a:
      return paths::backward_weight_dp4a(ex, args);
    case Int8ConvPath::tensor_core:
      return paths::backward_weight_tensor_core(ex, args);
    case Int8ConvPath::direct:
      return paths::backward_weight_direct(ex, args);
    default:
      return false;
  }
}

}  // namespace octet::quant::cuda
