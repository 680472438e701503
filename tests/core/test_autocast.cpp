// bf16 mixed precision (core/autocast.h): the f32 <-> bf16 conversion on every ISA against the
// BFloat16 constructor's bits; the policy table op by op (compute dtype, output dtype, the dtype of
// every input's gradient); each bf16 op against the f32 op on bf16-rounded inputs (the rounding in
// the same places), forward and backward, on the native and the emulated path; the ops that run
// on bf16 activations (norms, activations, adds, pools, dropout) against the f32 op on the widened
// input, rounded once; the weight cast cached once per scope.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu/bf16.h"
#include "core/cpu/isa.h"
#include "core/kernels.h"
#include "core/octet.h"
#include "tests/isa_scope.h"

namespace octet {
namespace {

// The largest |a - b| over max(1, max |b|).
double rel_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  const double scale = std::max(1.0, max(abs(b.to(DType::f32))).item<double>());
  return max(abs(a.to(DType::f32) - b.to(DType::f32))).item<double>() / scale;
}

// One bf16 unit in the last place relative to the largest value: a bf16 output against the f32
// reference rounded, where the two f32 sums may differ in their last bits and round apart.
constexpr double kBf16Ulp = 1.0 / 128;

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
  for (cpu::Isa isa : cpu::isa_selector().supported_choices()) {
    octet::testing::IsaScope isa_scope;
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
  for (const char* op : {"softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "sum", "mean"})
    EXPECT_EQ(autocast::policy(op), autocast::Policy::fp32) << op;
  for (const char* op : {"relu", "gelu", "add", "batch_norm", "layer_norm", "max_pool2d", "dropout"})
    EXPECT_EQ(autocast::policy(op), autocast::Policy::keep) << op;
  EXPECT_EQ(autocast::output_dtype(Device::cpu()), DType::bf16);
  // The products on their operands: in bf16 under autocast or when one is bf16 already.
  const Tensor f = zeros({2}), b = zeros({2}, DType::bf16), d = zeros({2}, DType::f64);
  EXPECT_FALSE(autocast::lowers("mm", {f, f}));
  EXPECT_TRUE(autocast::lowers("mm", {f, b}));
  EXPECT_TRUE(autocast::lowers("conv2d", {b, Tensor()}));
  EXPECT_FALSE(autocast::lowers("mm", {b, d}));
  {
    AutocastGuard on(DType::bf16);
    EXPECT_TRUE(autocast::lowers("mm", {f, f}));
    EXPECT_FALSE(autocast::lowers("mm", {d, d}));
  }
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
  EXPECT_THROW(AutocastGuard{DType::i8}, Error);
}

// Each lower op under autocast: a bf16 output; f32 gradients for its f32 inputs (weights), bf16
// ones for bf16 inputs (activations).
TEST(Autocast, LowerOpsGiveBf16OutputsAndGradientsOfTheirInputsDtypes) {
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
  for (const Op& op : ops)
    for (bool bf16_input : {false, true}) {
      SCOPED_TRACE(op.name + (bf16_input ? ", bf16 input" : ""));
      std::vector<Tensor> in;
      for (const Shape& s : op.shapes) in.push_back(leaf(s, seed++));
      if (bf16_input) in[0] = in[0].detach().to(DType::bf16).requires_grad_(true);
      Tensor y;
      {
        AutocastGuard autocast(DType::bf16);
        EXPECT_EQ(autocast::compute_dtype(op.name, DType::f32), DType::bf16);
        y = op.run(in);
      }
      EXPECT_EQ(y.dtype(), DType::bf16);
      sum(y * y).backward();
      for (const Tensor& t : in) {
        ASSERT_TRUE(t.grad().defined());
        EXPECT_EQ(t.grad().dtype(), t.dtype());
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
    EXPECT_EQ(y.dtype(), DType::bf16);
    EXPECT_LT(rel_diff(y, rounded(mm(rounded(a), rounded(b)))), kBf16Ulp);
    // dA = round(r) round(b)^T, dB = round(a)^T round(r)
    EXPECT_LT(rel_diff(a.grad(), mm(rounded(r), rounded(b).t())), 1e-5);
    EXPECT_LT(rel_diff(b.grad(), mm(rounded(a).t(), rounded(r))), 1e-5);

    Tensor x = leaf({2, 7, 65}, 4), w = leaf({31, 65}, 5), bias = leaf({31}, 6);
    Tensor yl;
    {
      AutocastGuard autocast(DType::bf16);
      yl = linear(x, w, bias);
    }
    EXPECT_LT(rel_diff(yl, rounded(linear(rounded(x), rounded(w), bias.detach()))), kBf16Ulp);
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
    EXPECT_LT(rel_diff(yb, rounded(bmm(rounded(p), rounded(q)))), kBf16Ulp);
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
      EXPECT_EQ(y.dtype(), DType::bf16);
      EXPECT_EQ(is_channels_last(y), c.channels_last);
      Tensor r = randn(y.shape());
      sum(y * r).backward();
      Tensor xr = rounded(x).requires_grad_(true), wr = rounded(w).requires_grad_(true);
      Tensor br = bias.detach().requires_grad_(true);
      Tensor want = conv2d(xr, wr, br, c.o);
      EXPECT_LT(rel_diff(y, rounded(want)), kBf16Ulp);
      sum(want * rounded(r)).backward();  // the backward's products take the rounded gradient
      EXPECT_LT(rel_diff(x.grad(), xr.grad()), 1e-5);
      EXPECT_LT(rel_diff(w.grad(), wr.grad()), 1e-5);
      // the bf16 output's gradient (rounded), summed in f32
      EXPECT_LT(rel_diff(bias.grad(), sum(rounded(r), {0, 2, 3})), 1e-5);
    }
  });
}

// bf16 attention as FlashAttention computes it in bf16, in f64 with at most 64 keys (one key tile
// of the CPU kernel, so the forward's running max is the row's max), rounding where the kernels
// round (or, with round false, nowhere): q, k, v, dO hold bf16 values; O is the op's bf16 output.
// Forward: P~ = bf16(exp(S - m)), out = P~ V / l (l summed unrounded). Backward: P = exp(S - lse),
// dV = bf16(P)^T dO, dS = P (dP - D) scale with D = rowsum(dO O), dQ = bf16(dS) K, dK = bf16(dS)^T Q.
struct AttentionRef {
  std::vector<double> out, dq, dk, dv;
};
AttentionRef bf16_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad, bool causal,
                                      const Tensor& dout, const Tensor& out, bool round) {
  const int64_t bh_n = q.size(0) * q.size(1), h = q.size(1), tq = q.size(2), tk = k.size(2), d = q.size(3),
                dv = v.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto f64 = [](const Tensor& t) {
    Tensor c = t.detach().to(DType::f64).contiguous();
    return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
  };
  const std::vector<double> Q = f64(q), K = f64(k), V = f64(v), dO = f64(dout), O = f64(out);
  auto r = [round](double x) { return round ? static_cast<double>(float(BFloat16(static_cast<float>(x)))) : x; };
  AttentionRef ref{std::vector<double>(bh_n * tq * dv), std::vector<double>(bh_n * tq * d),
                   std::vector<double>(bh_n * tk * d), std::vector<double>(bh_n * tk * dv)};
  for (int64_t bh = 0; bh < bh_n; ++bh) {
    const double *qh = &Q[bh * tq * d], *kh = &K[bh * tk * d], *vh = &V[bh * tk * dv];
    const double *doh = &dO[bh * tq * dv], *oh = &O[bh * tq * dv];
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(tk, -INFINITY);
      double m = -INFINITY;
      for (int64_t j = 0; j < tk; ++j) {
        if ((causal && j > i) || (pad.defined() && pad.data<uint8_t>()[bh / h * tk + j] != 0)) continue;
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += qh[i * d + x] * kh[j * d + x];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int64_t j = 0; j < tk; ++j) l += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - m);
      const double lse = m + std::log(l);
      double delta = 0;
      for (int64_t x = 0; x < dv; ++x) delta += doh[i * dv + x] * oh[i * dv + x];
      for (int64_t j = 0; j < tk; ++j) {
        if (s[j] == -INFINITY) continue;
        const double p_fwd = r(std::exp(s[j] - m)), p = std::exp(s[j] - lse);
        double dp = 0;
        for (int64_t x = 0; x < dv; ++x) {
          ref.out[(bh * tq + i) * dv + x] += p_fwd * vh[j * dv + x] / l;
          dp += doh[i * dv + x] * vh[j * dv + x];
          ref.dv[(bh * tk + j) * dv + x] += r(p) * doh[i * dv + x];
        }
        const double ds = r(p * (dp - delta) * scale);
        for (int64_t x = 0; x < d; ++x) {
          ref.dq[(bh * tq + i) * d + x] += ds * kh[j * d + x];
          ref.dk[(bh * tk + j) * d + x] += ds * qh[i * d + x];
        }
      }
    }
  }
  return ref;
}

