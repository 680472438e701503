// CUDA elementwise kernels: copy/cast, fill, random fills, unary, binary, compare, where. They
// mirror core/cpu/elementwise.cpp formula for formula (NaN rules, integer rules, error checks);
// only transcendental functions (exp, log, tanh, erf, pow, cos) may differ from the CPU's libm in
// the last bits. Every op runs through launch_elementwise (device_util.cuh): one thread per
// output element, a dense fast path when every operand is contiguous, broadcasting by stride 0.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cuda/device_util.cuh"
#include "core/cuda/kernels.h"
#include "core/generator.h"

namespace octet::cuda {

namespace {

// ---------------------------------------------------------------- bodies

// out = f(in), operand 0 the output.
template <typename TO, typename TI, typename F>
struct Map1 {
  TO* out;
  const TI* in;
  F f;
  __device__ void operator()(const Offsets<2>& off) const { out[off.v[0]] = f(in[off.v[1]]); }
};

template <typename TO, typename TA, typename TB, typename F>
struct Map2 {
  TO* out;
  const TA* a;
  const TB* b;
  F f;
  __device__ void operator()(const Offsets<3>& off) const { out[off.v[0]] = f(a[off.v[1]], b[off.v[2]]); }
};

template <typename TO, typename TI>
struct Convert {
  __device__ TO operator()(TI v) const { return convert<TO>(v); }
};

template <typename T>
struct Fill {
  T* out;
  T value;
  __device__ void operator()(const Offsets<1>& off) const { out[off.v[0]] = value; }
};

template <typename T>
struct Where {
  T* out;
  const uint8_t* cond;
  const T* a;
  const T* b;
  __device__ void operator()(const Offsets<4>& off) const {
    out[off.v[0]] = cond[off.v[1]] ? a[off.v[2]] : b[off.v[3]];
  }
};

// Records the first offset of b holding zero (integer division).
template <typename T>
struct FindZero {
  const T* b;
  unsigned long long* hit;
  __device__ void operator()(const Offsets<1>& off) const {
    if (b[off.v[0]] == T(0)) atomicMin(hit, static_cast<unsigned long long>(off.v[0]));
  }
};

// ---------------------------------------------------------------- unary functors

template <typename T>
struct Neg {
  __device__ T operator()(T v) const { return static_cast<T>(-v); }
};
template <typename T>
struct Abs {
  __device__ T operator()(T v) const {
    if constexpr (std::is_unsigned_v<T>) {
      return v;
    } else {
      return static_cast<T>(v < 0 ? -v : v);
    }
  }
};
template <typename T>
struct MulScalar {
  T s;
  __device__ T operator()(T v) const { return static_cast<T>(v * s); }
};
template <typename T>
struct AddScalar {
  T s;
  __device__ T operator()(T v) const { return static_cast<T>(v + s); }
};
template <typename T>
struct Exp {
  __device__ T operator()(T v) const { return dev_exp(v); }
};
template <typename T>
struct Log {
  __device__ T operator()(T v) const { return dev_log(v); }
};
template <typename T>
struct Sqrt {
  __device__ T operator()(T v) const { return dev_sqrt(v); }
};
template <typename T>
struct Rsqrt {  // two correctly rounded steps like the CPU, not the approximate rsqrt instruction
  __device__ T operator()(T v) const { return T(1) / dev_sqrt(v); }
};
template <typename T>
struct Sign {
  __device__ T operator()(T v) const { return static_cast<T>((v > 0) - (v < 0)); }
};
template <typename T>
struct Relu {
  __device__ T operator()(T v) const { return v > 0 ? v : T(0); }
};
template <typename T>
struct Relu6 {
  __device__ T operator()(T v) const { return v > 0 ? (v < 6 ? v : T(6)) : T(0); }
};
template <typename T>
struct Sigmoid {
  __device__ T operator()(T v) const {
    if (v >= 0) return T(1) / (T(1) + dev_exp(-v));  // split by sign so exp never overflows
    T e = dev_exp(v);
    return e / (T(1) + e);
  }
};
template <typename T>
struct Tanh {
  __device__ T operator()(T v) const { return dev_tanh(v); }
};
template <typename T>
struct Gelu {
  __device__ T operator()(T x) const { return T(0.5) * x * (T(1) + dev_erf(x * T(M_SQRT1_2))); }
};
template <typename T>
struct GeluGrad {
  __device__ T operator()(T x) const {
    T cdf = T(0.5) * (T(1) + dev_erf(x * T(M_SQRT1_2)));
    T pdf = dev_exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return cdf + x * pdf;
  }
};
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
template <typename T>
struct GeluTanh {
  __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + dev_tanh(T(kGeluC) * (x + T(0.044715) * x * x * x)));
  }
};
template <typename T>
struct GeluTanhGrad {
  __device__ T operator()(T x) const {
    T u = T(kGeluC) * (x + T(0.044715) * x * x * x);
    T t = dev_tanh(u);
    T du = T(kGeluC) * (T(1) + T(3 * 0.044715) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
  }
};
template <typename T>
struct Reciprocal {
  __device__ T operator()(T v) const { return T(1) / v; }
};
template <typename T>
struct Square {
  __device__ T operator()(T v) const { return v * v; }
};
// A NaN bound is no bound; a NaN input stays NaN.
template <typename T>
struct Clamp {
  T lo, hi;
  bool has_lo, has_hi;
  __device__ T operator()(T v) const {
    if (v != v) return v;
    if (has_lo && v < lo) v = lo;
    if (has_hi && v > hi) v = hi;
    return v;
  }
};
template <typename T>
struct PowScalar {
  T e;
  __device__ T operator()(T v) const { return dev_pow(v, e); }
};

// ---------------------------------------------------------------- binary functors

template <typename T>
struct Add {
  __device__ T operator()(T x, T y) const { return static_cast<T>(x + y); }
};
template <typename T>
struct Sub {
  __device__ T operator()(T x, T y) const { return static_cast<T>(x - y); }
};
template <typename T>
struct Mul {
  __device__ T operator()(T x, T y) const { return static_cast<T>(x * y); }
};
template <typename T>
struct Div {  // integer divisors were checked for zero first
  __device__ T operator()(T x, T y) const { return static_cast<T>(x / y); }
};
// The CPU computes integer powers as static_cast<T>(std::pow(double, double)), which is exact
// whenever the result is representable; squaring in 64 bits gives those same values (and wraps
// where the CPU's cast is undefined). A negative exponent leaves |x| <= 1 nonzero, 0 -> max.
template <typename T>
struct Pow {
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      return dev_pow(x, y);
    } else {
      if constexpr (std::is_signed_v<T>) {
        if (y < 0) {
          if (x == 1) return T(1);
          if (x == -1) return static_cast<T>((y & 1) ? -1 : 1);
          if (x == 0) return std::numeric_limits<T>::max();  // 1/0 = inf, saturated
          return T(0);
        }
      }
      uint64_t result = 1, base = static_cast<uint64_t>(static_cast<int64_t>(x));
      for (uint64_t e = static_cast<uint64_t>(y); e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(static_cast<int64_t>(result));
    }
  }
};
// NaN on either side wins, as on the CPU.
template <typename T>
struct Maximum {
  __device__ T operator()(T x, T y) const { return (x != x || x > y) ? x : y; }
};
template <typename T>
struct Minimum {
  __device__ T operator()(T x, T y) const { return (x != x || x < y) ? x : y; }
};
template <typename T>
struct ReluGrad {
  __device__ T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};
