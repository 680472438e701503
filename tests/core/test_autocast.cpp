// bf16 mixed precision (core/autocast.h): the f32 <-> bf16 conversion on every ISA against the
// BFloat16 constructor's bits; the policy table op by op (compute dtype, output dtype, the dtype of
// every input's gradient); each bf16 op against the f32 op on bf16-rounded inputs (the rounding in
// the same places), forward and backward, on the native and the emulated path; the weight cast
// cached once per scope.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/bf16.h"
#include "core/cpu/isa.h"
#include "core/octet.h"

namespace octet {
namespace {

// The largest |a - b| over max(1, max |b|).
double rel_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  const double scale = std::max(1.0, max(abs(b.to(DType::f32))).item<double>());
  return max(abs(a.to(DType::f32) - b.to(DType::f32))).item<double>() / scale;
}

// x rounded to bf16 and back: what the bf16 ops compute on.
Tensor rounded(const Tensor& x) {
  NoGradGuard ng;
  return x.detach().to(DType::bf16).to(DType::f32);
}

Tensor leaf(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g).requires_grad_(true);
}

// Each bf16 path this machine runs (emulated always; native with AVX512-BF16 or AMX), restored after.
template <typename Fn>
void for_each_bf16_path(Fn fn) {
  auto& sel = cpu::bf16_selector();
  const cpu::Bf16Path previous = sel.active();
  for (cpu::Bf16Path p : sel.supported_choices()) {
    SCOPED_TRACE(std::string(sel.name(p)));
    sel.set(p);
    fn();
  }
  sel.set(previous);
}

TEST(Bf16Conversion, SameBitsAsTheConstructorOnEveryIsa) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.5f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           std::bit_cast<float>(0x7f800001u),  // a signaling NaN: stays NaN, quieted
                           std::numeric_limits<float>::denorm_min(),
                           std::bit_cast<float>(0x00018000u),   // a subnormal tie
                           std::numeric_limits<float>::max(),   // rounds up to inf
                           std::bit_cast<float>(0x3f808000u),   // ties to even: down
                           std::bit_cast<float>(0x3f818000u)};  // ties to even: up
  Generator g(3);
  for (int i = 0; i < 10007; ++i) {  // odd count: every vector loop's tail
    const auto w = philox_at(g.seed(), g.advance(1), 0);
    xs.push_back(std::bit_cast<float>(w[0]));  // any bits
  }
  std::vector<uint16_t> want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = BFloat16(xs[i]).bits;
  const cpu::Isa previous = cpu::active_isa();
  for (cpu::Isa isa : cpu::isa_selector().supported_choices()) {
    SCOPED_TRACE(std::string(cpu::isa_name(isa)));
    cpu::set_active_isa(isa);
    for (size_t n : {size_t{1}, size_t{17}, xs.size()}) {
      std::vector<BFloat16> y(n);
      cpu::round_to_bf16(xs.data(), y.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i].bits, want[i]) << "x bits " << std::bit_cast<uint32_t>(xs[i]);
      std::vector<float> back(n);
      cpu::widen_bf16(y.data(), back.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), static_cast<uint32_t>(want[i]) << 16);
    }
  }
  cpu::set_active_isa(previous);
  // Tensor::to takes the same path, contiguous and channels-last.
  Tensor t = from_vector(std::vector<double>(xs.begin(), xs.begin() + 12), {12}).to(DType::f32);
  Tensor b = t.to(DType::bf16);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(b.data<BFloat16>()[i].bits, want[static_cast<size_t>(i)]) << i;
  Tensor cl = to_channels_last(randn({2, 3, 4, 5}));
  Tensor cb = autocast::cast(cl, DType::bf16);
  EXPECT_TRUE(is_channels_last(cb));
  EXPECT_EQ(rel_diff(cb, rounded(cl)), 0.0);
}