// The mean |a - b| over the mean |b|.
double mean_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  Tensor a64 = a.detach().to(DType::f64), b64 = b.detach().to(DType::f64);
  return sum(abs(a64 - b64)).item<double>() / sum(abs(b64)).item<double>();
}
double mean_diff(const Tensor& a, const std::vector<double>& b) {
  return mean_diff(a, from_blob(b.data(), a.shape(), DType::f64).clone());
}

// bf16 attention (autocast's, and on bf16 activations) rounds in the places FlashAttention does in
// bf16, on both the native and the emulated path: against the f64 reference above, with its
// roundings and without. A value the kernel computes in f32 near a bf16 rounding boundary may round
// the other way than the f64 reference's (a few of thousands, each moving a row of a gradient by a
// bf16 unit of that value), so the test compares means: the kernels sit on the rounded reference,
// 20x closer than to the unrounded one, and within a bf16 unit of it everywhere. The output's f32
// values before its last rounding come from the kernel itself (a bf16 q with an f32 out).
TEST(Autocast, AttentionRoundsItsProductOperandsToBf16) {
  struct Case {
    const char* name;
    int64_t tq, tk, d, dv;
    bool causal, padded;
  };
  for_each_bf16_path([] {
    for (const Case& c : {Case{"causal, odd head dims", 33, 33, 15, 9, true, false},
                          Case{"key padding, Tq != Tk", 37, 45, 16, 8, false, true}}) {
      SCOPED_TRACE(c.name);
      Tensor q = leaf({2, 3, c.tq, c.d}, 40), k = leaf({2, 3, c.tk, c.d}, 41), v = leaf({2, 3, c.tk, c.dv}, 42);
      Tensor pad;
      AttentionOptions o = AttentionOptions().causal(c.causal);
      if (c.padded) {
        pad = zeros({2, c.tk}, DType::u8);
        for (int64_t j = 0; j < c.tk; j += 3) pad.data<uint8_t>()[j] = 1;
        pad.data<uint8_t>()[c.tk + 1] = 1;
        o.key_padding_mask(pad);
      }
      Tensor y;
      {
        AutocastGuard autocast(DType::bf16);
        y = scaled_dot_product_attention(q, k, v, o);
      }
      ASSERT_EQ(y.dtype(), DType::bf16);
      Tensor r = rounded(randn(y.shape()));
      sum(y * r).backward();
      const AttentionRef want = bf16_attention_reference(rounded(q), rounded(k), rounded(v), pad, c.causal, r, y, true);
      const AttentionRef plain =
          bf16_attention_reference(rounded(q), rounded(k), rounded(v), pad, c.causal, r, y, false);
      kernels::AttentionGeometry g{2, 3, c.tq, c.tk, c.d, c.dv, 1.0 / std::sqrt(double(c.d)), c.causal, 0.0, 0, 0};
      Tensor out32 = empty({2, 3, c.tq, c.dv}), lse = empty({2, 3, c.tq});
      kernels::attention_forward(g, q.detach().to(DType::bf16), k.detach().to(DType::bf16), v.detach().to(DType::bf16),
                                 pad, out32, lse);
      const std::tuple<const char*, Tensor, const std::vector<double>*, const std::vector<double>*> checks[] = {
          {"out", out32, &want.out, &plain.out},
          {"dq", q.grad(), &want.dq, &plain.dq},
          {"dk", k.grad(), &want.dk, &plain.dk},
          {"dv", v.grad(), &want.dv, &plain.dv}};
      for (const auto& [name, got, rounded_ref, plain_ref] : checks) {
        SCOPED_TRACE(name);
        const Tensor want_t = from_blob(rounded_ref->data(), got.shape(), DType::f64).clone();
        EXPECT_LT(rel_diff(got, want_t), kBf16Ulp);
        EXPECT_LT(mean_diff(got, *rounded_ref), mean_diff(got, *plain_ref) / 20);
      }
      EXPECT_LT(rel_diff(y, out32.to(DType::bf16)), 1e-7);  // the output is the f32 one rounded
    }
  });
}

