// CUDA against CPU under bf16 autocast (core/autocast.h): the lower ops (mm, bmm, linear, conv2d,
// attention, the LSTM layer) with bf16 inputs and f32 accumulation on both devices (cuBLAS's bf16
// GEMM and cuDNN's bf16 convolutions on tensor cores; the CPU's oneDNN bf16 kernels or their
// emulation), forward and every input's gradient, odd sizes included; the ops between them on bf16
// activations (batch norm with its activation and residual, pooling); and whole models' training
// steps under autocast (ResNet, MobileNetV2 plain and fused, a GPT with dropout).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::all_close;
using testing::expect_parity;
using testing::gpu;
using testing::index_input;
using testing::Inputs;
using testing::kExact;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;
using testing::uniform_input;

class CudaAutocast : public testing::CudaParityTest {};

// fn's outputs computed under AutocastGuard(bf16) on each device, compared as f32 (the lower ops
// write bf16 on both, autocast::output_dtype; an f32 output, such as the LSTM's state, is rounded
// to bf16 first), so both backward passes start from the same bf16-rounded gradient.
testing::ParityFn under_bf16(testing::ParityFn fn) {
  return [fn](const Inputs& v) {
    Outputs out;
    {
      AutocastGuard autocast(DType::bf16);
      out = fn(v);
    }
    for (Tensor& t : out) t = t.to(DType::bf16).to(DType::f32);
    return out;
  };
}

// The outputs: equal bf16 roundings of f32 sums that agree to kSums, but for a sum that lands on
// either side of a rounding boundary: one bf16 unit (2^-8 relative). The gradients: kSums.
const testing::ParityOptions kRounded = testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, kSums);
// Batch norm on bf16 activations: the outputs as kRounded, and dx is bf16 too, its f32 value summed
// in another order (and contracted into FMAs by nvcc) on each device, so it may round either way:
// a bf16 unit for the gradients as well.
const testing::ParityOptions kRoundedNorm =
    testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{4e-3, 4e-3}, {4e-3, 4e-3}});
// cuDNN's bf16 convolutions write a bf16 dw (widened after), where the CPU keeps it f32, and add a
// bias to the rounded sums (rounded again): a bf16 unit (2^-8 relative), and the sums' order
// beyond it.
const testing::ParityOptions kRoundedConv =
    testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{5e-3, 5e-3}, {5e-3, 5e-3}});
// Attention's gradients take P~ and dS rounded to bf16 on both devices; a value computed near a
// rounding boundary may round either way on each, moving a gradient row by a bf16 unit of it.
const testing::ParityOptions kRoundedAttention =
    testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{8e-3, 8e-3}, {8e-3, 8e-3}});

TEST_F(CudaAutocast, Products) {
  const DType t = DType::f32;
  expect_parity("bf16 mm", under_bf16([](const Inputs& v) { return Outputs{mm(v[0], v[1])}; }),
                {normal_input({37, 129}, t, 1), normal_input({129, 33}, t, 2)}, kRounded);
  expect_parity("bf16 bmm", under_bf16([](const Inputs& v) { return Outputs{bmm(v[0], v[1])}; }),
                {normal_input({3, 9, 17}, t, 3), normal_input({3, 17, 5}, t, 4)}, kRounded);
  expect_parity("bf16 linear", under_bf16([](const Inputs& v) { return Outputs{linear(v[0], v[1], v[2])}; }),
                {normal_input({2, 7, 65}, t, 5), normal_input({31, 65}, t, 6), normal_input({31}, t, 7)}, kRounded);
}

TEST_F(CudaAutocast, ConvolutionAttentionLstm) {
  const DType t = DType::f32;
  expect_parity("bf16 conv2d", under_bf16([](const Inputs& v) {
                  return Outputs{conv2d(v[0], v[1], v[2], Conv2dOptions().padding(1).stride(2))};
                }),
                {normal_input({2, 5, 9, 7}, t, 8), normal_input({6, 5, 3, 3}, t, 9), normal_input({6}, t, 10)},
                kRoundedConv);
  expect_parity("bf16 conv2d, 1x1, batch 3",
                under_bf16([](const Inputs& v) { return Outputs{conv2d(v[0], v[1], Tensor(), Conv2dOptions())}; }),
                {normal_input({3, 16, 5, 5}, t, 21), normal_input({24, 16, 1, 1}, t, 22)}, kRoundedConv);
  expect_parity("bf16 depthwise conv2d", under_bf16([](const Inputs& v) {
                  return Outputs{conv2d(v[0], v[1], Tensor(), Conv2dOptions().padding(1).groups(8))};
                }),
                {normal_input({2, 8, 7, 7}, t, 11), normal_input({8, 1, 3, 3}, t, 12)}, kRounded);
  expect_parity(
      "bf16 attention", under_bf16([](const Inputs& v) {
        return Outputs{scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions().causal(true))};
      }),
      {normal_input({2, 3, 33, 16}, t, 13), normal_input({2, 3, 33, 16}, t, 14), normal_input({2, 3, 33, 8}, t, 15)},
      kRoundedAttention);
  expect_parity("bf16 lstm_layer", under_bf16([](const Inputs& v) {
                  auto [y, s] = lstm_layer(v[0], LstmState{}, v[1], v[2], v[3], v[4]);
                  return Outputs{y, s.h, s.c};
                }),
                {normal_input({5, 3, 7}, t, 16), normal_input({24, 7}, t, 17), normal_input({24, 6}, t, 18),
                 normal_input({24}, t, 19), normal_input({24}, t, 20)},
                kRounded);
}

