// CUDA kernels of the optimizers (launchers declared in optim/cuda/update.h). Every kernel runs a
// rule of optim/update_rules.h, the very code the CPU loop runs, compiled without FMA contraction
// (CMakeLists.txt), so an element rounds exactly as on the CPU:
//   - dense state: one thread per element (grid-stride), the state values through registers;
//   - 8-bit state: one warp per quantization block of up to 256 elements (several per thread
//     block, which loads the maps once), one thread block per larger one. Each thread dequantizes
//     its elements (map in shared memory), runs the rule in f32 and keeps the new state values in
//     registers; the warp or block reduces each buffer's new absmax (finite values only, as on the CPU) and every
//     thread requantizes its values from the CPU's code table (quant/code_table.h, read through
//     the cache). The f32 state never reaches memory;
//   - 4-bit state: one warp per block of 128 elements, each lane four neighbouring elements (its
//     two bytes of codes); block-wise buffers are re-encoded in registers as the 8-bit ones; a
//     rank-1 buffer's new values go to scratch with atomic maxima, and a second kernel encodes them;
//   - sums: the CPU's units (one thread adds a unit's terms in order), added exactly into digits
//     (core/exact_digits.h) by 64-bit atomics, per thread block in shared memory, then into the
//     accumulator; a one-thread kernel rounds them and turns them into a factor left in device
//     memory (the layer-wise update reads it there: no host synchronization between the passes).
#include "core/cuda/cuda_util.h"
#include "optim/cuda/update.h"
#include "quant/block_code.h"
#include "quant/cuda/block_max.cuh"

namespace octet::cuda {
namespace {

constexpr int kUpdateThreads = 256;
constexpr int kMaxPerThread = static_cast<int>(kMaxQuantBlock / kUpdateThreads);  // 16
constexpr int kSumThreads = 256;
static_assert(kMaxQuantBlock % kUpdateThreads == 0, "blocks split evenly");

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
    update_element<kMaxStateBuffers>(rule, pi, g[i], s);
    p[i] = pi;
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k)
      if (k < state.count) state.buf[k][i] = s[k];
  }
}

// The two passes over a quantization block's elements begin + first + e * stride (e < E, those
// below len) that both 8-bit kernels run. Pass 1 decodes the state, runs the rule, writes p, and
// keeps the new state in s and its finite absmax in m; pass 2, once m is the block's, requantizes s.
template <int E, typename Rule>
__device__ inline void update_elements(Rule& rule, float* __restrict__ p, const float* __restrict__ g,
                                       const QuantView& q, const float (&map)[kMaxStateBuffers][256],
                                       const float (&old_absmax)[kMaxStateBuffers], int64_t begin, int len, int first,
                                       int stride, float (&s)[kMaxStateBuffers][E], float (&m)[kMaxStateBuffers]) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = first + e * stride;
    if (j < len) {
      const int64_t i = begin + j;
      float st[kMaxStateBuffers];
#pragma unroll
      for (int k = 0; k < kMaxStateBuffers; ++k)
        st[k] = k < q.count ? quant::decode(map[k], q.codes[k][i], old_absmax[k]) : 0.0f;
      float pi = p[i];
      update_element<kMaxStateBuffers>(rule, pi, g[i], st);
      p[i] = pi;
#pragma unroll
      for (int k = 0; k < kMaxStateBuffers; ++k) {
        s[k][e] = st[k];
        m[k] = quant::absmax_step(m[k], st[k]);
      }
    }
  }
}

template <int E>
__device__ inline void requantize_elements(const QuantView& q, int64_t begin, int len, int first, int stride,
                                           const float (&s)[kMaxStateBuffers][E], const float (&m)[kMaxStateBuffers]) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = first + e * stride;
    if (j < len) {
      const int64_t i = begin + j;
#pragma unroll
      for (int k = 0; k < kMaxStateBuffers; ++k)
        if (k < q.count) q.codes[k][i] = quant::table_code(q.tables[k]->codes, quant::normalized(s[k][e], m[k]));
    }
  }
}

