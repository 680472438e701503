// CUDA row reductions and softmax over contiguous [M, R], mirroring core/cpu/reduce.cpp: sums
// accumulate in double (integers in 64 bits), max/min and argmax keep the first extreme and let
// the first NaN win, logsumexp and softmax work in double around the row max.
// A group of threads owns a row: a warp for short rows, the whole block for long ones. Each
// thread walks the row with a stride of the group size, then the group combines in a fixed tree,
// so results are deterministic; sums differ from the CPU's serial order only in rounding.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cuda/device_util.cuh"
#include "core/cuda/kernels.h"

namespace octet::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
// Rows at least this long get a whole block; shorter ones a warp.
constexpr int64_t kBlockRowLength = 1024;

// The best element seen so far and its column; i < 0 while nothing was seen.
template <typename T>
struct ArgState {
  T v;
  int64_t i;
};

template <typename T>
__device__ T shfl_down(T v, int delta) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < 4) {
    return static_cast<T>(__shfl_down_sync(kFullMask, static_cast<int>(v), delta));
  } else {
    return __shfl_down_sync(kFullMask, v, delta);
  }
}
template <typename T>
__device__ ArgState<T> shfl_down(ArgState<T> a, int delta) {
  return {shfl_down(a.v, delta), shfl_down(a.i, delta)};
}
template <typename T>
__device__ T shfl_first(T v) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < 4) {
    return static_cast<T>(__shfl_sync(kFullMask, static_cast<int>(v), 0));
  } else {
    return __shfl_sync(kFullMask, v, 0);
  }
}
template <typename T>
__device__ ArgState<T> shfl_first(ArgState<T> a) {
  return {shfl_first(a.v), shfl_first(a.i)};
}

// Combines the partial results of the kRowThreads threads that own a row; every one of them gets
// the same total. All threads of the group must call it (and, for a block, the whole block).
template <int kRowThreads, typename S, typename Combine>
__device__ S group_reduce(S s, Combine combine, S* shared) {
  for (int delta = kWarp / 2; delta > 0; delta >>= 1) s = combine(s, shfl_down(s, delta));
  if constexpr (kRowThreads == kWarp) {
    return shfl_first(s);  // lane 0 holds the total
  } else {
    static_assert(kRowThreads == kThreads, "a row is owned by a warp or by the whole block");
    const int warp = threadIdx.x / kWarp;
    if (threadIdx.x % kWarp == 0) shared[warp] = s;
    __syncthreads();
    S total = shared[0];
    for (int w = 1; w < kThreads / kWarp; ++w) total = combine(total, shared[w]);
    __syncthreads();  // `shared` may be reused by the next reduction
    return total;
  }
}

struct Plus {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

// std::max's rule (a < b ? b : a): a NaN never replaces the running max.
struct MaxSkipNan {
  __device__ double operator()(double a, double b) const { return a < b ? b : a; }
};

// The CPU's serial scan as a commutative combine: a NaN beats any number and the earlier of two
// NaNs wins; otherwise the strictly better value wins and a tie goes to the earlier column.
template <typename T, bool kMax>
struct PickExtreme {
  __device__ ArgState<T> operator()(ArgState<T> a, ArgState<T> b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.i < b.i ? a : b;
      return a_nan ? a : b;
    }
    if (kMax ? b.v > a.v : b.v < a.v) return b;
    if (kMax ? a.v > b.v : a.v < b.v) return a;
    return a.i < b.i ? a : b;
  }
};

// Row `row` of m is owned by the group of kRowThreads consecutive threads this thread belongs
// to. The loop bounds are the same for the whole group, so group_reduce may be called inside:
//   for (int64_t row = G::first_row(); row < m; row += G::row_step()) { ... }
template <int kRowThreads>
struct RowGroups {
  static constexpr int kRowsPerBlock = kThreads / kRowThreads;
  __device__ static int lane() { return threadIdx.x % kRowThreads; }
  __device__ static int64_t first_row() {
    return blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.x / kRowThreads;
  }
  __device__ static int64_t row_step() { return static_cast<int64_t>(gridDim.x) * kRowsPerBlock; }
};

