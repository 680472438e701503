// CUDA against CPU: every elementwise op of core/ops/elementwise.h (unary, binary, scalar
// operands, comparisons, where, sum_to) in f32 and f64, with broadcasting and non-contiguous
// operands, outputs and gradients; bf16 tensors (computed in f32, rounded once, bf16 with f32
// promoting to f32); and the differentiable views and copies of core/tensor.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::expect_parity;
using testing::index_input;
using testing::Inputs;
using testing::kExact;
using testing::kPointwise;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;
using testing::tolerances;
using testing::uniform_input;

class CudaElementwise : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaElementwise);

// An odd size, so vectorized kernels also run their tails.
const Shape kShape{7, 33};

TEST_P(CudaElementwise, Unary) {
  const DType t = dtype();
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double lo, hi;  // away from each op's singular or non-differentiable points
  };
  const Case cases[] = {
      {"neg", [](const Tensor& x) { return neg(x); }, -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, -5, 5},
      {"log", [](const Tensor& x) { return log(x); }, 0.05, 20},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.05, 20},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.05, 20},
      {"abs", [](const Tensor& x) { return abs(x); }, -3, 3},
      {"sign", [](const Tensor& x) { return sign(x); }, -3, 3},
      {"square", [](const Tensor& x) { return square(x); }, -3, 3},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, 0.1, 5},
      {"relu", [](const Tensor& x) { return relu(x); }, -3, 3},
      {"relu6", [](const Tensor& x) { return relu6(x); }, -8, 8},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -12, 12},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -6, 6},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -6, 6},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, -6, 6},
      {"operator-", [](const Tensor& x) { return -x; }, -3, 3},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    Inputs in{uniform_input(kShape, t, seed++, c.lo, c.hi)};
    expect_parity(
        c.name, [&c](const Inputs& v) { return Outputs{c.op(v[0])}; }, in, kPointwise);
    // The same op on a transposed and on a strided (every other column) view.
    expect_parity(
        std::string(c.name) + " of a transposed view", [&c](const Inputs& v) { return Outputs{c.op(v[0].t())}; }, in,
        kPointwise);
    expect_parity(
        std::string(c.name) + " of a strided slice",
        [&c](const Inputs& v) { return Outputs{c.op(v[0].slice(1, 1, 33, 2))}; }, in, kPointwise);
  }
}

TEST_P(CudaElementwise, SpecialValues) {
  // Infinities, NaN, signed zeros and huge values through every op, forward only: each device
  // must give the same value, NaN where the other gives NaN (all_close matches NaN with NaN).
  const DType t = dtype();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x =
      from_vector<double>({-inf, -1e300, -20.0, -1.0, -0.0, 0.0, 1e-30, 0.5, 6.0, 20.0, 1e300, inf, nan}, {13}).to(t);
  Tensor y = from_vector<double>({1.0, -inf, 0.0, -0.0, 2.0, nan, inf, -1.0, 3.0, 1e-30, 0.5, -inf, 1.0}, {13}).to(t);
  expect_parity(
      "unary ops of special values",
      [](const Inputs& v) {
        const Tensor& a = v[0];
        return Outputs{neg(a),
                       exp(a),
                       log(a),
                       sqrt(a),
                       rsqrt(a),
                       abs(a),
                       sign(a),
                       square(a),
                       reciprocal(a),
                       relu(a),
                       relu6(a),
                       sigmoid(a),
                       tanh(a),
                       gelu(a),
                       gelu(a, true),
                       pow(a, 2.5),
                       clamp(a, -1.0, 1.0),
                       a * 2.0,
                       a + 1.0,
                       1.0 / a};
      },
      {x}, kPointwise);
  expect_parity(
      "binary ops of special values",
      [](const Inputs& v) {
        const Tensor &a = v[0], &b = v[1];
        return Outputs{a + b,         a - b,    a * b,    a / b,    pow(a, b), maximum(a, b),
                       minimum(a, b), eq(a, b), lt(a, b), ge(a, b), ne(a, b),  where(gt(a, b), a, b)};
      },
      {x, y}, kPointwise);
}

