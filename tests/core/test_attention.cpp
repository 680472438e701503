// scaled_dot_product_attention (core/ops/attention.h): the fused, tiled kernel against the plain
// composed path in f64 (forward and every gradient to ~1e-12), finite differences, the causal and
// padding masks with odd sizes (T not a multiple of the tiles, one head, head dims 1, 80, 128),
// a fully masked row (0, as PyTorch's SDPA), dropout drawn as the reference's mask, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/octet.h"
#include "core/ops/attention.h"
#include "tests/core/gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;

// The largest |a - b| over max(1, max |b|).
double rel_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  const double scale = std::max(1.0, max(abs(b)).item<double>());
  return max(abs(a - b)).item<double>() / scale;
}

struct Case {
  std::string name;
  int64_t b, h, tq, tk, d, dv;
  bool causal = false, padding = false;
};

// Padding: batch n masks its last n + 1 keys (batch 0 one key; none when Tk is 1).
Tensor padding_mask(int64_t b, int64_t tk) {
  std::vector<double> m(static_cast<size_t>(b * tk), 0.0);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t j = std::max<int64_t>(1, tk - n - 1); j < tk; ++j) m[static_cast<size_t>(n * tk + j)] = 1.0;
  return from_vector(m, {b, tk}).to(DType::u8);
}

AttentionOptions options_of(const Case& c) {
  AttentionOptions o = AttentionOptions().causal(c.causal);
  if (c.padding) o.key_padding_mask(padding_mask(c.b, c.tk));
  return o;
}

// Forward and the gradients of q, k, v, fused against the reference, for sum(out * r).
void expect_matches_reference(const Case& c, uint64_t seed, double tol) {
  Tensor q = rand_input({c.b, c.h, c.tq, c.d}, seed), k = rand_input({c.b, c.h, c.tk, c.d}, seed + 1);
  Tensor v = rand_input({c.b, c.h, c.tk, c.dv}, seed + 2);
  Tensor r = rand_input({c.b, c.h, c.tq, c.dv}, seed + 3).detach();
  const AttentionOptions o = options_of(c);
  Tensor fused = scaled_dot_product_attention(q, k, v, o);
  sum(fused * r).backward();
  const std::vector<Tensor> got = {q.grad(), k.grad(), v.grad()};
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  Tensor want = attention_reference(q, k, v, o);
  sum(want * r).backward();
  EXPECT_LE(rel_diff(fused, want), tol) << c.name << " output";
  const char* names[] = {"dq", "dk", "dv"};
  const std::vector<Tensor> wants = {q.grad(), k.grad(), v.grad()};
  for (size_t i = 0; i < 3; ++i) EXPECT_LE(rel_diff(got[i], wants[i]), tol) << c.name << " " << names[i];
}

TEST(Attention, FusedEqualsTheComposedPathInF64) {
  const std::vector<Case> cases = {
      {"one element", 1, 1, 1, 1, 1, 1},
      {"odd lengths", 2, 3, 37, 53, 16, 16},
      {"one head, head dim 1", 2, 1, 45, 45, 1, 1},
      {"head dim 80", 1, 2, 70, 70, 80, 80},
      {"head dim 128, Dv 33", 1, 1, 65, 97, 128, 33},
      {"causal square", 2, 2, 77, 77, 8, 8, true},
      {"causal Tq < Tk", 1, 2, 30, 70, 8, 12, true},
      {"causal Tq > Tk", 1, 2, 70, 30, 8, 8, true},
      {"padding", 3, 2, 33, 65, 8, 8, false, true},
      {"causal and padding", 3, 2, 66, 66, 8, 8, true, true},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) expect_matches_reference(c, seed += 10, 1e-12);
}

TEST(Attention, FiniteDifferences) {
  for (bool causal : {false, true}) {
    Tensor q = rand_input({1, 2, 5, 3}, 71), k = rand_input({1, 2, 7, 3}, 72), v = rand_input({1, 2, 7, 2}, 73);
    gradcheck(
        [causal](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], AttentionOptions().causal(causal).scale(0.7));
        },
        {q, k, v});
  }
}