TEST(Autocast, PolicyTable) {
  for (const char* op : {"mm", "bmm", "linear", "conv2d", "scaled_dot_product_attention", "lstm_layer"})
    EXPECT_EQ(autocast::policy(op), autocast::Policy::lower) << op;
  for (const char* op :
       {"softmax", "log_softmax", "cross_entropy", "nll_loss", "sum", "mean", "batch_norm", "layer_norm"})
    EXPECT_EQ(autocast::policy(op), autocast::Policy::fp32) << op;
  EXPECT_EQ(autocast::policy("relu"), autocast::Policy::keep);
  EXPECT_EQ(autocast::compute_dtype("mm", DType::f32), DType::f32);  // off outside a guard
  {
    AutocastGuard on(DType::bf16);
    EXPECT_TRUE(autocast::enabled());
    EXPECT_EQ(autocast::compute_dtype("mm", DType::f32), DType::bf16);
    EXPECT_EQ(autocast::compute_dtype("mm", DType::f64), DType::f64);  // gradient checks stay exact
    EXPECT_EQ(autocast::compute_dtype("softmax", DType::bf16), DType::f32);
    EXPECT_EQ(autocast::compute_dtype("relu", DType::f32), DType::f32);
    {
      AutocastGuard off(DType::f32);
      EXPECT_FALSE(autocast::enabled());
      EXPECT_EQ(autocast::compute_dtype("mm", DType::f32), DType::f32);
    }
    EXPECT_TRUE(autocast::enabled());
  }
  EXPECT_FALSE(autocast::enabled());
  EXPECT_THROW(AutocastGuard(DType::i8), Error);
}

// Each lower op under autocast: an f32 output, and f32 gradients for its f32 inputs.
TEST(Autocast, LowerOpsGiveF32OutputsAndGradients) {
  struct Op {
    std::string name;
    std::vector<Shape> shapes;
    std::function<Tensor(const std::vector<Tensor>&)> run;
  };
  const std::vector<Op> ops = {
      {"mm", {{3, 5}, {5, 4}}, [](const auto& v) { return mm(v[0], v[1]); }},
      {"bmm", {{2, 3, 5}, {2, 5, 4}}, [](const auto& v) { return bmm(v[0], v[1]); }},
      {"linear", {{2, 3, 5}, {4, 5}, {4}}, [](const auto& v) { return linear(v[0], v[1], v[2]); }},
      {"conv2d",
       {{2, 3, 6, 6}, {4, 3, 3, 3}, {4}},
       [](const auto& v) { return conv2d(v[0], v[1], v[2], Conv2dOptions().padding(1)); }},
      {"scaled_dot_product_attention",
       {{1, 2, 5, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}},
       [](const auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions().causal(true)); }},
      {"lstm_layer",
       {{4, 2, 3}, {8, 3}, {8, 2}, {8}, {8}},
       [](const auto& v) { return lstm_layer(v[0], LstmState{}, v[1], v[2], v[3], v[4]).first; }},
  };
  uint64_t seed = 10;
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name);
    std::vector<Tensor> in;
    for (const Shape& s : op.shapes) in.push_back(leaf(s, seed++));
    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      EXPECT_EQ(autocast::compute_dtype(op.name, DType::f32), DType::bf16);
      y = op.run(in);
    }
    EXPECT_EQ(y.dtype(), DType::f32);
    sum(y * y).backward();
    for (const Tensor& t : in) {
      ASSERT_TRUE(t.grad().defined());
      EXPECT_EQ(t.grad().dtype(), DType::f32);
      EXPECT_EQ(t.grad().shape(), t.shape());
    }
  }
}