// Beyond one key tile the forward rounds exp(S - m) with the running max: the native path against
// the emulated one (the same roundings, other summation orders), both within a bf16 unit of f32
// attention on the rounded inputs. Dropout draws the same elements on both.
TEST(Autocast, AttentionNativeMatchesEmulatedOverManyTiles) {
  auto& sel = cpu::bf16_selector();
  if (sel.supported_choices().size() < 2) GTEST_SKIP() << "no native bf16 on this CPU";
  const cpu::Bf16Path previous = sel.active();
  Tensor q = leaf({2, 2, 150, 64}, 50), k = leaf({2, 2, 200, 64}, 51), v = leaf({2, 2, 200, 40}, 52);
  Tensor r = rounded(randn({2, 2, 150, 40}));
  std::vector<Tensor> outs, grads;
  for (cpu::Bf16Path p : {cpu::Bf16Path::native, cpu::Bf16Path::emulated}) {
    sel.set(p);
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    Generator gen(7);
    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = scaled_dot_product_attention(q * 3.0, k, v, AttentionOptions().causal(true).dropout(0.2, &gen));
    }
    sum(y * r).backward();
    outs.push_back(y);
    for (Tensor* t : {&q, &k, &v}) grads.push_back(t->grad().clone());
  }
  sel.set(previous);
  // Within a bf16 unit everywhere (a value near a rounding boundary may round either way), and
  // equal up to summation order nearly everywhere.
  EXPECT_LT(rel_diff(outs[0], outs[1]), kBf16Ulp);
  EXPECT_LT(mean_diff(outs[0], outs[1]), 1e-4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(rel_diff(grads[i], grads[i + 3]), kBf16Ulp) << "input " << i;
    EXPECT_LT(mean_diff(grads[i], grads[i + 3]), 2e-5) << "input " << i;
  }
  Generator gen(7);
  Tensor want = scaled_dot_product_attention(rounded(q * 3.0), rounded(k), rounded(v),
                                             AttentionOptions().causal(true).dropout(0.2, &gen));
  EXPECT_LT(rel_diff(outs[0], want), 2 * kBf16Ulp);
}

