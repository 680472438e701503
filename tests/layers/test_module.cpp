// Module: registration rules, recursive accessors and their order, train/eval, dtype and device
// moves, zero_grad, state_dict round trips and load_state_dict's error reports, summary().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/octet.h"
#include "layers/layers.h"
#include "tests/error_of.h"

namespace octet {
namespace {

// A module with own parameters and buffers plus children, to pin down the ordering rules.
class Net : public Module {
 public:
  Net() {
    register_parameter("scale", ones({3}));
    register_buffer("count", zeros({}, DType::i64));
    body_ = register_module("body", std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                                        std::make_shared<Conv2d>(2, 3, 3, Conv2dOptions().padding(1)),
                                        std::make_shared<BatchNorm2d>(3), std::make_shared<ReLU>()}));
    head_ = register_module("head", std::make_shared<Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = body_->forward(x);
    return head_->forward(mean(y, {2, 3}) * named_parameters()[0].second);
  }
  std::string type_name() const override { return "Net"; }
  std::shared_ptr<Sequential> body_;
  std::shared_ptr<Linear> head_;
};

std::vector<std::string> names_of(const NamedTensors& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.first);
  return out;
}

using testing::error_of;

Tensor input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g);
}

TEST(Module, RegistrationRejectsBadNames) {
  Net net;
  EXPECT_NE(error_of([&] { net.register_parameter("scale", ones({1})); }).find("'scale' is already registered"),
            std::string::npos);
  EXPECT_THROW(net.register_buffer("scale", ones({1})), Error);
  EXPECT_THROW(net.register_parameter("body", ones({1})), Error);
  EXPECT_THROW(net.register_module("count", std::make_shared<ReLU>()), Error);
  EXPECT_THROW(net.register_module("head", std::make_shared<ReLU>()), Error);
  EXPECT_THROW(net.register_parameter("", ones({1})), Error);
  EXPECT_NE(error_of([&] { net.register_buffer("a.b", ones({1})); }).find("'.'"), std::string::npos);
  EXPECT_THROW(net.register_module("none", std::shared_ptr<Module>()), Error);
  EXPECT_THROW(net.register_parameter("undefined", Tensor()), Error);
  EXPECT_THROW(net.register_parameter("ints", zeros({2}, DType::i64)), Error);
  // A non-leaf parameter is detached and becomes a leaf requiring grad.
  Tensor w = ones({2}, TensorOptions().requires_grad(true)) * 2.0;
  Tensor& p = net.register_parameter("w", w);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  // References returned by register_* stay valid after more registrations.
  for (int i = 0; i < 20; ++i) net.register_buffer("b" + std::to_string(i), zeros({1}));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Module, AccessorsFollowRegistrationOrder) {
  Net net;
  EXPECT_EQ(names_of(net.named_parameters()),
            (std::vector<std::string>{"scale", "body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias",
                                      "head.weight", "head.bias"}));
  EXPECT_EQ(
      names_of(net.named_buffers()),
      (std::vector<std::string>{"count", "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked"}));
  EXPECT_EQ(names_of(net.state_dict()),
            (std::vector<std::string>{"scale", "count", "body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias",
                                      "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked",
                                      "head.weight", "head.bias"}));
  auto children = net.named_children();
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0].first, "body");
  EXPECT_EQ(children[1].first, "head");
  std::vector<std::string> all;
  for (const auto& [name, m] : net.named_modules()) all.push_back(name + ":" + m->type_name());
  EXPECT_EQ(all, (std::vector<std::string>{"body:Sequential", "body.0:Conv2d", "body.1:BatchNorm2d", "body.2:ReLU",
                                           "head:Linear"}));
  EXPECT_EQ(net.num_parameters(), 3 + (3 * 2 * 9 + 3) + 6 + (2 * 3 + 2));
  EXPECT_EQ(net.parameters().size(), 7u);
  // parameters() are the module's own handles (an optimizer updates them in place).
  EXPECT_TRUE(net.parameters()[5].same(net.head_->weight_));
  // A tensor registered twice is listed once.
  net.register_parameter("shared", net.head_->weight_);
  EXPECT_EQ(net.parameters().size(), 7u);
}

TEST(Module, TrainEvalIsRecursive) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.body_->at(1)->is_training());
  EXPECT_FALSE(net.head_->is_training());
  net.train();
  EXPECT_TRUE(net.body_->at(1)->is_training());
}