// Each fp32 op under autocast takes a bf16 input up to f32: an f32 output, and the bf16 input's
// gradient in bf16 (its dtype).
TEST(Autocast, Fp32OpsTakeBf16InputsUp) {
  struct Op {
    std::string name;
    Shape shape;
    std::function<Tensor(const Tensor&)> run;
  };
  const Tensor target = from_vector(std::vector<int64_t>{1, 0, 3}, {3});
  const std::vector<Op> ops = {
      {"softmax", {3, 4}, [](const Tensor& x) { return softmax(x, 1); }},
      {"log_softmax", {3, 4}, [](const Tensor& x) { return log_softmax(x, 1); }},
      {"cross_entropy", {3, 4}, [&](const Tensor& x) { return cross_entropy(x, target); }},
      {"nll_loss", {3, 4}, [&](const Tensor& x) { return nll_loss(x, target); }},
      {"mse_loss",
       {3, 4},
       [](const Tensor& x) {
         return mse_loss(x, zeros({3, 4}));
       }},
      {"sum", {3, 4}, [](const Tensor& x) { return sum(x, {1}); }},
      {"mean", {3, 4}, [](const Tensor& x) { return mean(x, {0}); }},
      {"layer_norm", {3, 4}, [](const Tensor& x) { return layer_norm(x, {4}, ones({4}), zeros({4}), 1e-5); }},
      {"batch_norm",
       {3, 4, 2, 2},
       [](const Tensor& x) {
         BatchNormOptions o;
         o.training = true;
         return batch_norm(x, o);
       }},
  };
  uint64_t seed = 50;
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name);
    EXPECT_EQ(autocast::policy(op.name), autocast::Policy::fp32);
    Tensor x = rounded(leaf(op.shape, seed++)).to(DType::bf16).requires_grad_(true);
    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = op.run(x);
    }
    EXPECT_EQ(y.dtype(), DType::f32);
    sum(y * y).backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().dtype(), DType::bf16);
  }
}

// mm, bmm and linear under autocast: the f32 op on bf16-rounded inputs, and the gradients as the
// f32 op's on rounded inputs with the incoming gradient rounded too.
TEST(Autocast, ProductsMatchF32OnRoundedInputs) {
  for_each_bf16_path([] {
    Tensor a = leaf({37, 129}, 1), b = leaf({129, 33}, 2), r = leaf({37, 33}, 3).detach();
    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = mm(a, b);
    }
    sum(y * r).backward();
    Tensor ra = rounded(a).requires_grad_(true), rb = rounded(b).requires_grad_(true);
    Tensor want = mm(ra, rb);
    EXPECT_LT(rel_diff(y, want), 1e-5);
    // dA = round(r) round(b)^T, dB = round(a)^T round(r)
    EXPECT_LT(rel_diff(a.grad(), mm(rounded(r), rounded(b).t())), 1e-5);
    EXPECT_LT(rel_diff(b.grad(), mm(rounded(a).t(), rounded(r))), 1e-5);

    Tensor x = leaf({2, 7, 65}, 4), w = leaf({31, 65}, 5), bias = leaf({31}, 6);
    Tensor yl;
    {
      AutocastGuard autocast(DType::bf16);
      yl = linear(x, w, bias);
    }
    EXPECT_LT(rel_diff(yl, linear(rounded(x), rounded(w), bias.detach())), 1e-5);
    sum(yl).backward();
    Tensor ones_r = ones({2, 7, 31});
    EXPECT_LT(rel_diff(w.grad(), mm(ones_r.reshape({14, 31}).t(), rounded(x).reshape({14, 65}))), 1e-5);
    EXPECT_LT(rel_diff(bias.grad(), full({31}, 14.0)), 1e-6);

    Tensor p = leaf({3, 9, 17}, 7), q = leaf({3, 17, 5}, 8);
    Tensor yb;
    {
      AutocastGuard autocast(DType::bf16);
      yb = bmm(p, q);
    }
    EXPECT_LT(rel_diff(yb, bmm(rounded(p), rounded(q))), 1e-5);
  });
}