// A: double for floating types, uint64_t (wrapping like the CPU's int64_t) for integers.
template <typename T, typename A, int kRowThreads>
__global__ void sum_rows_kernel(const T* x, T* out, int64_t m, int64_t r, bool square) {
  __shared__ A shared[kThreads / kWarp];
  using G = RowGroups<kRowThreads>;
  const int lane = G::lane();
  for (int64_t row = G::first_row(); row < m; row += G::row_step()) {
    const T* p = x + row * r;
    A s = 0;
    for (int64_t j = lane; j < r; j += kRowThreads) {
      A v = static_cast<A>(p[j]);
      s += square ? v * v : v;
    }
    s = group_reduce<kRowThreads>(s, Plus{}, shared);
    if (lane == 0) {
      if constexpr (std::is_floating_point_v<T>) {
        out[row] = static_cast<T>(s);
      } else {
        out[row] = static_cast<T>(static_cast<int64_t>(s));
      }
    }
  }
}

// max/min (writes the value) or argmax/argmin (writes the column; 0 for an empty row, like the
// CPU).
template <typename T, bool kMax, bool kIndex, int kRowThreads>
__global__ void extreme_rows_kernel(const T* x, T* values, int64_t* indices, int64_t m, int64_t r) {
  __shared__ ArgState<T> shared[kThreads / kWarp];
  const PickExtreme<T, kMax> pick;
  using G = RowGroups<kRowThreads>;
  const int lane = G::lane();
  for (int64_t row = G::first_row(); row < m; row += G::row_step()) {
    const T* p = x + row * r;
    ArgState<T> best{T(0), -1};
    for (int64_t j = lane; j < r; j += kRowThreads) best = pick(best, ArgState<T>{p[j], j});
    best = group_reduce<kRowThreads>(best, pick, shared);
    if (lane == 0) {
      if constexpr (kIndex) {
        indices[row] = best.i < 0 ? 0 : best.i;
      } else {
        values[row] = best.v;
      }
    }
  }
}

// log(sum(exp(p))) of a row in double, as the CPU's row_logsumexp: the max skips NaNs, an
// infinite max is the answer itself (all -inf, or +inf present).
template <typename T, int kRowThreads>
__device__ double row_logsumexp(const T* p, int64_t r, int lane, double* shared) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = lane; j < r; j += kRowThreads) {
    double v = static_cast<double>(p[j]);
    mx = mx < v ? v : mx;
  }
  mx = group_reduce<kRowThreads>(mx, MaxSkipNan{}, shared);
  if (::isinf(mx)) return mx;  // the same for the whole group: no thread skips a group_reduce alone
  double s = 0;
  for (int64_t j = lane; j < r; j += kRowThreads) s += ::exp(static_cast<double>(p[j]) - mx);
  s = group_reduce<kRowThreads>(s, Plus{}, shared);
  return mx + ::log(s);
}

enum class RowExp : uint8_t { logsumexp, softmax, log_softmax };

// logsumexp writes out[M]; softmax and log-softmax write out[M, R].
template <typename T, int kRowThreads>
__global__ void softmax_rows_kernel(const T* x, T* out, int64_t m, int64_t r, RowExp mode) {
  __shared__ double shared[kThreads / kWarp];
  using G = RowGroups<kRowThreads>;
  const int lane = G::lane();
  for (int64_t row = G::first_row(); row < m; row += G::row_step()) {
    const T* p = x + row * r;
    const double lse = row_logsumexp<T, kRowThreads>(p, r, lane, shared);
    if (mode == RowExp::logsumexp) {
      if (lane == 0) out[row] = static_cast<T>(lse);
    } else {
      T* o = out + row * r;
      if (mode == RowExp::log_softmax)
        for (int64_t j = lane; j < r; j += kRowThreads) o[j] = static_cast<T>(static_cast<double>(p[j]) - lse);
      else
        for (int64_t j = lane; j < r; j += kRowThreads) o[j] = static_cast<T>(::exp(static_cast<double>(p[j]) - lse));
    }
  }
}

