// Eight double lanes for sums that must come out the same on every ISA path (core/cpu/isa.h):
// element i of a run goes to lane i % 8, and the caller combines the lanes in a fixed order. Held
// as two 4-lane halves (GCC vector types): on AVX2 each half is one ymm register. A single 64-byte
// vector type made GCC keep the lanes on the stack and reload them every step (batch norm's and
// the INT8 cosine sums' loops ran 2-3x slower). Internal to the CPU kernels; call these only from
// code compiled per ISA (simd_dispatch), where they inline.
//   cpu::Lanes8 s;
//   for (; i + 8 <= n; i += 8) s += cpu::Lanes8::load(x + i);
//   double total = s.pairwise_total();
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cpu/isa.h"
#include "core/dtype.h"

// The helpers pass vector types by value; they are internal and always inlined, so GCC's note that
// their ABI would differ between ISAs does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace octet::cpu {

using V4d = double __attribute__((vector_size(32)));
using V4f = float __attribute__((vector_size(16)));

struct Lanes8 {
  V4d lo = {}, hi = {};

  // 8 floats, doubles or bf16 values from p, widened to double (exactly).
  template <typename T>
  OCTET_SIMD_INLINE static Lanes8 load(const T* p) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, BFloat16>);
    if constexpr (std::is_same_v<T, BFloat16>) {
      using V4h = uint16_t __attribute__((vector_size(8)));
      using V4u = uint32_t __attribute__((vector_size(16)));
      V4h a, b;
      std::memcpy(&a, p, sizeof a);
      std::memcpy(&b, p + 4, sizeof b);
      const V4u ua = __builtin_convertvector(a, V4u) << 16, ub = __builtin_convertvector(b, V4u) << 16;
      V4f fa, fb;
      std::memcpy(&fa, &ua, sizeof fa);
      std::memcpy(&fb, &ub, sizeof fb);
      return widen(fa, fb);
    } else if constexpr (std::is_same_v<T, float>) {
      V4f a, b;
      std::memcpy(&a, p, sizeof a);
      std::memcpy(&b, p + 4, sizeof b);
      return {__builtin_convertvector(a, V4d), __builtin_convertvector(b, V4d)};
    } else {
      Lanes8 r;
      std::memcpy(&r.lo, p, sizeof r.lo);
      std::memcpy(&r.hi, p + 4, sizeof r.hi);
      return r;
    }
  }
  // Two 4-float halves, widened to double (exactly). Keep computed floats in halves: an 8-float
  // vector split in two went through the stack.
  OCTET_SIMD_INLINE static Lanes8 widen(V4f lo, V4f hi) {
    return {__builtin_convertvector(lo, V4d), __builtin_convertvector(hi, V4d)};
  }

  OCTET_SIMD_INLINE Lanes8 operator+(const Lanes8& o) const { return {lo + o.lo, hi + o.hi}; }
  OCTET_SIMD_INLINE Lanes8 operator-(double v) const { return {lo - v, hi - v}; }
  OCTET_SIMD_INLINE Lanes8 operator*(const Lanes8& o) const { return {lo * o.lo, hi * o.hi}; }
  OCTET_SIMD_INLINE Lanes8& operator+=(const Lanes8& o) {
    lo += o.lo, hi += o.hi;
    return *this;
  }
  OCTET_SIMD_INLINE double operator[](int l) const { return l < 4 ? lo[l] : hi[l - 4]; }

  // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
  OCTET_SIMD_INLINE double pairwise_total() const {
    return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
  }
};

}  // namespace octet::cpu