// conv2d under autocast: NCHW and channels-last, grouped and depthwise, forward and backward.
TEST(Autocast, ConvolutionMatchesF32OnRoundedInputs) {
  struct Case {
    std::string name;
    Shape x, w;
    Conv2dOptions o;
    bool channels_last;
  };
  const std::vector<Case> cases = {
      {"3x3", {2, 5, 9, 7}, {6, 5, 3, 3}, Conv2dOptions().padding(1), false},
      {"3x3 channels-last", {2, 8, 9, 9}, {16, 8, 3, 3}, Conv2dOptions().padding(1).stride(2), true},
      {"1x1", {3, 16, 5, 5}, {8, 16, 1, 1}, Conv2dOptions(), true},
      {"depthwise", {2, 8, 7, 7}, {8, 1, 3, 3}, Conv2dOptions().padding(1).groups(8), false},
  };
  for_each_bf16_path([&] {
    uint64_t seed = 20;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      Tensor x0 = leaf(c.x, seed++).detach();
      Tensor x = (c.channels_last ? to_channels_last(x0) : x0).requires_grad_(true);
      Tensor w = leaf(c.w, seed++), bias = leaf({c.w[0]}, seed++);
      Tensor y;
      {
        AutocastGuard autocast(DType::bf16);
        y = conv2d(x, w, bias, c.o);
      }
      EXPECT_EQ(y.dtype(), DType::f32);
      Tensor r = randn(y.shape());
      sum(y * r).backward();
      Tensor xr = rounded(x).requires_grad_(true), wr = rounded(w).requires_grad_(true);
      Tensor br = bias.detach().requires_grad_(true);
      Tensor want = conv2d(xr, wr, br, c.o);
      EXPECT_LT(rel_diff(y, want), 1e-5);
      sum(want * rounded(r)).backward();  // the backward's products take the rounded gradient
      EXPECT_LT(rel_diff(x.grad(), xr.grad()), 1e-5);
      EXPECT_LT(rel_diff(w.grad(), wr.grad()), 1e-5);
      EXPECT_LT(rel_diff(bias.grad(), sum(r, {0, 2, 3})), 1e-5);  // the f32 gradient, summed
    }
  });
}

// Attention and the LSTM layer under autocast: the f32 op on bf16-rounded inputs (and weights).
TEST(Autocast, AttentionAndLstmMatchF32OnRoundedInputs) {
  for_each_bf16_path([] {
    Tensor q = leaf({2, 3, 33, 16}, 40), k = leaf({2, 3, 33, 16}, 41), v = leaf({2, 3, 33, 8}, 42);
    const AttentionOptions o = AttentionOptions().causal(true);
    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = scaled_dot_product_attention(q, k, v, o);
    }
    EXPECT_LT(rel_diff(y, scaled_dot_product_attention(rounded(q), rounded(k), rounded(v), o)), 1e-5);
    Tensor r = randn(y.shape());
    sum(y * r).backward();
    Tensor qr = rounded(q).requires_grad_(true), kr = rounded(k).requires_grad_(true);
    Tensor vr = rounded(v).requires_grad_(true);
    sum(scaled_dot_product_attention(qr, kr, vr, o) * rounded(r)).backward();
    EXPECT_LT(rel_diff(q.grad(), qr.grad()), 1e-5);
    EXPECT_LT(rel_diff(k.grad(), kr.grad()), 1e-5);
    EXPECT_LT(rel_diff(v.grad(), vr.grad()), 1e-5);

    Tensor x = leaf({5, 3, 7}, 43), wih = leaf({4 * 6, 7}, 44), whh = leaf({4 * 6, 6}, 45);
    Tensor bih = leaf({24}, 46), bhh = leaf({24}, 47);
    std::pair<Tensor, LstmState> out;
    {
      AutocastGuard autocast(DType::bf16);
      out = lstm_layer(x, LstmState{}, wih, whh, bih, bhh);
    }
    EXPECT_EQ(out.first.dtype(), DType::f32);
    // The reference rounds each product's operands as the layer does: the cell with rounded
    // weights and input and, at each step, the rounded h.
    {
      NoGradGuard ng;
      Tensor h = zeros({3, 6}), c = zeros({3, 6});
      for (int64_t t = 0; t < 5; ++t) {
        LstmState s = lstm_cell(rounded(x.select(0, t)), rounded(h), c, rounded(wih), rounded(whh), bih, bhh);
        h = s.h, c = s.c;
        EXPECT_LT(rel_diff(out.first.select(0, t), h), 1e-5) << "step " << t;
      }
    }
    sum(out.first).backward();
    for (const Tensor& t : {x, wih, whh, bih, bhh}) EXPECT_EQ(t.grad().dtype(), DType::f32);
  });
}