// Block b covers elements [b * bs, min(n, (b + 1) * bs)); thread t takes the block's elements
// t + e * blockDim.x (e < kMaxPerThread), blockDim.x = min(bs, kUpdateThreads), so bs <=
// blockDim.x * kMaxPerThread and the loop over e covers the block. Each element is read and
// written by one thread only; the old absmax is read by all threads before the barrier in
// block_max and rewritten by thread 0 after it.
template <typename Rule>
__global__ void __launch_bounds__(kUpdateThreads)
    blockwise_update_kernel(Rule rule, float* __restrict__ p, const float* __restrict__ g, int64_t n, QuantView q,
                            const float* __restrict__ scale) {
  __shared__ float map[kMaxStateBuffers][256];
  __shared__ float red[kMaxStateBuffers][32];
  const int tid = threadIdx.x, threads = blockDim.x;
#pragma unroll
  for (int k = 0; k < kMaxStateBuffers; ++k) {  // constant k (unrolled, guarded): q stays in registers
    if (k < q.count) {
      for (int j = tid; j < 256; j += threads) map[k][j] = q.tables[k]->map[j];
    }
  }
  take_scale(rule, scale);
  const int64_t b = blockIdx.x, begin = b * q.block_size;
  const int len = static_cast<int>(min(q.block_size, n - begin));
  float old_absmax[kMaxStateBuffers];
#pragma unroll
  for (int k = 0; k < kMaxStateBuffers; ++k) old_absmax[k] = k < q.count ? q.absmax[k][b] : 0.0f;
  __syncthreads();  // the maps are in shared memory

  float s[kMaxStateBuffers][kMaxPerThread] = {};
  float m[kMaxStateBuffers] = {};
  update_elements<kMaxPerThread>(rule, p, g, q, map, old_absmax, begin, len, tid, threads, s, m);
  quant::cuda::block_max(m, red);  // the new absmax of every buffer, in every thread
  requantize_elements<kMaxPerThread>(q, begin, len, tid, threads, s, m);
  if (tid == 0) {
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k)
      if (k < q.count) q.absmax[k][b] = m[k];
  }
}

// Blocks of at most 256 elements (the default 256 among them): one warp per quantization block,
// kWarpBlocks warps per thread block, looping over the quantization blocks (grid-stride) so the
// maps are loaded into shared memory once per thread block, not once per 256 elements. Lane t
// takes the block's elements t + 32 e (e < kWarpPerLane); the absmax is a warp shuffle, with no
// barrier. The per-element passes are blockwise_update_kernel's (update_elements,
// requantize_elements), so the results are the same bits.
constexpr int kWarpBlocks = 8;
constexpr int kWarpPerLane = 8;
constexpr int64_t kWarpMaxBlock = 32 * kWarpPerLane;  // 256

template <typename Rule>
__global__ void __launch_bounds__(32 * kWarpBlocks)
    blockwise_update_warp_kernel(Rule rule, float* __restrict__ p, const float* __restrict__ g, int64_t n, QuantView q,
                                 int64_t blocks, const float* __restrict__ scale) {
  __shared__ float map[kMaxStateBuffers][256];
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < kMaxStateBuffers; ++k) {
    if (k < q.count) {
      for (int j = threadIdx.x; j < 256; j += blockDim.x) map[k][j] = q.tables[k]->map[j];
    }
  }
  take_scale(rule, scale);
  __syncthreads();  // the maps are in shared memory
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpBlocks;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * kWarpBlocks + (threadIdx.x >> 5); b < blocks; b += warps) {
    const int64_t begin = b * q.block_size;
    const int len = static_cast<int>(min(q.block_size, n - begin));
    float old_absmax[kMaxStateBuffers];
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k) old_absmax[k] = k < q.count ? q.absmax[k][b] : 0.0f;
    float s[kMaxStateBuffers][kWarpPerLane] = {};
    float m[kMaxStateBuffers] = {};
    update_elements<kWarpPerLane>(rule, p, g, q, map, old_absmax, begin, len, lane, 32, s, m);
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k) {
      for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, m[k], o);
        m[k] = m[k] < w ? w : m[k];
      }
    }
    requantize_elements<kWarpPerLane>(q, begin, len, lane, 32, s, m);
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kMaxStateBuffers; ++k)
        if (k < q.count) q.absmax[k][b] = m[k];
    }
  }
}

// ---- 4-bit state: one warp per block of kLowBitBlock (128) elements, kWarpBlocks warps per
// thread block, looping over the blocks (grid-stride). Lane t takes the block's elements
// 4t .. 4t + 3, so its codes are its own two bytes: it reads them, and writes them back, alone.
constexpr int kLowBitPerLane = static_cast<int>(kLowBitBlock / 32);  // 4
static_assert(kLowBitPerLane % 2 == 0, "a lane's codes are whole bytes");

