// enable_int8: which convolutions of the registry's models become INT8 (the paper keeps the first
// convolution and the final layer float), the parameter names a trainer scales with DCLR, the
// per-layer seeds, and the errors.
#include <gtest/gtest.h>

#include <set>

#include "core/octet.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "models/registry.h"
#include "quant/int8_conv.h"
#include "quant/int8_model.h"

namespace octet::quant {
namespace {

// Every Conv2d of the model by name, and whether it is INT8.
std::vector<std::pair<std::string, bool>> convs_of(const Module& m) {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& [name, mod] : m.named_modules())
    if (auto c = std::dynamic_pointer_cast<Conv2d>(mod)) out.emplace_back(name, c->int8() != nullptr);
  return out;
}

std::vector<std::string> names_of(const std::vector<Int8Module>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.name);
  return out;
}

void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Conv2d's INT8 mode is quant::int8_conv2d with the layer's weight, bias, options and state.
TEST(Int8Model, Conv2dLayerMode) {
  Generator g(3);
  Tensor x = randn({2, 4, 7, 7}, {}, &g);
  Conv2d conv(4, 6, 3, Conv2dOptions().padding(1).stride(2));
  auto layer = std::make_shared<Int8Layer>();
  layer->seed = 9;
  conv.set_int8(layer);
  EXPECT_EQ(conv.int8(), layer);
  EXPECT_EQ(conv.extra_repr(), "4, 6, kernel_size=3, stride=2, padding=1, int8");
  Tensor y = conv(x);
  EXPECT_GT(layer->stats.input_clip, 0.0f);
  EXPECT_GT(layer->stats.weight_clip, 0.0f);
  auto twin = std::make_shared<Int8Layer>();
  twin->seed = 9;
  {
    NoGradGuard ng;
    EXPECT_EQ(y.to_vector<float>(), int8_conv2d(x, conv.weight_, conv.bias_, conv.options_, twin).to_vector<float>());
  }
  sum(y).backward();
  EXPECT_EQ(layer->stats.backward_steps, 1);  // the autograd node updates the layer's stats
  EXPECT_FALSE(std::isnan(layer->stats.cos_distance));
  EXPECT_TRUE(conv.weight_.grad().defined());

  conv.set_int8(nullptr);  // back to float
  EXPECT_EQ(conv.extra_repr(), "4, 6, kernel_size=3, stride=2, padding=1");
  NoGradGuard ng;
  EXPECT_EQ(conv(x).to_vector<float>(), conv2d(x, conv.weight_, conv.bias_, conv.options_).to_vector<float>());
}

TEST(Int8Model, SmallCnn) {
  auto net = build_model(ModelOptions().name("small_cnn").in_channels(1).image_size(28));
  Int8Config config;
  config.clip_update_period_ = 7;
  auto layers = enable_int8(*net, config, /*keep_first_last_float=*/true, 0);
  // Two convolutions: the first stays float, the second (32 -> 64) trains in INT8.
  EXPECT_EQ(names_of(layers), std::vector<std::string>{"features.4"});
  EXPECT_EQ(convs_of(*net), (std::vector<std::pair<std::string, bool>>{{"features.0", false}, {"features.4", true}}));
  EXPECT_EQ(layers[0].params, std::vector<std::string>{"features.4.weight"});  // no bias: BatchNorm follows
  EXPECT_EQ(layers[0].layer->config.clip_update_period_, 7);
  EXPECT_EQ(layers[0].layer->stats.backward_steps, 0);
  auto* conv = dynamic_cast<Conv2d*>(net->named_modules()[5].second.get());
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->int8(), layers[0].layer);  // the layer and the trainer share one state
  EXPECT_NE(net->summary().find("bias=false, int8"), std::string::npos) << net->summary();

  auto all = build_model(ModelOptions().name("small_cnn").in_channels(1).image_size(28));
  EXPECT_EQ(names_of(enable_int8(*all, config, /*keep_first_last_float=*/false, 0)),
            (std::vector<std::string>{"features.0", "features.4"}));
}

