// The INT8 convolution fused with the batch norm in front of it (quant/int8_conv.h,
// int8_conv2d_batch_norm; the kernel quant/cpu/int8_bn_quant.cpp): bit for bit the composition
// batch_norm -> int8_conv2d -- output, running statistics, the layer's stats, every gradient, over
// two training steps -- on odd geometries, each activation, with and without affine parameters and
// bias, on values that saturate ReLU6, all-zero and non-finite inputs, on every ISA; and the models
// that run it after the fusion pass (MobileNetV2 across its nested Sequentials, the ResNet blocks)
// with the fusion on and off.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/cpu/isa.h"
#include "core/octet.h"
#include "layers/conv.h"
#include "layers/fusion.h"
#include "layers/sequential.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "quant/int8_conv.h"
#include "quant/int8_model.h"
#include "tests/isa_scope.h"
#include "tests/quant/same_bytes.h"

namespace octet::quant {
namespace {

struct FusionCase {
  std::string name;
  int64_t n, c, h, w, k, r;
  Conv2dOptions opts;
  NormActivation act;
  bool affine, bias;
};

std::vector<FusionCase> cases() {
  return {
      {"pointwise_relu6", 3, 5, 7, 6, 9, 1, Conv2dOptions(), NormActivation::relu6, true, false},
      {"depthwise_relu6", 2, 37, 5, 5, 37, 3, Conv2dOptions().padding(1).groups(37), NormActivation::relu6, true,
       false},
      {"depthwise_s2_relu6", 2, 12, 9, 7, 12, 3, Conv2dOptions().stride(2).padding(1).groups(12), NormActivation::relu6,
       true, true},
      {"conv3x3_relu", 2, 6, 8, 9, 4, 3, Conv2dOptions().padding(1), NormActivation::relu, true, true},
      {"conv3x3_relu_plain_bn", 3, 4, 5, 7, 5, 3, Conv2dOptions().padding(1).stride(2), NormActivation::relu, false,
       false},
      {"pointwise_no_act", 2, 3, 6, 6, 4, 1, Conv2dOptions(), NormActivation::none, true, true},
  };
}

Tensor random(const Shape& shape, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator g(seed);
  return randn(shape, {}, &g) * scale + shift;
}

struct Result {
  std::vector<Tensor> tensors;  // outputs, running stats, gradients
  std::vector<double> stats;    // the layer's stats after each step
};

// Two training steps of act(bn(z)) -> INT8 conv, fused or as the two ops, from the same state.
Result run(const FusionCase& fc, bool fused, const Tensor& z_values) {
  Tensor z = z_values.clone().requires_grad_(true);
  Tensor gamma = fc.affine ? random({fc.c}, 2, 1.0, 0.3).requires_grad_(true) : Tensor();  // some negative
  Tensor beta = fc.affine ? random({fc.c}, 3, 0.5).requires_grad_(true) : Tensor();
  Tensor rm = zeros({fc.c}), rv = ones({fc.c});
  Tensor w = random({fc.k, fc.c / fc.opts.groups_, fc.r, fc.r}, 4, 0.3).requires_grad_(true);
  Tensor b = fc.bias ? random({fc.k}, 5).requires_grad_(true) : Tensor();
  auto layer = std::make_shared<Int8Layer>();
  layer->seed = 17;
  layer->config.clip_update_period_ = 2;  // the second step reuses the first step's clip
  Result res;
  for (int step = 0; step < 2; ++step) {
    for (Tensor* t : {&z, &gamma, &beta, &w, &b})
      if (t->defined()) t->set_grad(Tensor());
    const BatchNormArgs bn{rm, rv, gamma, beta, 0.1, 1e-5, fc.act};
    Tensor y = fused ? int8_conv2d_batch_norm(z, bn, w, b, fc.opts, layer)
                     : int8_conv2d(batch_norm(z, {.running_mean = rm,
                                                  .running_var = rv,
                                                  .weight = gamma,
                                                  .bias = beta,
                                                  .training = true,
                                                  .act = fc.act}),
                                   w, b, fc.opts, layer);
    y.backward(random(y.shape(), 6 + static_cast<uint64_t>(step), 0.1));
    res.tensors.push_back(y.detach().clone());
    for (const Tensor* t : {&rm, &rv, &z, &gamma, &beta, &w, &b}) {
      if (!t->defined()) continue;
      res.tensors.push_back(t->clone());
      if (t->requires_grad()) res.tensors.push_back(t->grad().clone());
    }
    const Int8Stats& s = layer->stats;
    res.stats.insert(res.stats.end(), {s.input_clip, s.weight_clip, s.grad_clip, s.cos_distance,
                                       double(s.backward_steps), double(s.searches)});
  }
  return res;
}

void expect_same(const Result& got, const Result& want, const std::string& what) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << what;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    ASSERT_EQ(got.tensors[i].shape(), want.tensors[i].shape()) << what << " tensor " << i;
    EXPECT_TRUE(testing::same_bytes(got.tensors[i].data<float>(), want.tensors[i].data<float>(), got.tensors[i].numel(),
                                    sizeof(float), what + " tensor " + std::to_string(i)));
  }
  ASSERT_EQ(got.stats.size(), want.stats.size());
  for (size_t i = 0; i < got.stats.size(); ++i)
    EXPECT_TRUE(got.stats[i] == want.stats[i] || (std::isnan(got.stats[i]) && std::isnan(want.stats[i])))
        << what << " stat " << i << ": " << got.stats[i] << " vs " << want.stats[i];
}