__device__ inline uint8_t nibble(const uint8_t* codes, int64_t i) {
  const uint8_t byte = codes[i >> 1];
  return (i & 1) == 0 ? byte >> 4 : byte & 15u;
}

__device__ inline bool is_rank1(const LowBitView& q, int k) { return q.absmax[k] == nullptr; }

// Element i of each 4-bit buffer, decoded (0 past q.count): its code's map value times its scale,
// the rank-1 one at the shard's offset or its block's absmax. `map`: q.map, or a copy of it in
// shared memory.
__device__ inline void decode_element(const LowBitView& q, const float (*map)[16], int64_t i, float* s) {
#pragma unroll
  for (int k = 0; k < kMaxStateBuffers; ++k) {
    if (k >= q.count) {
      s[k] = 0.0f;
      continue;
    }
    const float sc = is_rank1(q, k) ? quant::rank1_scale(q.maxima[k], q.extents, q.dims, q.offset + i)
                                    : q.absmax[k][i / kLowBitBlock];
    s[k] = map[k][nibble(q.codes[k], i)] * sc;
  }
}

template <typename Rule>
__global__ void __launch_bounds__(32 * kWarpBlocks)
    lowbit_update_kernel(Rule rule, float* __restrict__ p, const float* __restrict__ g, int64_t n, LowBitView q,
                         int64_t blocks, const float* __restrict__ scale) {
  __shared__ float map[kMaxStateBuffers][16];
  __shared__ float thr[kMaxStateBuffers][16];
  for (int j = threadIdx.x; j < kMaxStateBuffers * 16; j += blockDim.x) {
    const int k = j / 16, e = j % 16;
    map[k][e] = q.map[k][e];
    thr[k][e] = e < 15 ? q.thresholds[k][e] : 0.0f;
  }
  take_scale(rule, scale);
  __syncthreads();  // the maps are in shared memory
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpBlocks;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * kWarpBlocks + (threadIdx.x >> 5); b < blocks; b += warps) {
    const int64_t begin = b * kLowBitBlock;
    const int len = static_cast<int>(min(kLowBitBlock, n - begin));
    float s[kMaxStateBuffers][kLowBitPerLane] = {};
    float m[kMaxStateBuffers] = {};
#pragma unroll
    for (int e = 0; e < kLowBitPerLane; ++e) {
      const int j = kLowBitPerLane * lane + e;
      if (j >= len) continue;
      const int64_t i = begin + j;
      float st[kMaxStateBuffers];
      decode_element(q, map, i, st);
      float pi = p[i];
      update_element<kMaxStateBuffers>(rule, pi, g[i], st);
      p[i] = pi;
#pragma unroll
      for (int k = 0; k < kMaxStateBuffers; ++k) {
        if (k >= q.count) continue;
        s[k][e] = st[k];
        m[k] = quant::absmax_step(m[k], st[k]);
        if (is_rank1(q, k)) {
          q.fresh[k][i] = st[k];
          const float a = fabsf(st[k]);
          if (a < INFINITY) {  // non-negative floats order as their bits
            int64_t rest = q.offset + i;
            for (int d = q.dims - 1; d >= 0; --d) {
              atomicMax(reinterpret_cast<unsigned*>(q.new_maxima[k][d] + rest % q.extents[d]), __float_as_uint(a));
              rest /= q.extents[d];
            }
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k) {
      if (k >= q.count || is_rank1(q, k)) continue;
      for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, m[k], o);
        m[k] = m[k] < w ? w : m[k];
      }
#pragma unroll
      for (int e = 0; e < kLowBitPerLane; e += 2) {
        const int j = kLowBitPerLane * lane + e;
        if (j >= len) continue;
        const unsigned hi = quant::code4(thr[k], quant::normalized(s[k][e], m[k]));
        const unsigned lo = j + 1 < len ? quant::code4(thr[k], quant::normalized(s[k][e + 1], m[k])) : 0u;
        q.codes[k][(begin + j) >> 1] = static_cast<uint8_t>(hi << 4 | lo);
      }
      if (lane == 0) q.absmax[k][b] = m[k];
    }
  }
}

