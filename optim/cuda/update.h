// Launchers of the optimizer kernels (optim/cuda/update.cu), reached from optim/cuda/device_update.cpp,
// which finds the device memory of a parameter's state. Pure C++ declarations (no CUDA headers);
// raw device pointers; everything runs on the current stream and never waits for the device.
//   DenseView<float> v;  v.buf[0] = m;  v.buf[1] = v2;  v.count = 2;
//   dense_update(adam_rule, p, g, n, v, nullptr);
#pragma once

#include <cstdint>

#include "core/exact_digits.h"
#include "optim/update_rules.h"
#include "quant/cuda/blockwise.h"

namespace octet::cuda {

// Dense state buffers of T on the device, in the order of the rule's s[].
template <typename T>
struct DenseView {
  T* buf[kMaxStateBuffers] = {};
  int count = 0;
};

// 8-bit block-wise state on the device: per buffer, u8 codes [n], f32 absmax [ceil(n / block_size)]
// and the map's device tables.
struct QuantView {
  uint8_t* codes[kMaxStateBuffers] = {};
  float* absmax[kMaxStateBuffers] = {};
  const quant::cuda::DeviceTables* tables[kMaxStateBuffers] = {};
  int count = 0;
  int64_t block_size = 0;  // a power of two in [64, kMaxQuantBlock]
};
inline constexpr int64_t kMaxQuantBlock = 4096;

// 4-bit state on the device (optim/lowbit_state.h): per buffer, codes packed two per byte
// ([ceil(n / 2)], element 2i in the high nibble), the map's 16 values and 15 thresholds, and
// either one absmax per block of kLowBitBlock (block-wise) or, rank-1, the maxima of each of the
// `dims` dims; a rank-1 buffer also takes scratch for the update: its new values [n] and new
// maxima (zeroed), which lowbit_encode_rank1 turns into codes once the update is done. A sharded
// state holds elements [offset, offset + n) of the flattened parameter: its element i has the
// rank-1 indices of element offset + i.
inline constexpr int64_t kLowBitBlock = 128;
inline constexpr int kMaxRank1Dims = 8;
struct LowBitView {
  uint8_t* codes[kMaxStateBuffers] = {};
  float* absmax[kMaxStateBuffers] = {};  // block-wise buffers; null for rank-1 ones
  const float* maxima[kMaxStateBuffers][kMaxRank1Dims] = {};
  float* fresh[kMaxStateBuffers] = {};
  float* new_maxima[kMaxStateBuffers][kMaxRank1Dims] = {};
  float map[kMaxStateBuffers][16] = {};
  float thresholds[kMaxStateBuffers][15] = {};
  int count = 0;
  int dims = 0;
  int64_t extents[kMaxRank1Dims] = {};
  int64_t offset = 0;
};

// ---- updates: `rule` over p, g (n elements) and the state. For Rule::kScaled rules, `scale` may
// point at device memory holding the factor (set_scale); null keeps the rule's own.
template <typename Rule, typename T>
void dense_update(const Rule& rule, T* p, const T* g, int64_t n, const DenseView<T>& state, const T* scale);
// One thread block per quantization block: dequantize in registers, update in f32, the block's new
// absmax, requantize; codes and absmax are rewritten in place.
template <typename Rule>
void blockwise_update(const Rule& rule, float* p, const float* g, int64_t n, const QuantView& state,
                      const float* scale);

// One warp per block of kLowBitBlock elements: decode, update in f32, and for block-wise buffers
// the block's new absmax and the codes; a rank-1 buffer's new values go to its `fresh` scratch
// and their maxima to `new_maxima` (atomic maxima of the bits: exact, in any order).
template <typename Rule>
void lowbit_update(const Rule& rule, float* p, const float* g, int64_t n, const LowBitView& state,
                   const float* scale);
// After lowbit_update: the codes of every rank-1 buffer from its new values and new maxima.
void lowbit_encode_rank1(const LowBitView& state, int64_t n);

// ---- exact sums (layer-wise optimizers, clip_grad_norm), the CPU's (optim/cpu/layerwise.h): units
// of kSumUnit elements from the first, each unit's terms added in double in element order by one
// thread, the units' sums added exactly (core/exact_digits.h, 64-bit atomics: any order gives the
// same digits) into an accumulator `acc` of terms x kExactWords int64 in device memory ([term]
// [digits..., flags], as ExactSum::from_words reads them), which the caller zeroes; each call adds
// to it. So a sum has the CPU's bits, and a sum over ranges that start on units is the whole's.
inline constexpr int kExactWords = exact::kDigits + 1;  // ExactSum::kWords

// LAMB's ||p||^2 and ||u||^2 (rule.terms), from the old state; acc: 2 sums.
template <typename T>
void lamb_exact_sums(const LambRule<T>& rule, const T* p, const T* g, int64_t n, const DenseView<T>& state,
                     int64_t* acc);
void lamb_exact_sums(const LambRule<float>& rule, const float* p, const float* g, int64_t n, const QuantView& state,
                     int64_t* acc);
// The same over 4-bit state (decoded as lowbit_update decodes it; the view's scratch is not used).
void lamb_exact_sums(const LambRule<float>& rule, const float* p, const float* g, int64_t n, const LowBitView& state,
                     int64_t* acc);
// *step = T(lr * lamb_ratio(sums, trust_clip)) from acc's 2 sums.
template <typename T>
void lamb_finish(const int64_t* acc, double lr, bool trust_clip, T* step);

// sum x^2 (acc: 1 sum), and sum x^2, sum of y's finite squares (acc: 2 sums).
template <typename T>
void square_exact_sums(const T* x, int64_t n, int64_t* acc);
template <typename T>
void square_pair_exact_sums(const T* x, const T* y, int64_t n, int64_t* acc);
// *scale = T(lars_local_lr(sums, ...)) from acc's 2 sums.
template <typename T>
void lars_finish(const int64_t* acc, double trust_coefficient, double weight_decay, double eps, T* scale);

}  // namespace octet::cuda