TEST(Int8BnFusion, SameBitsAsBatchNormThenInt8Conv) {
  for (const FusionCase& fc : cases()) {
    // Wide values: ReLU6 saturates on some, clips below zero on others.
    const Tensor z = random({fc.n, fc.c, fc.h, fc.w}, 1, 3.0, 0.5);
    expect_same(run(fc, true, z), run(fc, false, z), fc.name);
  }
}

TEST(Int8BnFusion, EveryIsaGivesTheSameBits) {
  octet::testing::IsaScope isa_scope;
  for (const FusionCase& fc : {cases()[1], cases()[3]}) {
    const Tensor z = random({fc.n, fc.c, fc.h, fc.w}, 9, 2.0);
    octet::cpu::set_active_isa(octet::cpu::Isa::portable);
    const Result want = run(fc, false, z);
    for (octet::cpu::Isa isa : {octet::cpu::Isa::portable, octet::cpu::Isa::avx2, octet::cpu::Isa::avx512}) {
      if (!octet::cpu::isa_supported(isa)) continue;
      octet::cpu::set_active_isa(isa);
      expect_same(run(fc, true, z), want, fc.name + " " + std::string(octet::cpu::isa_name(isa)));
    }
  }
}

// A constant channel (variance 0: scale 1/sqrt(eps)), an all-zero input (clip 0: every code 0),
// and NaN and infinite values (NaN statistics in their channels) give the composition's bits too.
TEST(Int8BnFusion, DegenerateAndNonFiniteInputs) {
  const FusionCase fc = cases()[0];
  Tensor constant = random({fc.n, fc.c, fc.h, fc.w}, 11);
  constant.narrow(1, 2, 1).fill_(4.0);
  Tensor nonfinite = random({fc.n, fc.c, fc.h, fc.w}, 12);
  nonfinite.narrow(1, 1, 1).narrow(0, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  nonfinite.narrow(1, 3, 1).narrow(0, 1, 1).fill_(std::numeric_limits<double>::infinity());
  for (const auto& [name, z] : std::vector<std::pair<std::string, Tensor>>{
           {"constant channel", constant}, {"zeros", zeros({fc.n, fc.c, fc.h, fc.w})}, {"non-finite", nonfinite}})
    for (NormActivation act : {NormActivation::relu6, NormActivation::none}) {
      FusionCase c = fc;
      c.act = act;
      expect_same(run(c, true, z), run(c, false, z), name + (act == NormActivation::none ? " (no act)" : ""));
    }
}

TEST(Int8BnFusion, ChecksItsArguments) {
  auto layer = std::make_shared<Int8Layer>();
  Tensor z = random({2, 3, 4, 4}, 1), w = random({4, 3, 1, 1}, 2);
  EXPECT_THROW(int8_conv2d_batch_norm(z, {}, w, {}, {}, nullptr), Error);
  BatchNormArgs four;
  four.running_mean = zeros({4}), four.running_var = ones({4});
  EXPECT_THROW(int8_conv2d_batch_norm(z, four, w, {}, {}, layer), Error);                      // [C] is 3
  EXPECT_THROW(int8_conv2d_batch_norm(random({1, 3, 1, 1}, 3), {}, w, {}, {}, layer), Error);  // one value
  EXPECT_THROW(int8_conv2d_batch_norm(z, {}, random({4, 2, 1, 1}, 4), {}, {}, layer), Error);  // channels
  EXPECT_NO_THROW(int8_conv2d_batch_norm(z, {}, w, {}, {}, layer));
}

// Two training steps of a model -- loss, every parameter's gradient, every buffer -- with the
// fusion on and off. `make` builds the model (the same weights each time).
std::vector<Tensor> model_steps(const std::function<std::shared_ptr<Module>()>& make, int64_t channels, int64_t image,
                                bool fused) {
  const Int8BnFusion saved = set_int8_bn_fusion(fused ? Int8BnFusion::on : Int8BnFusion::off);
  manual_seed(3);
  std::shared_ptr<Module> net = make();
  enable_int8(*net, Int8Config{}, /*keep_first_last_float=*/false, 7);
  net->train();
  Tensor x = random({4, channels, image, image}, 21);
  fuse(*net, x);  // the fusion pass sets the groups up; set_int8_bn_fusion turns the INT8 one on or off
  std::vector<Tensor> out;
  for (int step = 0; step < 2; ++step) {
    for (const auto& [n, p] : net->named_parameters()) p.set_grad(Tensor());
    Tensor y = net->forward(x);
    Tensor loss = sum(y * random(y.shape(), 22 + static_cast<uint64_t>(step)));
    loss.backward();
    out.push_back(loss.detach().clone());
    for (const auto& [n, p] : net->named_parameters()) out.push_back(p.grad().clone());
  }
  for (const auto& [n, b] : net->named_buffers()) out.push_back(b.to(DType::f64));
  set_int8_bn_fusion(saved);
  return out;
}

// MobileNetV2-CIFAR (its blocks through Sequential), ResNet-20 (BasicBlock) and a ResNet-50
// Bottleneck with a projection shortcut.
TEST(Int8BnFusion, ModelsGiveTheSameBitsFusedOrNot) {
  struct Case {
    std::string name;
    std::function<std::shared_ptr<Module>()> make;
    int64_t channels, image;
  };
  const std::vector<Case> models = {
      {"mobilenetv2_cifar", [] { return build_model(ModelOptions().name("mobilenetv2_cifar").num_classes(10)); }, 3, 8},
      {"resnet20", [] { return build_model(ModelOptions().name("resnet20").num_classes(10)); }, 3, 12},
      {"bottleneck", [] { return std::make_shared<Bottleneck>(16, 8, 2); }, 16, 9},
  };
  for (const Case& m : models) {
    const std::vector<Tensor> fused = model_steps(m.make, m.channels, m.image, true),
                              plain = model_steps(m.make, m.channels, m.image, false);
    ASSERT_EQ(fused.size(), plain.size()) << m.name;
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_EQ(fused[i].dtype(), plain[i].dtype()) << m.name << " " << i;
      const int64_t elem = fused[i].dtype() == DType::f64 ? 8 : 4;
      EXPECT_TRUE(testing::same_bytes(fused[i].raw_data(), plain[i].raw_data(), fused[i].numel(), elem,
                                      m.name + " result " + std::to_string(i)));
    }
  }
}

