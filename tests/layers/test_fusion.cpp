// The fusion pass (layers/fusion.h): on each model and block it finds the groups it should (and
// only chains: a shared module, an output used twice, a use outside any module stop it), the fused
// model gives the plain model's bits -- output, every gradient, every buffer -- in training and
// evaluation, fusing keeps less memory, tracing changes nothing, and unfuse() undoes it.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/octet.h"
#include "layers/layers.h"
#include "models/mobilenetv2.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "quant/int8_model.h"

namespace octet {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.numel() * dtype_size(a.dtype())) == 0;
}

Tensor random(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, DType::f32, &g);
}

// Two steps of `m` on x (training mode unless `eval`): each output, the input's gradient, every
// parameter's gradient, then every buffer.
std::vector<Tensor> steps(Module& m, const Tensor& x0, bool eval = false) {
  m.train(!eval);
  std::vector<Tensor> out;
  for (int step = 0; step < 2; ++step) {
    m.zero_grad();
    Tensor x = x0.clone().requires_grad_(true);
    Tensor y = m.forward(x);
    sum(y * y).backward();
    out.push_back(y.detach().clone());
    out.push_back(x.grad());
    for (const auto& [name, p] : m.named_parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  }
  for (const auto& [name, b] : m.named_buffers()) out.push_back(b.clone());
  return out;
}

// The steps of a model built by `make`, fused or not, from the same weights.
std::vector<Tensor> steps_of(const std::function<std::shared_ptr<Module>()>& make, const Tensor& x, bool fused,
                             bool eval = false) {
  manual_seed(5);
  std::shared_ptr<Module> m = make();
  if (fused) fuse(*m, x);
  return steps(*m, x, eval);
}

void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << what << " tensor " << i;
}

std::shared_ptr<Sequential> conv_bn_relu6_conv() {
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Conv2d>(3, 8, 3, Conv2dOptions().padding(1)));
  seq->push_back(std::make_shared<BatchNorm2d>(8));
  seq->push_back(std::make_shared<ReLU6>());
  seq->push_back(std::make_shared<Conv2d>(8, 4, 3, Conv2dOptions().padding(1)));
  return seq;
}

TEST(Fusion, FindsTheGroupsOfEachModel) {
  struct Case {
    std::string name;
    int64_t channels;
    std::map<std::string, size_t> groups;
  };
  // MobileNetV2: a ReLU6 after the stem, 16 expansions, 17 depthwise convolutions and the head
  // (35); 10 blocks with a residual; the ResNets: the stem and each block's first batch norm, each
  // block's add.
  const std::vector<Case> cases = {
      {"mobilenetv2_cifar", 3, {{"batch_norm+relu6", 35}, {"batch_norm+add", 10}, {"channels_last", 1}}},
      {"resnet20", 3, {{"batch_norm+relu", 10}, {"batch_norm+add+relu", 9}, {"channels_last", 1}}},
      {"resnet18", 3, {{"batch_norm+relu", 9}, {"batch_norm+add+relu", 8}, {"channels_last", 1}}},
      {"resnet50", 3, {{"batch_norm+relu", 33}, {"batch_norm+add+relu", 16}, {"channels_last", 1}}},
      {"small_cnn", 1, {{"batch_norm+relu", 2}, {"channels_last", 1}}},
  };
  for (const Case& c : cases) {
    auto model = build_model(ModelOptions().name(c.name).num_classes(10).in_channels(c.channels).image_size(32));
    const FusionReport r = fuse(*model, random({1, c.channels, 32, 32}, 1));
    size_t total = 0;
    for (const auto& [rule, n] : c.groups) EXPECT_EQ(r.count(rule), n) << c.name << " " << rule;
    for (const auto& [rule, n] : c.groups) total += n;
    EXPECT_EQ(r.groups.size(), total) << c.name << ": " << r.describe();
  }
  // The names, in data-flow order.
  auto block = std::make_shared<BasicBlock>(8, 16, 2, Shortcut::B);
  const FusionReport r = fuse(*block, random({1, 8, 6, 6}, 2));
  ASSERT_EQ(r.groups.size(), 3U) << r.describe();
  EXPECT_EQ(r.groups[0].modules, (std::vector<std::string>{"bn2", "add", "relu2"}));
  EXPECT_EQ(r.groups[1].modules, (std::vector<std::string>{"bn1", "relu1"}));
  EXPECT_EQ(r.groups[2].rule, "channels_last");
  EXPECT_EQ(r.describe(), "batch_norm+add+relu x1, batch_norm+relu x1, channels_last x1");
}