TEST(Int8Model, MobileNetV2AndResNets) {
  struct Case {
    const char* model;
    size_t convs;
    const char* first;
  };
  // Conv counts: MobileNetV2 stem + 17 blocks (2 + 16 x 3 convs) + 1x1 head = 52; ResNet-50
  // 1 + 16 x 3 + 4 projections = 53; ResNet-20 (option A shortcuts) 1 + 9 x 2 = 19.
  for (const Case& c :
       {Case{"mobilenetv2_cifar", 52, "features.0.0"}, Case{"resnet50", 53, "conv1"}, Case{"resnet20", 19, "conv1"}}) {
    SCOPED_TRACE(c.model);
    auto net = build_model(ModelOptions().name(c.model).width_mult(0.25));
    auto layers = enable_int8(*net, Int8Config{}, true, 5);
    auto convs = convs_of(*net);
    ASSERT_EQ(convs.size(), c.convs);
    EXPECT_EQ(convs[0], std::make_pair(std::string(c.first), false));
    EXPECT_EQ(layers.size(), c.convs - 1);  // the classifier is a Linear: only the first conv stays float
    for (size_t i = 1; i < convs.size(); ++i) EXPECT_TRUE(convs[i].second) << convs[i].first;
    // Parameter names are the model's own, and the seeds are distinct.
    std::set<std::string> params;
    for (const auto& [n, t] : net->named_parameters()) params.insert(n);
    std::set<uint64_t> seeds;
    for (const auto& l : layers) {
      ASSERT_EQ(l.params.size(), 1u) << l.name;
      EXPECT_EQ(l.params[0], l.name + ".weight");
      EXPECT_TRUE(params.count(l.params[0])) << l.params[0];
      seeds.insert(l.layer->seed);
    }
    EXPECT_EQ(seeds.size(), layers.size());
  }
  // MobileNetV2's depthwise convolutions are INT8 too (the paper quantizes every convolution).
  auto net = build_model(ModelOptions().name("mobilenetv2_cifar").width_mult(0.25));
  auto layers = enable_int8(*net, Int8Config{}, true, 0);
  EXPECT_EQ(layers.front().name, "features.1.conv.0.0");  // the first block's depthwise conv
  EXPECT_EQ(layers.back().name, "features.18.0");         // the 1x1 head conv
}

TEST(Int8Model, FinalConvStaysFloatAndBiasesAreListed) {
  auto seq = [] {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Conv2d>(3, 4, 3), std::make_shared<ReLU>(), std::make_shared<Conv2d>(4, 4, 3),
        std::make_shared<ReLU>(), std::make_shared<Conv2d>(4, 2, 1)});
  };
  auto net = seq();
  auto layers = enable_int8(*net, Int8Config{}, true, 0);
  EXPECT_EQ(names_of(layers), std::vector<std::string>{"2"});  // first and final convs stay float
  EXPECT_EQ(layers[0].params, (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_EQ(names_of(enable_int8(*seq(), Int8Config{}, false, 0)), (std::vector<std::string>{"0", "2", "4"}));

  // Seeds depend on the conv's index among all convs, not on which others are INT8.
  EXPECT_EQ(layers[0].layer->seed, int8_layer_seed(0, 1));  // module "2" is the second Conv2d
  EXPECT_EQ(int8_layer_seed(3, 1), int8_layer_seed(3, 1));
  EXPECT_NE(int8_layer_seed(3, 1), int8_layer_seed(3, 2));
  EXPECT_NE(int8_layer_seed(3, 1), int8_layer_seed(4, 1));
}

TEST(Int8Model, LeavesTheDefaultGeneratorAlone) {
  auto net = build_model(ModelOptions().name("resnet20"));
  manual_seed(11);
  const uint64_t offset = default_generator().offset();
  enable_int8(*net, Int8Config{}, true, 11);
  EXPECT_EQ(default_generator().offset(), offset);  // a float and an INT8 run draw the same numbers
}

TEST(Int8Model, Errors) {
  auto mlp = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Module>>{std::make_shared<Linear>(4, 8), std::make_shared<Linear>(8, 2)});
  expect_error([&] { enable_int8(*mlp, Int8Config{}, true, 0); }, "has no Conv2d layers");
  auto one = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Module>>{std::make_shared<Conv2d>(1, 2, 3), std::make_shared<Linear>(2, 2)});
  expect_error([&] { enable_int8(*one, Int8Config{}, true, 0); }, "every Conv2d layer of the model stays float");
  EXPECT_EQ(enable_int8(*one, Int8Config{}, false, 0).size(), 1u);
  expect_error([&] { enable_int8(*one, Int8Config{}, false, 0); }, "0 is INT8 already");
  Int8Config bad;
  bad.clip_update_period_ = 0;
  expect_error([&] { enable_int8(*mlp, bad, true, 0); }, "clip_update_period must be >= 1");
  bad = Int8Config{};
  bad.dclr_beta_ = 0;
  expect_error([&] { enable_int8(*mlp, bad, true, 0); }, "dclr_beta must be in (0, 1]");
}

}  // namespace
}  // namespace octet::quant
