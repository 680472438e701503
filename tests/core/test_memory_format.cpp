// Channels-last tensors (core/memory_format.h): the helpers, and every op that keeps the format on
// the CPU against the same op on NCHW. Batch norm gives the NCHW kernels' bits (the same sums in
// the same order) on every ISA; the f32 convolution (oneDNN's nhwc kernels, a different summation
// order than the blocked ones) agrees within f32 rounding, and the plain path bit for bit; the
// models give the NCHW step's loss and gradients and stay channels-last between layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/conv_dnnl.h"
#include "core/cpu/isa.h"
#include "core/octet.h"

namespace octet {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.numel() * dtype_size(ac.dtype())) == 0;
}

// max |a - b| / (max |b| + tiny): f32 results of two summation orders.
double rel_diff(const Tensor& a, const Tensor& b) {
  const double scale = max(abs(b.to(DType::f64))).item() + 1e-30;
  return max(abs(a.to(DType::f64) - b.to(DType::f64))).item() / scale;
}

// Reassociated f32 sums of up to a few thousand terms: a few hundred ulps of the largest value.
constexpr double kF32Reassociation = 2e-5;

TEST(MemoryFormat, HelpersKeepValuesAndShapes) {
  Generator g(1);
  const Tensor x = randn({2, 3, 4, 5}, DType::f32, &g);
  EXPECT_FALSE(is_channels_last(x));
  const Tensor cl = to_channels_last(x);
  EXPECT_TRUE(is_channels_last(cl));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.shape(), x.shape());
  EXPECT_EQ(cl.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(same_bits(cl, x));
  EXPECT_TRUE(to_channels_last(cl).same(cl));  // no copy when already channels-last
  // [N, C, H, W] <-> [N, C, H*W] as views in either format
  const Tensor planes = reshape_planes(cl, {2, 3, 20});
  EXPECT_TRUE(is_channels_last(planes));
  EXPECT_EQ(planes.raw_data(), cl.raw_data());
  EXPECT_TRUE(same_bits(planes, x.reshape({2, 3, 20})));
  EXPECT_TRUE(same_bits(reshape_planes(planes, {2, 3, 4, 5}), x));
  EXPECT_EQ(reshape_planes(x, {2, 3, 20}).raw_data(), x.raw_data());
  // One pixel per plane, or one channel: both layouts are the same memory.
  EXPECT_TRUE(is_channels_last(randn({2, 3, 1, 1})));
  EXPECT_TRUE(randn({2, 1, 4, 5}).is_contiguous() && is_channels_last(randn({2, 1, 4, 5})));
  const Tensor e = empty_channels_last({2, 3, 4, 5});
  EXPECT_TRUE(is_channels_last(e) && !e.is_contiguous());
  EXPECT_TRUE(is_channels_last(empty_in_format_of(cl, {2, 7, 4, 5}, DType::f32)));
  EXPECT_TRUE(empty_in_format_of(x, {2, 7, 4, 5}, DType::f32).is_contiguous());
  EXPECT_THROW(to_channels_last(randn({2, 3})), Error);
  EXPECT_THROW(reshape_planes(x.transpose(2, 3), {2, 3, 20}), Error);
}

TEST(MemoryFormat, ToChannelsLastIsDifferentiable) {
  Generator g(2);
  Tensor x = randn({2, 3, 4, 5}, DType::f64, &g).requires_grad_(true);
  const Tensor dy = randn({2, 3, 4, 5}, DType::f64, &g);
  sum(to_channels_last(x) * dy).backward();
  EXPECT_TRUE(same_bits(x.grad(), dy));
}