// The ResNet blocks (identity and projection shortcuts) and MobileNetV2's inverted residual, fused,
// give the plain bits in training (the residual added in the norm's pass) and in evaluation.
TEST(Fusion, BlocksGiveThePlainBits) {
  const std::vector<std::pair<std::string, std::function<std::shared_ptr<Module>()>>> blocks = {
      {"basic, identity", [] { return std::make_shared<BasicBlock>(8, 8, 1); }},
      {"basic, projection", [] { return std::make_shared<BasicBlock>(8, 16, 2); }},
      {"basic, option A", [] { return std::make_shared<BasicBlock>(8, 16, 2, Shortcut::A); }},
      {"bottleneck, identity", [] { return std::make_shared<Bottleneck>(32, 8, 1); }},
      {"bottleneck, projection", [] { return std::make_shared<Bottleneck>(8, 4, 2); }},
      {"inverted residual", [] { return std::make_shared<InvertedResidual>(8, 8, 1, 6); }},
  };
  for (const auto& [name, make] : blocks) {
    const Tensor x = random({2, name.starts_with("bottleneck, id") ? 32 : 8, 9, 9}, 3);
    for (bool eval : {false, true})
      expect_same(steps_of(make, x, true, eval), steps_of(make, x, false, eval), name + (eval ? " (eval)" : ""));
  }
}

// Whole models, fused, step as the plain ones bit for bit (NCHW: the channels-last choice changes
// the convolutions' summation order, tests/core/test_memory_format.cpp).
TEST(Fusion, ModelsGiveThePlainBits) {
  const ChannelsLastMode previous = channels_last_selector().set(ChannelsLastMode::off);
  for (const char* name : {"mobilenetv2_cifar", "resnet20", "small_cnn"}) {
    const int64_t channels = std::string(name) == "small_cnn" ? 1 : 3;
    auto make = [&] {
      return build_model(ModelOptions().name(name).num_classes(4).in_channels(channels).image_size(16));
    };
    const Tensor x = random({4, channels, 16, 16}, 4);
    expect_same(steps_of(make, x, true), steps_of(make, x, false), name);
  }
  channels_last_selector().set(previous);
}

// Conv -> BN -> ReLU6 -> conv: the plain bits, and one activation fewer alive between forward and
// backward.
TEST(Fusion, BatchNormActivationKeepsLess) {
  const Tensor x = random({2, 3, 9, 9}, 4);
  auto kept = [&](bool fused) {
    manual_seed(3);
    auto seq = conv_bn_relu6_conv();
    if (fused) {
      EXPECT_EQ(fuse(*seq, x).count("batch_norm+relu6"), 1U);
    }
    const size_t before = cpu_memory_stats().allocated;
    Tensor y = seq->forward(x);
    return cpu_memory_stats().allocated - before;
  };
  const size_t activation = 2 * 8 * 9 * 9 * sizeof(float);
  EXPECT_LE(kept(true) + activation, kept(false));
  expect_same(steps_of(conv_bn_relu6_conv, x, true), steps_of(conv_bn_relu6_conv, x, false), "conv-bn-relu6-conv");
}