TEST_P(CudaElementwise, ScalarOperands) {
  const DType t = dtype();
  Inputs in{uniform_input(kShape, t, 11, 0.2, 3)};
  auto check = [&](const char* name, Tensor (*op)(const Tensor&)) {
    expect_parity(
        name, [op](const Inputs& v) { return Outputs{op(v[0])}; }, in, kPointwise);
  };
  check("x + 2.5", [](const Tensor& x) { return x + 2.5; });
  check("x - 2.5", [](const Tensor& x) { return x - 2.5; });
  check("x * -1.5", [](const Tensor& x) { return x * -1.5; });
  check("x / 3", [](const Tensor& x) { return x / 3.0; });
  check("2.5 + x", [](const Tensor& x) { return 2.5 + x; });
  check("2.5 - x", [](const Tensor& x) { return 2.5 - x; });
  check("-1.5 * x", [](const Tensor& x) { return -1.5 * x; });
  check("3 / x", [](const Tensor& x) { return 3.0 / x; });
  check("pow(x, 2.5)", [](const Tensor& x) { return pow(x, 2.5); });
  check("pow(x, -0.5)", [](const Tensor& x) { return pow(x, -0.5); });
  check("pow(x, 3)", [](const Tensor& x) { return pow(x, 3.0); });
  check("clamp(x, 0.5, 2)", [](const Tensor& x) { return clamp(x, 0.5, 2.0); });
  check("clamp(x, NaN, 1)", [](const Tensor& x) { return clamp(x, std::numeric_limits<double>::quiet_NaN(), 1.0); });
  check("clamp(x, 1, NaN)", [](const Tensor& x) { return clamp(x, 1.0, std::numeric_limits<double>::quiet_NaN()); });
}

TEST_P(CudaElementwise, Binary) {
  const DType t = dtype();
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&);
  };
  const Case cases[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"operator-", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"operator*", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"operator/", [](const Tensor& a, const Tensor& b) { return a / b; }},
  };
  // Positive operands keep pow and div smooth; maximum/minimum see no ties in random data.
  uint64_t seed = 100;
  for (const Case& c : cases) {
    auto op = c.op;
    std::string name = c.name;
    // Same shapes.
    expect_parity(
        name, [op](const Inputs& v) { return Outputs{op(v[0], v[1])}; },
        {uniform_input(kShape, t, seed, 0.2, 3), uniform_input(kShape, t, seed + 1, 0.2, 3)}, kPointwise);
    // Broadcasting: the gradient of the broadcast operand is a sum over the broadcast dims.
    auto sums = tolerances(kPointwise, kSums);
    expect_parity(
        name + " [4,1,5] x [3,1]", [op](const Inputs& v) { return Outputs{op(v[0], v[1])}; },
        {uniform_input({4, 1, 5}, t, seed + 2, 0.2, 3), uniform_input({3, 1}, t, seed + 3, 0.2, 3)}, sums);
    expect_parity(
        name + " [2,3,300] x [300]", [op](const Inputs& v) { return Outputs{op(v[0], v[1])}; },
        {uniform_input({2, 3, 300}, t, seed + 4, 0.2, 3), uniform_input({300}, t, seed + 5, 0.2, 3)}, sums);
    expect_parity(
        name + " [] x [5,6]", [op](const Inputs& v) { return Outputs{op(v[0], v[1])}; },
        {uniform_input({}, t, seed + 6, 0.2, 3), uniform_input({5, 6}, t, seed + 7, 0.2, 3)}, sums);
    // Non-contiguous operands: a transpose against a strided slice, and an expanded view.
    expect_parity(
        name + " of views", [op](const Inputs& v) { return Outputs{op(v[0].t(), v[1].slice(0, 0, 12, 2))}; },
        {uniform_input({5, 6}, t, seed + 8, 0.2, 3), uniform_input({12, 5}, t, seed + 9, 0.2, 3)}, sums);
    expect_parity(
        name + " of an expanded view",
        [op](const Inputs& v) {
          return Outputs{op(v[0].expand({4, 6}), v[1].permute({1, 0}))};
        },
        {uniform_input({1, 6}, t, seed + 10, 0.2, 3), uniform_input({6, 4}, t, seed + 11, 0.2, 3)}, sums);
    seed += 20;
  }
}