template <typename T>
struct Relu6Grad {
  __device__ T operator()(T g, T x) const { return x > T(0) && x < T(6) ? g : T(0); }
};

// ---------------------------------------------------------------- compare functors

template <typename T, CompareOp kOp>
struct Compare {
  __device__ uint8_t operator()(T x, T y) const {
    if constexpr (kOp == CompareOp::eq) {
      return x == y;
    } else if constexpr (kOp == CompareOp::ne) {
      return x != y;
    } else if constexpr (kOp == CompareOp::lt) {
      return x < y;
    } else if constexpr (kOp == CompareOp::le) {
      return x <= y;
    } else if constexpr (kOp == CompareOp::gt) {
      return x > y;
    } else {
      return x >= y;
    }
  }
};

// bf16 through f32, as the CPU's ops on bf16 compute: the f32 op on the widened values, the result
// rounded once.
template <typename F>
struct Bf16Unary {
  F f;
  __device__ BFloat16 operator()(BFloat16 v) const { return float_to_bf16(f(bf16_to_float(v))); }
};
template <typename F>
struct Bf16Binary {
  F f;
  __device__ BFloat16 operator()(BFloat16 a, BFloat16 b) const {
    return float_to_bf16(f(bf16_to_float(a), bf16_to_float(b)));
  }
};
// An f32 op whose result is rounded to bf16 (f32 operands into a bf16 output: an autocast product's
// f32 sums plus its bias, rounded once).
template <typename F>
struct Bf16Rounded {
  F f;
  __device__ BFloat16 operator()(float a, float b) const { return float_to_bf16(f(a, b)); }
};
template <typename F>
struct Bf16Compare {
  F f;
  __device__ uint8_t operator()(BFloat16 a, BFloat16 b) const { return f(bf16_to_float(a), bf16_to_float(b)); }
};