// Elementwise ops keep a channels-last operand's format (and walk it in memory order).
TEST(MemoryFormat, ElementwiseOpsKeepTheFormat) {
  Generator g(3);
  const Tensor a = randn({2, 5, 3, 7}, DType::f32, &g), b = randn({2, 5, 3, 7}, DType::f32, &g);
  const Tensor acl = to_channels_last(a), bcl = to_channels_last(b);
  const Tensor sum = acl + bcl, act = relu6(acl * 4.0), mixed = acl + b, bias = acl + randn({1, 5, 1, 1});
  EXPECT_TRUE(is_channels_last(sum) && !sum.is_contiguous());
  EXPECT_TRUE(is_channels_last(act) && !act.is_contiguous());
  EXPECT_TRUE(is_channels_last(mixed) && !mixed.is_contiguous());
  EXPECT_TRUE(is_channels_last(bias) && !bias.is_contiguous());
  EXPECT_TRUE(same_bits(sum, a + b));
  EXPECT_TRUE(same_bits(act, relu6(a * 4.0)));
  EXPECT_TRUE(same_bits(mixed, a + b));
  EXPECT_TRUE((a + b).is_contiguous());
  // A 3-D tensor with the same strides (a transposed [N, S, C]) gives a contiguous result.
  const Tensor t = randn({2, 7, 5}, DType::f32, &g).transpose(1, 2);
  EXPECT_TRUE(is_channels_last(t) && (t * 2.0).is_contiguous() && same_bits(t * 2.0, t.contiguous() * 2.0));
}

// Batch norm (+ ReLU/ReLU6, + residual), training mode: output, running statistics and every
// gradient are the NCHW op's bits, on every ISA, with plane sizes around the 8 lanes and channel
// counts around the threads' chunks.
TEST(MemoryFormat, BatchNormGivesTheNchwBits) {
  const cpu::Isa best = cpu::active_isa();
  struct Case {
    int64_t n, c, h, w;
  };
  for (const Case& k : {Case{3, 5, 1, 1}, Case{2, 3, 3, 3}, Case{2, 19, 4, 2}, Case{3, 37, 5, 7}, Case{2, 40, 3, 11}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (NormActivation act : {NormActivation::none, NormActivation::relu, NormActivation::relu6}) {
        for (bool with_residual : {false, true}) {
          Generator g(k.c * 100 + k.h);
          const Tensor x0 = randn({k.n, k.c, k.h, k.w}, dt, &g) * 2.0 + 1.0, w0 = randn({k.c}, dt, &g),
                       b0 = randn({k.c}, dt, &g), r0 = randn({k.n, k.c, k.h, k.w}, dt, &g),
                       dy = randn({k.n, k.c, k.h, k.w}, dt, &g);
          auto run = [&](bool channels_last) {
            auto fmt = [&](const Tensor& t) {
              return channels_last ? to_channels_last(t.detach().clone()) : t.clone();
            };
            // Leaves get contiguous gradients (autograd's accumulation); the hook sees the
            // gradient as the op returns it.
            Tensor x_leaf = fmt(x0).requires_grad_(true), r = fmt(r0).requires_grad_(true);
            Tensor x = x_leaf * 1.0;
            Tensor dx_seen;
            x.register_hook([&](const Tensor& d) {
              dx_seen = d;
              return Tensor();
            });
            Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
            Tensor rm = zeros({k.c}, dt), rv = ones({k.c}, dt);
            Tensor y = batch_norm(x, {.running_mean = rm,
                                      .running_var = rv,
                                      .weight = w,
                                      .bias = b,
                                      .training = true,
                                      .act = act,
                                      .residual = with_residual ? r : Tensor()});
            const bool planes = k.h * k.w > 1;
            EXPECT_EQ(channels_last && planes, !y.is_contiguous());
            y.backward(fmt(dy));
            EXPECT_EQ(channels_last && planes, !dx_seen.is_contiguous() && is_channels_last(dx_seen));
            std::vector<Tensor> out{y.detach(), rm, rv, x_leaf.grad(), w.grad(), b.grad()};
            if (with_residual) out.push_back(r.grad());
            return out;
          };
          cpu::set_active_isa(best);
          const std::vector<Tensor> want = run(false);
          for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
            if (!cpu::isa_supported(isa)) continue;
            cpu::set_active_isa(isa);
            const std::vector<Tensor> got = run(true);
            for (size_t i = 0; i < want.size(); ++i)
              EXPECT_TRUE(same_bits(got[i], want[i]))
                  << cpu::isa_name(isa) << " " << dtype_name(dt) << " [" << k.n << ", " << k.c << ", " << k.h << ", "
                  << k.w << "] act " << static_cast<int>(act) << " residual " << with_residual << " output " << i;
          }
          cpu::set_active_isa(best);
        }
      }
    }
  }
}

