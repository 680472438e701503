// CPU row reductions and softmax. Rows are independent, so a row is always reduced by one
// thread in one order: results do not depend on the thread count.
#include <cmath>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace octet::cpu {

namespace {

template <typename T>
double row_logsumexp(const T* p, int64_t r) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < r; ++j) m = std::max<double>(m, p[j]);
  if (std::isinf(m)) return m;  // all -inf (or +inf present)
  double s = 0;
  for (int64_t j = 0; j < r; ++j) s += std::exp(static_cast<double>(p[j]) - m);
  return m + std::log(s);
}

template <typename Fn>
void for_rows(const Tensor& x, const char* op, Fn fn) {
  OCTET_CHECK(x.dim() == 2 && x.is_contiguous(), op, ": kernel requires a contiguous [M, R] tensor");
  int64_t m = x.size(0), r = x.size(1);
  parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i, r);
  });
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  check_cpu("reduce", {x, out});
  OCTET_CHECK(x.size(1) > 0 || op == ReduceOp::sum || op == ReduceOp::sum_sq,
              "reduce: cannot take max/min/logsumexp over zero elements");
  dispatch_numeric(x.dtype(), "reduce", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_rows(x, "reduce", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      if constexpr (std::is_floating_point_v<T>) {
        if (op == ReduceOp::logsumexp) {
          po[i] = static_cast<T>(row_logsumexp(p, r));
          return;
        }
      }
      if (op == ReduceOp::sum || op == ReduceOp::sum_sq) {
        using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
        A s = 0;
        if (op == ReduceOp::sum)
          for (int64_t j = 0; j < r; ++j) s += static_cast<A>(p[j]);
        else
          for (int64_t j = 0; j < r; ++j) s += static_cast<A>(p[j]) * static_cast<A>(p[j]);
        po[i] = static_cast<T>(s);
        return;
      }
      T m = p[0];
      bool is_max = op == ReduceOp::max;
      for (int64_t j = 1; j < r; ++j) {
        T v = p[j];
        if (v != v) {
          m = v;
          break;
        }  // NaN propagates
        if (is_max ? v > m : v < m) m = v;
      }
      po[i] = m;
    });
  });
}

void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out) {
  check_cpu("argmax", {x, out});
  dispatch_numeric(x.dtype(), "argmax", [&]<typename T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    for_rows(x, "argmax", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      int64_t best = 0;
      for (int64_t j = 1; j < r; ++j) {
        if (p[best] != p[best]) break;  // first NaN wins
        if (p[j] != p[j] || (is_max ? p[j] > p[best] : p[j] < p[best])) best = j;
      }
      po[i] = best;
    });
  });
}

void softmax_rows(bool log, const Tensor& x, const Tensor& out) {
  check_cpu("softmax", {x, out});
  dispatch_float(x.dtype(), "softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_rows(x, "softmax", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      T* o = po + i * r;
      double lse = row_logsumexp(p, r);
      if (log)
        for (int64_t j = 0; j < r; ++j) o[j] = static_cast<T>(static_cast<double>(p[j]) - lse);
      else
        for (int64_t j = 0; j < r; ++j) o[j] = static_cast<T>(std::exp(static_cast<double>(p[j]) - lse));
    });
  });
}

}  // namespace octet::cpu