// The gradients of softmax_rows (core/kernels.h): the row sum of g (log) or g * y in double, then
// dx = g - exp(y) * s or y * (g - s), as the CPU computes them.
template <typename T, int kRowThreads>
__global__ void softmax_backward_rows_kernel(const T* y, const T* g, T* dx, int64_t m, int64_t r, bool log) {
  __shared__ double shared[kThreads / kWarp];
  using G = RowGroups<kRowThreads>;
  const int lane = G::lane();
  for (int64_t row = G::first_row(); row < m; row += G::row_step()) {
    const T *py = y + row * r, *pg = g + row * r;
    T* pd = dx + row * r;
    double acc = 0;
    for (int64_t j = lane; j < r; j += kRowThreads)
      acc += static_cast<double>(log ? pg[j] : static_cast<T>(pg[j] * py[j]));
    const T s = static_cast<T>(group_reduce<kRowThreads>(acc, Plus{}, shared));
    if (log)
      for (int64_t j = lane; j < r; j += kRowThreads)
        pd[j] = pg[j] - static_cast<T>(::exp(static_cast<double>(py[j]))) * s;
    else
      for (int64_t j = lane; j < r; j += kRowThreads) pd[j] = py[j] * (pg[j] - s);
  }
}

// dx = c * (exp(logp) - u), minus c * w more at the row's target column (when in [0, r)).
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logp, const int64_t* target, const T* coef, T* dx, int64_t m,
                                              int64_t r, T u, T w) {
  const int64_t n = m * r;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / r, j = i - row * r;
    const T c = coef[row];
    const T d = static_cast<T>(::exp(static_cast<double>(logp[i]))) - u;
    dx[i] = target[row] == j ? c * (d - w) : c * d;
  }
}

void check_rows(const Tensor& x, const char* op) {
  OCTET_CHECK(x.dim() == 2 && x.is_contiguous(), op, ": kernel requires a contiguous [M, R] tensor");
}

// Calls launch.template operator()<kRowThreads>(grid) with the group size that suits rows of
// length r, then checks the launch.
template <typename Launch>
void launch_rows(const char* op, int64_t m, int64_t r, Launch&& launch) {
  if (m == 0) return;
  if (r >= kBlockRowLength)
    launch.template operator()<kThreads>(grid_for(m, 1));
  else
    launch.template operator()<kWarp>(grid_for(m, RowGroups<kWarp>::kRowsPerBlock));
  OCTET_CUDA_LAUNCH(op);
}

}  // namespace

// The permuted copy and the row reduction (the CUDA row kernels sum in trees, not in the CPU's
// order, either way).
void reduce_outer(ReduceOp op, const Tensor& x, int64_t a, int64_t k, int64_t b, const Tensor& out) {
  OCTET_CHECK(x.is_contiguous() && x.numel() == a * k * b && out.numel() == k,
              "reduce_outer: expected contiguous x of ", a * k * b, " and out of ", k, " elements");
  const Tensor rows = x.view({a, k, b}).permute({1, 0, 2}).contiguous().view({k, a * b});
  reduce_rows(op, rows, out);
}

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  OCTET_CHECK(x.size(1) > 0 || op == ReduceOp::sum || op == ReduceOp::sum_sq,
              "reduce: cannot take max/min/logsumexp over zero elements");
  dispatch_numeric(x.dtype(), "reduce", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    check_rows(x, "reduce");
    const int64_t m = x.size(0), r = x.size(1);
    if constexpr (std::is_floating_point_v<T>) {
      if (op == ReduceOp::logsumexp) {
        launch_rows("reduce", m, r, [&]<int kRowThreads>(unsigned grid) {
          softmax_rows_kernel<T, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, po, m, r, RowExp::logsumexp);
        });
        return;
      }
    }
    if (op == ReduceOp::sum || op == ReduceOp::sum_sq) {
      using A = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
      const bool square = op == ReduceOp::sum_sq;
      launch_rows("reduce", m, r, [&]<int kRowThreads>(unsigned grid) {
        sum_rows_kernel<T, A, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, po, m, r, square);
      });
      return;
    }
    // max, min, and (as the CPU's fall-through does) logsumexp of an integer tensor: min.
    if (op == ReduceOp::max) {
      launch_rows("reduce", m, r, [&]<int kRowThreads>(unsigned grid) {
        extreme_rows_kernel<T, true, false, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, po, nullptr, m, r);
      });
    } else {
      launch_rows("reduce", m, r, [&]<int kRowThreads>(unsigned grid) {
        extreme_rows_kernel<T, false, false, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, po, nullptr, m, r);
      });
    }
  });
}

