// The language-model layers: Embedding (padding row), StableEmbedding (Xavier init, LayerNorm,
// 32-bit optimizer state hint), LayerNorm and LSTM (PyTorch names and init, step-by-step equality
// with lstm_cell, state in and out, dropout between layers), with float64 finite-difference checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/octet.h"
#include "layers/layers.h"
#include "tests/core/gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;

std::vector<std::string> names_of(const NamedTensors& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.first);
  return out;
}

// Every parameter of `m`, for gradcheck (which perturbs them in place).
std::vector<Tensor> params_of(const Module& m) { return m.parameters(); }

TEST(Embedding, InitPaddingAndGradient) {
  manual_seed(0);
  Embedding emb(200, 100, /*padding_idx=*/3);
  EXPECT_EQ(emb.weight_.shape(), (Shape{200, 100}));
  std::vector<float> w = emb.weight_.to_vector<float>();
  double sq = 0;
  for (float v : w) sq += static_cast<double>(v) * v;
  // N(0, 1) over 20k draws: the sample variance is within ~1% of 1; 5% is a wide margin.
  EXPECT_NEAR(sq / static_cast<double>(w.size()), 1.0, 0.05);
  for (int j = 0; j < 100; ++j) EXPECT_EQ(w[3 * 100 + j], 0.0f);
  Tensor ids = from_vector<int64_t>({3, 5, 3, 7, 5, 0}, {2, 3});
  Tensor y = emb(ids);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 100}));
  sum(y * y + y).backward();
  std::vector<float> g = emb.weight_.grad().to_vector<float>();
  for (int j = 0; j < 100; ++j) EXPECT_EQ(g[3 * 100 + j], 0.0f) << "padding row got a gradient";
  // Row 5 is used twice: d/dw (w^2 + w) summed over both uses.
  for (int j = 0; j < 100; ++j) EXPECT_NEAR(g[5 * 100 + j], 2 * (2 * w[5 * 100 + j] + 1), 1e-5);
  EXPECT_EQ(emb.extra_repr(), "200, 100, padding_idx=3");
  EXPECT_EQ(Embedding(5, 2).extra_repr(), "5, 2");
  EXPECT_THROW(emb(from_vector<int64_t>({200}, {1})), Error);
  EXPECT_THROW(emb(from_vector<int64_t>({-1}, {1})), Error);
  EXPECT_THROW(emb(zeros({2})), Error);
  EXPECT_THROW(Embedding(5, 2, 5), Error);
  EXPECT_THROW(Embedding(0, 2), Error);
}

TEST(Embedding, Gradcheck) {
  manual_seed(1);
  Embedding emb(6, 4, /*padding_idx=*/2);
  emb.to(DType::f64);
  // The padding row gets no gradient by design, so the finite-difference check uses other rows;
  // InitPaddingAndGradient checks the padding row.
  Tensor ids = from_vector<int64_t>({0, 5, 1, 5, 3, 4}, {3, 2});
  gradcheck([&](const auto&) { return emb(ids); }, params_of(emb));
}

