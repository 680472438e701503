// Mlp (models/mlp.h): the PrecisionBatching paper's MNIST network by name, its layer names and
// parameter count, forward on images and on flat rows, and its errors.
#include <gtest/gtest.h>

#include "core/octet.h"
#include "models/mlp.h"
#include "models/registry.h"
#include "quant/precision.h"
#include "tests/train/run_util.h"

namespace octet {
namespace {

TEST(Mlp, PaperNetwork) {
  auto net = build_model(ModelOptions().name("mlp").in_channels(1).image_size(28).num_classes(10));
  // 784*4096+4096 + 4096*4096+4096 + 4096*10+10 (PyTorch's count of the reference's nn.Sequential)
  EXPECT_EQ(net->num_parameters(), 3211264 + 4096 + 16777216 + 4096 + 40960 + 10);
  std::vector<std::string> names;
  for (const auto& l : quant::quantizable_layers(*net)) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc0", "fc1", "fc2"}));
  EXPECT_EQ(quant::final_layer_name(*net), "fc2");
}

TEST(Mlp, ForwardMatchesTheLayers) {
  manual_seed(3);
  Mlp net(12, {8, 6}, 3);
  Generator g(5);
  const Tensor x = randn({4, 3, 2, 2}, {}, &g);
  NoGradGuard ng;
  net.eval();
  const Tensor y = net(x);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  // By hand: relu(relu(x W0^T + b0) W1^T + b1) W2^T + b2
  Tensor h = x.reshape({4, 12});
  for (size_t i = 0; i < 3; ++i) {
    h = linear(h, net.fc_[i]->weight_, net.fc_[i]->bias_);
    if (i < 2) h = relu(h);
  }
  const auto a = y.to_vector<float>(), b = h.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << i;
  EXPECT_EQ(net(x.reshape({4, 12})).to_vector<float>(), a);  // flat rows too
  Mlp linear_only(12, {}, 3);
  EXPECT_EQ(linear_only(x).shape(), (Shape{4, 3}));
}

TEST(Mlp, Errors) {
  using octet::train::expect_error;
  expect_error(
      [] {
        build_model(ModelOptions().name("mlp").hidden_sizes({16, 0}));
      },
      "build_model: hidden_sizes: expected >= 1, got 0");
  Mlp net(12, {8}, 3);
  expect_error([&] { net(zeros({2, 5})); }, "Mlp: expected input [N, 12]");
  expect_error([] { Mlp(12, {8}, 3, 1.0); }, "Mlp: dropout must be in [0, 1)");
}

}  // namespace
}  // namespace octet
