// Batch norm fused with a following ReLU/ReLU6 and a residual add (core/norm_act.h,
// batch_norm(..., act, residual)): on every ISA path and odd plane sizes the fused op gives the
// unfused relu(batch_norm(x) + r) / relu6(...) bits in the output and in every gradient; the fused gradient passes f64
// finite differences. (The models reach it through the fusion pass: tests/layers/test_fusion.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/gradcheck.h"
#include "core/octet.h"

namespace octet {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.numel() * dtype_size(a.dtype())) == 0;
}

// Output, dx, dweight, dbias (and dresidual) of a training-mode act(batch_norm(x) [+ residual]),
// fused or as separate ops.
std::vector<Tensor> step(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy, NormActivation act,
                         bool fused, const Tensor& r0 = Tensor()) {
  Tensor x = x0.detach().clone().requires_grad_(true), w = w0.detach().clone().requires_grad_(true),
         b = b0.detach().clone().requires_grad_(true);
  Tensor r = r0.defined() ? r0.detach().clone().requires_grad_(true) : Tensor();
  Tensor y;
  if (fused) {
    y = batch_norm(x, {.weight = w, .bias = b, .training = true, .act = act, .residual = r});
  } else {
    y = batch_norm(x, {.weight = w, .bias = b, .training = true});
    if (r.defined()) y = y + r;
    if (act != NormActivation::none) y = act == NormActivation::relu ? relu(y) : relu6(y);
  }
  y.backward(dy);
  std::vector<Tensor> out{y.detach(), x.grad(), w.grad(), b.grad()};
  if (r.defined()) out.push_back(r.grad());
  return out;
}

TEST(BatchNormAct, FusedGivesTheUnfusedBitsOnEveryIsa) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t hw : {1, 7, 8, 9, 61}) {
    Generator g(hw);
    // Means and scales that put the outputs on both sides of 0 and 6.
    const Tensor x = randn({3, 5, hw}, DType::f32, &g) * 3.0 + 2.0, w = randn({5}, DType::f32, &g) * 4.0,
                 b = randn({5}, DType::f32, &g) * 3.0, dy = randn({3, 5, hw}, DType::f32, &g);
    for (NormActivation act : {NormActivation::relu, NormActivation::relu6}) {
      for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::set_active_isa(isa);
        const std::vector<Tensor> want = step(x, w, b, dy, act, false), got = step(x, w, b, dy, act, true);
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_TRUE(same_bits(got[i], want[i]))
              << cpu::isa_name(isa) << " hw " << hw << " act " << static_cast<int>(act) << " output " << i;
      }
    }
    cpu::set_active_isa(best);
  }
}

// With a residual (ResNet's relu(bn(y) + identity), MobileNetV2's bn(y) + x): the unfused bits
// in the output and in every gradient, the residual's included.
TEST(BatchNormAct, ResidualGivesTheUnfusedBitsOnEveryIsa) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t hw : {1, 7, 8, 9, 61}) {
    Generator g(100 + hw);
    const Tensor x = randn({3, 5, hw}, DType::f32, &g) * 3.0 + 2.0, w = randn({5}, DType::f32, &g) * 4.0,
                 b = randn({5}, DType::f32, &g) * 3.0, r = randn({3, 5, hw}, DType::f32, &g) * 3.0,
                 dy = randn({3, 5, hw}, DType::f32, &g);
    for (NormActivation act : {NormActivation::none, NormActivation::relu, NormActivation::relu6}) {
      for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::set_active_isa(isa);
        const std::vector<Tensor> want = step(x, w, b, dy, act, false, r), got = step(x, w, b, dy, act, true, r);
        ASSERT_EQ(got.size(), 5u);
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_TRUE(same_bits(got[i], want[i]))
              << cpu::isa_name(isa) << " hw " << hw << " act " << static_cast<int>(act) << " output " << i;
      }
    }
    cpu::set_active_isa(best);
  }
}

TEST(BatchNormAct, ResidualGradientsMatchFiniteDifferences) {
  for (NormActivation act : {NormActivation::none, NormActivation::relu, NormActivation::relu6}) {
    Tensor x = testing::rand_input({2, 3, 5}, 21, -2.0, 2.0), w = testing::rand_input({3}, 22, 1.0, 3.0),
           b = testing::rand_input({3}, 23, 0.5, 4.0), r = testing::rand_input({2, 3, 5}, 24, -1.5, 1.5);
    testing::gradcheck(
        [act](const std::vector<Tensor>& v) {
          return batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true, .act = act, .residual = v[3]});
        },
        {x, w, b, r});
  }
}

TEST(BatchNormAct, ResidualOfAnotherShapeIsAnError) {
  const Tensor x = ones({2, 3, 4, 4}), w = ones({3}), b = zeros({3});
  EXPECT_THROW(
      batch_norm(
          x, {.weight = w, .bias = b, .training = true, .act = NormActivation::relu, .residual = ones({2, 3, 4, 5})}),
      Error);
  EXPECT_THROW(batch_norm(x, {.weight = w,
                              .bias = b,
                              .training = true,
                              .act = NormActivation::relu,
                              .residual = ones({2, 3, 4, 4}, DType::f64)}),
               Error);
}

// The mask sits where the unfused one does, the edges included: a channel with weight 0 has y =
// bias everywhere, so bias 0 and 6 put every element on an edge.
TEST(BatchNormAct, EdgesPassNoGradient) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3, 1}), w = from_vector<float>({0, 0, 0}, {3}),
               b = from_vector<float>({0, 6, 3}, {3}), dy = ones({2, 3, 1}, DType::f32);
  for (NormActivation act : {NormActivation::relu, NormActivation::relu6}) {
    const std::vector<Tensor> want = step(x, w, b, dy, act, false), got = step(x, w, b, dy, act, true);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
    const std::vector<float> dbias = got[3].to_vector<float>();
    EXPECT_EQ(dbias[0], 0.0f);                                        // y = 0: no gradient
    EXPECT_EQ(dbias[1], act == NormActivation::relu6 ? 0.0f : 2.0f);  // y = 6: relu6's edge
    EXPECT_EQ(dbias[2], 2.0f);
  }
}

TEST(BatchNormAct, GradientsMatchFiniteDifferences) {
  for (NormActivation act : {NormActivation::relu, NormActivation::relu6}) {
    // Outputs spread over (-3, 9): both relu6 edges are crossed, none is hit.
    Tensor x = testing::rand_input({2, 3, 5}, 11, -2.0, 2.0), w = testing::rand_input({3}, 12, 1.0, 3.0),
           b = testing::rand_input({3}, 13, 0.5, 4.0);
    testing::gradcheck(
        [act](const std::vector<Tensor>& v) {
          return batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true, .act = act});
        },
        {x, w, b});
  }
}

}  // namespace
}  // namespace octet