TEST(StableEmbedding, XavierLayerNormAndGradcheck) {
  manual_seed(2);
  StableEmbedding emb(300, 200, /*padding_idx=*/0);
  EXPECT_EQ(names_of(emb.named_parameters()), (std::vector<std::string>{"weight", "norm.weight", "norm.bias"}));
  // Xavier-uniform bound sqrt(6 / (300 + 200)); every value inside, the ends reached.
  const double bound = std::sqrt(6.0 / 500.0);
  std::vector<float> w = emb.weight_.to_vector<float>();
  float lo = 0, hi = 0;
  for (size_t i = 200; i < w.size(); ++i) {
    ASSERT_LE(std::abs(w[i]), bound);
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  EXPECT_LT(lo, -0.98 * bound);
  EXPECT_GT(hi, 0.98 * bound);
  for (int j = 0; j < 200; ++j) EXPECT_EQ(w[j], 0.0f);
  // The output is layer-normalized: zero mean and unit variance per token.
  Tensor y = emb(from_vector<int64_t>({4, 9, 250}, {3}));
  EXPECT_EQ(y.shape(), (Shape{3, 200}));
  for (float m : mean(y, {1}).to_vector<float>()) EXPECT_NEAR(m, 0.0, 1e-5);
  // Variance var / (var + eps): the rows' variance is ~bound^2 / 3 = 0.004, so eps = 1e-5 takes ~0.25%.
  for (float v : mean(y * y, {1}).to_vector<float>()) EXPECT_NEAR(v, 1.0, 5e-3);
  EXPECT_EQ(emb.keep_32bit_state_names(), (std::vector<std::string>{"weight"}));
  EXPECT_TRUE(Embedding(3, 2).keep_32bit_state_names().empty());

  StableEmbedding small(5, 4);
  small.to(DType::f64);
  {
    NoGradGuard ng;  // a non-trivial affine, so its gradient is checked in general position
    small.norm_->weight_.copy_(rand_input({4}, 3, 0.5, 1.5));
    small.norm_->bias_.copy_(rand_input({4}, 4));
  }
  EXPECT_EQ(small.keep_32bit_state_names(), (std::vector<std::string>{"weight"}));  // survives to(f64)
  Tensor ids = from_vector<int64_t>({0, 4, 1, 4, 3}, {5});
  gradcheck([&](const auto&) { return small(ids); }, params_of(small));
}

TEST(LayerNorm, LayerMatchesOpAndValidates) {
  LayerNorm ln(Shape{3, 4}, 1e-6);
  EXPECT_EQ(names_of(ln.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(ln.extra_repr(), "(3, 4), eps=1e-06, elementwise_affine=true");
  EXPECT_EQ(LayerNorm(8).extra_repr(), "(8,), eps=1e-05, elementwise_affine=true");
  EXPECT_TRUE(LayerNorm(8, 1e-5, false).named_parameters().empty());
  Tensor x = rand_input({2, 3, 4}, 5).to(DType::f32);
  EXPECT_EQ(ln(x).to_vector<float>(), layer_norm(x, {3, 4}, ln.weight_, ln.bias_, 1e-6).to_vector<float>());
  EXPECT_THROW(LayerNorm(Shape{}), Error);
  EXPECT_THROW(LayerNorm(0), Error);
  EXPECT_THROW(ln(zeros({2, 4, 3})), Error);
}

// The multi-layer LSTM from the foundation's cell op, step by step: the reference of every test.
std::pair<Tensor, LstmState> lstm_by_cells(const LSTM& m, const Tensor& x, const LstmState& state) {
  Tensor seq = m.batch_first_ ? x.transpose(0, 1) : x;
  std::vector<Tensor> hs, cs;
  for (int64_t l = 0; l < m.num_layers_; ++l) {
    Tensor h = state.h.select(0, l), c = state.c.select(0, l);
    std::vector<Tensor> ys;
    for (int64_t t = 0; t < seq.size(0); ++t) {
      LstmState s = lstm_cell(seq.select(0, t), h, c, m.weight_ih_[l], m.weight_hh_[l], m.bias_ih_[l], m.bias_hh_[l]);
      h = s.h;
      c = s.c;
      ys.push_back(h);
    }
    hs.push_back(h);
    cs.push_back(c);
    seq = stack(ys, 0);
  }
  return {m.batch_first_ ? seq.transpose(0, 1) : seq, LstmState{stack(hs, 0), stack(cs, 0)}};
}

// Output and final state flattened into one tensor, for gradcheck and comparisons.
Tensor flat(const std::pair<Tensor, LstmState>& r) {
  return cat({r.first.reshape({-1}), r.second.h.reshape({-1}), r.second.c.reshape({-1})}, 0);
}

TEST(LSTM, PyTorchNamesShapesAndInit) {
  manual_seed(3);
  LSTM lstm(10, 64, 2);
  EXPECT_EQ(names_of(lstm.named_parameters()),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1",
                                      "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"}));
  EXPECT_EQ(lstm.weight_ih_[0].shape(), (Shape{256, 10}));
  EXPECT_EQ(lstm.weight_ih_[1].shape(), (Shape{256, 64}));
  EXPECT_EQ(lstm.weight_hh_[1].shape(), (Shape{256, 64}));
  EXPECT_EQ(lstm.bias_hh_[1].shape(), (Shape{256}));
  EXPECT_EQ(lstm.num_parameters(), 256 * (10 + 64 + 2) + 256 * (64 + 64 + 2));  // torch.nn.LSTM(10, 64, 2)
  for (const auto& [name, p] : lstm.named_parameters())
    for (float v : p.to_vector<float>()) ASSERT_LE(std::abs(v), 1.0 / 8.0) << name;  // U(-1/sqrt(H), 1/sqrt(H))
  EXPECT_EQ(LSTM(3, 4, 1, true, 0.0, /*bias=*/false).named_parameters().size(), 2u);
  EXPECT_EQ(lstm.extra_repr(), "10, 64, num_layers=2, batch_first=true");
  EXPECT_EQ(LSTM(3, 4, 1, false, 0.0, false).extra_repr(), "3, 4, bias=false, batch_first=false");

  Tensor x = randn({5, 7, 10});
  auto [y, s] = lstm.forward(x, LstmState{});
  EXPECT_EQ(y.shape(), (Shape{5, 7, 64}));
  EXPECT_EQ(s.h.shape(), (Shape{2, 5, 64}));
  EXPECT_EQ(lstm(x).to_vector<float>(), y.to_vector<float>());
  EXPECT_THROW(lstm(randn({5, 7, 9})), Error);
  EXPECT_THROW(lstm(randn({7, 10})), Error);
  EXPECT_THROW(lstm.forward(x, LstmState{zeros({2, 4, 64}), zeros({2, 4, 64})}), Error);  // wrong batch
  EXPECT_THROW(lstm.forward(x, LstmState{zeros({2, 5, 64}), Tensor()}), Error);
  EXPECT_THROW(LSTM(3, 4, 0), Error);
  EXPECT_THROW(LSTM(3, 4, 1, true, 1.5), Error);
}

TEST(LSTM, EqualsStepByStepCells) {
  for (bool batch_first : {true, false}) {
    for (bool bias : {true, false}) {
      manual_seed(4);
      LSTM lstm(5, 7, 3, batch_first, 0.0, bias);
      lstm.to(DType::f64);
      const int64_t b = 2, t = 4;
      Tensor x = rand_input(batch_first ? Shape{b, t, 5} : Shape{t, b, 5}, 5);
      LstmState s{rand_input({3, b, 7}, 6), rand_input({3, b, 7}, 7)};
      Tensor got = flat(lstm.forward(x, s)), want = flat(lstm_by_cells(lstm, x, s));
      std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      // f64, the same operations in another order: agreement to rounding (~1e-16 per op).
      for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-13) << i;
      // And the gradients of everything.
      std::vector<Tensor> leaves = lstm.parameters();
      leaves.insert(leaves.end(), {x, s.h, s.c});
      Tensor r = rand_input(got.shape(), 8).detach();
      auto grads_of = [&](const Tensor& out) {
        for (Tensor& v : leaves) v.set_grad(Tensor());
        sum(out * r).backward();
        std::vector<std::vector<double>> gs;
        for (Tensor& v : leaves) gs.push_back(v.grad().to_vector<double>());
        return gs;
      };
      auto ga = grads_of(got), gb = grads_of(want);
      for (size_t k = 0; k < ga.size(); ++k)
        for (size_t i = 0; i < ga[k].size(); ++i) ASSERT_NEAR(ga[k][i], gb[k][i], 1e-12) << "leaf " << k << " " << i;
    }
  }
}