// The codes of the rank-1 buffers from their new values and maxima: one thread per byte.
__global__ void lowbit_encode_rank1_kernel(LowBitView q, int64_t n) {
  const int64_t bytes = (n + 1) / 2, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t byte = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; byte < bytes; byte += stride) {
    for (int k = 0; k < q.count; ++k) {
      if (!is_rank1(q, k)) continue;
      const float* const* maxima = q.new_maxima[k];
      unsigned c[2] = {0u, 0u};
      for (int e = 0; e < 2; ++e) {
        const int64_t i = 2 * byte + e;
        if (i < n)
          c[e] = quant::code4(q.thresholds[k],
                              quant::normalized(q.fresh[k][i],
                                                quant::rank1_scale(maxima, q.extents, q.dims, q.offset + i)));
      }
      q.codes[k][byte] = static_cast<uint8_t>(c[0] << 4 | c[1]);
    }
  }
}

// ---- sums

// What x adds to the digits at `digits` (kExactWords words): its parts, or its flag. Unsigned 64-bit
// atomics add the signed parts modulo 2^64, which is their two's complement sum.
__device__ inline void add_exact(unsigned long long* digits, double x) {
  const exact::Parts p = exact::parts_of(x);
  if (p.flag != 0) {
    atomicOr(&digits[exact::kDigits], static_cast<unsigned long long>(p.flag));
    return;
  }
#pragma unroll
  for (int k = 0; k < 3; ++k)
    if (p.part[k] != 0) atomicAdd(&digits[p.index + k], static_cast<unsigned long long>(p.part[k]));
}

// Unit u (grid-stride) is elements u * kSumUnit ... in order, its K sums in double, added exactly
// into the thread block's digits; the block then adds its digits into acc ([K][kExactWords]).
template <int K, typename Terms>
__global__ void __launch_bounds__(kSumThreads) exact_sums_kernel(Terms terms, int64_t n, int64_t* __restrict__ acc) {
  __shared__ unsigned long long digits[K * kExactWords];
  for (int j = threadIdx.x; j < K * kExactWords; j += blockDim.x) digits[j] = 0;
  __syncthreads();
  const int64_t units = (n + kSumUnit - 1) / kSumUnit;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    double unit[K] = {};
    const int64_t end = (u + 1) * kSumUnit < n ? (u + 1) * kSumUnit : n;
    for (int64_t i = u * kSumUnit; i < end; ++i) {
      double t[K];
      terms(i, t);
#pragma unroll
      for (int k = 0; k < K; ++k) unit[k] += t[k];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) add_exact(&digits[k * kExactWords], unit[k]);
  }
  __syncthreads();
  auto* out = reinterpret_cast<unsigned long long*>(acc);
  for (int j = threadIdx.x; j < K * kExactWords; j += blockDim.x) {
    if (digits[j] == 0) continue;
    if (j % kExactWords == exact::kDigits)
      atomicOr(&out[j], digits[j]);
    else
      atomicAdd(&out[j], digits[j]);
  }
}

// One thread: acc's K sums rounded (ExactSum::value's rounding), handed to `finish`.
template <int K, typename Finish>
__global__ void exact_finish_kernel(const int64_t* __restrict__ acc, Finish finish) {
  double s[K];
#pragma unroll
  for (int k = 0; k < K; ++k) s[k] = exact::value_of(acc + k * kExactWords, acc[k * kExactWords + exact::kDigits]);
  finish(s);
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

struct QuantReader {
  QuantView q;
  int shift;  // block_size = 1 << shift
  __device__ void load(int64_t i, float* s) const {
#pragma unroll
    for (int k = 0; k < kMaxStateBuffers; ++k)
      s[k] = k < q.count ? quant::decode(q.tables[k]->map, q.codes[k][i], q.absmax[k][i >> shift]) : 0.0f;
  }
};

// Element i of each 4-bit buffer, decoded as lowbit_update_kernel decodes it.
struct LowBitReader {
  LowBitView q;
  __device__ void load(int64_t i, float* s) const { decode_element(q, q.map, i, s); }
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
    t[1] = finite_square(y[i]);  // y is the gradient: its non-finite elements are skipped
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

template <int K, typename Terms>
void launch_exact_sums(const Terms& terms, int64_t n, int64_t* acc, const char* what) {
  if (n <= 0) return;
  const int64_t units = (n + kSumUnit - 1) / kSumUnit;
  // Each digit takes at most one part (< 2^32) per unit: 2^31 units keep every digit in an int64.
  OCTET_CHECK(units < (int64_t{1} << 31), what, ": ", n, " elements exceed the exact accumulator");
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((units + kSumThreads - 1) / kSumThreads, 1024));
  exact_sums_kernel<K><<<blocks, kSumThreads, 0, stream()>>>(terms, n, acc);
  OCTET_CUDA_LAUNCH(what);
}

template <int K, typename Finish>
void launch_finish(const int64_t* acc, const Finish& finish, const char* what) {
  exact_finish_kernel<K><<<1, 1, 0, stream()>>>(acc, finish);
  OCTET_CUDA_LAUNCH(what);
}

int log2_of(int64_t block_size) {
  int shift = 0;
  while ((int64_t{1} << shift) < block_size) ++shift;
  return shift;
}

void check_quant_view(const QuantView& q, const char* what) {
  OCTET_CHECK(q.count >= 1 && q.count <= kMaxStateBuffers, what, ": ", q.count, " 8-bit state buffers (expected 1 to ",
              kMaxStateBuffers, ")");
  OCTET_CHECK(q.block_size >= 64 && q.block_size <= kMaxQuantBlock && (q.block_size & (q.block_size - 1)) == 0, what,
              ": block size ", q.block_size, " (expected a power of two in [64, ", kMaxQuantBlock, "])");
}

// The state has the buffers the rule updates.
template <typename Rule>
void check_buffers(const Rule& rule, int count, const char* what) {
  OCTET_CHECK(count == rule.buffers, what, ": the rule uses ", rule.buffers, " state buffers, the state has ", count);
}

// The grid of a warp-per-block kernel over `blocks` blocks: kWarpBlocks per thread block, and
// about as many thread blocks as an H100 holds at once (132 SMs x 8); each loops over its share.
unsigned warp_grid(int64_t blocks) {
  return static_cast<unsigned>(std::min<int64_t>((blocks + kWarpBlocks - 1) / kWarpBlocks, 1024));
}

}  // namespace