// The lower ops write bf16 activations on the GPU as on the CPU (autocast::output_dtype), and their
// inputs' gradients take the inputs' dtypes: bf16 for an activation, f32 for a weight.
TEST_F(CudaAutocast, ProductsWriteBf16Activations) {
  EXPECT_EQ(autocast::output_dtype(Device::cuda(0)), DType::bf16);
  const TensorOptions f32 = TensorOptions(DType::f32).device(gpu());
  Tensor x = randn({2, 5, 9, 7}, f32).requires_grad_(true), w = randn({6, 5, 3, 3}, f32).requires_grad_(true);
  Tensor lw = randn({4, 6}, f32).requires_grad_(true), lb = randn({4}, f32).requires_grad_(true);
  Tensor q = randn({1, 2, 9, 8}, f32);
  Tensor y, z, a;
  {
    AutocastGuard autocast(DType::bf16);
    y = conv2d(x, w, Tensor(), Conv2dOptions().padding(1));
    z = linear(y.permute({0, 2, 3, 1}), lw, lb);
    a = scaled_dot_product_attention(q, q, q, AttentionOptions().causal(true));
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(z.dtype(), DType::bf16);
  EXPECT_EQ(a.dtype(), DType::bf16);
  EXPECT_EQ(y.device(), gpu());
  sum(z.to(DType::f32)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(lw.grad().dtype(), DType::f32);
  EXPECT_EQ(lb.grad().dtype(), DType::f32);
}

// The ops between the products on bf16 activations, as autocast hands them over: loaded into f32,
// statistics and parameters f32, rounded once to bf16 on both devices. Outputs and gradients agree
// to a bf16 unit (a value computed near a rounding boundary may round either way); max pooling's
// forward exactly (it selects).
TEST_F(CudaAutocast, NormsAndPoolsOnBf16Activations) {
  const DType b = DType::bf16, f = DType::f32;
  for (NormActivation act : {NormActivation::none, NormActivation::relu, NormActivation::relu6}) {
    for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{2, 4, 33, 33}}) {
      const int64_t c = shape[1];
      const std::string name =
          "bf16 batch_norm, act " + std::to_string(static_cast<int>(act)) + " " + ::testing::PrintToString(shape);
      expect_parity(
          name,
          [act](const Inputs& v) {
            Tensor y = batch_norm(v[0], {.running_mean = v[3],
                                         .running_var = v[4],
                                         .weight = v[1],
                                         .bias = v[2],
                                         .training = true,
                                         .act = act});
            return Outputs{y, v[3], v[4]};
          },
          {normal_input(shape, b, 41), uniform_input({c}, f, 42, 1.0, 4.0), uniform_input({c}, f, 43, 0.0, 4.0),
           uniform_input({c}, f, 44, -0.5, 0.5, false), uniform_input({c}, f, 45, 0.5, 2.0, false)},
          kRoundedNorm);
      expect_parity(
          name + " + residual",
          [act](const Inputs& v) {
            return Outputs{
                batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true, .act = act, .residual = v[3]})};
          },
          {normal_input(shape, b, 46), uniform_input({c}, f, 47, 1.0, 4.0), uniform_input({c}, f, 48, 0.0, 4.0),
           normal_input(shape, b, 49)},
          kRoundedNorm);
    }
  }
  const Tensor x = normal_input({2, 3, 11, 9}, b, 50);
  expect_parity(
      "bf16 max_pool2d", [](const Inputs& v) { return Outputs{max_pool2d(v[0], {3}, {2}, {1})}; }, {x},
      testing::tolerances(kExact, kRounded.grad_tol));
  for (bool include_pad : {true, false})
    expect_parity(
        std::string("bf16 avg_pool2d") + (include_pad ? " counting padding" : ""),
        [include_pad](const Inputs& v) { return Outputs{avg_pool2d(v[0], {3}, {2}, {1}, include_pad)}; }, {x},
        kRounded);
  for (const Shape& out : {Shape{1, 1}, Shape{3, 5}})
    expect_parity(
        "bf16 adaptive_avg_pool2d to " + ::testing::PrintToString(out),
        [out](const Inputs& v) { return Outputs{adaptive_avg_pool2d(v[0], out)}; }, {x}, kRounded);
}

// A whole model under autocast: per-op differences of a bf16 unit compound through the layers (and
// cuDNN's dw is rounded to bf16 where the CPU's stays f32), so the bounds are a few bf16 units.
constexpr testing::Tolerances kModelBf16{{2e-2, 1e-2}, {2e-2, 1e-2}};