// The LSTM layer under autocast: the f32 layer on bf16-rounded inputs and weights.
TEST(Autocast, LstmMatchesF32OnRoundedInputs) {
  for_each_bf16_path([] {
    Tensor x = leaf({5, 3, 7}, 43), wih = leaf({4 * 6, 7}, 44), whh = leaf({4 * 6, 6}, 45);
    Tensor bih = leaf({24}, 46), bhh = leaf({24}, 47);
    std::pair<Tensor, LstmState> out;
    {
      AutocastGuard autocast(DType::bf16);
      out = lstm_layer(x, LstmState{}, wih, whh, bih, bhh);
    }
    EXPECT_EQ(out.first.dtype(), DType::bf16);
    // The reference rounds each product's operands as the layer does: the cell with rounded
    // weights and input and, at each step, the rounded h.
    {
      NoGradGuard ng;
      Tensor h = zeros({3, 6}), c = zeros({3, 6});
      for (int64_t t = 0; t < 5; ++t) {
        LstmState s = lstm_cell(rounded(x.select(0, t)), rounded(h), c, rounded(wih), rounded(whh), bih, bhh);
        h = s.h, c = s.c;
        EXPECT_LT(rel_diff(out.first.select(0, t), rounded(h)), kBf16Ulp) << "step " << t;
      }
    }
    sum(out.first).backward();
    for (const Tensor& t : {x, wih, whh, bih, bhh}) EXPECT_EQ(t.grad().dtype(), DType::f32);
  });
}

