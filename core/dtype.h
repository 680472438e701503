// Element types and the bfloat16 storage type.
//   DType t = DType::f32;  dtype_size(t) == 4;  dtype_name(t) == "f32";
//   OCTET_DISPATCH_FLOAT(t, "relu", [&]<typename T>() { kernel<T>(...); });
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/error.h"

namespace octet {

enum class DType : uint8_t { f32, f64, bf16, i8, u8, i32, i64 };

// bfloat16: the upper 16 bits of an IEEE float32. Conversion from float rounds to nearest even
// (as PyTorch and the hardware do); NaN stays NaN.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT(google-explicit-constructor): numeric conversion
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = round_bits(u);
  }
  // f32 bits u rounded to nearest even, a NaN kept quiet: a select rather than a branch, for the
  // CPU loops that convert and must vectorize (cpu::bf16_bits is this).
  static constexpr uint16_t round_bits(uint32_t u) {
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  operator float() const {  // NOLINT(google-explicit-constructor)
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
static_assert(sizeof(BFloat16) == 2);

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::i8:
      return 1;
    case DType::u8:
      return 1;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::i8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
};
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls fn.template operator()<T>() with T the C++ type of `t`. The FLOAT variant covers the
// types the math kernels compute in (f32, f64); other dtypes are an octet::Error naming `op`.
template <typename Fn>
decltype(auto) dispatch_float(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    default:
      OCTET_FAIL(op, ": expected dtype f32 or f64, got ", t);
  }
}

// The float types activations are stored in: f32, f64, and bf16 (autocast's activations, whose
// kernels load bf16, compute in opmath_t<T> = f32 and round once on the store, as PyTorch's).
template <typename Fn>
decltype(auto) dispatch_activation(DType t, std::string_view op, Fn&& fn) {
  if (t == DType::bf16) return fn.template operator()<BFloat16>();
  return dispatch_float(t, op, std::forward<Fn>(fn));
}

// The type a kernel computes in for storage type T: f32 for bf16, T itself otherwise.
template <typename T>
using opmath_t = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;

// opmath_t's dtype: what a kernel computes in, and keeps statistics in, for activations of dtype t.
constexpr DType opmath_dtype(DType t) { return t == DType::bf16 ? DType::f32 : t; }

template <typename Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::bf16:
      return fn.template operator()<BFloat16>();
    case DType::i8:
      return fn.template operator()<int8_t>();
    case DType::u8:
      return fn.template operator()<uint8_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
  }
  OCTET_FAIL("unknown dtype ", static_cast<int>(t));
}

// Numeric (non-bf16) types for arithmetic kernels that also work on integers.
template <typename Fn>
decltype(auto) dispatch_numeric(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::i8:
      return fn.template operator()<int8_t>();
    case DType::u8:
      return fn.template operator()<uint8_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    default:
      OCTET_FAIL(op, ": dtype ", t, " is not supported (cast to f32 first)");
  }
}

}  // namespace octet
