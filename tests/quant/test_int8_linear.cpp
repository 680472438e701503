// The INT8 Linear op (quant/int8_linear.h) and INT8 Linear layers in models (quant/int8_model.h):
// bit for bit the 1x1 INT8 convolution of its rows (output, gradients, stats, over several backward
// passes with stochastic rounding and DSGC); forward and both gradients against float64 products of
// the dequantized operands at odd sizes and several GEMM blocks; 3-D inputs, bf16 inputs, empty
// batches, requires_grad handling and bad input; the Linear layer's INT8 mode; which Linear layers
// of a GPT and an MLP enable_int8_linear converts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/octet.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "models/registry.h"
#include "quant/dsgc.h"
#include "quant/int8_conv.h"
#include "quant/int8_linear.h"
#include "quant/int8_model.h"
#include "quant/int8_tensor.h"
#include "tests/quant/int8_reference.h"
#include "tests/train/run_util.h"

namespace octet::quant {
namespace {

using namespace testing;  // int8_reference.h

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  EXPECT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << what;
}

void expect_same_stats(const Int8Stats& a, const Int8Stats& b, const std::string& what) {
  EXPECT_EQ(a.input_clip, b.input_clip) << what;
  EXPECT_EQ(a.weight_clip, b.weight_clip) << what;
  EXPECT_EQ(a.grad_clip, b.grad_clip) << what;
  EXPECT_EQ(a.backward_steps, b.backward_steps) << what;
  EXPECT_EQ(a.searches, b.searches) << what;
  if (!std::isnan(a.cos_distance) || !std::isnan(b.cos_distance)) {
    EXPECT_EQ(a.cos_distance, b.cos_distance) << what;
  }
}

std::shared_ptr<Int8Layer> layer_with(bool sr, bool dsgc, uint64_t seed, int64_t period = 100) {
  auto l = std::make_shared<Int8Layer>();
  l->config.stochastic_rounding_ = sr;
  l->config.dsgc_ = dsgc;
  l->config.clip_update_period_ = period;
  l->seed = seed;
  return l;
}

struct LinearCase {
  const char* name;
  Shape x;  // [..., in]
  int64_t out;
  bool bias;
};

// Odd sizes, a single element, 3-D input, and 4100 rows: several GEMM blocks of the CPU kernels.
std::vector<LinearCase> linear_cases() {
  return {{"one", {1, 1}, 1, true},
          {"odd", {7, 33}, 19, true},
          {"no_bias", {5, 17}, 3, false},
          {"three_d", {3, 5, 24}, 40, true},
          {"blocks", {4100, 24}, 40, true}};
}

class Int8LinearValues : public ::testing::TestWithParam<LinearCase> {};

TEST_P(Int8LinearValues, SameBitsAsThePointwiseInt8Conv) {
  const LinearCase& lc = GetParam();
  const int64_t in = lc.x.back();
  // Stochastic rounding and a DSGC search every other pass: three passes reuse and redo the clip.
  auto lin = layer_with(true, true, 77, 2), conv = layer_with(true, true, 77, 2);
  for (int pass = 0; pass < 3; ++pass) {
    const std::string tag = std::string(lc.name) + " pass " + std::to_string(pass);
    const Tensor xv = random(lc.x, 1 + pass), wv = random({lc.out, in}, 2, 0.3), bv = random({lc.out}, 3);
    const int64_t rows = xv.numel() / in;
    Tensor x = xv.clone().requires_grad_(true), w = wv.clone().requires_grad_(true);
    Tensor b = lc.bias ? bv.clone().requires_grad_(true) : Tensor();
    Tensor x4 = xv.reshape({rows, in, 1, 1}).clone().requires_grad_(true);
    Tensor w4 = wv.reshape({lc.out, in, 1, 1}).clone().requires_grad_(true);
    Tensor b4 = lc.bias ? bv.clone().requires_grad_(true) : Tensor();
    Tensor y = int8_linear(x, w, b, lin);
    Tensor y4 = int8_conv2d(x4, w4, b4, Conv2dOptions(), conv);
    Shape want_shape = lc.x;
    want_shape.back() = lc.out;
    ASSERT_EQ(y.shape(), want_shape) << tag;
    expect_same(y, y4.reshape(want_shape), tag + " y");
    Tensor dy = random(y.shape(), 10 + pass, 0.01);
    y.backward(dy);
    y4.backward(dy.reshape(y4.shape()));
    expect_same(x.grad(), x4.grad().reshape(x.shape()), tag + " dx");
    expect_same(w.grad(), w4.grad().reshape(w.shape()), tag + " dw");
    if (lc.bias) expect_same(b.grad(), b4.grad(), tag + " db");
    expect_same_stats(lin->stats, conv->stats, tag);
  }
  EXPECT_EQ(lin->stats.backward_steps, 3);
  EXPECT_EQ(lin->stats.searches, 2);  // passes 0 and 2
}

// The CPU kernels' one-position-per-sample paths (a transposition of the codes, a transposed
// rescale) against the general ones: the same rows laid out as one sample of M positions,
// [1, in, M, 1], give the same integer sums, so the same output, dx and dw bits (round to nearest
// and the max|dy| clip, whose codes do not depend on the element order; the bias gradient is a sum
// in another order).
TEST_P(Int8LinearValues, SameBitsAsTheRowsAsOneSample) {
  const LinearCase& lc = GetParam();
  const int64_t in = lc.x.back();
  const Tensor xv = random(lc.x, 21), wv = random({lc.out, in}, 22, 0.3);
  const int64_t rows = xv.numel() / in;
  Tensor x = xv.clone().requires_grad_(true), w = wv.clone().requires_grad_(true);
  Tensor xt = xv.reshape({rows, in}).t().contiguous().reshape({1, in, rows, 1}).requires_grad_(true);
  Tensor w4 = wv.reshape({lc.out, in, 1, 1}).clone().requires_grad_(true);
  Tensor y = int8_linear(x, w, Tensor(), layer_with(false, false, 0));
  Tensor yt = int8_conv2d(xt, w4, Tensor(), Conv2dOptions(), layer_with(false, false, 0));
  expect_same(y.reshape({rows, lc.out}), yt.reshape({lc.out, rows}).t().contiguous(), std::string(lc.name) + " y");
  Tensor dy = random(y.shape(), 23, 0.01);
  y.backward(dy);
  yt.backward(dy.reshape({rows, lc.out}).t().contiguous().reshape(yt.shape()));
  expect_same(x.grad().reshape({rows, in}), xt.grad().reshape({in, rows}).t().contiguous(),
              std::string(lc.name) + " dx");
  expect_same(w.grad(), w4.grad().reshape(w.shape()), std::string(lc.name) + " dw");
}

TEST_P(Int8LinearValues, MatchesFloatProductsOfDequantized) {
  const LinearCase& lc = GetParam();
  const int64_t in = lc.x.back();
  for (bool sr : {false, true}) {
    const std::string tag = std::string(lc.name) + (sr ? " (SR, DSGC)" : " (RTN)");
    Tensor x = random(lc.x, 11).requires_grad_(true), w = random({lc.out, in}, 12, 0.3).requires_grad_(true);
    Tensor b = lc.bias ? random({lc.out}, 13).requires_grad_(true) : Tensor();
    auto layer = layer_with(sr, sr, 99);
    Tensor y = int8_linear(x, w, b, layer);
    EXPECT_EQ(layer->stats.input_clip, int8_absmax(x));
    EXPECT_EQ(layer->stats.weight_clip, int8_absmax(w));
    Tensor xh = dequantized64(x, int8_absmax(x)).requires_grad_(true);
    Tensor wh = dequantized64(w, int8_absmax(w)).requires_grad_(true);
    Tensor b64 = lc.bias ? b.detach().to(DType::f64) : Tensor();
    expect_within(y, linear(xh, wh, b64), linear(abs(xh), abs(wh), lc.bias ? abs(b64) : Tensor()), tag + " y");

    Tensor dy = random(y.shape(), 14, 0.01);
    y.backward(dy);
    const float clip = layer->stats.grad_clip;
    EXPECT_EQ(clip, sr ? dsgc_search(dy).clip : int8_absmax(dy)) << tag;
    const Int8Rounding r = sr ? Int8Rounding::stochastic : Int8Rounding::nearest;
    const uint64_t seed = int8_backward_seed(99, 0);
    Tensor dyh = dequantized64(dy, clip, r, seed);
    linear(xh, wh, Tensor()).backward(dyh);
    Tensor xa = abs(xh.detach()).requires_grad_(true), wa = abs(wh.detach()).requires_grad_(true);
    linear(xa, wa, Tensor()).backward(abs(dyh));
    expect_within(x.grad(), xh.grad(), xa.grad(), tag + " dx");
    expect_within(w.grad(), wh.grad(), wa.grad(), tag + " dw");
    if (lc.bias) expect_bias_grad(b.grad(), dy.reshape({-1, lc.out}), {0}, tag);
    EXPECT_EQ(layer->stats.backward_steps, 1);
    EXPECT_EQ(layer->stats.searches, sr ? 1 : 0);
    EXPECT_NEAR(layer->stats.cos_distance, cosine_distance(dy, clip, r, seed), 1e-12) << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Linear, Int8LinearValues, ::testing::ValuesIn(linear_cases()),
                         [](const ::testing::TestParamInfo<LinearCase>& info) { return info.param.name; });

TEST(Int8Linear, GradOnlyForInputsThatNeedIt) {
  Tensor x = random({6, 10}, 1), w = random({4, 10}, 2).requires_grad_(true), b = random({4}, 3);
  auto layer = layer_with(true, true, 1);
  Tensor y = int8_linear(x, w, b, layer);
  sum(y).backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(layer->stats.backward_steps, 1);
  // Nothing needs a gradient: no node, the stats of the backward untouched.
  NoGradGuard no_grad;
  auto idle = layer_with(true, true, 1);
  Tensor z = int8_linear(x, w, b, idle);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_EQ(idle->stats.backward_steps, 0);
  EXPECT_GT(idle->stats.input_clip, 0.0f);
}

TEST(Int8Linear, Bf16InputIsTakenUpToF32AndAutocastOutputIsBf16) {
  Tensor x = random({5, 12}, 4).to(DType::bf16).requires_grad_(true), w = random({3, 12}, 5).requires_grad_(true);
  auto a = layer_with(false, false, 0), b = layer_with(false, false, 0);
  Tensor y = int8_linear(x, w, Tensor(), a);
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_same(y, int8_linear(x.detach().to(DType::f32), w.detach(), Tensor(), b), "bf16 x");
  sum(y).backward();
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  // Under autocast the INT8 layer writes bf16 as the bf16 products do: its f32 output rounded once,
  // and the gradient still reaches the weight in f32.
  auto c = layer_with(false, false, 0);
  Tensor yb;
  {
    AutocastGuard autocast(DType::bf16);
    yb = int8_linear(x, w, Tensor(), c);
  }
  EXPECT_EQ(yb.dtype(), DType::bf16);
  expect_same(yb, y.detach().to(DType::bf16), "autocast output");
  w.set_grad(Tensor());
  sum(yb).backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

TEST(Int8Linear, EmptyBatch) {
  Tensor x = zeros({0, 6}).requires_grad_(true), w = random({4, 6}, 6).requires_grad_(true);
  auto layer = layer_with(true, true, 0);
  Tensor y = int8_linear(x, w, Tensor(), layer);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  EXPECT_EQ(layer->stats.backward_steps, 0);
}

using train::expect_error;  // tests/train/run_util.h

TEST(Int8Linear, RejectsBadInputs) {
  auto layer = layer_with(true, true, 0);
  Tensor x = random({2, 6}, 1), w = random({4, 6}, 2);
  expect_error([&] { int8_linear(random({2, 5}, 1), w, Tensor(), layer); }, "int8_linear: expected input [..., 6]");
  expect_error([&] { int8_linear(x, random({24}, 2), Tensor(), layer); }, "int8_linear: expected a 2-D weight");
  expect_error([&] { int8_linear(x, w.to(DType::f64), Tensor(), layer); }, "expected an f32 weight");
  expect_error([&] { int8_linear(x.to(DType::f64), w, Tensor(), layer); }, "expected an f32 input");
  expect_error([&] { int8_linear(x, w, random({5}, 3), layer); }, "expected bias of shape [4]");
  expect_error([&] { int8_linear(x, w, Tensor(), nullptr); }, "int8_linear: expected an Int8Layer");
  expect_error([&] { int8_linear(Tensor(), w, Tensor(), layer); }, "int8_linear: undefined input");
}

TEST(Int8Linear, LayerRunsTheOpAndBackToFloat) {
  Linear fc(10, 7);
  auto layer = layer_with(true, true, 3), twin = layer_with(true, true, 3);
  fc.set_int8(layer);
  EXPECT_EQ(fc.int8(), layer);
  EXPECT_EQ(fc.extra_repr(), "in_features=10, out_features=7, bias=true, int8");
  Tensor x = random({2, 3, 10}, 8);
  Tensor y = fc(x);
  {
    NoGradGuard no_grad;
    expect_same(y, int8_linear(x, fc.weight_, fc.bias_, twin), "layer");
  }
  sum(y).backward();
  EXPECT_EQ(layer->stats.backward_steps, 1);
  EXPECT_TRUE(fc.weight_.grad().defined());
  fc.set_int8(nullptr);
  EXPECT_EQ(fc.extra_repr(), "in_features=10, out_features=7, bias=true");
  NoGradGuard no_grad;
  expect_same(fc(x), linear(x, fc.weight_, fc.bias_), "float again");
}

std::vector<std::string> names_of(const std::vector<Int8Module>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.name);
  return out;
}

TEST(Int8LinearModel, GptBlocksProjectionsOnly) {
  auto gpt =
      build_model(ModelOptions().name("gpt").vocab_size(50).embed_dim(16).num_heads(4).num_layers(2).context_length(8));
  Int8Config config;
  config.clip_update_period_ = 9;
  auto layers = enable_int8_linear(*gpt, config, /*keep_first_last_float=*/true, 4);
  std::vector<std::string> want;
  for (const char* h : {"transformer.h.0.", "transformer.h.1."})
    for (const char* l : {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}) want.push_back(std::string(h) + l);
  EXPECT_EQ(names_of(layers), want);
  std::set<uint64_t> seeds;
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(layers[i].params, (std::vector<std::string>{want[i] + ".weight", want[i] + ".bias"}));
    EXPECT_EQ(layers[i].layer->config.clip_update_period_, 9);
    seeds.insert(layers[i].layer->seed);
  }
  EXPECT_EQ(seeds.size(), layers.size());
  for (const auto& [name, m] : gpt->named_modules()) {
    if (auto* lin = dynamic_cast<Linear*>(m.get())) {
      EXPECT_EQ(lin->int8() != nullptr, name != "lm_head") << name;  // the LM head stays float
    }
  }
  // A step through the whole model: every INT8 layer saw a backward pass.
  Tensor ids = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  sum((*gpt)(ids)).backward();
  for (const auto& l : layers) EXPECT_EQ(l.layer->stats.backward_steps, 1) << l.name;
  // Convolution and Linear seeds of one run are apart.
  EXPECT_EQ(layers[0].layer->seed, int8_layer_seed(4, kInt8LinearIndex + 0));
}

TEST(Int8LinearModel, MlpKeepsItsInputAndFinalLayers) {
  auto mlp = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(4, 8), std::make_shared<Linear>(8, 8), std::make_shared<Linear>(8, 2)});
  EXPECT_EQ(names_of(enable_int8_linear(*mlp, Int8Config{}, true, 0)), std::vector<std::string>{"1"});
  auto all = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Module>>{std::make_shared<Linear>(4, 8), std::make_shared<Linear>(8, 2)});
  expect_error([&] { enable_int8_linear(*all, Int8Config{}, true, 0); }, "every Linear layer of the model stays float");
  EXPECT_EQ(names_of(enable_int8_linear(*all, Int8Config{}, false, 0)), (std::vector<std::string>{"0", "1"}));
  expect_error([&] { enable_int8_linear(*all, Int8Config{}, false, 0); }, "0 is INT8 already");
  // ResNet-20's one Linear is its classifier, the final layer.
  auto convs = build_model(ModelOptions().name("resnet20"));
  expect_error([&] { enable_int8_linear(*convs, Int8Config{}, true, 0); },
               "every Linear layer of the model stays float");
}

}  // namespace
}  // namespace octet::quant