// ---------------------------------------------------------------- launchers

template <typename TO, typename TI, typename F>
void map1(const char* op, const Tensor& out, const Tensor& in, F f) {
  launch_elementwise<2>(op, out.shape(), {out.strides(), broadcast_strides(in, out.shape())},
                        Map1<TO, TI, F>{static_cast<TO*>(out.raw_data()), static_cast<const TI*>(in.raw_data()), f});
}

template <typename TO, typename T, typename F>
void map2(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const Shape& s = out.shape();
  launch_elementwise<3>(op, s, {out.strides(), broadcast_strides(a, s), broadcast_strides(b, s)},
                        Map2<TO, T, T, F>{static_cast<TO*>(out.raw_data()), static_cast<const T*>(a.raw_data()),
                                          static_cast<const T*>(b.raw_data()), f});
}

template <typename T>
void check_no_zero(const Tensor& b) {
  FirstHit zero(b.device());
  launch_elementwise<1>("div", b.shape(), {b.strides()}, FindZero<T>{static_cast<const T*>(b.raw_data()), zero.ptr()});
  OCTET_CHECK(zero.position() == FirstHit::kNone, "div: integer division by zero");
}

// Element i of a random fill uses Philox counter offset + i (core/generator.h), like the CPU.
// The arithmetic around it uses explicit round-to-nearest intrinsics: nvcc would otherwise fuse
// a multiply and an add into an FMA and uniform draws would no longer match the CPU bit for bit.
template <typename T>
__global__ void uniform_kernel(T* out, int64_t n, double low, double high, uint64_t seed, uint64_t offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    std::array<uint32_t, 4> w = philox_at(seed, offset, static_cast<uint64_t>(i));
    double u = std::is_same_v<T, double> ? uniform_double(w[0], w[1]) : static_cast<double>(uniform_float(w[0]));
    double v = __dadd_rn(low, __dmul_rn(high - low, u));
    out[i] = static_cast<T>(v < high ? v : low);  // keep [low, high) after rounding
  }
}

// Box-Muller on (0, 1] x [0, 1), the CPU's formula and evaluation order; log and cos come from
// CUDA's libdevice, so f64 results may differ from the CPU in the last bits.
template <typename T>
__global__ void normal_kernel(T* out, int64_t n, double mean, double stddev, uint64_t seed, uint64_t offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    std::array<uint32_t, 4> w = philox_at(seed, offset, static_cast<uint64_t>(i));
    double u1 = 1.0 - uniform_double(w[0], w[1]);
    double u2 = uniform_double(w[2], w[3]);
    double radius = ::sqrt(__dmul_rn(-2.0, ::log(u1)));
    double v = __dadd_rn(mean, __dmul_rn(__dmul_rn(stddev, radius), ::cos(__dmul_rn(2.0 * M_PI, u2))));
    out[i] = static_cast<T>(v);
  }
}

