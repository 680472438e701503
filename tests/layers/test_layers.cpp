// The layers: default initializations (bounds and seeding), BatchNorm2d running statistics,
// train/eval behaviour of BatchNorm2d and Dropout, shapes of the shape-only modules, constructor
// validation, the init helpers, and a float64 finite-difference check through a small network.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/octet.h"
#include "layers/layers.h"
#include "tests/core/gradcheck.h"

namespace octet {
namespace {

Tensor input(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// Every value in [-bound, bound], and some within 2% of each end: with n >= 18k draws, missing an
// end has probability 0.99^n < 1e-78.
void expect_uniform_bound(const Tensor& t, double bound, const char* what) {
  std::vector<float> v = t.to_vector<float>();
  float lo = v[0], hi = v[0];
  for (float x : v) {
    ASSERT_LE(std::abs(x), bound) << what;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -0.98 * bound) << what;
  EXPECT_GT(hi, 0.98 * bound) << what;
}

TEST(Layers, LinearAndConvDefaultInit) {
  manual_seed(0);
  Linear fc(400, 300);
  expect_uniform_bound(fc.weight_, 1.0 / std::sqrt(400.0), "linear weight");
  for (float x : fc.bias_.to_vector<float>()) EXPECT_LE(std::abs(x), 1.0 / std::sqrt(400.0));
  Conv2d conv(32, 64, 3, Conv2dOptions().groups(4));  // fan_in = 32/4 * 3 * 3 = 72
  EXPECT_EQ(conv.weight_.shape(), (Shape{64, 8, 3, 3}));
  expect_uniform_bound(conv.weight_, 1.0 / std::sqrt(72.0), "conv weight");
  for (float x : conv.bias_.to_vector<float>()) EXPECT_LE(std::abs(x), 1.0 / std::sqrt(72.0));
  // Same seed, same weights: initialization draws from the default generator.
  manual_seed(0);
  Linear again(400, 300);
  EXPECT_EQ(again.weight_.to_vector<float>(), fc.weight_.to_vector<float>());
  EXPECT_FALSE(Linear(3, 2, /*bias=*/false).bias_.defined());
  EXPECT_EQ(Linear(3, 2, false).named_parameters().size(), 1u);
  EXPECT_EQ(Conv2d(3, 2, 1, {}, false).named_parameters().size(), 1u);
}

TEST(Layers, InitHelpers) {
  manual_seed(3);
  Tensor w = empty({256, 64, 3, 3}, TensorOptions().requires_grad(true));
  init::kaiming_normal_(w, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu);
  std::vector<float> v = w.to_vector<float>();
  double sq = 0;
  for (float x : v) sq += static_cast<double>(x) * x;
  double want = std::sqrt(2.0 / (256 * 9));
  // 147k samples: the sample std is within ~0.4% of the true one; 2% is a wide margin.
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), want, 0.02 * want);
  init::ones_(w);
  EXPECT_EQ(w.to_vector<float>()[7], 1.0f);
  init::zeros_(w);
  EXPECT_EQ(w.to_vector<float>()[7], 0.0f);
  init::uniform_(w, 2.0, 3.0);
  EXPECT_GE(min(w).item(), 2.0);
  init::normal_(w, 5.0, 0.0);
  EXPECT_EQ(max(w).item(), 5.0);
  EXPECT_EQ(init::compute_fans(zeros({10, 4, 3, 3})).fan_in, 36);
  EXPECT_EQ(init::compute_fans(zeros({10, 4, 3, 3})).fan_out, 90);
  EXPECT_THROW(init::compute_fans(zeros({10})), Error);
}

TEST(Layers, BatchNormRunningStats) {
  BatchNorm2d bn(2, 1e-5, 0.25);
  EXPECT_EQ(bn.num_batches_tracked_.dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked_.dim(), 0);
  Tensor x = input({3, 2, 2, 2}, 5);
  Tensor y = bn(x);
  // Per-channel statistics over N, H, W; running = (1 - m) * running + m * stat (unbiased var).
  Tensor mu = mean(x, {0, 2, 3}), v = var(x, {0, 2, 3});
  std::vector<float> rm = bn.running_mean_.to_vector<float>(), rv = bn.running_var_.to_vector<float>();
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(rm[c], 0.25 * mu.to_vector<float>()[c], 1e-6);
    EXPECT_NEAR(rv[c], 0.75 + 0.25 * v.to_vector<float>()[c], 1e-6);
  }
  EXPECT_EQ(bn.num_batches_tracked_.item<int64_t>(), 1);
  // Training output is normalized with the batch statistics: mean 0 per channel.
  for (float m : mean(y, {0, 2, 3}).to_vector<float>()) EXPECT_NEAR(m, 0.0, 1e-5);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked_.item<int64_t>(), 2);
  // Evaluation uses the running statistics and neither updates them nor counts the batch.
  bn.eval();
  std::vector<float> rm2 = bn.running_mean_.to_vector<float>();
  Tensor ye = bn(x);
  EXPECT_EQ(bn.running_mean_.to_vector<float>(), rm2);
  EXPECT_EQ(bn.num_batches_tracked_.item<int64_t>(), 2);
  Tensor want = (x - bn.running_mean_.reshape({1, 2, 1, 1})) / sqrt(bn.running_var_.reshape({1, 2, 1, 1}) + 1e-5);
  std::vector<float> a = ye.to_vector<float>(), b = want.to_vector<float>(), t = y.to_vector<float>();
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5);
    differs = differs || std::abs(a[i] - t[i]) > 1e-3;
  }
  EXPECT_TRUE(differs) << "train and eval outputs should differ";
  EXPECT_THROW(bn(zeros({2, 3, 4, 4})), Error);
  EXPECT_THROW(bn(zeros({2, 2, 4, 4}, DType::f64)), Error);
  EXPECT_THROW(BatchNorm2d(0), Error);
  EXPECT_THROW(BatchNorm2d(2, 1e-5, 1.5), Error);
}

