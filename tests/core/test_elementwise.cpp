// Elementwise ops: values against hand-computed references, gradients against finite
// differences (with broadcasting and non-contiguous inputs), bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/kernels.h"
#include "core/octet.h"
#include "gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

TEST(Elementwise, ValuesAndBroadcasting) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  Tensor col = from_vector<float>({1, 2}, {2, 1});
  EXPECT_EQ((a * col).to_vector<float>(), (std::vector<float>{1, 2, 3, 8, 10, 12}));
  EXPECT_EQ((col - b).shape(), (Shape{2, 3}));
  EXPECT_EQ((2.0 / a).to_vector<float>()[1], 1.0f);
  EXPECT_EQ((a.t() + 1.0).to_vector<float>(), (std::vector<float>{2, 5, 3, 6, 4, 7}));
  EXPECT_EQ(relu6(from_vector<float>({-1, 3, 7}, {3})).to_vector<float>(), (std::vector<float>{0, 3, 6}));
  EXPECT_EQ(clamp(from_vector<float>({-1, 3, 7}, {3}), 0, 5).to_vector<float>(), (std::vector<float>{0, 3, 5}));
  EXPECT_EQ(sign(from_vector<float>({-2, 0, 3}, {3})).to_vector<float>(), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(gt(a, 3.0).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(where(gt(a, 3.0), a, -a).to_vector<float>(), (std::vector<float>{-1, -2, -3, 4, 5, 6}));
  std::vector<double> s = sigmoid(from_vector<double>({-1000, 0, 1000}, {3})).to_vector<double>();
  EXPECT_EQ(s, (std::vector<double>{0, 0.5, 1}));
  EXPECT_NEAR(gelu(scalar_tensor(1.0, DType::f64)).item(), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(gelu(scalar_tensor(1.0, DType::f64), true).item(), 0.8411919906082768, 1e-15);
  EXPECT_EQ((from_vector<int32_t>({7, -7}, {2}) / from_vector<int32_t>({2, 2}, {2})).to_vector<int32_t>(),
            (std::vector<int32_t>{3, -3}));
  EXPECT_EQ(maximum(a, b * 0.1).to_vector<float>()[0], 1.0f);
}

TEST(Elementwise, LargeStridedMatchesContiguous) {
  // Exercises the threaded strided loop on a transposed, broadcast operand.
  Generator g(3);
  Tensor x = randn({300, 257}, DType::f32, &g);
  Tensor y = randn({257}, DType::f32, &g);
  Tensor viaT = (x.t().contiguous() * y.unsqueeze(1)).t();
  EXPECT_EQ(viaT.contiguous().to_vector<float>(), (x * y).to_vector<float>());
}

struct UnaryCase {
  const char* name;
  Fn f;
  double lo, hi;
};

TEST(Elementwise, UnaryGradients) {
  std::vector<UnaryCase> cases = {
      {"neg", [](const auto& v) { return -v[0]; }, -2, 2},
      {"exp", [](const auto& v) { return exp(v[0]); }, -2, 2},
      {"log", [](const auto& v) { return log(v[0]); }, 0.5, 3},
      {"sqrt", [](const auto& v) { return sqrt(v[0]); }, 0.5, 3},
      {"rsqrt", [](const auto& v) { return rsqrt(v[0]); }, 0.5, 3},
      {"abs", [](const auto& v) { return abs(v[0]); }, -2, 2},
      {"sign", [](const auto& v) { return sign(v[0]); }, -2, 2},
      {"square", [](const auto& v) { return square(v[0]); }, -2, 2},
      {"reciprocal", [](const auto& v) { return reciprocal(v[0]); }, 0.5, 2},
      {"pow_scalar", [](const auto& v) { return pow(v[0], 2.5); }, 0.5, 2},
      {"clamp", [](const auto& v) { return clamp(v[0], -0.5, 0.7); }, -2, 2},
      {"relu", [](const auto& v) { return relu(v[0]); }, -2, 2},
      {"relu6", [](const auto& v) { return relu6(v[0] * 5.0); }, -2, 2},
      {"sigmoid", [](const auto& v) { return sigmoid(v[0]); }, -3, 3},
      {"tanh", [](const auto& v) { return tanh(v[0]); }, -3, 3},
      {"gelu", [](const auto& v) { return gelu(v[0]); }, -3, 3},
      {"gelu_tanh", [](const auto& v) { return gelu(v[0], true); }, -3, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // Kinks (relu, abs, clamp) are at points the uniform draw hits with probability ~0.
    gradcheck(c.f, {rand_input({3, 5}, 11, c.lo, c.hi)});
    // Non-contiguous input.
    gradcheck([&](const auto& v) { return c.f({v[0].t()}); }, {rand_input({4, 3}, 12, c.lo, c.hi)});
  }
}

TEST(Elementwise, BinaryGradientsWithBroadcasting) {
  std::vector<std::pair<const char*, Fn>> cases = {
      {"add", [](const auto& v) { return v[0] + v[1]; }},
      {"sub", [](const auto& v) { return v[0] - v[1]; }},
      {"mul", [](const auto& v) { return v[0] * v[1]; }},
      {"div", [](const auto& v) { return v[0] / (v[1] + 3.0); }},
      {"pow", [](const auto& v) { return pow(v[0] + 2.0, v[1]); }},
      {"maximum", [](const auto& v) { return maximum(v[0], v[1]); }},
      {"minimum", [](const auto& v) { return minimum(v[0], v[1]); }},
      {"where", [](const auto& v) { return where(gt(v[0], 0.0), v[0], v[1]); }},
  };
  std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4, 1, 3}, {2, 1}}, {{3}, {}}, {{1}, {2, 2}}};
  for (const auto& [name, f] : cases) {
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(name) + " " + ::testing::PrintToString(sa) + " " + ::testing::PrintToString(sb));
      gradcheck(f, {rand_input(sa, 21), rand_input(sb, 22)});
    }
  }
  // A non-contiguous operand.
  gradcheck([](const auto& v) { return v[0].t() * v[1]; }, {rand_input({3, 2}, 23), rand_input({2, 3}, 24)});
}

