#include "core/ops/elementwise.h"

#include <cmath>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/memory_format.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

static TensorOptions like(const Tensor& x) { return TensorOptions(x.dtype()).device(x.device()); }
static Tensor scalar_like(double v, const Tensor& x) { return scalar_tensor(v, like(x)); }

// The output of an elementwise op on the CPU keeps a 4-D channels-last operand's format (the first
// operand of the output's shape that has it), so a channels-last network stays so through its adds
// and activations, forward and backward (core/memory_format.h). Elsewhere outputs are contiguous
// (a 3-D view with those strides, such as a transposed [N, S, C], gives a contiguous result).
static Tensor elementwise_out(const Shape& shape, TensorOptions opts, std::initializer_list<Tensor> operands) {
  for (const Tensor& t : operands)
    if (t.shape() == shape && keeps_channels_last(t)) return empty_channels_last(shape, opts);
  return empty(shape, opts);
}

static void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  OCTET_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  OCTET_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.dtype(), " and ", b.dtype(),
              " (convert one with .to())");
  OCTET_CHECK(a.device() == b.device(), op, ": tensors are on different devices: ", a.device(), " and ", b.device());
}

// The dtype of arithmetic on a and b: theirs, or f32 for bf16 with f32 (PyTorch's promotion:
// autocast's bf16 activations added to f32 ones, such as a GPT's residual stream). Other mixes
// are an error naming the op.
static DType result_dtype(const char* op, const Tensor& a, const Tensor& b) {
  OCTET_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  auto bf16_f32 = [](DType x, DType y) { return x == DType::bf16 && y == DType::f32; };
  if (bf16_f32(a.dtype(), b.dtype()) || bf16_f32(b.dtype(), a.dtype())) {
    OCTET_CHECK(a.device() == b.device(), op, ": tensors are on different devices: ", a.device(), " and ",
                b.device());
    return DType::f32;
  }
  check_pair(op, a, b);
  return a.dtype();
}

// ---------------------------------------------------------------- binary

static Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  const DType dtype = result_dtype(name, a, b);
  Tensor out = elementwise_out(broadcast_shapes(a.shape(), b.shape(), name), TensorOptions(dtype).device(a.device()),
                               {a, b});
  kernels::binary(op, a, b, out);
  return out;
}

// Records a binary node whose backward gives (da, db) before un-broadcasting; each side is
// computed only when that input needs it.
template <typename Fa, typename Fb>
static void record_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out, Fa da, Fb db) {
  bool ra = a.requires_grad(), rb = b.requires_grad();
  autograd::record(name, {a, b}, {out}, [=, sa = a.shape(), sb = b.shape()](const Grads& g) {
    return Grads{ra ? sum_to(da(g[0]), sa) : Tensor(), rb ? sum_to(db(g[0]), sb) : Tensor()};
  });
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::add, "add", a, b);
  record_binary(
      "add", a, b, out, [](const Tensor& g) { return g; }, [](const Tensor& g) { return g; });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::sub, "sub", a, b);
  record_binary(
      "sub", a, b, out, [](const Tensor& g) { return g; }, [](const Tensor& g) { return neg(g); });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::mul, "mul", a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sa = saved(a), sb = saved(b);
    record_binary(
        "mul", a, b, out, [sb](const Tensor& g) { return mul(g, sb); }, [sa](const Tensor& g) { return mul(g, sa); });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::div, "div", a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sb = saved(b), so = saved(out);
    record_binary(
        "div", a, b, out, [sb](const Tensor& g) { return div(g, sb); },
        [sb, so](const Tensor& g) { return neg(mul(g, div(so, sb))); });
  }
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::pow, "pow", a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sa = saved(a), sb = saved(b), so = saved(out);
    record_binary(
        "pow", a, b, out, [sa, sb](const Tensor& g) { return g * sb * pow(sa, sb - 1.0); },
        [sa, so](const Tensor& g) { return g * so * log(sa); });
  }
  return out;
}