class CudaIntegerOps : public testing::CudaParityTest {};

TEST_F(CudaIntegerOps, Arithmetic) {
  // The integer kernels (dispatch_numeric) are exact on both devices.
  for (DType it : {DType::i32, DType::i64}) {
    Tensor a = index_input({6, 7}, 1000, 31).to(it), b = (index_input({7}, 50, 32) + index_input({7}, 2, 33)).to(it);
    std::string n = std::string(dtype_name(it));
    expect_parity(
        n + " add/sub/mul/max/min",
        [](const Inputs& v) {
          return Outputs{v[0] + v[1], v[0] - v[1],       v[0] * v[1], maximum(v[0], v[1]), minimum(v[0], v[1]),
                         neg(v[0]),   abs(v[0] - 500.0), v[0] * 3.0,  v[0] + 7.0};
        },
        {a, b}, kExact);
  }
}

TEST_P(CudaElementwise, CompareAndWhere) {
  const DType t = dtype();
  // Small integers as floats, so equal elements (ties) are common.
  Tensor a = index_input({5, 8}, 4, 41).to(t), b = index_input({8}, 4, 42).to(t);
  expect_parity(
      "comparisons",
      [](const Inputs& v) {
        return Outputs{eq(v[0], v[1]), ne(v[0], v[1]), lt(v[0], v[1]), le(v[0], v[1]), gt(v[0], v[1]), ge(v[0], v[1]),
                       eq(v[0], 2.0),  ne(v[0], 2.0),  lt(v[0], 2.0),  le(v[0], 2.0),  gt(v[0], 2.0),  ge(v[0], 2.0)};
      },
      {a, b}, kExact);
  expect_parity(
      "comparisons of views",
      [](const Inputs& v) {
        return Outputs{lt(v[0].t(), v[1].unsqueeze(1)), eq(v[0].slice(0, 0, 5, 2), v[1])};
      },
      {a, b}, kExact);
  Tensor ia = index_input({5, 8}, 4, 43), ib = index_input({5, 8}, 4, 44);
  expect_parity(
      "i64 comparisons",
      [](const Inputs& v) {
        return Outputs{eq(v[0], v[1]), le(v[0], v[1])};
      },
      {ia, ib}, kExact);
  // where: cond u8 (from a comparison), a and b broadcast; gradients go through the chosen side.
  Tensor c = uniform_input({4, 1, 6}, t, 45, -1, 1, false);
  expect_parity(
      "where", [](const Inputs& v) { return Outputs{where(gt(v[0], 0.0), v[1], v[2])}; },
      {c, uniform_input({3, 6}, t, 46), uniform_input({4, 3, 1}, t, 47)}, tolerances(kExact, kSums));
  expect_parity(
      "where of views", [](const Inputs& v) { return Outputs{where(lt(v[0].t(), 0.0), v[1].t(), v[1])}; },
      {uniform_input({6, 6}, t, 48, -1, 1, false), uniform_input({6, 6}, t, 49)}, kExact);
}

TEST_P(CudaElementwise, SumTo) {
  const DType t = dtype();
  expect_parity(
      "sum_to [4,5,6] -> [5,1]",
      [](const Inputs& v) {
        return Outputs{sum_to(v[0], {5, 1})};
      },
      {uniform_input({4, 5, 6}, t, 51)}, kSums);
  expect_parity(
      "sum_to [3,1000] -> [1000]", [](const Inputs& v) { return Outputs{sum_to(v[0], {1000})}; },
      {uniform_input({3, 1000}, t, 52)}, kSums);
  expect_parity(
      "sum_to [300,7] -> []", [](const Inputs& v) { return Outputs{sum_to(v[0], {})}; },
      {uniform_input({300, 7}, t, 53)}, kSums);
}

