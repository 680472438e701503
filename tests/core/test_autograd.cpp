// Autograd engine: accumulation, retain_graph, NoGradGuard, detach, hooks, errors.
#include <gtest/gtest.h>

#include "core/octet.h"
#include "gradcheck.h"

namespace octet {
namespace {

using testing::f64_grad;

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor x = from_vector<double>({1, 2, 3}, {3}, true);
  sum(x * x).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));
  sum(x * 3.0).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));
  x.set_grad(Tensor());
  sum(x).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = from_vector<double>({2}, {1}, true);
  Tensor a = x * x;      // x^2
  Tensor b = a * x + a;  // x^3 + x^2
  sum(b).backward();     // 3x^2 + 2x = 16
  EXPECT_DOUBLE_EQ(x.grad().item(), 16.0);
  EXPECT_FALSE(a.is_leaf());
  EXPECT_TRUE(x.is_leaf());
}

TEST(Autograd, RetainGraph) {
  Tensor x = from_vector<double>({1, 2}, {2}, true);
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_NEAR(g[0], 2 * std::exp(1.0), 1e-12);
  EXPECT_THROW(y.backward(), Error);  // graph released by the second call
}

TEST(Autograd, NoGradAndDetach) {
  Tensor x = ones({2}, f64_grad());
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
  }
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.raw_data(), x.raw_data());
  Tensor y = x * d;  // d is a constant
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  // requires_grad propagates
  Tensor c = ones({2}, DType::f64);
  EXPECT_FALSE((c * 2.0).requires_grad());
  EXPECT_TRUE((c * x).requires_grad());
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = from_vector<double>({1, 2}, {2}, true);
  Tensor y = x * 3.0;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 10.0;  // e.g. a quantizer replacing the gradient
  });
  int leaf_calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++leaf_calls;
    return Tensor();  // keep as is
  });
  sum(y * y).backward();
  EXPECT_EQ(seen, (std::vector<double>{6, 12}));                             // dL/dy = 2y
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{180, 360}));  // 10 * 2y * 3
  EXPECT_EQ(leaf_calls, 1);
}

TEST(Autograd, MultiOutputAndUnusedOutput) {
  Tensor x = from_vector<double>({3, 1, 2, 5, 4, 0}, {2, 3}, true);
  auto [v, i] = max(x, 1);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(i.requires_grad());
  sum(v).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 1, 0, 0}));
  // An op result that does not reach the loss contributes nothing.
  Tensor z = from_vector<double>({1, 2}, {2}, true);
  Tensor unused = z * 5.0;
  sum(z * 2.0).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(Autograd, Errors) {
  Tensor x = ones({2}, f64_grad());
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), Error);                       // non-scalar without gradient
  EXPECT_THROW(y.backward(ones({3}, DType::f64)), Error);  // wrong gradient shape
  EXPECT_THROW(y.backward(ones({2}, DType::f32)), Error);  // wrong gradient dtype
  y.backward(ones({2}, DType::f64));                       // fine with a gradient
  EXPECT_THROW(ones({2}).backward(), Error);               // no grad at all
  EXPECT_THROW(x.copy_(zeros({2}, DType::f64)), Error);    // in-place on a leaf needing grad
  EXPECT_THROW(y.requires_grad_(false), Error);            // only leaves
  {
    NoGradGuard ng;
    x.copy_(zeros({2}, DType::f64));  // allowed without recording
  }
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsAnError) {
  Tensor x = from_vector<double>({1, 2}, {2}, true);
  Tensor w = from_vector<double>({3, 4}, {2});
  Tensor y = sum(x * w);  // mul saves w for dx = dout * w
  {
    NoGradGuard ng;
    w.narrow(0, 0, 1).fill_(0);  // through a view: the storage is shared
  }
  EXPECT_THROW(y.backward(), Error);
  // Writing to a tensor the backward does not need is fine.
  Tensor a = from_vector<double>({1, 2}, {2}, true);
  Tensor b = from_vector<double>({5, 6}, {2});
  Tensor z = sum(a + b);  // add saves nothing
  {
    NoGradGuard ng;
    b.copy_(zeros({2}, DType::f64));
  }
  z.backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(Autograd, ViewsAreDifferentiable) {
  Tensor x = testing::rand_input({3, 4}, 1);
  testing::gradcheck([](const auto& v) { return v[0].t().contiguous() * 2.0; }, {x});
  testing::gradcheck([](const auto& v) { return v[0].narrow(1, 1, 2) * v[0].slice(1, 0, 4, 2); }, {x});
  testing::gradcheck([](const auto& v) { return v[0].reshape({2, 6}).select(0, 1); }, {x});
  testing::gradcheck([](const auto& v) { return v[0].unsqueeze(0).expand({2, 3, 4}) * 1.5; }, {x});
  testing::gradcheck([](const auto& v) { return v[0].permute({1, 0}).flatten(); }, {x});
  // A round trip through f32 passes the gradient through (checked exactly: f32 breaks f64 differences).
  Tensor y = from_vector<double>({1, 2}, {2}, true);
  sum(y.to(DType::f32).to(DType::f64) * 3.0).backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{3, 3}));
  testing::gradcheck([](const auto& v) { return v[0].slice(0, 1, 3).squeeze(0).clone(); }, {x});
}

}  // namespace
}  // namespace octet