// Ties split the gradient evenly between the two sides (as PyTorch does).
static Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(op, name, a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sa = saved(a), sb = saved(b);
    bool is_max = op == BinaryOp::maximum;
    auto share = [=](const Tensor& g, bool first) {
      Tensor wins = first == is_max ? gt(sa, sb) : lt(sa, sb);
      Tensor w = wins.to(g.dtype()) + eq(sa, sb).to(g.dtype()) * 0.5;
      return g * w;
    };
    record_binary(
        name, a, b, out, [share](const Tensor& g) { return share(g, true); },
        [share](const Tensor& g) { return share(g, false); });
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::maximum, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::minimum, "minimum", a, b); }

// ---------------------------------------------------------------- unary

static Tensor unary_forward(UnaryOp op, const char* name, const Tensor& x, double a = 0, double b = 0) {
  OCTET_CHECK(x.defined(), name, ": undefined tensor argument");
  bool any_numeric = op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::mul_scalar || op == UnaryOp::add_scalar;
  // bf16 (autocast's activations) computes in f32 and rounds once, as the other float dtypes.
  OCTET_CHECK(any_numeric || is_floating(x.dtype()), name, ": expected dtype f32, f64 or bf16, got ", x.dtype());
  Tensor out = elementwise_out(x.shape(), like(x), {x});
  kernels::unary(op, x, out, a, b);
  return out;
}

// A unary op whose backward is dout * derivative(saved input, saved output).
template <typename D>
static Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, D derivative, double a = 0, double b = 0) {
  Tensor out = unary_forward(op, name, x, a, b);
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor sx = saved(x), so = saved(out);
    autograd::record(name, {x}, {out}, [=](const Grads& g) { return Grads{mul(g[0], derivative(sx, so))}; });
  }
  return out;
}

static Tensor mask_of(const Tensor& m, const Tensor& like_t) { return m.to(like_t.dtype()); }

Tensor neg(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::neg, "neg", x);
  autograd::record("neg", {x}, {out}, [](const Grads& g) { return Grads{neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::exp, "exp", x, [](const Tensor&, const Tensor& y) { return y; });
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::log, "log", x, [](const Tensor& v, const Tensor&) { return reciprocal(v); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::sqrt, "sqrt", x, [](const Tensor&, const Tensor& y) { return 0.5 / y; });
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::rsqrt, "rsqrt", x, [](const Tensor&, const Tensor& y) { return -0.5 * y * y * y; });
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::abs, "abs", x, [](const Tensor& v, const Tensor&) { return sign(v); });
}
Tensor sign(const Tensor& x) {
  return unary_op(UnaryOp::sign, "sign", x, [](const Tensor& v, const Tensor&) { return zeros_like(v); });
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::square, "square", x, [](const Tensor& v, const Tensor&) { return 2.0 * v; });
}
Tensor reciprocal(const Tensor& x) {
  return unary_op(UnaryOp::reciprocal, "reciprocal", x, [](const Tensor&, const Tensor& y) { return neg(y * y); });
}
Tensor pow(const Tensor& x, double e) {
  return unary_op(
      UnaryOp::pow_scalar, "pow", x, [e](const Tensor& v, const Tensor&) { return e * pow(v, e - 1.0); }, e);
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  OCTET_CHECK(std::isnan(lo) || std::isnan(hi) || lo <= hi, "clamp: min ", lo, " > max ", hi);
  return unary_op(
      UnaryOp::clamp, "clamp", x,
      [lo, hi](const Tensor& v, const Tensor&) {
        Tensor m = ones_like(v);
        if (!std::isnan(lo)) m = m * mask_of(ge(v, lo), v);
        if (!std::isnan(hi)) m = m * mask_of(le(v, hi), v);
        return m;
      },
      lo, hi);
}

// relu and relu6 pass the gradient where the output is positive (the input inside (0, 6)) in one
// select (BinaryOp::relu_grad, relu6_grad), not as mask tensors multiplied in (five passes).
static Tensor relu_like(UnaryOp op, BinaryOp grad, const char* name, const Tensor& x) {
  Tensor out = unary_forward(op, name, x);
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor s = saved(op == UnaryOp::relu ? out : x);
    autograd::record(name, {x}, {out}, [=](const Grads& g) { return Grads{binary_forward(grad, name, g[0], s)}; });
  }
  return out;
}

