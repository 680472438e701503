// The model zoo: parameter counts equal to the reference architectures (torchvision for the
// ImageNet models, the ResNet paper's CIFAR networks), forward shapes, torchvision-compatible
// names, state_dict round trips, and the registry's validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/octet.h"
#include "models/mobilenetv2.h"
#include "models/registry.h"
#include "models/resnet.h"

namespace octet {
namespace {

Tensor input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g);
}

bool has_key(const Module& m, const std::string& key) {
  for (const auto& [name, t] : m.state_dict())
    if (name == key) return true;
  return false;
}

// Reference counts: torchvision's models (sum(p.numel() for p in m.parameters())) and, for the
// CIFAR ResNets, the common reference implementation (0.27M / 0.85M in the paper's table).
TEST(Models, ParameterCountsMatchReferences) {
  struct Case {
    ModelOptions opts;
    int64_t params;
  };
  const Case cases[] = {
      {ModelOptions().name("resnet18").num_classes(1000), 11'689'512},
      {ModelOptions().name("resnet34").num_classes(1000), 21'797'672},
      {ModelOptions().name("resnet50").num_classes(1000), 25'557'032},
      {ModelOptions().name("mobilenetv2").num_classes(1000), 3'504'872},
      {ModelOptions().name("mobilenetv2_cifar").num_classes(10), 2'236'682},
      {ModelOptions().name("resnet20").shortcut("A"), 269'722},
      {ModelOptions().name("resnet20").shortcut("B"), 272'474},
      {ModelOptions().name("resnet56").shortcut("A"), 853'018},
  };
  for (const Case& c : cases) EXPECT_EQ(build_model(c.opts)->num_parameters(), c.params) << c.opts.name_;
}

TEST(Models, ForwardShapes) {
  auto r50 = build_model(ModelOptions().name("resnet50").num_classes(1000));
  r50->eval();
  EXPECT_EQ((*r50)(input({1, 3, 64, 64}, 1)).shape(), (Shape{1, 1000}));

  auto mnv2 = build_model(ModelOptions().name("mobilenetv2_cifar"));
  EXPECT_EQ((*mnv2)(input({2, 3, 32, 32}, 2)).shape(), (Shape{2, 10}));
  // The CIFAR variant ends at 4x4 on 32x32 inputs (the ImageNet one would end at 1x1).
  auto* net = dynamic_cast<MobileNetV2*>(mnv2.get());
  ASSERT_NE(net, nullptr);
  NoGradGuard ng;
  EXPECT_EQ(net->features_->forward(input({1, 3, 32, 32}, 3)).shape(), (Shape{1, 1280, 4, 4}));

  auto cnn = build_model(ModelOptions().name("small_cnn").in_channels(1).image_size(28));
  EXPECT_EQ((*cnn)(input({2, 1, 28, 28}, 4)).shape(), (Shape{2, 10}));
  EXPECT_EQ(cnn->num_parameters(), (9 * 32 + 64) + (32 * 9 * 64 + 128) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10));
  EXPECT_THROW((*cnn)(input({2, 1, 32, 32}, 4)), Error);
  auto cnn32 = build_model(ModelOptions().name("small_cnn").in_channels(3).image_size(32).num_classes(5));
  EXPECT_EQ((*cnn32)(input({2, 3, 32, 32}, 5)).shape(), (Shape{2, 5}));
}

TEST(Models, CifarResNetTrainsThroughBothShortcuts) {
  for (const char* shortcut : {"A", "B"}) {
    auto net = build_model(ModelOptions().name("resnet20").shortcut(shortcut));
    Tensor y = (*net)(input({2, 3, 16, 16}, 6));
    EXPECT_EQ(y.shape(), (Shape{2, 10}));
    cross_entropy(y, from_vector<int64_t>({1, 7}, {2})).backward();
    for (const auto& [name, p] : net->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << shortcut << " " << name;
    }
    // The first conv's gradient has flowed through every stage transition.
    EXPECT_GT(max(abs(net->named_parameters()[0].second.grad())).item(), 0.0) << shortcut;
  }
}

TEST(Models, OptionAShortcutIsSubsampledInputWithZeroChannels) {
  BasicBlock block(2, 4, 2, Shortcut::A);
  // With the residual branch zeroed, the block computes relu(shortcut(x)).
  {
    NoGradGuard ng;
    block.bn2_->weight_.zero_();
  }
  Tensor x = input({1, 2, 4, 4}, 7);
  Tensor y = block(x);
  ASSERT_EQ(y.shape(), (Shape{1, 4, 2, 2}));
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        float want = c == 0 || c == 3 ? 0.0f : std::max(0.0f, xv[((c - 1) * 4 + 2 * i) * 4 + 2 * j]);
        EXPECT_EQ(yv[(c * 2 + i) * 2 + j], want) << c << " " << i << " " << j;
      }
}

TEST(Models, TorchvisionNames) {
  auto mnv2 = build_model(ModelOptions().name("mobilenetv2").num_classes(1000));
  for (const char* key : {"features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
                          "features.1.conv.1.weight", "features.2.conv.0.0.weight", "features.2.conv.3.bias",
                          "features.18.0.weight", "classifier.1.weight", "classifier.1.bias"})
    EXPECT_TRUE(has_key(*mnv2, key)) << key;
  EXPECT_EQ(mnv2->state_dict().size(), 314u);  // len(torchvision mobilenet_v2().state_dict())
  auto r50 = build_model(ModelOptions().name("resnet50").num_classes(1000));
  for (const char* key : {"conv1.weight", "bn1.num_batches_tracked", "layer1.0.downsample.0.weight",
                          "layer1.0.downsample.1.running_var", "layer4.2.conv3.weight", "fc.bias"})
    EXPECT_TRUE(has_key(*r50, key)) << key;
  EXPECT_EQ(r50->state_dict().size(), 320u);  // len(torchvision resnet50().state_dict())
}

TEST(Models, StateDictRoundTrip) {
  manual_seed(1);
  auto a = build_model(ModelOptions().name("resnet20"));
  (*a)(input({4, 3, 8, 8}, 8));  // training step moves BatchNorm statistics
  manual_seed(2);
  auto b = build_model(ModelOptions().name("resnet20"));
  a->eval();
  b->eval();
  Tensor x = input({2, 3, 8, 8}, 9);
  b->load_state_dict(a->state_dict());
  EXPECT_EQ((*a)(x).to_vector<float>(), (*b)(x).to_vector<float>());
  // A checkpoint of one architecture does not load into another.
  auto c = build_model(ModelOptions().name("resnet20").shortcut("B"));
  EXPECT_THROW(c->load_state_dict(a->state_dict()), Error);
}

TEST(Models, Summary) {
  std::string s = build_model(ModelOptions().name("resnet20"))->summary();
  EXPECT_EQ(s.rfind("CifarResNet(  # 269,722 params\n  depth=20, shortcut=A\n"
                    "  (conv1): Conv2d(3, 16, kernel_size=3, padding=1, bias=false)  # 432 params\n",
                    0),
            0u)
      << s;
  EXPECT_NE(s.find("      (conv1): Conv2d(16, 32, kernel_size=3, stride=2, padding=1, bias=false)  # 4,608 params\n"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.substr(s.size() - 2), ")\n");
}

TEST(Models, Registry) {
  std::vector<std::string> names = model_names();
  for (const char* n :
       {"small_cnn", "mobilenetv2", "mobilenetv2_cifar", "resnet18", "resnet34", "resnet50", "resnet20", "resnet56"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  try {
    build_model(ModelOptions().name("vgg16"));
    ADD_FAILURE() << "expected an octet::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown model \"vgg16\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("mobilenetv2_cifar"), std::string::npos) << msg;
    EXPECT_NE(msg.find("small_cnn"), std::string::npos) << msg;
  }
  EXPECT_THROW(build_model(ModelOptions().num_classes(0)), Error);
  EXPECT_THROW(build_model(ModelOptions().in_channels(-1)), Error);
  EXPECT_THROW(build_model(ModelOptions().image_size(2)), Error);  // small_cnn needs >= 4
  EXPECT_THROW(build_model(ModelOptions().name("mobilenetv2_cifar").width_mult(0)), Error);
  EXPECT_THROW(build_model(ModelOptions().dropout(1.0)), Error);
  EXPECT_THROW(build_model(ModelOptions().name("resnet20").shortcut("C")), Error);
  EXPECT_EQ(make_divisible(32 * 0.35), 16);
  EXPECT_EQ(make_divisible(1280 * 1.4), 1792);
  EXPECT_EQ(build_model(ModelOptions().name("mobilenetv2_cifar").width_mult(0.5))->num_parameters(),
            build_model(ModelOptions().name("mobilenetv2").width_mult(0.5).num_classes(10))->num_parameters());
}

}  // namespace
}  // namespace octet