// The convolution on channels-last tensors: the output and dx come back channels-last. Through
// oneDNN (nhwc kernels) within f32 reassociation of the NCHW result; through the plain kernels
// (via NCHW copies) bit for bit. Odd sizes, stride, padding, dilation, groups, depthwise, bias.
TEST(MemoryFormat, ConvolutionMatchesNchw) {
  struct Case {
    int64_t n, c, h, w, k, r, stride, pad, dil, groups;
  };
  const std::vector<Case> cases{{2, 3, 9, 11, 7, 3, 1, 1, 1, 1},   {3, 5, 8, 7, 4, 1, 1, 0, 1, 1},
                                {2, 6, 10, 9, 6, 3, 2, 1, 1, 6},   {1, 12, 7, 7, 12, 5, 1, 2, 1, 12},
                                {2, 8, 11, 13, 12, 3, 2, 2, 2, 4}, {2, 17, 5, 6, 33, 1, 2, 0, 1, 1}};
  for (cpu::Conv2dPath path : {cpu::Conv2dPath::dnnl, cpu::Conv2dPath::loops}) {
    const cpu::Conv2dPath previous = cpu::conv2d_selector().set(path);
    for (const Case& k : cases) {
      for (bool with_bias : {false, true}) {
        Generator g(k.c * 10 + k.k);
        const Conv2dOptions o = Conv2dOptions().stride(k.stride).padding(k.pad).dilation(k.dil).groups(k.groups);
        const Tensor x0 = randn({k.n, k.c, k.h, k.w}, DType::f32, &g),
                     w0 = randn({k.k, k.c / k.groups, k.r, k.r}, DType::f32, &g),
                     b0 = with_bias ? randn({k.k}, DType::f32, &g) : Tensor();
        Tensor dx_seen;  // the input gradient as the op returns it (a leaf's is made contiguous)
        auto run = [&](bool channels_last) {
          Tensor x_leaf = (channels_last ? to_channels_last(x0.clone()) : x0.clone()).requires_grad_(true);
          Tensor x = x_leaf * 1.0;
          x.register_hook([&](const Tensor& d) {
            dx_seen = d;
            return Tensor();
          });
          Tensor w = w0.clone().requires_grad_(true), b = with_bias ? b0.clone().requires_grad_(true) : Tensor();
          Tensor y = conv2d(x, w, b, o);
          Generator gy(7);
          const Tensor dy = randn(y.shape(), DType::f32, &gy);
          y.backward(channels_last ? to_channels_last(dy) : dy);
          std::vector<Tensor> out{y.detach(), x_leaf.grad(), w.grad()};
          if (with_bias) out.push_back(b.grad());
          return out;
        };
        const std::vector<Tensor> want = run(false), got = run(true);
        EXPECT_TRUE(!got[0].is_contiguous() && is_channels_last(got[0])) << "output";
        EXPECT_TRUE(!dx_seen.is_contiguous() && is_channels_last(dx_seen)) << "dx";
        for (size_t i = 0; i < want.size(); ++i) {
          if (path == cpu::Conv2dPath::loops)
            EXPECT_TRUE(same_bits(got[i], want[i])) << "loops, case c " << k.c << " k " << k.k << " output " << i;
          else
            EXPECT_LE(rel_diff(got[i], want[i]), kF32Reassociation)
                << "dnnl, case c " << k.c << " k " << k.k << " groups " << k.groups << " output " << i;
        }
      }
    }
    cpu::conv2d_selector().set(previous);
  }
}