// The ops that run on bf16 activations (autocast's keep list): on bf16 inputs each loads them into
// f32, computes as the f32 op and rounds once, so the output equals the f32 op on the widened
// inputs, rounded, bit for bit; the gradients are the f32 op's on the widened inputs and gradient,
// within a bf16 unit (a backward formula of several ops rounds between them, as PyTorch's does).
TEST(Autocast, OpsOnBf16ActivationsAreTheF32OpsRoundedOnce) {
  struct Op {
    std::string name;
    std::vector<Shape> shapes;
    std::function<Tensor(const std::vector<Tensor>&)> run;
  };
  auto bn = [](const Tensor& x, const Tensor& w, const Tensor& b, NormActivation act) {
    BatchNormOptions o;
    o.weight = w.to(DType::f32), o.bias = b.to(DType::f32), o.training = true, o.act = act;
    return batch_norm(x, o);
  };
  const std::vector<Op> ops = {
      {"relu", {{5, 67}}, [](const auto& v) { return relu(v[0]); }},
      {"relu6", {{5, 67}}, [](const auto& v) { return relu6(v[0] * 4.0); }},
      {"gelu", {{5, 67}}, [](const auto& v) { return gelu(v[0]); }},
      {"gelu tanh", {{5, 67}}, [](const auto& v) { return gelu(v[0], true); }},
      {"sigmoid", {{5, 67}}, [](const auto& v) { return sigmoid(v[0]); }},
      {"tanh", {{5, 67}}, [](const auto& v) { return tanh(v[0]); }},
      {"add", {{5, 67}, {5, 67}}, [](const auto& v) { return v[0] + v[1]; }},
      {"mul broadcast", {{5, 67}, {67}}, [](const auto& v) { return v[0] * v[1]; }},
      {"scale", {{5, 67}}, [](const auto& v) { return v[0] * 0.3; }},
      {"shift", {{5, 67}}, [](const auto& v) { return 0.3 - v[0]; }},
      {"divide", {{5, 67}}, [](const auto& v) { return v[0] / 0.3; }},
      {"layer_norm",
       {{3, 5, 24}, {24}, {24}},
       [](const auto& v) { return layer_norm(v[0], {24}, v[1].to(DType::f32), v[2].to(DType::f32), 1e-5); }},
      {"batch_norm + relu",
       {{4, 6, 5, 3}, {6}, {6}},
       [&](const auto& v) { return bn(v[0], v[1], v[2], NormActivation::relu); }},
      {"batch_norm channels-last",
       {{4, 6, 5, 3}, {6}, {6}},
       [&](const auto& v) { return bn(to_channels_last(v[0]), v[1], v[2], NormActivation::none); }},
      {"max_pool2d",
       {{2, 3, 9, 9}},
       [](const auto& v) {
         return max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
       }},
      {"max_pool2d channels-last",
       {{2, 3, 9, 9}},
       [](const auto& v) {
         return max_pool2d(to_channels_last(v[0]), {3, 3}, {2, 2}, {1, 1});
       }},
      {"avg_pool2d",
       {{2, 3, 9, 9}},
       [](const auto& v) {
         return avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
       }},
      {"adaptive_avg_pool2d",
       {{2, 3, 7, 5}},
       [](const auto& v) {
         return adaptive_avg_pool2d(v[0], {1, 1});
       }},
      {"dropout",
       {{5, 67}},
       [](const auto& v) {
         Generator g(9);
         return dropout(v[0], 0.3, true, &g);
       }},
  };
  uint64_t seed = 60;
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name);
    std::vector<Tensor> xb, xf;
    for (const Shape& shape : op.shapes) {
      Tensor r = rounded(leaf(shape, seed++));
      xb.push_back(r.to(DType::bf16).requires_grad_(true));
      xf.push_back(r.requires_grad_(true));
    }
    Tensor y, want;
    {
      AutocastGuard autocast(DType::bf16);
      y = op.run(xb);
    }
    want = op.run(xf);
    ASSERT_EQ(y.dtype(), DType::bf16);
    EXPECT_EQ(rel_diff(y, rounded(want)), 0.0);
    Tensor g = rounded(randn(y.shape()));
    y.backward(g.to(DType::bf16));
    want.backward(g);
    for (size_t i = 0; i < xb.size(); ++i) {
      ASSERT_TRUE(xb[i].grad().defined()) << "input " << i;
      EXPECT_EQ(xb[i].grad().dtype(), DType::bf16) << "input " << i;
      EXPECT_LT(rel_diff(xb[i].grad(), xf[i].grad()), kBf16Ulp) << "input " << i;
    }
  }
}