// Nodes of each name in the graph behind t.
std::map<std::string, int> node_counts(const Tensor& t) {
  std::map<std::string, int> counts;
  std::set<const autograd::Node*> seen;
  std::vector<std::shared_ptr<autograd::Node>> todo{t.grad_fn()};
  while (!todo.empty()) {
    std::shared_ptr<autograd::Node> n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    ++counts[n->name()];
    for (const autograd::Edge& e : n->next_edges()) todo.push_back(e.node);
  }
  return counts;
}

// The fused op runs wherever the models have BN -> ReLU/ReLU6 -> INT8 conv: in MobileNetV2-CIFAR
// the depthwise convolution after each of the 16 expansions, the projection after each of the 17
// depthwise convolutions, and the first block's depthwise convolution after the stem -- across the
// nested Sequentials and into the block (34; Sequential's own fusion stopped at the block: 33) --,
// in ResNet-20 every block's
// second convolution (9) and in a Bottleneck the second and third, once the fusion pass set them
// up; with the setting off or in evaluation mode, none.
TEST(Int8BnFusion, ModelsTakeTheFusedPath) {
  for (const auto& [name, fused] :
       std::vector<std::pair<std::string, int>>{{"mobilenetv2_cifar", 34}, {"resnet20", 9}}) {
    auto net = build_model(ModelOptions().name(name).num_classes(10).image_size(16));
    enable_int8(*net, Int8Config{}, /*keep_first_last_float=*/true, 7);
    net->train();
    Tensor x = random({2, 3, 16, 16}, 21).requires_grad_(true);
    EXPECT_EQ(fuse(*net, x).count("batch_norm+relu6+int8_conv") + fuse(*net, x).count("batch_norm+relu+int8_conv"),
              static_cast<size_t>(fused))
        << name;
    EXPECT_EQ(node_counts(net->forward(x))["int8_conv2d_batch_norm"], fused) << name;
    const Int8BnFusion saved = set_int8_bn_fusion(Int8BnFusion::off);
    EXPECT_EQ(node_counts(net->forward(x))["int8_conv2d_batch_norm"], 0) << name;
    set_int8_bn_fusion(saved);
    net->eval();
    EXPECT_EQ(node_counts(net->forward(x))["int8_conv2d_batch_norm"], 0) << name;
  }
  auto block = std::make_shared<Bottleneck>(16, 8, 2);  // conv2 and conv3 take bn1 and bn2
  enable_int8(*block, Int8Config{}, /*keep_first_last_float=*/false, 7);
  const Tensor x = random({2, 16, 9, 9}, 23).requires_grad_(true);
  fuse(*block, x);
  EXPECT_EQ(node_counts(block->forward(x))["int8_conv2d_batch_norm"], 2);
}

TEST(Int8BnFusion, SettingParsesAndRestores) {
  EXPECT_EQ(int8_bn_fusion_selector().parse("off"), Int8BnFusion::off);
  EXPECT_THROW(int8_bn_fusion_selector().parse("maybe"), Error);
  const Int8BnFusion saved = set_int8_bn_fusion(Int8BnFusion::off);
  EXPECT_FALSE(int8_bn_fusion());
  set_int8_bn_fusion(Int8BnFusion::on);
  EXPECT_TRUE(int8_bn_fusion());
  set_int8_bn_fusion(saved);
}

}  // namespace
}  // namespace octet::quant