// Max pooling has channels-last kernels (same taps, same first-maximum and NaN rule, gradients added
// in the same order: the NCHW bits), average pooling goes through NCHW; both keep the format.
// Ties (values on a coarse grid), a NaN, overlapping windows, dilation and 37 channels.
TEST(MemoryFormat, PoolingKeepsTheFormat) {
  std::vector<float> values(2 * 37 * 9 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 5) - 2.0f;
  values[(1 * 37 + 5) * 72 + 4 * 8 + 3] = std::nanf("");
  const Tensor x0 = from_vector<float>(values, {2, 37, 9, 8});
  struct Case {
    bool average;
    int64_t kernel, stride, pad, dil;
  };
  for (const Case& k :
       {Case{false, 3, 2, 1, 1}, Case{false, 2, 2, 0, 1}, Case{false, 3, 1, 1, 2}, Case{true, 3, 2, 1, 1}}) {
    auto run = [&](bool channels_last) {
      Tensor x = (channels_last ? to_channels_last(x0.clone()) : x0.clone()).requires_grad_(true);
      Tensor y = k.average ? avg_pool2d(x, {k.kernel}, {k.stride}, {k.pad})
                           : max_pool2d(x, {k.kernel}, {k.stride}, {k.pad}, {k.dil});
      Generator gy(5);
      y.backward(randn(y.shape(), DType::f32, &gy));
      return std::vector<Tensor>{y.detach(), x.grad()};
    };
    const std::vector<Tensor> want = run(false), got = run(true);
    EXPECT_TRUE(!got[0].is_contiguous() && is_channels_last(got[0])) << k.average << " " << k.kernel;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(same_bits(got[i], want[i])) << k.average << " kernel " << k.kernel << " dil " << k.dil << " " << i;
  }
}

// Loss and parameter gradients of one training step.
std::vector<Tensor> model_step(Module& model, const Tensor& x, const Tensor& labels) {
  for (auto& [name, p] : model.named_parameters()) p.set_grad(Tensor());
  Tensor loss = cross_entropy(model(x), labels);
  loss.backward();
  std::vector<Tensor> out{loss.detach()};
  for (auto& [name, p] : model.named_parameters()) out.push_back(p.grad());
  return out;
}

// The activations after a network's last stage, the layers called one by one as forward calls them.
Tensor last_features(const std::string& name, Module& model, const Tensor& input) {
  if (name == "mobilenetv2_cifar") return dynamic_cast<MobileNetV2&>(model).features_->forward(input);
  Tensor y;
  std::vector<std::shared_ptr<Sequential>>* stages = nullptr;
  if (auto* net = dynamic_cast<CifarResNet*>(&model)) {
    y = net->relu_->forward(net->bn1_->forward(net->conv1_->forward(input)));
    stages = &net->stages_;
  } else {
    auto& r = dynamic_cast<ResNet&>(model);
    y = r.maxpool_->forward(r.relu_->forward(r.bn1_->forward(r.conv1_->forward(input))));
    stages = &r.stages_;
  }
  for (const auto& stage : *stages) y = stage->forward(y);
  return y;
}

bool channels_last_only(const Tensor& t) { return is_channels_last(t) && !t.is_contiguous(); }

// Gradients of a whole step of a randomly initialized network, f32, two summation orders of its
// convolutions: batch norms over few values per channel amplify the rounding differences (measured
// up to ~7e-4 of the largest gradient for MobileNetV2-CIFAR at batch 8, the same order between
// oneDNN's and the plain NCHW kernels).
constexpr double kModelGradients = 3e-3;