// ---- launchers

template <typename Rule, typename T>
void dense_update(const Rule& rule, T* p, const T* g, int64_t n, const DenseView<T>& state, const T* scale) {
  if (n <= 0) return;
  check_buffers(rule, state.count, "cuda::dense_update");
  dense_update_kernel<<<grid_for(n, kUpdateThreads), kUpdateThreads, 0, stream()>>>(rule, p, g, n, state, scale);
  OCTET_CUDA_LAUNCH("cuda::dense_update_kernel");
}

template <typename Rule>
void blockwise_update(const Rule& rule, float* p, const float* g, int64_t n, const QuantView& state,
                      const float* scale) {
  if (n <= 0) return;
  check_quant_view(state, "cuda::blockwise_update");
  check_buffers(rule, state.count, "cuda::blockwise_update");
  const int64_t blocks = (n + state.block_size - 1) / state.block_size;
  OCTET_CHECK(blocks <= 0x7fffffff, "cuda::blockwise_update: ", blocks, " blocks exceed the grid");
  if (state.block_size <= kWarpMaxBlock) {
    blockwise_update_warp_kernel<<<warp_grid(blocks), 32 * kWarpBlocks, 0, stream()>>>(rule, p, g, n, state, blocks,
                                                                                       scale);
    OCTET_CUDA_LAUNCH("cuda::blockwise_update_warp_kernel");
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>(state.block_size, kUpdateThreads));
  blockwise_update_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream()>>>(rule, p, g, n, state, scale);
  OCTET_CUDA_LAUNCH("cuda::blockwise_update_kernel");
}

void check_lowbit_view(const LowBitView& q, const char* what) {
  OCTET_CHECK(q.count >= 1 && q.count <= kMaxStateBuffers, what, ": ", q.count, " 4-bit state buffers (expected 1 to ",
              kMaxStateBuffers, ")");
  OCTET_CHECK(q.dims >= 0 && q.dims <= kMaxRank1Dims, what, ": ", q.dims, " rank-1 dims (at most ", kMaxRank1Dims, ")");
}

template <typename Rule>
void lowbit_update(const Rule& rule, float* p, const float* g, int64_t n, const LowBitView& state, const float* scale) {
  if (n <= 0) return;
  check_lowbit_view(state, "cuda::lowbit_update");
  check_buffers(rule, state.count, "cuda::lowbit_update");
  const int64_t blocks = (n + kLowBitBlock - 1) / kLowBitBlock;
  lowbit_update_kernel<<<warp_grid(blocks), 32 * kWarpBlocks, 0, stream()>>>(rule, p, g, n, state, blocks, scale);
  OCTET_CUDA_LAUNCH("cuda::lowbit_update_kernel");
}