TEST(LSTM, GradcheckTwoLayersWithState) {
  for (bool batch_first : {true, false}) {
    manual_seed(9);
    LSTM lstm(3, 4, 2, batch_first);
    lstm.to(DType::f64);
    Tensor x = rand_input(batch_first ? Shape{2, 3, 3} : Shape{3, 2, 3}, 10);
    Tensor h0 = rand_input({2, 2, 4}, 11), c0 = rand_input({2, 2, 4}, 12);
    std::vector<Tensor> inputs = lstm.parameters();
    inputs.insert(inputs.end(), {x, h0, c0});
    gradcheck([&](const auto&) { return flat(lstm.forward(x, LstmState{h0, c0})); }, inputs);
  }
}

TEST(LSTM, StateCarriedAcrossCallsAndDropoutBetweenLayers) {
  manual_seed(12);
  LSTM lstm(4, 6, 2);
  Tensor x = randn({3, 8, 4});
  auto [whole, ws] = lstm.forward(x, LstmState{});
  auto [a, sa] = lstm.forward(x.narrow(1, 0, 5).contiguous(), LstmState{});
  auto [b, sb] = lstm.forward(x.narrow(1, 5, 3).contiguous(), sa);
  std::vector<float> w = whole.narrow(1, 5, 3).contiguous().to_vector<float>(), v = b.to_vector<float>();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], v[i], 1e-5);
  std::vector<float> wh = ws.h.to_vector<float>(), vh = sb.h.to_vector<float>();
  for (size_t i = 0; i < wh.size(); ++i) EXPECT_NEAR(wh[i], vh[i], 1e-5);
  // Dropout acts between layers while training only.
  LSTM dropping(4, 6, 2, true, 0.5);
  dropping.load_state_dict(lstm.state_dict());
  EXPECT_NE(dropping(x).to_vector<float>(), whole.to_vector<float>());
  dropping.eval();
  EXPECT_EQ(dropping(x).to_vector<float>(), whole.to_vector<float>());
}

}  // namespace
}  // namespace octet