// A whole network channels-last against NCHW: the same loss and gradients within f32
// reassociation (only the convolutions' summation order differs), and the activations stay
// channels-last through every layer up to the final pooling.
TEST(MemoryFormat, ModelsStepAsInNchw) {
  const ChannelsLastMode previous = channels_last_selector().active();
  Generator g(6);
  const Tensor labels = from_vector<int64_t>({1, 0, 3, 2, 2, 3, 0, 1}, {8});
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> models{
      {"mobilenetv2_cifar", std::make_shared<MobileNetV2>(4, 0.25, true, 3, 0.0)},
      {"resnet20", std::make_shared<CifarResNet>(20, 4)},
      {"resnet20_grey", std::make_shared<CifarResNet>(20, 4, Shortcut::A, 1)},
      {"resnet18", std::make_shared<ResNet>(ResNet::Block::basic, std::vector<int64_t>{1, 1, 1, 1}, 4)}};
  for (auto& [name, model] : models) {
    const int64_t side = name == "resnet18" ? 64 : name == "resnet20_grey" ? 28 : 32;
    const Tensor x = randn({8, name == "resnet20_grey" ? 1 : 3, side, side}, DType::f32, &g);
    // The fusion pass makes the first convolution turn the network channels-last (layers/fusion.h).
    EXPECT_EQ(fuse(*model, x).count("channels_last"), 1U) << name;
    channels_last_selector().set(ChannelsLastMode::off);
    EXPECT_TRUE(last_features(name, *model, x).is_contiguous()) << name;
    const std::vector<Tensor> want = model_step(*model, x, labels);
    // The ImageNet ResNets stay NCHW in the automatic mode (measured slower channels-last); `on`
    // turns them channels-last too. A one-channel input is both layouts as it is: the network
    // turns channels-last after its stem.
    const bool automatic = name != "resnet18";
    channels_last_selector().set(ChannelsLastMode::automatic);
    EXPECT_EQ(channels_last_only(last_features(name, *model, x)), automatic) << name;
    if (!automatic) channels_last_selector().set(ChannelsLastMode::on);
    const Tensor features = last_features(name, *model, x);
    EXPECT_GT(features.size(2), 1) << name;
    EXPECT_TRUE(channels_last_only(features)) << name;
    const std::vector<Tensor> got = model_step(*model, x, labels);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(rel_diff(got[0], want[0]), kF32Reassociation) << name << " loss";
    // Gradients against the largest one of the model: a bias whose batch norm feeds a shift-invariant
    // path has a true gradient of 0 and a computed one of rounding noise in either format.
    double largest = 0;
    for (size_t i = 1; i < want.size(); ++i) largest = std::max(largest, max(abs(want[i])).item());
    for (size_t i = 1; i < want.size(); ++i)
      EXPECT_LE(max(abs(got[i] - want[i])).item(), kModelGradients * largest) << name << " gradient " << i;
  }
  // The automatic mode leaves f64 inputs and INT8 networks NCHW; `on` converts them too.
  channels_last_selector().set(ChannelsLastMode::automatic);
  auto net = std::make_shared<MobileNetV2>(4, 0.5, true, 3, 0.0);
  const Tensor x64 = randn({2, 3, 8, 8}, DType::f64, &g), x32 = randn({2, 3, 8, 8}, DType::f32, &g);
  Module& stem = *net->features_->at(0);  // conv -> BN -> ReLU6
  fuse(*net, x32);
  EXPECT_TRUE(channels_last_only(stem.forward(x32)));
  net->to(DType::f64);
  EXPECT_TRUE(stem.forward(x64).is_contiguous());
  net->to(DType::f32);
  net->apply([](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m); conv != nullptr && conv->in_channels_ != 3)
      conv->set_int8(std::make_shared<quant::Int8Layer>());
  });
  fuse(*net, x32);  // the choice is the pass's: after the INT8 layers
  EXPECT_TRUE(stem.forward(x32).is_contiguous());
  channels_last_selector().set(ChannelsLastMode::on);
  EXPECT_TRUE(channels_last_only(stem.forward(x32)));
  net->to(DType::f64);
  EXPECT_TRUE(channels_last_only(stem.forward(x64)));
  channels_last_selector().set(previous);
}

}  // namespace
}  // namespace octet
