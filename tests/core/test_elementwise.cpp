// Elementwise ops: values against hand-computed references, gradients against finite
// differences (with broadcasting and non-contiguous inputs), bad input.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(Elementwise, BadInput) {
  EXPECT_THROW(zeros({2, 3}) + zeros({4}), Error);
  EXPECT_THROW(zeros({2}) + zeros({2}, DType::f64), Error);
  EXPECT_THROW(exp(zeros({2}, DType::i32)), Error);
  EXPECT_THROW(zeros({2}, DType::bf16) * zeros({2}, DType::f64), Error);  // bf16 mixes with f32 only
  try {
    relu(zeros({2}, DType::i64));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu: expected dtype f32, f64 or bf16, got i64"), std::string::npos) << e.what();
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