Tensor relu(const Tensor& x) { return relu_like(UnaryOp::relu, BinaryOp::relu_grad, "relu", x); }
Tensor relu6(const Tensor& x) { return relu_like(UnaryOp::relu6, BinaryOp::relu6_grad, "relu6", x); }
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::sigmoid, "sigmoid", x, [](const Tensor&, const Tensor& y) { return y * (1.0 - y); });
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::tanh, "tanh", x, [](const Tensor&, const Tensor& y) { return 1.0 - y * y; });
}
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  UnaryOp fwd = tanh_approximation ? UnaryOp::gelu_tanh : UnaryOp::gelu;
  UnaryOp grad = tanh_approximation ? UnaryOp::gelu_tanh_grad : UnaryOp::gelu_grad;
  return unary_op(fwd, "gelu", x, [grad](const Tensor& v, const Tensor&) { return unary_forward(grad, "gelu", v); });
}

// ---------------------------------------------------------------- where and comparisons

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_pair("where", a, b);
  OCTET_CHECK(cond.defined() && cond.dtype() == DType::u8, "where: condition must be a u8 tensor, got ",
              cond.defined() ? dtype_name(cond.dtype()) : "undefined");
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = empty(s, like(a));
  kernels::where(cond, a, b, out);
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor c = saved(cond);
    record_binary(
        "where", a, b, out, [c](const Tensor& g) { return where(c, g, zeros_like(g)); },
        [c](const Tensor& g) { return where(c, zeros_like(g), g); });
  }
  return out;
}

static Tensor compare(CompareOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_pair(name, a, b);
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), TensorOptions(DType::u8).device(a.device()));
  kernels::compare(op, a, b, out);
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareOp::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareOp::ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareOp::lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareOp::le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareOp::gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareOp::ge, "ge", a, b); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(b, a)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(b, a)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }

// ---------------------------------------------------------------- broadcasting inverse

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  OCTET_CHECK(lead >= 0, "sum_to: cannot reduce shape ", x.shape(), " to ", shape);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      OCTET_CHECK(want == x.shape()[i] || want == 1, "sum_to: cannot reduce shape ", x.shape(), " to ", shape);
      if (want == 1 && x.shape()[i] != 1) dims.push_back(i);
    }
  }
  return sum(x, dims, true).reshape(shape);
}

// ---------------------------------------------------------------- operators

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
// A bf16 tensor with a number: the number stays f32 (computed with, not rounded to bf16), as
// PyTorch's scalars, through the scalar kernels: x * s, x + s.
static bool bf16_scalar(const Tensor& x) { return x.defined() && x.dtype() == DType::bf16; }
static Tensor scalar_op(UnaryOp op, const char* name, const Tensor& x, double s) {
  Tensor out = unary_forward(op, name, x, s);
  autograd::record(name, {x}, {out}, [op, s](const Grads& g) {
    return Grads{op == UnaryOp::mul_scalar ? scalar_op(op, "mul", g[0], s) : g[0]};
  });
  return out;
}

Tensor operator+(const Tensor& a, double b) {
  return bf16_scalar(a) ? scalar_op(UnaryOp::add_scalar, "add", a, b) : add(a, scalar_like(b, a));
}
Tensor operator-(const Tensor& a, double b) {
  return bf16_scalar(a) ? scalar_op(UnaryOp::add_scalar, "sub", a, -b) : sub(a, scalar_like(b, a));
}
Tensor operator*(const Tensor& a, double b) {
  return bf16_scalar(a) ? scalar_op(UnaryOp::mul_scalar, "mul", a, b) : mul(a, scalar_like(b, a));
}
Tensor operator/(const Tensor& a, double b) {
  return bf16_scalar(a) ? div(a, scalar_tensor(b, TensorOptions(DType::f32).device(a.device())))
                              .to(DType::bf16)
                        : div(a, scalar_like(b, a));
}
Tensor operator+(double a, const Tensor& b) { return bf16_scalar(b) ? b + a : add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return bf16_scalar(b) ? -b + a : sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return bf16_scalar(b) ? b * a : mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) {
  return bf16_scalar(b) ? div(scalar_tensor(a, TensorOptions(DType::f32).device(b.device())), b).to(DType::bf16)
                        : div(scalar_like(a, b), b);
}

}  // namespace octet
