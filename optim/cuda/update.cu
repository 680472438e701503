// CUDA kernels of the optimizers (launchers declared in optim/cuda/update.h). Every kernel runs a
// rule of optim/update_rules.h, the very code the CPU loop runs, compiled without FMA contraction
// (CMakeLists.txt), so an element rounds exactly as on the CPU:
//   - dense state: one thread per element (grid-stride), the state values through registers;
//   - sums: fixed chunks, a fixed tree within each chunk, one block summing the partials in a fixed
//     order, and a finishing functor turning the sums into a factor left in device memory (the
//     layer-wise update reads it there: no host synchronization between the passes).
#include "core/cuda/cuda_util.h"
#include "optim/cuda/update.h"

namespace octet::cuda {
namespace {

constexpr int kUpdateThreads = 256;
constexpr int kSumThreads = 256;
constexpr int kSumPerThread = static_cast<int>(kSumChunk / kSumThreads);  // 16
static_assert(kSumChunk % kSumThreads == 0, "chunks split evenly");

// ---- updates

template <typename Rule>
__device__ inline void take_scale(Rule& rule, const typename Rule::Scalar* scale) {
  if constexpr (Rule::kScaled) {
    if (scale != nullptr) rule.set_scale(*scale);
  }
}

template <typename Rule, typename T>
__global__ void __launch_bounds__(kUpdateThreads)
    dense_update_kernel(Rule rule, T* __restrict__ p, const T* __restrict__ g, int64_t n, DenseView<T> state,
                        const T* __restrict__ scale) {
  take_scale(rule, scale);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T s[kMaxStateBuffers];
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k) s[k] = k < state.count ? state.buf[k][i] : T(0);
    T pi = p[i];
    rule(pi, g[i], s);
    p[i] = pi;
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k)
      if (k < state.count) state.buf[k][i] = s[k];
  }
}

// ---- sums

// Sums acc[k] over the block's kSumThreads threads by a fixed tree; the result is in thread 0.
template <int K>
__device__ inline void tree_sum(double (&acc)[K], double (&red)[K][kSumThreads]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int k = 0; k < K; ++k) red[k][tid] = acc[k];
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half >>= 1) {
    if (tid < half) {
#pragma unroll
      for (int k = 0; k < K; ++k) red[k][tid] += red[k][tid + half];
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = red[k][0];
}

// Chunk c = blockIdx.x: thread t adds the terms of elements c * kSumChunk + t + e * kSumThreads in
// order of e, then the tree; partials[c * K + k].
template <int K, typename Terms>
__global__ void __launch_bounds__(kSumThreads)
    partial_sums_kernel(Terms terms, int64_t n, double* __restrict__ partials) {
  __shared__ double red[K][kSumThreads];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSumChunk;
  double acc[K] = {};
  for (int e = 0; e < kSumPerThread; ++e) {
    const int64_t i = begin + threadIdx.x + static_cast<int64_t>(e) * kSumThreads;
    if (i < n) {
      double t[K];
      terms(i, t);
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] += t[k];
    }
  }
  tree_sum(acc, red);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) partials[static_cast<int64_t>(blockIdx.x) * K + k] = acc[k];
  }
}

// One block: thread t adds partials t, t + kSumThreads, ... in order, then the tree; thread 0
// hands the sums to `finish`.
template <int K, typename Finish>
__global__ void __launch_bounds__(kSumThreads)
    finish_sums_kernel(const double* __restrict__ partials, int64_t count, Finish finish) {
  __shared__ double red[K][kSumThreads];
  double acc[K] = {};
  for (int64_t c = threadIdx.x; c < count; c += kSumThreads) {
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] += partials[c * K + k];
  }
  tree_sum(acc, red);
  if (threadIdx.x == 0) finish(acc);
}

// Terms: what one element adds to the sums.
template <typename T>
struct DenseReader {
  DenseView<T> v;
  __device__ void load(int64_t i, T* s) const {
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k) s[k] = k < v.count ? v.buf[k][i] : T(0);
  }
};

template <typename T, typename Reader>
struct LambTerms {
  LambRule<T> rule;
  const T* p;
  const T* g;
  Reader state;
  __device__ void operator()(int64_t i, double* t) const {
    T s[kMaxStateBuffers];
    state.load(i, s);
    rule.terms(p[i], g[i], s, t);
  }
};