void check_random(const Tensor& dst, const char* op) {
  OCTET_CHECK(dst.is_contiguous(), op, ": kernel requires a contiguous tensor");
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  // Same dtype, both dense, no broadcasting (equal numel): a plain device copy. bf16 goes through
  // the kernel, whose float round trip quiets signaling NaNs as the CPU does.
  if (dst.dtype() == src.dtype() && dst.dtype() != DType::bf16 && dst.numel() == src.numel() && dst.is_contiguous() &&
      src.is_contiguous()) {
    const size_t nbytes = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype());
    if (nbytes > 0 && dst.raw_data() != src.raw_data())  // cudaMemcpy must not overlap itself
      OCTET_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes, cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  dispatch_all(dst.dtype(), [&]<typename TO>() {
    dispatch_all(src.dtype(), [&]<typename TI>() { map1<TO, TI>("copy_", dst, src, Convert<TO, TI>{}); });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), [&]<typename T>() {
    const T v = convert<T>(value);
    launch_elementwise<1>("fill_", dst.shape(), {dst.strides()}, Fill<T>{static_cast<T*>(dst.raw_data()), v});
  });
}

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  check_random(dst, "uniform_");
  dispatch_float(dst.dtype(), "uniform_", [&]<typename T>() {
    const int64_t n = dst.numel();
    if (n == 0) return;
    uniform_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(dst.data<T>(), n, low, high, seed, offset);
    OCTET_CUDA_LAUNCH("uniform_");
  });
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  check_random(dst, "normal_");
  dispatch_float(dst.dtype(), "normal_", [&]<typename T>() {
    const int64_t n = dst.numel();
    if (n == 0) return;
    normal_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(dst.data<T>(), n, mean, std, seed, offset);
    OCTET_CUDA_LAUNCH("normal_");
  });
}

namespace {

// The unary ops' functors in type T (float for bf16), each handed to launch (which maps it over x
// into out, directly or through bf16).
template <typename T, typename Launch>
void scalar_arith_unary(UnaryOp op, double a, Launch launch) {
  switch (op) {
    case UnaryOp::neg:
      return launch(Neg<T>{});
    case UnaryOp::abs:
      return launch(Abs<T>{});
    case UnaryOp::mul_scalar:
      return launch(MulScalar<T>{static_cast<T>(a)});
    default:
      return launch(AddScalar<T>{static_cast<T>(a)});
  }
}

template <typename T, typename Launch>
void float_unary(UnaryOp op, double a, double b, Launch launch) {
  const T ta = static_cast<T>(a), tb = static_cast<T>(b);
  switch (op) {
    case UnaryOp::exp:
      return launch(Exp<T>{});
    case UnaryOp::log:
      return launch(Log<T>{});
    case UnaryOp::sqrt:
      return launch(Sqrt<T>{});
    case UnaryOp::rsqrt:
      return launch(Rsqrt<T>{});
    case UnaryOp::sign:
      return launch(Sign<T>{});
    case UnaryOp::relu:
      return launch(Relu<T>{});
    case UnaryOp::relu6:
      return launch(Relu6<T>{});
    case UnaryOp::sigmoid:
      return launch(Sigmoid<T>{});
    case UnaryOp::tanh:
      return launch(Tanh<T>{});
    case UnaryOp::gelu:
      return launch(Gelu<T>{});
    case UnaryOp::gelu_tanh:
      return launch(GeluTanh<T>{});
    case UnaryOp::gelu_grad:
      return launch(GeluGrad<T>{});
    case UnaryOp::gelu_tanh_grad:
      return launch(GeluTanhGrad<T>{});
    case UnaryOp::reciprocal:
      return launch(Reciprocal<T>{});
    case UnaryOp::square:
      return launch(Square<T>{});
    case UnaryOp::clamp:
      return launch(Clamp<T>{ta, tb, !std::isnan(ta), !std::isnan(tb)});
    case UnaryOp::pow_scalar:
      if (a == 2.0) return launch(Square<T>{});
      return launch(PowScalar<T>{ta});
    default:
      OCTET_FAIL("unary: unhandled op ", static_cast<int>(op));
  }
}

}  // namespace

Tensor widened_to_f32(const Tensor& t) {
  Tensor out = empty(t.shape(), TensorOptions(DType::f32).device(t.device()));
  copy(out, t);
  return out;
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  const bool arith = op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::mul_scalar || op == UnaryOp::add_scalar;
  if (x.dtype() == DType::bf16) {
    OCTET_CHECK(out.dtype() == DType::bf16, "unary: a bf16 input takes a bf16 output, got ", out.dtype());
    auto launch = [&](auto f) { map1<BFloat16, BFloat16>("unary", out, x, Bf16Unary<decltype(f)>{f}); };
    if (arith) return scalar_arith_unary<float>(op, a, launch);
    return float_unary<float>(op, a, b, launch);
  }
  if (arith) {
    dispatch_numeric(x.dtype(), "unary", [&]<typename T>() {
      scalar_arith_unary<T>(op, a, [&](auto f) { map1<T, T>("unary", out, x, f); });
    });
    return;
  }
  dispatch_float(x.dtype(), "unary",
                 [&]<typename T>() { float_unary<T>(op, a, b, [&](auto f) { map1<T, T>("unary", out, x, f); }); });
}