TEST_P(CudaElementwise, ViewsAndCopies) {
  const DType t = dtype();
  Inputs in{normal_input({4, 6, 5}, t, 61)};
  // Views share storage; contiguous() and clone() run the strided copy kernel on the device.
  expect_parity(
      "views then contiguous",
      [](const Inputs& v) {
        const Tensor& x = v[0];
        return Outputs{x.permute({2, 0, 1}).contiguous(),   x.transpose(0, 2).contiguous(),
                       x.slice(1, 1, 6, 2).contiguous(),    x.narrow(2, 1, 3).clone(),
                       x.select(1, 3).contiguous(),         x.unsqueeze(1).expand({4, 3, 6, 5}).contiguous(),
                       x.reshape({24, 5}).t().contiguous(), x.transpose(0, 1).flatten()};
      },
      in, kExact);
  // Gradients through views: several views of one leaf accumulate into it.
  expect_parity(
      "sum of views",
      [](const Inputs& v) {
        const Tensor& x = v[0];
        return Outputs{x.slice(1, 0, 6, 3) * 2.0 + x.narrow(1, 2, 2)};
      },
      in, kPointwise);
  // Dtype conversion on the device is differentiable (the gradient converts back).
  DType other = t == DType::f32 ? DType::f64 : DType::f32;
  expect_parity(
      "to(dtype)", [other](const Inputs& v) { return Outputs{v[0].to(other) * 3.0}; }, in, kPointwise);
  expect_parity(
      "to(dtype) of a view",
      [other](const Inputs& v) {
        return Outputs{v[0].permute({1, 2, 0}).to(other)};
      },
      in, kExact);
}

class CudaBf16Elementwise : public testing::CudaParityTest {};

// bf16 tensors (autocast's activations) on CUDA compute each op in f32 on the widened values and
// round once, as the CPU does: the same bits but where a transcendental function's last f32 bit
// differs and the rounding lands on the other side (a bf16 unit). Outputs and gradients in f32.
TEST_F(CudaBf16Elementwise, OpsComputeInF32AndRoundOnce) {
  const testing::ParityOptions kBf16Unit = tolerances({{8e-3, 8e-3}, {8e-3, 8e-3}}, {{8e-3, 8e-3}, {8e-3, 8e-3}});
  auto bf16 = [](const Tensor& t) { return t.to(DType::bf16); };
  auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  const Inputs in{uniform_input(kShape, DType::f32, 71, -4, 4), uniform_input(kShape, DType::f32, 72, 0.5, 3),
                  uniform_input({kShape[1]}, DType::f32, 73, -2, 2)};
  expect_parity(
      "bf16 unary",
      [&](const Inputs& v) {
        const Tensor x = bf16(v[0]);
        return Outputs{f32(relu(x)), f32(gelu(x)), f32(gelu(x, true)), f32(tanh(x)), f32(sigmoid(x)),
                       f32(exp(x * 0.5)),  f32(abs(x)),  f32(-x),          f32(x * 0.3),  f32(0.3 - x)};
      },
      in, kBf16Unit);
  expect_parity(
      "bf16 binary, broadcast, and bf16 with f32",
      [&](const Inputs& v) {
        const Tensor a = bf16(v[0]), b = bf16(v[1]), c = bf16(v[2]);
        return Outputs{f32(a + b), f32(a * c), f32(a / b), f32(maximum(a, b)), a + v[1], v[2] * b};
      },
      in, kBf16Unit);
  expect_parity(
      "bf16 compare",
      [&](const Inputs& v) {
        const Tensor a = bf16(v[0]), b = bf16(v[0] * 0.5);
        return Outputs{gt(a, b).to(DType::f32), eq(a, a).to(DType::f32), le(a, 0.0).to(DType::f32)};
      },
      in, tolerances(testing::kExact, testing::kExact));
}

}  // namespace
}  // namespace octet