template <typename T>
struct SquareTerms {
  const T* x;
  __device__ void operator()(int64_t i, double* t) const {
    t[0] = static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
};

template <typename T>
struct SquarePairTerms {
  const T* x;
  const T* y;
  __device__ void operator()(int64_t i, double* t) const {
    t[0] = static_cast<double>(x[i]) * static_cast<double>(x[i]);
    t[1] = static_cast<double>(y[i]) * static_cast<double>(y[i]);
  }
};

// Finishers: the sums -> a factor in device memory.
template <typename T>
struct LambFinish {
  double lr;
  bool trust_clip;
  T* out;
  __device__ void operator()(const double* s) const { *out = static_cast<T>(lr * lamb_ratio(s[0], s[1], trust_clip)); }
};

template <typename T>
struct LarsFinish {
  double trust_coefficient, weight_decay, eps;
  T* out;
  __device__ void operator()(const double* s) const {
    *out = static_cast<T>(lars_local_lr(s[0], s[1], trust_coefficient, weight_decay, eps));
  }
};

struct StoreFinish {
  double* out;
  __device__ void operator()(const double* s) const { *out = s[0]; }
};

template <int K, typename Terms>
void launch_partials(const Terms& terms, int64_t n, double* partials, const char* what) {
  if (n <= 0) return;
  const int64_t chunks = sum_chunks(n);
  OCTET_CHECK(chunks <= 0x7fffffff, what, ": ", n, " elements exceed the grid");
  partial_sums_kernel<K><<<static_cast<unsigned>(chunks), kSumThreads, 0, stream()>>>(terms, n, partials);
  OCTET_CUDA_LAUNCH(what);
}

template <int K, typename Finish>
void launch_finish(const double* partials, int64_t count, const Finish& finish, const char* what) {
  // count == 0 is fine: the sums are 0.
  finish_sums_kernel<K><<<1, kSumThreads, 0, stream()>>>(partials, count, finish);
  OCTET_CUDA_LAUNCH(what);
}

}  // namespace

// ---- launchers

template <typename Rule, typename T>
void dense_update(const Rule& rule, T* p, const T* g, int64_t n, const DenseView<T>& state, const T* scale) {
  if (n <= 0) return;
  OCTET_CHECK(state.count == rule.buffers, "cuda::dense_update: the rule uses ", rule.buffers,
              " state buffers, the state has ", state.count);
  dense_update_kernel<<<grid_for(n, kUpdateThreads), kUpdateThreads, 0, stream()>>>(rule, p, g, n, state, scale);
  OCTET_CUDA_LAUNCH("cuda::dense_update_kernel");
}

template <typename T>
void lamb_partials(const LambRule<T>& rule, const T* p, const T* g, int64_t n, const DenseView<T>& state,
                   double* partials) {
  launch_partials<2>(LambTerms<T, DenseReader<T>>{rule, p, g, DenseReader<T>{state}}, n, partials,
                     "cuda::lamb_partials (dense)");
}

template <typename T>
void lamb_finish(const double* partials, int64_t chunks, double lr, bool trust_clip, T* step) {
  launch_finish<2>(partials, chunks, LambFinish<T>{lr, trust_clip, step}, "cuda::lamb_finish");
}

template <typename T>
void square_partials(const T* x, int64_t n, double* partials) {
  launch_partials<1>(SquareTerms<T>{x}, n, partials, "cuda::square_partials");
}

template <typename T>
void square_pair_partials(const T* x, const T* y, int64_t n, double* partials) {
  launch_partials<2>(SquarePairTerms<T>{x, y}, n, partials, "cuda::square_pair_partials");
}

template <typename T>
void lars_finish(const double* partials, int64_t chunks, double trust_coefficient, double weight_decay, double eps,
                 T* scale) {
  launch_finish<2>(partials, chunks, LarsFinish<T>{trust_coefficient, weight_decay, eps, scale}, "cuda::lars_finish");
}

void sum_finish(const double* partials, int64_t count, double* out) {
  launch_finish<1>(partials, count, StoreFinish{out}, "cuda::sum_finish");
}

// ---- instantiations: every rule in f32 and f64

#define OCTET_DENSE_UPDATE(RULE, T) \
  template void dense_update<RULE<T>, T>(const RULE<T>&, T*, const T*, int64_t, const DenseView<T>&, const T*);
#define OCTET_RULE(RULE)          \
  OCTET_DENSE_UPDATE(RULE, float) \
  OCTET_DENSE_UPDATE(RULE, double)
OCTET_RULE(SgdRule)
OCTET_RULE(AdamRule)
OCTET_RULE(RmspropRule)
OCTET_RULE(LionRule)
OCTET_RULE(LambRule)
OCTET_RULE(LarsRule)
#undef OCTET_RULE
#undef OCTET_DENSE_UPDATE

#define OCTET_SUMS(T)                                                                                            \
  template void lamb_partials<T>(const LambRule<T>&, const T*, const T*, int64_t, const DenseView<T>&, double*); \
  template void lamb_finish<T>(const double*, int64_t, double, bool, T*);                                        \
  template void square_partials<T>(const T*, int64_t, double*);                                                  \
  template void square_pair_partials<T>(const T*, const T*, int64_t, double*);                                   \
  template void lars_finish<T>(const double*, int64_t, double, double, double, T*);
OCTET_SUMS(float)
OCTET_SUMS(double)
#undef OCTET_SUMS

}  // namespace octet::cuda