// The point of the INT8 fusion: conv -> BN -> ReLU6 -> INT8 conv keeps the INT8 conv's int8 codes
// and not its float input.
TEST(Fusion, Int8ConvolutionAfterItKeepsOnlyCodes) {
  manual_seed(5);
  auto seq = conv_bn_relu6_conv();
  quant::enable_int8(*seq, quant::Int8Config(), /*keep_first_last_float=*/false, 0);
  seq->train();
  const Tensor x = random({4, 3, 16, 16}, 6);
  const FusionReport r = fuse(*seq, x);
  ASSERT_EQ(r.count("batch_norm+relu6+int8_conv"), 1U) << r.describe();
  EXPECT_EQ(r.groups[1].rule, "batch_norm+relu6+int8_conv");
  EXPECT_EQ(r.groups[1].modules, (std::vector<std::string>{"1", "2", "3"}));
  const size_t before = cpu_memory_stats().allocated;
  Tensor y = seq->forward(x);
  const size_t kept = cpu_memory_stats().allocated - before;
  const size_t plane = 4 * 8 * 16 * 16;  // elements of one activation
  // The first conv's output (kept by the batch norm), the int8 codes of the INT8 conv's input and
  // its output; no float copy of the ReLU6 output.
  EXPECT_LT(kept, plane * (4 + 1 + 1) + 4 * 4 * 16 * 16 * 4);
  sum(y).backward();
}

// A block whose data flow is not a chain: `shape` picks how.
class Branchy : public Module {
 public:
  enum class Shape { bn_used_twice, relu_shared, used_outside_modules, relu_made_in_forward };
  explicit Branchy(Shape shape) : shape_(shape) {
    conv_ = register_module("conv", std::make_shared<Conv2d>(3, 4, 1));
    bn_ = register_module("bn", std::make_shared<BatchNorm2d>(4));
    bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(4));
    relu_ = register_module("relu", std::make_shared<ReLU>());
    add_ = register_module("add", std::make_shared<Add>());
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = bn_->forward(conv_->forward(x));
    switch (shape_) {
      case Shape::bn_used_twice:  // relu(bn(y)) + bn(y): the add must see the normalized values
        return add_->forward(relu_->forward(y), y);
      case Shape::relu_shared: {  // torchvision's one ReLU module called twice
        Tensor r = relu_->forward(y);
        return relu_->forward(add_->forward(bn2_->forward(r), r));
      }
      case Shape::used_outside_modules:
        return relu_->forward(y) + y * 0.5;
      case Shape::relu_made_in_forward:  // a new module each call: nothing set on it would last
        return std::make_shared<ReLU>()->forward(y);
    }
    return y;
  }
  Shape shape_;
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm2d> bn_, bn2_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<Add> add_;
};

TEST(Fusion, OnlyChainsAreFused) {
  const Tensor x = random({2, 3, 5, 5}, 7);
  for (auto shape :
       {Branchy::Shape::bn_used_twice, Branchy::Shape::relu_shared, Branchy::Shape::used_outside_modules}) {
    const std::string what = "shape " + std::to_string(static_cast<int>(shape));
    auto make = [&] { return std::make_shared<Branchy>(shape); };
    auto m = make();
    const FusionReport r = fuse(*m, x);
    EXPECT_EQ(r.count("batch_norm+relu"), 0U) << what << ": " << r.describe();
    EXPECT_EQ(r.count("batch_norm+add+relu"), 0U) << what << ": " << r.describe();
    expect_same(steps_of(make, x, true), steps_of(make, x, false), what);
  }
  // relu_shared: bn2 -> add is a chain of its own (the add's output goes to the shared ReLU, which
  // stays as it is).
  auto m = std::make_shared<Branchy>(Branchy::Shape::relu_shared);
  EXPECT_EQ(fuse(*m, x).count("batch_norm+add"), 1U);
}