// PyTorch's SDPA gives 0 for a query whose keys are all masked (its safe softmax, since 2.5), and
// so no gradient through that row.
TEST(Attention, AFullyMaskedRowIsZeroWithNoGradient) {
  const int64_t tk = 6;
  std::vector<double> m(2 * tk, 0.0);
  for (int64_t j = 0; j < tk; ++j) m[static_cast<size_t>(tk + j)] = 1.0;  // batch 1: every key padding
  const AttentionOptions o = AttentionOptions().key_padding_mask(from_vector(m, {2, tk}).to(DType::u8));
  Tensor q = rand_input({2, 2, 4, 3}, 81), k = rand_input({2, 2, tk, 3}, 82), v = rand_input({2, 2, tk, 3}, 83);
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  sum(out * out).backward();
  for (double x : out.select(0, 1).contiguous().to_vector<double>()) EXPECT_EQ(x, 0.0);
  for (const Tensor& g : {q.grad(), k.grad(), v.grad()})
    for (double x : g.select(0, 1).contiguous().to_vector<double>()) EXPECT_EQ(x, 0.0);
  for (double x : q.grad().select(0, 0).contiguous().to_vector<double>()) EXPECT_TRUE(std::isfinite(x));
  EXPECT_LE(rel_diff(out, attention_reference(q, k, v, o)), 1e-12);
}

TEST(Attention, DropoutDrawsTheReferenceMask) {
  const double p = 0.3;
  Tensor q = rand_input({2, 2, 19, 8}, 91), k = rand_input({2, 2, 23, 8}, 92), v = rand_input({2, 2, 23, 5}, 93);
  Tensor r = rand_input({2, 2, 19, 5}, 94).detach();
  Generator gen(7);
  const AttentionOptions o = AttentionOptions().causal(true).dropout(p, &gen);
  Tensor fused = scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(gen.offset(), uint64_t{2 * 2 * 19 * 23});  // one draw per score
  sum(fused * r).backward();
  const std::vector<Tensor> got = {q.grad(), k.grad(), v.grad()};
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  Tensor keep = attention_dropout_keep({2, 2, 19, 23}, p, 7, 0);
  const double kept = mean(keep.to(DType::f64)).item<double>();
  EXPECT_NEAR(kept, 1.0 - p, 0.05);
  Tensor want = attention_reference(q, k, v, o, keep);
  sum(want * r).backward();
  EXPECT_LE(rel_diff(fused, want), 1e-12);
  const std::vector<Tensor> wants = {q.grad(), k.grad(), v.grad()};
  for (size_t i = 0; i < 3; ++i) EXPECT_LE(rel_diff(got[i], wants[i]), 1e-12) << i;
  // The same generator state draws the same mask.
  Generator again(7);
  EXPECT_EQ(rel_diff(scaled_dot_product_attention(q, k, v, AttentionOptions().causal(true).dropout(p, &again)), fused),
            0.0);
}

TEST(Attention, F32FollowsF64) {
  Tensor q = rand_input({2, 4, 130, 64}, 101), k = rand_input({2, 4, 130, 64}, 102);
  Tensor v = rand_input({2, 4, 130, 64}, 103);
  const AttentionOptions o = AttentionOptions().causal(true);
  Tensor want = scaled_dot_product_attention(q, k, v, o);
  Tensor got =
      scaled_dot_product_attention(q.detach().to(DType::f32), k.detach().to(DType::f32), v.detach().to(DType::f32), o);
  EXPECT_LE(rel_diff(got.to(DType::f64), want), 1e-5);
}

TEST(Attention, BadInputsAreErrorsNamingThem) {
  Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 5, 4}), v = randn({1, 2, 5, 6});
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { scaled_dot_product_attention(q.select(0, 0), k, v); }, "expected q [B, H, Tq, D]");
  expect_error([&] { scaled_dot_product_attention(q, randn({1, 2, 5, 3}), v); }, "head dims differ");
  expect_error([&] { scaled_dot_product_attention(q, k, randn({1, 2, 4, 6})); }, "lengths differ");
  expect_error([&] { scaled_dot_product_attention(q, k, v.to(DType::f64)); }, "of one dtype");
  expect_error([&] { scaled_dot_product_attention(q, k, v, AttentionOptions().dropout(1.0)); }, "dropout");
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, AttentionOptions().key_padding_mask(zeros({1, 4})));
      },
      "key_padding_mask must be u8 [B, Tk]");
  expect_error([&] { scaled_dot_product_attention(q, k, v, AttentionOptions().scale(INFINITY)); }, "scale");
}

}  // namespace
}  // namespace octet