using MakeModel = std::function<std::shared_ptr<Module>()>;
using LossOf = std::function<Tensor(const Tensor& logits, const Tensor& target)>;

// Two training steps of identically initialized f32 models, each step's forward under
// AutocastGuard(bf16), on the CPU and on CUDA (fused first when `fused`): the logits are bf16 on
// both, and the logits, losses, every (f32) parameter gradient and every buffer agree.
void expect_autocast_model_parity(const std::string& what, const MakeModel& make, const Tensor& x, const Tensor& target,
                                  const LossOf& loss_of, bool fused) {
  manual_seed(5);
  std::shared_ptr<Module> a = make();
  manual_seed(5);
  std::shared_ptr<Module> g = make();
  g->to(gpu());
  if (fused) {
    fuse(*a, x);
    fuse(*g, x.to(gpu()));
  }
  for (int step = 0; step < 2; ++step) {
    const std::string s = what + (fused ? " fused" : "") + " step " + std::to_string(step);
    a->zero_grad();
    g->zero_grad();
    Tensor ya, yg, la, lg;
    {
      AutocastGuard autocast(DType::bf16);
      manual_seed(100 + step);  // dropout masks: the same draws on both devices
      ya = (*a)(x);
      la = loss_of(ya, target);
      manual_seed(100 + step);
      yg = (*g)(x.to(gpu()));
      lg = loss_of(yg, target.to(gpu()));
    }
    EXPECT_EQ(ya.dtype(), DType::bf16) << s;
    EXPECT_TRUE(all_close(yg, ya, kModelBf16, s + " logits"));
    EXPECT_TRUE(all_close(lg, la, kModelBf16, s + " loss"));
    la.backward();
    lg.backward();
    testing::expect_same_grads_and_buffers(*g, *a, kModelBf16, s, DType::f32);  // f32 master gradients
  }
}

TEST_F(CudaAutocast, ModelTrainingStepsMatchTheCpu) {
  const LossOf images = [](const Tensor& logits, const Tensor& target) { return cross_entropy(logits, target); };
  const Tensor x = normal_input({4, 3, 16, 16}, DType::f32, 6, false), y = index_input({4}, 10, 7);
  for (bool fused : {false, true}) {
    expect_autocast_model_parity(
        "bf16 resnet8", [] { return std::make_shared<CifarResNet>(8, 10, Shortcut::A); }, x, y, images, fused);
    expect_autocast_model_parity(
        "bf16 mobilenetv2_cifar x0.25",
        [] { return build_model(ModelOptions().name("mobilenetv2_cifar").num_classes(10).width_mult(0.25)); }, x, y,
        images, fused);
  }
  // A GPT with dropout: layer norms on the f32 residual stream, bf16 attention and MLP activations.
  const LossOf tokens = [](const Tensor& logits, const Tensor& target) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  };
  expect_autocast_model_parity(
      "bf16 gpt",
      [] {
        return std::make_shared<Gpt>(
            GptOptions().vocab_size(37).context_length(16).num_layers(2).num_heads(2).width(32).dropout(0.1));
      },
      index_input({2, 13}, 37, 8), index_input({2, 13}, 37, 9), tokens, false);
}

// What the bf16 activations are for: a training step's peak device memory above what lives
// between steps (weights, gradients), bf16 against f32, on a model whose activations dominate. On
// the CPU the same step measured 0.52x (tools/bench/RESULTS.md, "bf16 activations").
TEST_F(CudaAutocast, Bf16StepPeakMemoryBelowF32) {
  if (testing::cpu_selftest()) GTEST_SKIP() << "device memory counters: a GPU only";
  manual_seed(3);
  std::shared_ptr<Module> model = build_model(ModelOptions().name("mobilenetv2_cifar").num_classes(10));
  model->to(gpu());
  const Tensor x = normal_input({64, 3, 32, 32}, DType::f32, 11, false).to(gpu());
  const Tensor y = index_input({64}, 10, 12).to(gpu());
  auto step_peak_mib = [&](DType precision) {
    model->zero_grad();
    cuda::synchronize();
    const size_t resident = cuda::memory_stats().allocated;
    cuda::reset_peak();
    {
      Tensor loss;
      {
        AutocastGuard autocast(precision);
        loss = cross_entropy((*model)(x), y);
      }
      loss.backward();
    }
    cuda::synchronize();
    return static_cast<double>(cuda::memory_stats().peak_allocated - resident) / (1 << 20);
  };
  step_peak_mib(DType::f32);  // the gradients exist from here on, in both measured steps
  const double f32 = step_peak_mib(DType::f32), bf16 = step_peak_mib(DType::bf16);
  std::printf("MobileNetV2-CIFAR, batch 64, step peak above resident: f32 %.1f MiB, bf16 %.1f MiB (%.2fx)\n", f32, bf16,
              bf16 / f32);
  EXPECT_LT(bf16, 0.7 * f32) << "f32 " << f32 << " MiB, bf16 " << bf16 << " MiB";
}

}  // namespace
}  // namespace octet