// GELU's f32 and bf16 path (a vectorized normal CDF, core/cpu/elementwise.cpp) against the f64
// path's libm erf: within a few f32 ulp relative, on a grid across [-12, 12] and odd lengths; the
// same bits on every ISA; bf16 the f32 values rounded once.
TEST(Elementwise, GeluVectorizedMatchesLibm) {
  std::vector<double> xs;
  for (int i = -12000; i <= 12000; ++i) xs.push_back(i / 1000.0 + 1e-4);
  xs.push_back(0.0), xs.push_back(-0.0), xs.push_back(1e-30), xs.push_back(-40.0), xs.push_back(40.0);
  const Tensor x64 = from_vector(xs, {static_cast<int64_t>(xs.size())}), x32 = x64.to(DType::f32);
  const Tensor x32_64 = x32.to(DType::f64);  // the f32 inputs exactly
  for (bool grad : {false, true}) {
    SCOPED_TRACE(grad ? "gelu_grad" : "gelu");
    const UnaryOp op = grad ? UnaryOp::gelu_grad : UnaryOp::gelu;
    auto run = [&](const Tensor& x) {
      Tensor out = empty(x.shape(), x.dtype());
      kernels::unary(op, x, out);
      return out;
    };
    // The reference in f64 through erfc (1 + erf(x) cancels for large negative x).
    // The error is relative to the terms' size: the gradient's cdf + x pdf cancels near x = -0.75.
    std::vector<double> want, size;
    for (double v : x32_64.to_vector<double>()) {
      const double cdf = 0.5 * std::erfc(-v * M_SQRT1_2), pdf = std::exp(-0.5 * v * v) * 0.5 * M_2_SQRTPI * M_SQRT1_2;
      want.push_back(grad ? cdf + v * pdf : v * cdf);
      size.push_back(grad ? cdf + std::abs(v * pdf) : std::abs(v * cdf));
    }
    const cpu::Isa best = cpu::active_isa();
    cpu::set_active_isa(cpu::Isa::portable);
    const Tensor portable = run(x32);
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      cpu::set_active_isa(isa);
      EXPECT_EQ(std::memcmp(run(x32).raw_data(), portable.raw_data(), 4 * xs.size()), 0) << cpu::isa_name(isa);
    }
    cpu::set_active_isa(best);
    const std::vector<float> got = portable.to_vector<float>();
    // Measured: within 4e-7 of the terms' size on [-4, 4] (the fit's 1.2e-7 and f32 rounding), a
    // few 1e-6 in the far tails (values below 1e-4); results below f32's normal range flush.
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i], tol = (std::abs(v) <= 4 ? 1e-6 : 1e-5) * size[i] + 2e-38;
      ASSERT_LE(std::abs(got[i] - want[i]), tol) << "x = " << v << ", want " << want[i] << ", got " << got[i];
    }
    // bf16: the f32 path's values rounded once (an odd length: the loops' tails).
    const Tensor xb = x32.narrow(0, 0, 1001).to(DType::bf16);
    EXPECT_EQ(run(xb).to(DType::f32).to_vector<float>(),
              run(xb.to(DType::f32)).to(DType::bf16).to(DType::f32).to_vector<float>());
  }
}

TEST(Elementwise, BadInput) {
  EXPECT_THROW(zeros({2, 3}) + zeros({4}), Error);
  EXPECT_THROW(zeros({2}) + zeros({2}, DType::f64), Error);
  EXPECT_THROW(exp(zeros({2}, DType::i32)), Error);
  EXPECT_THROW(zeros({2}, DType::bf16) * zeros({2}, DType::f64), Error);  // bf16 mixes with f32 only
  try {
    relu(zeros({2}, DType::i64));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu: expected dtype f32, f64 or bf16, got i64"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(where(zeros({2}), zeros({2}), zeros({2})), Error);  // condition must be u8
  EXPECT_THROW(from_vector<int32_t>({1}, {1}) / from_vector<int32_t>({0}, {1}), Error);
  EXPECT_THROW(clamp(zeros({2}), 1, 0), Error);
  try {
    (void)(zeros({2, 3}) * zeros({4, 3}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul: shapes [2, 3] and [4, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet
