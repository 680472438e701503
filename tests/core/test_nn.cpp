// matmul, softmax, losses, gather, embedding, dropout, cat, layer/batch norm, LSTM cell.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;

TEST(Linalg, Values) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(matmul(a, a.t()).to_vector<float>(), (std::vector<float>{14, 32, 32, 77}));
  EXPECT_EQ(matmul(from_vector<float>({1, 2, 3}, {3}), from_vector<float>({4, 5, 6}, {3})).item(), 32.0);
  EXPECT_EQ(matmul(a, from_vector<float>({1, 1, 1}, {3})).to_vector<float>(), (std::vector<float>{6, 15}));
  EXPECT_EQ(linear(a, from_vector<float>({1, 1, 1}, {1, 3}), from_vector<float>({0.5}, {1})).to_vector<float>(),
            (std::vector<float>{6.5, 15.5}));
  // f32 (oneDNN) against f64 (Eigen) on an odd-sized product with transposed operands.
  Generator g(5);
  Tensor x = randn({37, 53}, DType::f64, &g), y = randn({29, 53}, DType::f64, &g);
  std::vector<double> ref = matmul(x, y.t()).to_vector<double>();
  std::vector<float> got = matmul(x.to(DType::f32), y.to(DType::f32).t()).to_vector<float>();
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4 * std::sqrt(53.0));
  // batched with broadcasting
  Tensor p = randn({2, 1, 4, 3}, DType::f64, &g), q = randn({5, 3, 2}, DType::f64, &g);
  Tensor r = matmul(p, q);
  EXPECT_EQ(r.shape(), (Shape{2, 5, 4, 2}));
  EXPECT_NEAR(r.select(0, 1).select(0, 3).to_vector<double>()[0],
              matmul(p.select(0, 1).select(0, 0), q.select(0, 3)).to_vector<double>()[0], 1e-12);
}

TEST(Linalg, Gradients) {
  gradcheck([](const auto& v) { return mm(v[0], v[1]); }, {rand_input({3, 4}, 1), rand_input({4, 5}, 2)});
  gradcheck([](const auto& v) { return mm(v[0].t(), v[1].t()); }, {rand_input({4, 3}, 1), rand_input({5, 4}, 2)});
  gradcheck([](const auto& v) { return bmm(v[0], v[1]); }, {rand_input({2, 3, 4}, 3), rand_input({2, 4, 2}, 4)});
  gradcheck([](const auto& v) { return matmul(v[0], v[1]); }, {rand_input({2, 1, 3, 4}, 5), rand_input({3, 4, 2}, 6)});
  gradcheck([](const auto& v) { return matmul(v[0], v[1]); }, {rand_input({2, 3, 4}, 5), rand_input({4, 2}, 6)});
  gradcheck([](const auto& v) { return matmul(v[0], v[1]); }, {rand_input({4}, 7), rand_input({4, 3}, 8)});
  gradcheck([](const auto& v) { return matmul(v[0], v[1]); }, {rand_input({4}, 7), rand_input({4}, 8)});
  gradcheck([](const auto& v) { return linear(v[0], v[1], v[2]); },
            {rand_input({2, 3, 4}, 9), rand_input({5, 4}, 10), rand_input({5}, 11)});
}

TEST(Linalg, BadInput) {
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({4, 2})), Error);
  EXPECT_THROW(mm(zeros({2, 3}), zeros({3, 2}, DType::f64)), Error);
  EXPECT_THROW(mm(zeros({2, 3}, DType::i32), zeros({3, 2}, DType::i32)), Error);
  EXPECT_THROW(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})), Error);
  EXPECT_THROW(linear(zeros({2, 3}), zeros({4, 2})), Error);
  EXPECT_THROW(linear(zeros({2, 3}), zeros({4, 3}), zeros({3})), Error);
}

TEST(Softmax, ValuesAndGradients) {
  Tensor x = from_vector<double>({1, 2, 3, 1000, 1000, 1000}, {2, 3});
  std::vector<double> p = softmax(x, 1).to_vector<double>();
  EXPECT_NEAR(p[2], std::exp(3) / (std::exp(1) + std::exp(2) + std::exp(3)), 1e-12);
  EXPECT_NEAR(p[4], 1.0 / 3, 1e-12);
  EXPECT_NEAR(log_softmax(x, 1).to_vector<double>()[3], -std::log(3.0), 1e-12);
  Tensor y = rand_input({3, 4, 5}, 41);
  for (int64_t d : {0, 1, -1}) {
    gradcheck([d](const auto& v) { return softmax(v[0], d); }, {y});
    gradcheck([d](const auto& v) { return log_softmax(v[0], d); }, {y});
  }
}

TEST(Loss, CrossEntropyMatchesReference) {
  // Reference values computed by hand from the definition (log-softmax, pick, average).
  Tensor logits = from_vector<double>({1, 2, 3, 0, 0, 0, 2, -1, 0.5}, {3, 3});
  Tensor target = from_vector<int64_t>({2, 0, -100}, {3});
  auto lse = [](double a, double b, double c) { return std::log(std::exp(a) + std::exp(b) + std::exp(c)); };
  double l0 = lse(1, 2, 3) - 3, l1 = lse(0, 0, 0) - 0;
  EXPECT_NEAR(cross_entropy(logits, target).item(), (l0 + l1) / 2, 1e-12);
  EXPECT_NEAR(cross_entropy(logits, target, CrossEntropyOptions().reduction(Reduction::sum)).item(), l0 + l1, 1e-12);
  std::vector<double> none =
      cross_entropy(logits, target, CrossEntropyOptions().reduction(Reduction::none)).to_vector<double>();
  EXPECT_EQ(none[2], 0.0);
  // label smoothing eps: (1-eps) * nll + eps * mean_c(-logp_c)
  double eps = 0.1;
  double s0 = (3 * lse(1, 2, 3) - 6) / 3, s1 = lse(0, 0, 0);
  double expect = ((1 - eps) * l0 + eps * s0 + (1 - eps) * l1 + eps * s1) / 2;
  EXPECT_NEAR(cross_entropy(logits, target, CrossEntropyOptions().label_smoothing(eps)).item(), expect, 1e-12);
  EXPECT_NEAR(nll_loss(log_softmax(logits, 1), target).item(), (l0 + l1) / 2, 1e-12);
  EXPECT_NEAR(mse_loss(from_vector<double>({1, 2}, {2}), from_vector<double>({0, 0}, {2})).item(), 2.5, 1e-15);
}

TEST(Loss, Gradients) {
  Tensor target = from_vector<int64_t>({1, 0, 3, 3, -100}, {5});
  Tensor x = rand_input({5, 4}, 51, -2, 2);
  gradcheck([&](const auto& v) { return cross_entropy(v[0], target); }, {x});
  gradcheck([&](const auto& v) { return cross_entropy(v[0], target, CrossEntropyOptions().label_smoothing(0.2)); },
            {x});
  gradcheck(
      [&](const auto& v) {
        return cross_entropy(v[0], from_vector<int64_t>({1, 0, 3, 3, 2}, {5}),
                             CrossEntropyOptions().ignore_index(3).reduction(Reduction::none));
      },
      {x});
  gradcheck([&](const auto& v) { return nll_loss(log_softmax(v[0], 1), target, -100, Reduction::sum); }, {x});
  gradcheck([](const auto& v) { return mse_loss(v[0], v[1]); }, {rand_input({3, 2}, 52), rand_input({3, 2}, 53)});
}

TEST(Loss, BadInput) {
  Tensor x = zeros({2, 3});
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, 3}, {2})), Error);   // class 3 of 3
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, -5}, {2})), Error);  // negative, not ignore_index
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0}, {1})), Error);
  EXPECT_THROW(cross_entropy(x, zeros({2})), Error);  // float targets
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, 1}, {2}), CrossEntropyOptions().label_smoothing(2)), Error);
  EXPECT_THROW(mse_loss(zeros({2}), zeros({3})), Error);
}

TEST(Nn, GatherEmbeddingCat) {
  Tensor x = rand_input({3, 4}, 61);
  Tensor idx = from_vector<int64_t>({0, 3, 1, 1, 2, 0}, {3, 2});
  EXPECT_EQ(gather(x, 1, idx).shape(), (Shape{3, 2}));
  gradcheck([&](const auto& v) { return gather(v[0], 1, idx); }, {x});
  gradcheck([&](const auto& v) { return gather(v[0], 0, from_vector<int64_t>({2, 0, 1, 2}, {1, 4})); }, {x});
  Tensor w = rand_input({5, 3}, 62);
  Tensor ids = from_vector<int64_t>({4, 0, 4, 2, 1, 4}, {2, 3});
  Tensor e = embedding(w, ids);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(e.select(0, 0).select(0, 0).to_vector<double>(), w.select(0, 4).to_vector<double>());
  gradcheck([&](const auto& v) { return embedding(v[0], ids); }, {w});
  w.set_grad(Tensor());
  sum(embedding(w, ids, /*padding_idx=*/4)).backward();
  EXPECT_EQ(w.grad().select(0, 4).to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(w.grad().select(0, 2).to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_THROW(embedding(w, from_vector<int64_t>({5}, {1})), Error);
  EXPECT_THROW(gather(x, 1, from_vector<int64_t>({4, 0, 0}, {3, 1})), Error);
  gradcheck([](const auto& v) { return cat({v[0], v[1] * 2.0}, 1); }, {rand_input({2, 3}, 63), rand_input({2, 1}, 64)});
  gradcheck([](const auto& v) { return stack({v[0], v[1]}, 0); }, {rand_input({2, 3}, 65), rand_input({2, 3}, 66)});
  EXPECT_THROW(cat({zeros({2, 3}), zeros({3, 3})}, 1), Error);
  // split, cat's inverse: views, one node; every piece's gradient (a piece the loss does not use
  // gives zeros), a shorter last piece, f64 finite differences.
  gradcheck(
      [](const auto& v) {
        const std::vector<Tensor> p = split(v[0], 2, 1);  // [3, 2], [3, 2], [3, 1]
        return cat({p[0] * 3.0, p[2] * p[2]}, 1);         // p[1] unused
      },
      {rand_input({3, 5}, 65)});
  {
    Tensor x = rand_input({2, 7}, 66);
    const std::vector<Tensor> p = split(x, 3, -1);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[2].shape(), (Shape{2, 1}));
    EXPECT_EQ(p[1].raw_data(), x.narrow(1, 3, 3).raw_data());  // a view
    EXPECT_THROW(split(x, 0, 1), Error);
  }
}

TEST(Nn, Dropout) {
  Generator g(9);
  Tensor x = ones({100000});
  Tensor y = dropout(x, 0.3, true, &g);
  std::vector<float> v = y.to_vector<float>();
  int64_t zeros_n = 0;
  for (float q : v) {
    if (q == 0)
      ++zeros_n;
    else
      ASSERT_NEAR(q, 1.0 / 0.7, 1e-6);
  }
  EXPECT_NEAR(zeros_n / 100000.0, 0.3, 0.01);
  EXPECT_TRUE(dropout(x, 0.3, false).same(x));
  Generator g1(9);
  EXPECT_EQ(dropout(x, 0.3, true, &g1).to_vector<float>(), v);  // seeded
  // The gradient uses the same mask as the forward.
  Tensor w = rand_input({50}, 67);
  Generator g2(4);
  Tensor out = dropout(w, 0.5, true, &g2);
  sum(out).backward();
  std::vector<double> o = out.to_vector<double>(), gr = w.grad().to_vector<double>();
  for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(gr[i], o[i] == 0 ? 0.0 : 2.0);
  EXPECT_THROW(dropout(x, 1.5, true), Error);
}

TEST(Nn, LayerNorm) {
  Tensor x = rand_input({2, 3, 4}, 71);
  Tensor y = layer_norm(x, {4});
  std::vector<double> row = y.select(0, 0).select(0, 0).to_vector<double>();
  double m = (row[0] + row[1] + row[2] + row[3]) / 4;
  EXPECT_NEAR(m, 0, 1e-12);
  gradcheck([](const auto& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
            {x, rand_input({4}, 72), rand_input({4}, 73)});
  gradcheck([](const auto& v) { return layer_norm(v[0], {3, 4}); }, {x});
  EXPECT_THROW(layer_norm(x, {3}), Error);
}

TEST(Nn, BatchNorm) {
  Tensor x = rand_input({4, 3, 2, 5}, 81);
  Tensor rm = zeros({3}, DType::f64), rv = ones({3}, DType::f64);
  Tensor y = batch_norm(x, {.running_mean = rm, .running_var = rv, .training = true});
  // Each channel is normalized to mean 0, biased variance ~1.
  EXPECT_NEAR(mean(y, {0, 2, 3}).to_vector<double>()[1], 0, 1e-12);
  EXPECT_NEAR(var(y, {0, 2, 3}, 0).to_vector<double>()[1], 1, 1e-3);
  // Running stats: 0.9 * old + 0.1 * batch (unbiased variance).
  NoGradGuard ng;
  std::vector<double> bm = mean(x, {0, 2, 3}).to_vector<double>(), bv = var(x, {0, 2, 3}).to_vector<double>();
  EXPECT_NEAR(rm.to_vector<double>()[2], 0.1 * bm[2], 1e-12);
  EXPECT_NEAR(rv.to_vector<double>()[2], 0.9 + 0.1 * bv[2], 1e-12);
  Tensor e = batch_norm(x, {.running_mean = rm, .running_var = rv});
  EXPECT_NEAR(e.to_vector<double>()[0],
              (x.to_vector<double>()[0] - rm.to_vector<double>()[0]) / std::sqrt(rv.to_vector<double>()[0] + 1e-5),
              1e-12);
}

TEST(Nn, BatchNormGradients) {
  Tensor x = rand_input({4, 3, 2, 2}, 82);
  Tensor w = rand_input({3}, 83), b = rand_input({3}, 84);
  gradcheck([](const auto& v) { return batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true}); },
            {x, w, b});
  Tensor rm = rand_input({3}, 85).detach(), rv = (rand_input({3}, 86).detach() + 2.0);
  gradcheck(
      [&](const auto& v) {
        return batch_norm(v[0], {.running_mean = rm, .running_var = rv, .weight = v[1], .bias = v[2]});
      },
      {x, w, b});
  gradcheck([](const auto& v) { return batch_norm(v[0], {.training = true}); }, {rand_input({5, 2}, 87)});
  EXPECT_THROW(batch_norm(zeros({1, 3}), {.training = true}), Error);
  EXPECT_THROW(batch_norm(zeros({2, 3}), {.running_mean = zeros({4}), .running_var = ones({4})}), Error);
}

// The fused training-mode kernel against the plain composite formula, forward and backward.
TEST(Nn, BatchNormKernelMatchesPlainFormula) {
  for (Shape shape : {Shape{3, 5, 7, 9}, Shape{16, 3, 1, 1}, Shape{4, 6, 11}}) {
    Generator g(7);
    Tensor x = (randn(shape, DType::f64, &g) * 3.0 + 2.0).requires_grad_(true);
    Tensor w = randn({shape[1]}, DType::f64, &g).requires_grad_(true);
    Tensor b = randn({shape[1]}, DType::f64, &g).requires_grad_(true);
    Tensor dy = randn(shape, DType::f64, &g);
    batch_norm(x, {.weight = w, .bias = b, .training = true}).backward(dy);
    std::vector<double> y1 = batch_norm(x, {.weight = w, .bias = b, .training = true}).to_vector<double>();
    std::vector<std::vector<double>> g1 = {x.grad().to_vector<double>(), w.grad().to_vector<double>(),
                                           b.grad().to_vector<double>()};
    for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    Shape bs(x.dim(), 1);
    bs[1] = shape[1];
    Tensor centered = x - mean(x, dims, true);
    Tensor plain = centered * rsqrt(mean(centered * centered, dims, true) + 1e-5) * w.reshape(bs) + b.reshape(bs);
    plain.backward(dy);
    std::vector<double> y2 = plain.to_vector<double>();
    for (size_t i = 0; i < y1.size(); ++i) ASSERT_NEAR(y1[i], y2[i], 1e-12);
    std::vector<std::vector<double>> g2 = {x.grad().to_vector<double>(), w.grad().to_vector<double>(),
                                           b.grad().to_vector<double>()};
    for (int k = 0; k < 3; ++k)
      for (size_t i = 0; i < g1[k].size(); ++i) ASSERT_NEAR(g1[k][i], g2[k][i], 1e-10) << k;
  }
}

TEST(Nn, LstmCell) {
  int64_t b = 2, in = 3, h = 4;
  Tensor x = rand_input({b, in}, 91), h0 = rand_input({b, h}, 92), c0 = rand_input({b, h}, 93);
  Tensor wih = rand_input({4 * h, in}, 94), whh = rand_input({4 * h, h}, 95);
  Tensor bih = rand_input({4 * h}, 96), bhh = rand_input({4 * h}, 97);
  // Reference for one element from the definition.
  auto s = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> gates = (linear(x, wih, bih) + linear(h0, whh, bhh)).to_vector<double>();
  double c = s(gates[h]) * c0.to_vector<double>()[0] + s(gates[0]) * std::tanh(gates[2 * h]);
  double hv = s(gates[3 * h]) * std::tanh(c);
  LstmState st = lstm_cell(x, h0, c0, wih, whh, bih, bhh);
  EXPECT_NEAR(st.c.to_vector<double>()[0], c, 1e-12);
  EXPECT_NEAR(st.h.to_vector<double>()[0], hv, 1e-12);
  gradcheck(
      [](const auto& v) {
        LstmState r = lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        return cat({r.h, r.c}, 1);
      },
      {x, h0, c0, wih, whh, bih, bhh});
  EXPECT_THROW(lstm_cell(x, h0, c0, whh, whh), Error);
}

}  // namespace
}  // namespace octet