void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out) {
  dispatch_numeric(x.dtype(), "argmax", [&]<typename T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    check_rows(x, "argmax");
    const int64_t m = x.size(0), r = x.size(1);
    if (is_max) {
      launch_rows("argmax", m, r, [&]<int kRowThreads>(unsigned grid) {
        extreme_rows_kernel<T, true, true, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, nullptr, po, m, r);
      });
    } else {
      launch_rows("argmax", m, r, [&]<int kRowThreads>(unsigned grid) {
        extreme_rows_kernel<T, false, true, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, nullptr, po, m, r);
      });
    }
  });
}

void softmax_rows(bool log, const Tensor& x, const Tensor& out) {
  dispatch_float(x.dtype(), "softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    check_rows(x, "softmax");
    const int64_t m = x.size(0), r = x.size(1);
    const RowExp mode = log ? RowExp::log_softmax : RowExp::softmax;
    launch_rows("softmax", m, r, [&]<int kRowThreads>(unsigned grid) {
      softmax_rows_kernel<T, kRowThreads><<<grid, kThreads, 0, stream()>>>(px, po, m, r, mode);
    });
  });
}

void softmax_backward_rows(bool log, const Tensor& y, const Tensor& g, const Tensor& dx) {
  dispatch_float(y.dtype(), "softmax_backward", [&]<typename T>() {
    check_rows(y, "softmax_backward");
    OCTET_CHECK(g.is_contiguous() && dx.is_contiguous() && g.shape() == y.shape() && dx.shape() == y.shape(),
                "softmax_backward: kernel requires contiguous [M, R] tensors of one shape");
    const T *py = y.data<T>(), *pg = g.data<T>();
    T* pd = dx.data<T>();
    const int64_t m = y.size(0), r = y.size(1);
    launch_rows("softmax_backward", m, r, [&]<int kRowThreads>(unsigned grid) {
      softmax_backward_rows_kernel<T, kRowThreads><<<grid, kThreads, 0, stream()>>>(py, pg, pd, m, r, log);
    });
  });
}

void cross_entropy_backward_rows(const Tensor& logp, const Tensor& target, const Tensor& coef, double smoothing,
                                 const Tensor& dx) {
  dispatch_float(logp.dtype(), "cross_entropy_backward", [&]<typename T>() {
    check_rows(logp, "cross_entropy_backward");
    OCTET_CHECK(target.dtype() == DType::i64 && target.is_contiguous() && coef.is_contiguous() && dx.is_contiguous() &&
                    dx.shape() == logp.shape() && target.numel() == logp.size(0) && coef.numel() == logp.size(0),
                "cross_entropy_backward: kernel requires logp and dx [M, R], target (i64) and coef [M], contiguous");
    const int64_t m = logp.size(0), r = logp.size(1);
    if (m * r == 0) return;
    const T u = static_cast<T>(smoothing / static_cast<double>(r)), w = static_cast<T>(1.0 - smoothing);
    cross_entropy_backward_kernel<T><<<grid_for(m * r), kThreads, 0, stream()>>>(
        logp.data<T>(), target.data<int64_t>(), coef.data<T>(), dx.data<T>(), m, r, u, w);
    OCTET_CUDA_LAUNCH("cross_entropy_backward");
  });
}

}  // namespace octet::cuda
