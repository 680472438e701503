// CPU gather / scatter kernels behind max-reduction backward, losses and embeddings.
// Indices come from users (labels, token ids): each is range-checked before any memory access.
#include <atomic>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"

namespace octet::cpu {

using kernels::check_rows;

// Range-checks every index in [0, limit); reports the first bad one.
static void check_indices(const Tensor& index, int64_t limit, const char* op) {
  OCTET_CHECK(index.dtype() == DType::i64, op, ": indices must be i64, got ", index.dtype());
  const int64_t* p = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    OCTET_CHECK(p[i] >= 0 && p[i] < limit, op, ": index ", p[i], " at position ", i, " is out of range [0, ", limit,
                ")");
}

void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  check_cpu("gather", {x, index, out});
  check_rows({x, index, out}, "gather");
  check_indices(index, x.size(1), "gather");
  dispatch_all(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    const int64_t* pi = index.data<int64_t>();
    T* po = out.data<T>();
    int64_t c = x.size(1), j = index.size(1);
    parallel_for(0, index.size(0), 1024, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int64_t q = 0; q < j; ++q) po[r * j + q] = px[r * c + pi[r * j + q]];
    });
  });
}

void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  check_cpu("scatter_add", {dx, index, src});
  check_rows({dx, index, src}, "scatter_add");
  check_indices(index, dx.size(1), "scatter_add");
  dispatch_float(dx.dtype(), "scatter_add", [&]<typename T>() {
    T* pd = dx.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* ps = src.data<T>();
    int64_t c = dx.size(1), j = index.size(1);
    // Each row is owned by one thread: no races, fixed order.
    parallel_for(0, index.size(0), 1024, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int64_t q = 0; q < j; ++q) pd[r * c + pi[r * j + q]] += ps[r * j + q];
    });
  });
}

void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  check_cpu("index_select", {x, index, out});
  check_rows({x, out}, "index_select");
  OCTET_CHECK(index.dim() == 1 && index.is_contiguous(), "index_select: expected a contiguous 1-D index");
  check_indices(index, x.size(0), "index_select");
  dispatch_all(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    const int64_t* pi = index.data<int64_t>();
    T* po = out.data<T>();
    int64_t d = x.size(1);
    parallel_for(0, index.numel(), std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) std::copy(px + pi[r] * d, px + pi[r] * d + d, po + r * d);
    });
  });
}

void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  check_cpu("index_add", {dx, index, src});
  check_rows({dx, src}, "index_add");
  OCTET_CHECK(index.dim() == 1 && index.is_contiguous(), "index_add: expected a contiguous 1-D index");
  check_indices(index, dx.size(0), "index_add");
  dispatch_float(dx.dtype(), "index_add", [&]<typename T>() {
    T* pd = dx.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* ps = src.data<T>();
    int64_t d = dx.size(1);
    // Split over columns so repeated indices never race and the summation order is fixed.
    parallel_for(0, d, 256, [&](int64_t b, int64_t e) {
      for (int64_t r = 0; r < index.numel(); ++r)
        for (int64_t q = b; q < e; ++q) pd[pi[r] * d + q] += ps[r * d + q];
    });
  });
}

}  // namespace octet::cpu