void lowbit_encode_rank1(const LowBitView& state, int64_t n) {
  if (n <= 0) return;
  check_lowbit_view(state, "cuda::lowbit_encode_rank1");
  lowbit_encode_rank1_kernel<<<grid_for((n + 1) / 2, kUpdateThreads), kUpdateThreads, 0, stream()>>>(state, n);
  OCTET_CUDA_LAUNCH("cuda::lowbit_encode_rank1_kernel");
}

template <typename T>
void lamb_exact_sums(const LambRule<T>& rule, const T* p, const T* g, int64_t n, const DenseView<T>& state,
                     int64_t* acc) {
  launch_exact_sums<2>(LambTerms<T, DenseReader<T>>{rule, p, g, DenseReader<T>{state}}, n, acc,
                       "cuda::lamb_exact_sums (dense)");
}

void lamb_exact_sums(const LambRule<float>& rule, const float* p, const float* g, int64_t n, const QuantView& state,
                     int64_t* acc) {
  check_quant_view(state, "cuda::lamb_exact_sums");
  launch_exact_sums<2>(LambTerms<float, QuantReader>{rule, p, g, QuantReader{state, log2_of(state.block_size)}}, n, acc,
                       "cuda::lamb_exact_sums (8-bit)");
}

void lamb_exact_sums(const LambRule<float>& rule, const float* p, const float* g, int64_t n, const LowBitView& state,
                     int64_t* acc) {
  check_lowbit_view(state, "cuda::lamb_exact_sums");
  launch_exact_sums<2>(LambTerms<float, LowBitReader>{rule, p, g, LowBitReader{state}}, n, acc,
                       "cuda::lamb_exact_sums (4-bit)");
}

template <typename T>
void lamb_finish(const int64_t* acc, double lr, bool trust_clip, T* step) {
  launch_finish<2>(acc, LambFinish<T>{lr, trust_clip, step}, "cuda::lamb_finish");
}

template <typename T>
void square_exact_sums(const T* x, int64_t n, int64_t* acc) {
  launch_exact_sums<1>(SquareTerms<T>{x}, n, acc, "cuda::square_exact_sums");
}

template <typename T>
void square_pair_exact_sums(const T* x, const T* y, int64_t n, int64_t* acc) {
  launch_exact_sums<2>(SquarePairTerms<T>{x, y}, n, acc, "cuda::square_pair_exact_sums");
}

template <typename T>
void lars_finish(const int64_t* acc, double trust_coefficient, double weight_decay, double eps, T* scale) {
  launch_finish<2>(acc, LarsFinish<T>{trust_coefficient, weight_decay, eps, scale}, "cuda::lars_finish");
}

// ---- instantiations: every rule in f32 and f64 on dense state, in f32 on 8-bit and 4-bit state

#define OCTET_DENSE_UPDATE(RULE, T) \
  template void dense_update<RULE<T>, T>(const RULE<T>&, T*, const T*, int64_t, const DenseView<T>&, const T*);
#define OCTET_RULE(RULE)                                                                                           \
  OCTET_DENSE_UPDATE(RULE, float)                                                                                  \
  OCTET_DENSE_UPDATE(RULE, double)                                                                                 \
  template void blockwise_update<RULE<float>>(const RULE<float>&, float*, const float*, int64_t, const QuantView&, \
                                              const float*);                                                       \
  template void lowbit_update<RULE<float>>(const RULE<float>&, float*, const float*, int64_t, const LowBitView&,   \
                                           const float*);
OCTET_RULE(SgdRule)
OCTET_RULE(AdamRule)
OCTET_RULE(RmspropRule)
OCTET_RULE(AdagradRule)
OCTET_RULE(LionRule)
OCTET_RULE(LambRule)
OCTET_RULE(LarsRule)
#undef OCTET_RULE
#undef OCTET_DENSE_UPDATE

#define OCTET_SUMS(T)                                                                                               \
  template void lamb_exact_sums<T>(const LambRule<T>&, const T*, const T*, int64_t, const DenseView<T>&, int64_t*); \
  template void lamb_finish<T>(const int64_t*, double, bool, T*);                                                   \
  template void square_exact_sums<T>(const T*, int64_t, int64_t*);                                                  \
  template void square_pair_exact_sums<T>(const T*, const T*, int64_t, int64_t*);                                   \
  template void lars_finish<T>(const int64_t*, double, double, double, T*);
OCTET_SUMS(float)
OCTET_SUMS(double)
#undef OCTET_SUMS

}  // namespace octet::cuda
