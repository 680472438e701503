#include "core/cpu/bf16.h"

#include <bit>

#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/memory_format.h"
#include "core/parallel.h"

namespace octet::cpu {

namespace {

constexpr int64_t kGrain = int64_t{1} << 15;

}  // namespace

void round_to_bf16(const float* x, BFloat16* y, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(y);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    simd_dispatch([=] {
      for (int64_t i = b; i < e; ++i) out[i] = bf16_bits(std::bit_cast<uint32_t>(x[i]));
    });
  });
}

void widen_bf16(const BFloat16* x, float* y, int64_t n) {
  const auto* in = reinterpret_cast<const uint16_t*>(x);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    simd_dispatch([=] {
      for (int64_t i = b; i < e; ++i) y[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
    });
  });
}

Tensor empty_f32_like(const Tensor& t) { return empty_in_format_of(t, t.shape(), TensorOptions(DType::f32)); }

Tensor widened_to_f32(const Tensor& t) {
  Tensor out = empty_f32_like(t);
  copy(out, t);
  return out;
}

}  // namespace octet::cpu