TEST(Layers, DropoutFollowsTrainingMode) {
  Dropout drop(0.5);
  Tensor x = ones({1000});
  manual_seed(7);
  std::vector<float> y = drop(x).to_vector<float>();
  int zeros_seen = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  // The mask comes from the default generator: reseeding reproduces it.
  manual_seed(7);
  EXPECT_EQ(drop(x).to_vector<float>(), y);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(Dropout(1.5), Error);
  EXPECT_THROW(Dropout(-0.1), Error);
}

TEST(Layers, ShapesOfSimpleModules) {
  Tensor x = input({2, 3, 8, 8}, 6);
  EXPECT_EQ(MaxPool2d(2)(x).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(MaxPool2d(3, 2, 1)(x).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(AvgPool2d(2)(x).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(AvgPool2d(3, 1, 1)(x).shape(), (Shape{2, 3, 8, 8}));
  EXPECT_EQ(AdaptiveAvgPool2d(1)(x).shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(AdaptiveAvgPool2d(2, 3)(x).shape(), (Shape{2, 3, 2, 3}));
  EXPECT_EQ(Flatten()(x).shape(), (Shape{2, 192}));
  EXPECT_EQ(Flatten(2)(x).shape(), (Shape{2, 3, 64}));
  EXPECT_TRUE(Identity()(x).same(x));
  EXPECT_EQ(ReLU6()(full({1}, 7.0)).item(), 6.0);
  EXPECT_EQ(ReLU()(full({1}, -1.0)).item(), 0.0);
  EXPECT_EQ(Conv2d(3, 4, 3, Conv2dOptions().stride(2).padding(1))(x).shape(), (Shape{2, 4, 4, 4}));
  EXPECT_EQ(Linear(8, 5)(x).shape(), (Shape{2, 3, 8, 5}));
  EXPECT_THROW(MaxPool2d(0), Error);
  EXPECT_THROW(MaxPool2d(2, 2, 2), Error);
  EXPECT_THROW(Conv2d(3, 4, 3, Conv2dOptions().groups(2)), Error);
  EXPECT_THROW(Conv2d(4, 4, 3)(x), Error);
  EXPECT_THROW(Linear(7, 5)(x), Error);
  EXPECT_THROW(Linear(0, 5), Error);
}

TEST(Layers, Sequential) {
  auto seq = std::make_shared<Sequential>();
  EXPECT_TRUE(seq->empty());
  Tensor x = input({2, 4}, 8);
  EXPECT_TRUE((*seq)(x).same(x));
  auto fc = seq->push_back(std::make_shared<Linear>(4, 3));
  seq->push_back(std::make_shared<ReLU>());
  EXPECT_EQ(seq->size(), 2u);
  EXPECT_EQ(seq->at(0), fc);
  EXPECT_THROW(seq->at(2), Error);
  EXPECT_EQ((*seq)(x).to_vector<float>(), relu((*fc)(x)).to_vector<float>());
  EXPECT_EQ(seq->named_children()[1].first, "1");
  Sequential listed{std::make_shared<Linear>(4, 3), std::make_shared<ReLU6>(), std::make_shared<Linear>(3, 1)};
  EXPECT_EQ(listed(x).shape(), (Shape{2, 1}));
  EXPECT_EQ(listed.named_parameters()[2].first, "2.weight");
}

// A small network end to end in float64: the module gradients (parameters and input) against
// central differences, in training mode (batch statistics) and in evaluation mode.
TEST(Layers, GradcheckSmallNetwork) {
  manual_seed(11);
  Sequential net{std::make_shared<Conv2d>(2, 3, 3, Conv2dOptions().padding(1)),
                 std::make_shared<BatchNorm2d>(3),
                 std::make_shared<ReLU>(),
                 std::make_shared<AdaptiveAvgPool2d>(1),
                 std::make_shared<Flatten>(),
                 std::make_shared<Linear>(3, 2)};
  net.to(DType::f64);
  std::vector<Tensor> inputs = {testing::rand_input({2, 2, 4, 4}, 12)};
  for (const Tensor& p : net.parameters()) inputs.push_back(p);
  auto f = [&net](const std::vector<Tensor>& v) { return net(v[0]); };
  testing::gradcheck(f, inputs);
  net.eval();
  testing::gradcheck(f, inputs);
}

}  // namespace
}  // namespace octet