namespace {

template <typename T, typename Launch>
void binary_op(BinaryOp op, const Tensor& b, Launch launch) {
  switch (op) {
    case BinaryOp::add:
      return launch(Add<T>{});
    case BinaryOp::sub:
      return launch(Sub<T>{});
    case BinaryOp::mul:
      return launch(Mul<T>{});
    case BinaryOp::div:
      if constexpr (std::is_integral_v<T>) check_no_zero<T>(b);
      return launch(Div<T>{});
    case BinaryOp::pow:
      return launch(Pow<T>{});
    case BinaryOp::maximum:
      return launch(Maximum<T>{});
    case BinaryOp::minimum:
      return launch(Minimum<T>{});
    case BinaryOp::relu_grad:
      return launch(ReluGrad<T>{});
    case BinaryOp::relu6_grad:
      return launch(Relu6Grad<T>{});
  }
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  // bf16 with f32 (autocast's activations beside an f32 residual stream) computes in f32.
  if (a.dtype() != b.dtype() && out.dtype() == DType::f32 && (a.dtype() == DType::bf16 || b.dtype() == DType::bf16) &&
      (a.dtype() == DType::f32 || b.dtype() == DType::f32))
    return binary(op, a.dtype() == DType::bf16 ? widened_to_f32(a) : a, b.dtype() == DType::bf16 ? widened_to_f32(b) : b,
                  out);
  // f32 with f32 to bf16 (a bf16 product's f32 sums plus its bias) computes in f32, rounded once.
  if (a.dtype() == DType::f32 && b.dtype() == DType::f32 && out.dtype() == DType::bf16)
    return binary_op<float>(op, b,
                            [&](auto f) { map2<BFloat16, float>("binary", out, a, b, Bf16Rounded<decltype(f)>{f}); });
  OCTET_CHECK(a.dtype() == b.dtype() && out.dtype() == a.dtype(),
              "binary: CUDA takes one dtype (or bf16 with f32 to f32, or f32 to bf16), got ", a.dtype(), " and ",
              b.dtype(), " to ", out.dtype());
  if (a.dtype() == DType::bf16)
    return binary_op<float>(op, b,
                            [&](auto f) { map2<BFloat16, BFloat16>("binary", out, a, b, Bf16Binary<decltype(f)>{f}); });
  dispatch_numeric(a.dtype(), "binary",
                   [&]<typename T>() { binary_op<T>(op, b, [&](auto f) { map2<T, T>("binary", out, a, b, f); }); });
}

namespace {

template <typename T, typename Launch>
void compare_op(CompareOp op, Launch launch) {
  switch (op) {
    case CompareOp::eq:
      return launch(Compare<T, CompareOp::eq>{});
    case CompareOp::ne:
      return launch(Compare<T, CompareOp::ne>{});
    case CompareOp::lt:
      return launch(Compare<T, CompareOp::lt>{});
    case CompareOp::le:
      return launch(Compare<T, CompareOp::le>{});
    case CompareOp::gt:
      return launch(Compare<T, CompareOp::gt>{});
    case CompareOp::ge:
      return launch(Compare<T, CompareOp::ge>{});
  }
}

}  // namespace

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.dtype() == DType::bf16)
    return compare_op<float>(
        op, [&](auto f) { map2<uint8_t, BFloat16>("compare", out, a, b, Bf16Compare<decltype(f)>{f}); });
  dispatch_numeric(a.dtype(), "compare", [&]<typename T>() {
    compare_op<T>(op, [&](auto f) { map2<uint8_t, T>("compare", out, a, b, f); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), [&]<typename T>() {
    using B = Bits<T>;  // where only moves elements: one instantiation per element size
    const Shape& s = out.shape();
    launch_elementwise<4>("where", s,
                          {out.strides(), broadcast_strides(cond, s), broadcast_strides(a, s), broadcast_strides(b, s)},
                          Where<B>{static_cast<B*>(out.raw_data()), static_cast<const uint8_t*>(cond.raw_data()),
                                   static_cast<const B*>(a.raw_data()), static_cast<const B*>(b.raw_data())});
  });
}

}  // namespace octet::cuda