// Tracing changes no state: the modules' training flags, the buffers, the generator, grad mode;
// and unfuse() returns to the plain forms.
TEST(Fusion, TracingChangesNothingAndUnfuseUndoes) {
  manual_seed(9);
  auto model = build_model(ModelOptions().name("resnet20").num_classes(4));
  model->train();
  auto* block = dynamic_cast<BasicBlock*>((*std::dynamic_pointer_cast<CifarResNet>(model)->stages_[0])[0].get());
  block->bn1_->eval();  // a frozen batch norm stays frozen
  const NamedTensors before = model->state_dict();
  std::vector<Tensor> copies;
  for (const auto& [n, t] : before) copies.push_back(t.clone());
  const uint64_t offset = default_generator().offset();
  {
    NoGradGuard ng;
    EXPECT_GT(fuse(*model, random({3, 3, 8, 8}, 8)).groups.size(), 0U);
    EXPECT_FALSE(autograd::grad_mode_enabled());
  }
  EXPECT_TRUE(model->is_training() && block->is_training() && !block->bn1_->is_training());
  EXPECT_EQ(default_generator().offset(), offset);
  for (size_t i = 0; i < copies.size(); ++i) EXPECT_TRUE(same_bits(before[i].second, copies[i])) << before[i].first;
  EXPECT_EQ(block->bn2_->act_, NormActivation::none);
  EXPECT_FALSE(block->add_->input_bn_.expired());
  EXPECT_TRUE(block->relu2_->absorbed_);
  unfuse(*model);
  EXPECT_TRUE(block->add_->input_bn_.expired() && block->bn2_->consumer_.expired() && !block->relu2_->absorbed_);
  EXPECT_EQ(block->bn1_->act_, NormActivation::none);
}

TEST(Fusion, BadInputIsAnError) {
  auto model = build_model(ModelOptions().name("resnet20").num_classes(4));
  EXPECT_THROW(fuse(*model, Tensor()), Error);
  try {
    fuse(*model, random({1, 5, 8, 8}, 1));  // 5 channels for a 3-channel model
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuse"), std::string::npos) << e.what();
  }
  // A model without batch norms or convolutions is not run: nothing to fuse.
  auto mlp = build_model(ModelOptions().name("mlp").num_classes(4).hidden_sizes({8}));
  EXPECT_EQ(fuse(*mlp, random({1, 5}, 1)).describe(), "nothing to fuse");
  Add add;
  EXPECT_THROW(add.forward(random({2, 3}, 1)), Error);
  EXPECT_THROW(add.forward(random({2, 3}, 1), random({3, 2}, 1)), Error);
}

// Module::replace_module: a Sequential's forward runs the new child under the old name; a model
// that calls its children through typed members refuses, naming itself, rather than keep the old.
TEST(ReplaceModule, SequentialTakesItModelsWithTypedMembersRefuse) {
  auto seq = conv_bn_relu6_conv();
  const Tensor x = random({1, 3, 5, 5}, 9);
  auto relu = std::make_shared<ReLU>();
  const std::shared_ptr<Module> old = seq->replace_module("2", relu);
  EXPECT_EQ(old->type_name(), "ReLU6");
  EXPECT_EQ((*seq)[2].get(), relu.get());
  EXPECT_EQ(seq->named_children()[2].second.get(), relu.get());
  seq->eval();
  Tensor big = seq->forward(x * 100.0);  // ReLU now: values above 6 pass the third module
  auto* first = dynamic_cast<Conv2d*>((*seq)[0].get());
  auto* bn = dynamic_cast<BatchNorm2d*>((*seq)[1].get());
  const Tensor mid = relu->forward(bn->forward(first->forward(x * 100.0)));
  EXPECT_GT(max(mid).item(), 6.0);
  EXPECT_TRUE(same_bits(big, (*seq)[3]->forward(mid)));
  EXPECT_THROW(seq->replace_module("9", relu), Error);
  EXPECT_THROW(seq->replace_module("1", nullptr), Error);
  auto block = std::make_shared<BasicBlock>(4, 4);
  try {
    block->replace_module("relu1", std::make_shared<ReLU6>());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BasicBlock"), std::string::npos) << e.what();
  }
  EXPECT_EQ(block->named_children()[2].second.get(), block->relu1_.get());  // unchanged
}

}  // namespace
}  // namespace octet