// bf16 beside f32 promotes to f32 (a GPT's residual stream): exact, and the bf16 side's gradient
// comes back in bf16.
TEST(Autocast, Bf16WithF32GivesF32) {
  Tensor a = rounded(randn({4, 33})).to(DType::bf16).requires_grad_(true), b = leaf({4, 33}, 70);
  Tensor y = a + b;
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(rel_diff(y, a.detach().to(DType::f32) + b.detach()), 0.0);
  Tensor g = randn({4, 33});
  y.backward(g);
  EXPECT_EQ(a.grad().dtype(), DType::bf16);
  EXPECT_EQ(rel_diff(a.grad(), rounded(g)), 0.0);
  EXPECT_EQ(rel_diff(b.grad(), g), 0.0);
  EXPECT_EQ((b * a).dtype(), DType::f32);
  EXPECT_THROW(a + b.to(DType::f64), Error);
}

// Batch norm on bf16 activations, fused with its ReLU and a residual, gives the unfused bf16 ops'
// bits (the normalized value rounded to bf16 before the residual is added), forward and backward,
// NCHW and channels-last; its statistics and parameter gradients stay f32.
TEST(Autocast, FusedBatchNormOnBf16IsTheUnfusedOps) {
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels-last" : "NCHW");
    Tensor base = rounded(randn({4, 6, 5, 3})), res = rounded(randn({4, 6, 5, 3}));
    if (channels_last) base = to_channels_last(base), res = to_channels_last(res);
    auto run = [&](bool fused) {
      Tensor x = base.to(DType::bf16).requires_grad_(true), r = res.to(DType::bf16).requires_grad_(true);
      Tensor w = full({6}, 1.5).requires_grad_(true), b = full({6}, 0.1).requires_grad_(true);
      BatchNormOptions o;
      o.weight = w, o.bias = b, o.training = true;
      if (fused) o.act = NormActivation::relu, o.residual = r;
      Tensor y = fused ? batch_norm(x, o) : relu(batch_norm(x, o) + r);
      EXPECT_EQ(y.dtype(), DType::bf16);
      Generator g(5);
      y.backward(randn(y.shape(), {}, &g).to(DType::bf16));
      EXPECT_EQ(w.grad().dtype(), DType::f32);
      return std::vector<Tensor>{y, x.grad(), r.grad(), w.grad(), b.grad()};
    };
    const std::vector<Tensor> fused = run(true), unfused = run(false);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(rel_diff(fused[i], unfused[i]), 0.0) << "tensor " << i;
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