TEST(Module, ZeroGradClearsEveryGrad) {
  Net net;
  sum(net(input({2, 2, 4, 4}, 1))).backward();
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, ToDTypeKeepsHandles) {
  Net net;
  Tensor w = net.head_->weight_;
  std::vector<float> before = w.to_vector<float>();
  net.to(DType::f64);
  EXPECT_EQ(w.dtype(), DType::f64);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(net.named_parameters()[5].second.same(w));
  std::vector<double> after = w.to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], static_cast<double>(before[i]));
  for (const auto& [name, b] : net.named_buffers())
    EXPECT_EQ(b.dtype(), name.find("count") != std::string::npos || name.find("tracked") != std::string::npos
                             ? DType::i64
                             : DType::f64)
        << name;
  // It still trains: a backward reaches the converted leaves with f64 grads.
  sum(net(input({2, 2, 4, 4}, 2).to(DType::f64))).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f64);
  EXPECT_THROW(net.to(DType::i32), Error);
}

TEST(Module, ToDevice) {
  Net net;
  net.to(Device::cpu());
  if (!cuda_compiled()) {
    std::string msg = error_of([&] { net.to(Device::cuda(0)); });
    EXPECT_NE(msg.find("CUDA backend is not built"), std::string::npos) << msg;
  }
}

TEST(Module, StateDictRoundTripGivesIdenticalOutputs) {
  manual_seed(1);
  Net a;
  a(input({4, 2, 5, 5}, 3));  // moves the BatchNorm running statistics away from 0/1
  manual_seed(2);
  Net b;
  Tensor x = input({3, 2, 5, 5}, 4);
  a.eval();
  b.eval();
  EXPECT_NE(a(x).to_vector<float>(), b(x).to_vector<float>());
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a(x).to_vector<float>(), b(x).to_vector<float>());
  EXPECT_EQ(b.body_->named_buffers()[2].second.item<int64_t>(), 1);
  // Values were copied, not aliased.
  {
    NoGradGuard ng;
    a.head_->weight_.fill_(0.0);
  }
  EXPECT_NE(b.head_->weight_.to_vector<float>()[0], 0.0f);
}

TEST(Module, LoadStateDictReportsEveryProblem) {
  Net net;
  NamedTensors sd = net.state_dict();
  NamedTensors bad;
  for (const auto& [name, t] : sd) {
    if (name == "body.0.bias" || name == "body.1.running_var") continue;  // missing
    if (name == "head.weight")
      bad.emplace_back(name, zeros({3, 2}));  // transposed shape
    else if (name == "scale")
      bad.emplace_back(name, zeros({3}, DType::f64));  // wrong dtype
    else
      bad.emplace_back(name, t);
  }
  bad.emplace_back("head.extra", zeros({1}));
  bad.emplace_back("tail.weight", zeros({1}));
  std::vector<float> before = net.body_->named_parameters()[0].second.to_vector<float>();
  std::string msg = error_of([&] { net.load_state_dict(bad); });
  for (const char* want : {"missing keys: body.0.bias, body.1.running_var", "unexpected keys: head.extra, tail.weight",
                           "shape mismatch for 'head.weight': expected [2, 3], got [3, 2]",
                           "dtype mismatch for 'scale': expected f32, got f64"})
    EXPECT_NE(msg.find(want), std::string::npos) << "missing \"" << want << "\" in:\n" << msg;
  // Nothing was copied from a rejected state dict.
  EXPECT_EQ(net.body_->named_parameters()[0].second.to_vector<float>(), before);

  // Non-strict ignores missing and unexpected names but still checks shapes and dtypes.
  msg = error_of([&] { net.load_state_dict(bad, /*strict=*/false); });
  EXPECT_EQ(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape mismatch for 'head.weight'"), std::string::npos) << msg;
  NamedTensors partial = {{"head.bias", full({2}, 0.5)}, {"other", zeros({7})}};
  net.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(net.head_->bias_.to_vector<float>(), (std::vector<float>{0.5, 0.5}));
  EXPECT_THROW(net.load_state_dict(partial), Error);
  // Duplicate keys are an error too.
  NamedTensors dup = net.state_dict();
  dup.push_back(dup.front());
  EXPECT_NE(error_of([&] { net.load_state_dict(dup); }).find("duplicate key 'scale'"), std::string::npos);
}

TEST(Module, Summary) {
  Net net;
  std::string s = net.summary();
  EXPECT_EQ(s.rfind("Net(  # 74 params\n", 0), 0u) << s;
  EXPECT_NE(s.find("  (body): Sequential(  # 63 params\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    (0): Conv2d(2, 3, kernel_size=3, padding=1)  # 57 params\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    (2): ReLU()\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  (head): Linear(in_features=3, out_features=2, bias=true)  # 8 params\n"), std::string::npos) << s;
}

}  // namespace
}  // namespace octet
