// CPU elementwise kernels: copy/cast, fill, random fills, unary, binary, compare, where.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu/bf16.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/philox.h"
#include "core/cpu/vec_exp.h"
#include "core/generator.h"
#include "core/memory_format.h"

namespace octet::cpu {

namespace {

template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Out-of-range and NaN float -> int is undefined in C++; saturate instead.
    if (std::isnan(v)) return 0;
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Runs f over out (contiguous or not) and one input broadcast to it.
template <typename TO, typename TI, typename F>
void map1(const Tensor& out, const Tensor& in, F f) {
  TO* o = static_cast<TO*>(out.raw_data());
  const TI* a = static_cast<const TI*>(in.raw_data());
  strided_loop<2>(out.shape(), {out.strides(), bstrides(in, out.shape())},
                  [&](int64_t n, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st) {
                    TO* po = o + off[0];
                    const TI* pa = a + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j]);
                    } else {
                      for (int64_t j = 0; j < n; ++j) po[j * st[0]] = f(pa[j * st[1]]);
                    }
                  });
}

template <typename TO, typename TA, typename TB, typename F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  TO* o = static_cast<TO*>(out.raw_data());
  const TA* pa0 = static_cast<const TA*>(a.raw_data());
  const TB* pb0 = static_cast<const TB*>(b.raw_data());
  strided_loop<3>(out.shape(), {out.strides(), bstrides(a, out.shape()), bstrides(b, out.shape())},
                  [&](int64_t n, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st) {
                    TO* po = o + off[0];
                    const TA* pa = pa0 + off[1];
                    const TB* pb = pb0 + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j], pb[j]);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const TB s = *pb;
                      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j], s);
                    } else {
                      for (int64_t j = 0; j < n; ++j) po[j * st[0]] = f(pa[j * st[1]], pb[j * st[2]]);
                    }
                  });
}

template <typename T>
T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
}
template <typename T>
T gelu_erf_grad(T x) {
  T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
  return cdf + x * pdf;
}
template <typename T>
constexpr T kGeluC = T(0.7978845608028654);  // sqrt(2/pi)
template <typename T>
T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + std::tanh(kGeluC<T> * (x + T(0.044715) * x * x * x)));
}
template <typename T>
T gelu_tanh_grad(T x) {
  T u = kGeluC<T> * (x + T(0.044715) * x * x * x);
  T t = std::tanh(u);
  T du = kGeluC<T> * (T(1) + T(3 * 0.044715) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

template <typename T>
T sigmoid(T x) {
  // Split by sign so exp never overflows.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

// The numeric dtypes of dispatch_numeric and bf16: arithmetic on integers and floats, bf16 loaded
// into f32 (opmath_t) and rounded once on the store.
template <typename Fn>
void dispatch_arith(DType t, std::string_view op, Fn&& fn) {
  if (t == DType::bf16) return fn.template operator()<BFloat16>();
  dispatch_numeric(t, op, std::forward<Fn>(fn));
}

// exp(extra - c * x * x) for c = 1 or 1/2 (and small extra) to a few ulp where x * x is large: x split as hi + lo with hi
// keeping 12 significant bits, so that c * hi * hi is exact and only the small rest is rounded
// (exp(-x * x) straight from the rounded square loses ~x^2 ulp).
OCTET_SIMD_INLINE float vec_exp_neg_square(float x, float c, float extra) {
  const float hi = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xfffff000u), lo = x - hi;
  return vec_exp(-c * (hi * hi)) * vec_exp(extra - c * (lo * (x + hi)));
}

// The standard normal CDF, 0.5 * erfc(-x / sqrt 2), for loops that vectorize (GELU's f32 and bf16
// paths): erfc by Numerical Recipes' Chebyshev fit (fractional error below 1.2e-7 on the whole
// line) and vec_exp, with no libm call and no branch, so every ISA gives the same bits; within a
// few f32 ulp of the f64 erfc (tests/core/test_elementwise.cpp).
OCTET_SIMD_INLINE float vec_normal_cdf(float x) {
  const float z = -x * static_cast<float>(M_SQRT1_2);
  const float a = z < 0.0f ? -z : z;
  const float t = 1.0f / (1.0f + 0.5f * a);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  // erfc(a) = t exp(-a^2 - 1.26551223 + t q), with a^2 = x^2 / 2 from x itself (a = |x| / sqrt 2
  // is rounded; its square would carry that error times a^2)
  const float e = t * vec_exp_neg_square(x, 0.5f, t * q - 1.26551223f);
  return 0.5f * (z >= 0.0f ? e : 2.0f - e);
}

// GELU (erf form) and its derivative over dense f32 or bf16 tensors, computed in f32.
template <typename T>
void gelu_dense(bool grad, const T* x, T* out, int64_t n) {
  parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    simd_dispatch([=] {
      constexpr float kPdf = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);  // 1 / sqrt(2 pi)
      if (grad) {
        for (int64_t i = b; i < e; ++i) {
          const float v = static_cast<float>(x[i]);
          out[i] = static_cast<T>(vec_normal_cdf(v) + v * (vec_exp_neg_square(v, 0.5f, 0.0f) * kPdf));
        }
      } else {
        for (int64_t i = b; i < e; ++i) {
          const float v = static_cast<float>(x[i]);
          out[i] = static_cast<T>(v * vec_normal_cdf(v));
        }
      }
    });
  });
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  check_cpu("copy_", {dst, src});
  // f32 <-> bf16 between tensors dense in one layout (contiguous or channels-last): the vectorized
  // conversion of core/cpu/bf16.h, the same bits as convert<>.
  const bool dense =
      dst.shape() == src.shape() && dst.strides() == src.strides() && (dst.is_contiguous() || is_channels_last(dst));
  if (dense && dst.dtype() == DType::bf16 && src.dtype() == DType::f32)
    return round_to_bf16(src.data<float>(), dst.data<BFloat16>(), dst.numel());
  if (dense && dst.dtype() == DType::f32 && src.dtype() == DType::bf16)
    return widen_bf16(src.data<BFloat16>(), dst.data<float>(), dst.numel());
  dispatch_all(dst.dtype(), [&]<typename TO>() {
    dispatch_all(src.dtype(), [&]<typename TI>() { map1<TO, TI>(dst, src, [](TI v) { return convert<TO>(v); }); });
  });
}