// Batch norm computes in f32 and keeps its input (and, before a residual's ReLU, its output) in
// bf16 for the backward. On a bf16-representable input the kept copy is exact and the ReLU mask
// keeps its signs: outputs and gradients equal the f32 op's bit for bit, NCHW and channels-last,
// with and without a residual.
TEST(Autocast, BatchNormKeepsBf16ForTheBackwardExactly) {
  {
    AutocastGuard autocast(DType::bf16);
    EXPECT_EQ(autocast::saved_dtype("batch_norm", DType::f32), DType::bf16);
    EXPECT_EQ(autocast::saved_dtype("conv2d", DType::f32), DType::bf16);
    EXPECT_EQ(autocast::saved_dtype("softmax", DType::f32), DType::f32);
  }
  EXPECT_EQ(autocast::saved_dtype("batch_norm", DType::f32), DType::f32);
  for (bool channels_last : {false, true})
    for (bool residual : {false, true}) {
      SCOPED_TRACE(std::string(channels_last ? "channels-last" : "NCHW") + (residual ? ", residual" : ""));
      Tensor base = rounded(randn({4, 6, 5, 3}));
      if (channels_last) base = to_channels_last(base);
      auto run = [&](bool bf16) {
        Tensor x = base.detach().requires_grad_(true), w = ones({6}).requires_grad_(true);
        Tensor b = full({6}, 0.1).requires_grad_(true), r = full({4, 6, 5, 3}, -0.2).requires_grad_(true);
        BatchNormOptions o;
        o.weight = w, o.bias = b, o.training = true, o.act = NormActivation::relu;
        if (residual) o.residual = r;
        Tensor y;
        {
          AutocastGuard autocast(bf16 ? DType::bf16 : DType::f32);
          y = batch_norm(x, o);
        }
        Generator g(5);
        sum(y * randn(y.shape(), {}, &g)).backward();
        return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad(), residual ? r.grad() : zeros({1})};
      };
      const std::vector<Tensor> f32 = run(false), bf16 = run(true);
      for (size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(rel_diff(bf16[i], f32[i]), 0.0) << "tensor " << i;
    }
}

TEST(Autocast, WeightIsCastOncePerScope) {
  Tensor w = leaf({4, 3}, 30);
  Tensor x = randn({2, 3});  // no grad: cast on every use
  AutocastGuard autocast(DType::bf16);
  Tensor c1 = autocast::cast(w, DType::bf16), c2 = autocast::cast(w, DType::bf16);
  EXPECT_TRUE(c1.same(c2));
  EXPECT_FALSE(autocast::cast(x, DType::bf16).same(autocast::cast(x, DType::bf16)));
  {
    NoGradGuard ng;
    w.copy_(w.detach() * 2.0);  // a new version: cast again
  }
  Tensor c3 = autocast::cast(w, DType::bf16);
  EXPECT_FALSE(c3.same(c1));
  EXPECT_EQ(rel_diff(c3, rounded(w)), 0.0);
}

TEST(Autocast, DescribeSaysNativeOrEmulated) {
  const std::string d = autocast::describe(DType::bf16);
  EXPECT_NE(d.find(autocast::native_on_cpu() ? "native" : "emulated"), std::string::npos) << d;
  EXPECT_EQ(autocast::describe(DType::f32), "f32");
}

}  // namespace
}  // namespace octet
