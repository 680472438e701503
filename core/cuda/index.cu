// CUDA gather / scatter kernels behind max-reduction backward, losses and embeddings, mirroring
// core/cpu/index.cpp. Indices come from users, so before any kernel touches memory through them
// a check kernel finds the first out-of-range one on the device; the host reads that position back
// (one stream synchronize per call) and throws the CPU's message. The scatters keep the CPU's
// summation order exactly (a thread per row, or per column in row order): no atomics, results
// bit-identical to the CPU and deterministic.
#include "core/cuda/device_util.cuh"
#include "core/cuda/kernels.h"
#include "core/kernel_checks.h"

namespace octet::cuda {

using kernels::check_rows;

namespace {

// ---------------------------------------------------------------- checks

__global__ void find_out_of_range(const int64_t* index, int64_t n, int64_t limit, unsigned long long* first_bad) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (index[i] < 0 || index[i] >= limit) atomicMin(first_bad, static_cast<unsigned long long>(i));
}

// Range-checks every index in [0, limit); reports the first bad one.
void check_indices(const Tensor& index, int64_t limit, const char* op) {
  OCTET_CHECK(index.dtype() == DType::i64, op, ": indices must be i64, got ", index.dtype());
  const int64_t n = index.numel();
  if (n == 0) return;
  const int64_t* p = index.data<int64_t>();
  FirstHit bad(index.device());
  find_out_of_range<<<grid_for(n), kThreads, 0, stream()>>>(p, n, limit, bad.ptr());
  OCTET_CUDA_LAUNCH("check_indices");
  const unsigned long long pos = bad.position();
  if (pos == FirstHit::kNone) return;
  const int64_t i = static_cast<int64_t>(pos);
  OCTET_FAIL(op, ": index ", read_element(p, i), " at position ", i, " is out of range [0, ", limit, ")");
}

// ---------------------------------------------------------------- kernels

// out [M, J] = x[r, index[r, q]] for x [M, C]; one thread per output element.
template <typename B>
__global__ void gather_kernel(const B* x, const int64_t* index, B* out, int64_t n, int64_t j, int64_t c) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / j;
    out[e] = x[r * c + index[e]];
  }
}

// dx [M, C] += src [M, J] at index [M, J]. A row's indices may repeat, so a thread owns a row and
// adds in column order, as the CPU does.
template <typename T>
__global__ void scatter_add_kernel(T* dx, const int64_t* index, const T* src, int64_t m, int64_t j, int64_t c) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < m;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T* d = dx + r * c;
    for (int64_t q = 0; q < j; ++q) d[index[r * j + q]] += src[r * j + q];
  }
}

// out [n, D] = x[index[i], :]; one thread per output element.
template <typename B>
__global__ void index_select_kernel(const B* x, const int64_t* index, B* out, int64_t total, int64_t d) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / d;
    out[e] = x[index[r] * d + (e - r * d)];
  }
}

// dx [V, D] += src [n, D] at rows index[i]. Indices repeat (a token seen twice), so a thread owns
// a column and walks the rows in order, as the CPU does: parallel over D only.
template <typename T>
__global__ void index_add_kernel(T* dx, const int64_t* index, const T* src, int64_t n, int64_t d) {
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < d;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x)
    for (int64_t r = 0; r < n; ++r) dx[index[r] * d + q] += src[r * d + q];
}

}  // namespace

void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  check_rows({x, index, out}, "gather");
  check_indices(index, x.size(1), "gather");
  dispatch_all(x.dtype(), [&]<typename T>() {
    using B = Bits<T>;  // a gather only moves elements
    const B* px = reinterpret_cast<const B*>(x.data<T>());
    const int64_t* pi = index.data<int64_t>();
    B* po = reinterpret_cast<B*>(out.data<T>());
    const int64_t c = x.size(1), j = index.size(1), n = index.size(0) * j;
    if (n == 0) return;
    gather_kernel<B><<<grid_for(n), kThreads, 0, stream()>>>(px, pi, po, n, j, c);
    OCTET_CUDA_LAUNCH("gather");
  });
}

void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  check_rows({dx, index, src}, "scatter_add");
  check_indices(index, dx.size(1), "scatter_add");
  dispatch_float(dx.dtype(), "scatter_add", [&]<typename T>() {
    T* pd = dx.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* ps = src.data<T>();
    const int64_t c = dx.size(1), j = index.size(1), m = index.size(0);
    if (m == 0 || j == 0) return;
    scatter_add_kernel<T><<<grid_for(m), kThreads, 0, stream()>>>(pd, pi, ps, m, j, c);
    OCTET_CUDA_LAUNCH("scatter_add");
  });
}

void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  check_rows({x, out}, "index_select");
  OCTET_CHECK(index.dim() == 1 && index.is_contiguous(), "index_select: expected a contiguous 1-D index");
  check_indices(index, x.size(0), "index_select");
  dispatch_all(x.dtype(), [&]<typename T>() {
    using B = Bits<T>;
    const B* px = reinterpret_cast<const B*>(x.data<T>());
    const int64_t* pi = index.data<int64_t>();
    B* po = reinterpret_cast<B*>(out.data<T>());
    const int64_t d = x.size(1), total = index.numel() * d;
    if (total == 0) return;
    index_select_kernel<B><<<grid_for(total), kThreads, 0, stream()>>>(px, pi, po, total, d);
    OCTET_CUDA_LAUNCH("index_select");
  });
}

void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  check_rows({dx, src}, "index_add");
  OCTET_CHECK(index.dim() == 1 && index.is_contiguous(), "index_add: expected a contiguous 1-D index");
  check_indices(index, dx.size(0), "index_add");
  dispatch_float(dx.dtype(), "index_add", [&]<typename T>() {
    T* pd = dx.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* ps = src.data<T>();
    const int64_t d = dx.size(1), n = index.numel();
    if (n == 0 || d == 0) return;
    index_add_kernel<T><<<grid_for(d), kThreads, 0, stream()>>>(pd, pi, ps, n, d);
    OCTET_CUDA_LAUNCH("index_add");
  });
}

}  // namespace octet::cuda