void fill(const Tensor& dst, double value) {
  check_cpu("fill_", {dst});
  dispatch_all(dst.dtype(), [&]<typename T>() {
    T v = convert<T>(value);
    T* o = static_cast<T*>(dst.raw_data());
    strided_loop<1>(dst.shape(), {dst.strides()},
                    [&](int64_t n, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st) {
                      for (int64_t j = 0; j < n; ++j) o[off[0] + j * st[0]] = v;
                    });
  });
}

// Element i's value depends only on (seed, offset + i): any thread split gives the same tensor.
// f(w, dbl) makes an element's value from its four Philox words (philox_at's), drawn 256 at a
// time by the vectorized Philox (core/cpu/philox.h: ~5x the one-counter function in a loop).
template <typename F>
static void random_fill(const Tensor& dst, const char* op, uint64_t seed, uint64_t offset, F f) {
  check_cpu(op, {dst});
  OCTET_CHECK(dst.is_contiguous(), op, ": kernel requires a contiguous tensor");
  dispatch_float(dst.dtype(), op, [&]<typename T>() {
    T* o = dst.data<T>();
    parallel_for(0, dst.numel(), 16384, [&](int64_t b, int64_t e) {
      constexpr int64_t kRun = 256;
      uint32_t words[4 * kRun];
      for (int64_t r = b; r < e; r += kRun) {
        const int64_t n = std::min(kRun, e - r);
        philox_words(seed, offset + static_cast<uint64_t>(r), n, words);
        for (int64_t i = 0; i < n; ++i) o[r + i] = static_cast<T>(f(words + 4 * i, std::is_same_v<T, double>));
      }
    });
  });
}

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  random_fill(dst, "uniform_", seed, offset, [=](const uint32_t* w, bool dbl) {
    double u = dbl ? uniform_double(w[0], w[1]) : static_cast<double>(uniform_float(w[0]));
    double v = low + (high - low) * u;
    return v < high ? v : low;  // keep [low, high) after rounding
  });
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  random_fill(dst, "normal_", seed, offset, [=](const uint32_t* w, bool) {
    // Box-Muller on (0, 1] x [0, 1).
    double u1 = 1.0 - uniform_double(w[0], w[1]);
    double u2 = uniform_double(w[2], w[3]);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  check_cpu("unary", {x, out});
  // GELU on dense f32 and bf16 (a transformer's MLP): the vectorized CDF, not a libm erf per value.
  const bool dense = x.shape() == out.shape() && x.strides() == out.strides() && x.dtype() == out.dtype() &&
                     (x.is_contiguous() || is_channels_last(x));
  if ((op == UnaryOp::gelu || op == UnaryOp::gelu_grad) && dense) {
    if (x.dtype() == DType::f32)
      return gelu_dense(op == UnaryOp::gelu_grad, x.data<float>(), out.data<float>(), x.numel());
    if (x.dtype() == DType::bf16)
      return gelu_dense(op == UnaryOp::gelu_grad, x.data<BFloat16>(), out.data<BFloat16>(), x.numel());
  }
  if (op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::mul_scalar || op == UnaryOp::add_scalar) {
    dispatch_arith(x.dtype(), "unary", [&]<typename T>() {
      using C = opmath_t<T>;
      switch (op) {
        case UnaryOp::neg:
          return map1<T, T>(out, x, [](C v) { return static_cast<C>(-v); });
        case UnaryOp::abs:
          return map1<T, T>(out, x, [](C v) { return static_cast<C>(v < 0 ? -v : v); });
        case UnaryOp::mul_scalar:
          return map1<T, T>(out, x, [s = static_cast<C>(a)](C v) { return static_cast<C>(v * s); });
        default:
          return map1<T, T>(out, x, [s = static_cast<C>(a)](C v) { return static_cast<C>(v + s); });
      }
    });
    return;
  }
  dispatch_activation(x.dtype(), "unary", [&]<typename T>() {
    using C = opmath_t<T>;
    const C ta = static_cast<C>(a), tb = static_cast<C>(b);
    switch (op) {
      case UnaryOp::exp:
        return map1<T, T>(out, x, [](C v) { return std::exp(v); });
      case UnaryOp::log:
        return map1<T, T>(out, x, [](C v) { return std::log(v); });
      case UnaryOp::sqrt:
        return map1<T, T>(out, x, [](C v) { return std::sqrt(v); });
      case UnaryOp::rsqrt:
        return map1<T, T>(out, x, [](C v) { return C(1) / std::sqrt(v); });
      case UnaryOp::sign:
        return map1<T, T>(out, x, [](C v) { return static_cast<C>((v > 0) - (v < 0)); });
      case UnaryOp::relu:
        return map1<T, T>(out, x, [](C v) { return v > 0 ? v : C(0); });
      case UnaryOp::relu6:
        return map1<T, T>(out, x, [](C v) { return v > 0 ? (v < 6 ? v : C(6)) : C(0); });
      case UnaryOp::sigmoid:
        return map1<T, T>(out, x, [](C v) { return sigmoid(v); });
      case UnaryOp::tanh:
        return map1<T, T>(out, x, [](C v) { return std::tanh(v); });
      case UnaryOp::gelu:
        return map1<T, T>(out, x, [](C v) { return gelu_erf(v); });
      case UnaryOp::gelu_tanh:
        return map1<T, T>(out, x, [](C v) { return gelu_tanh(v); });
      case UnaryOp::gelu_grad:
        return map1<T, T>(out, x, [](C v) { return gelu_erf_grad(v); });
      case UnaryOp::gelu_tanh_grad:
        return map1<T, T>(out, x, [](C v) { return gelu_tanh_grad(v); });
      case UnaryOp::reciprocal:
        return map1<T, T>(out, x, [](C v) { return C(1) / v; });
      case UnaryOp::square:
        return map1<T, T>(out, x, [](C v) { return v * v; });
      case UnaryOp::clamp:
        return map1<T, T>(out, x, [=](C v) {
          if (std::isnan(v)) return v;
          if (!std::isnan(ta) && v < ta) v = ta;
          if (!std::isnan(tb) && v > tb) v = tb;
          return v;
        });
      case UnaryOp::pow_scalar:
        if (a == 2.0) return map1<T, T>(out, x, [](C v) { return v * v; });
        return map1<T, T>(out, x, [ta](C v) { return std::pow(v, ta); });
      default:
        OCTET_FAIL("unary: unhandled op ", static_cast<int>(op));
    }
  });
}

namespace {
// out = op(a, b) stored as TO, computed in opmath_t<TO> from a's TA and b's TB values.
template <typename TO, typename TA, typename TB>
void binary_as(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = opmath_t<TO>;
  switch (op) {
    case BinaryOp::add:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return static_cast<C>(x + y); });
    case BinaryOp::sub:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return static_cast<C>(x - y); });
    case BinaryOp::mul:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return static_cast<C>(x * y); });
    case BinaryOp::div:
      if constexpr (std::is_integral_v<TO>) {
        // Kernel bodies run on worker threads and must not throw: look for a zero first.
        std::atomic<bool> has_zero{false};
        const TB* pb = static_cast<const TB*>(b.raw_data());
        strided_loop<1>(b.shape(), {b.strides()},
                        [&](int64_t n, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st) {
                          for (int64_t j = 0; j < n; ++j)
                            if (pb[off[0] + j * st[0]] == 0) has_zero = true;
                        });
        OCTET_CHECK(!has_zero, "div: integer division by zero");
        return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return static_cast<C>(x / y); });
      } else {
        return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return x / y; });
      }
    case BinaryOp::pow:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return static_cast<C>(std::pow(x, y)); });
    case BinaryOp::maximum:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return (x != x || x > y) ? x : y; });
    case BinaryOp::minimum:
      return map2<TO, TA, TB>(out, a, b, [](C x, C y) { return (x != x || x < y) ? x : y; });
    case BinaryOp::relu_grad:
      return map2<TO, TA, TB>(out, a, b, [](C g, C y) { return y > C(0) ? g : C(0); });
    case BinaryOp::relu6_grad:
      return map2<TO, TA, TB>(out, a, b, [](C g, C x) { return x > C(0) && x < C(6) ? g : C(0); });
  }
}
}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cpu("binary", {a, b, out});
  // Mixed f32 and bf16, computed in f32 (autocast's activations): bf16 with f32 to f32, as PyTorch
  // promotes; f32 with f32 to bf16, an f32 sum rounded once (a bf16 product's bias).
  const DType f32 = DType::f32, bf16 = DType::bf16;
  if (a.dtype() == bf16 && b.dtype() == f32 && out.dtype() == f32)
    return binary_as<float, BFloat16, float>(op, a, b, out);
  if (a.dtype() == f32 && b.dtype() == bf16 && out.dtype() == f32)
    return binary_as<float, float, BFloat16>(op, a, b, out);
  if (a.dtype() == f32 && b.dtype() == f32 && out.dtype() == bf16)
    return binary_as<BFloat16, float, float>(op, a, b, out);
  OCTET_CHECK(a.dtype() == b.dtype() && out.dtype() == a.dtype(), "binary: dtypes ", a.dtype(), " and ", b.dtype(),
              " to ", out.dtype(), " (mixed only as bf16 with f32 to f32, or f32 with f32 to bf16)");
  dispatch_arith(a.dtype(), "binary", [&]<typename T>() { binary_as<T, T, T>(op, a, b, out); });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cpu("compare", {a, b, out});
  dispatch_arith(a.dtype(), "compare", [&]<typename T>() {
    using C = opmath_t<T>;
    auto run = [&](auto f) { map2<uint8_t, T, T>(out, a, b, [f](C x, C y) { return static_cast<uint8_t>(f(x, y)); }); };
    switch (op) {
      case CompareOp::eq:
        return run([](C x, C y) { return x == y; });
      case CompareOp::ne:
        return run([](C x, C y) { return x != y; });
      case CompareOp::lt:
        return run([](C x, C y) { return x < y; });
      case CompareOp::le:
        return run([](C x, C y) { return x <= y; });
      case CompareOp::gt:
        return run([](C x, C y) { return x > y; });
      case CompareOp::ge:
        return run([](C x, C y) { return x >= y; });
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cpu("where", {cond, a, b, out});
  dispatch_all(a.dtype(), [&]<typename T>() {
    T* o = static_cast<T*>(out.raw_data());
    const uint8_t* pc = static_cast<const uint8_t*>(cond.raw_data());
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    const Shape& s = out.shape();
    strided_loop<4>(s, {out.strides(), bstrides(cond, s), bstrides(a, s), bstrides(b, s)},
                    [&](int64_t n, const std::array<int64_t, 4>& off, const std::array<int64_t, 4>& st) {
                      for (int64_t j = 0; j < n; ++j)
                        o[off[0] + j * st[0]] =
                            pc[off[1] + j * st[1]] ? pa[off[2] + j * st[2]] : pb[off[3] + j * st[3]];
                    });
  });
}

}  // namespace octet::cpu
