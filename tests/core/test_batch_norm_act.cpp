// Batch norm fused with a following ReLU/ReLU6 and a residual add (core/norm_act.h,
// batch_norm(..., act, residual)): on every ISA path and odd plane sizes the fused op gives the
// unfused relu(batch_norm(x) + r) / relu6(...) bits in the output and in every gradient; the fused gradient passes f64
// finite differences; Sequential and the ResNet blocks use it; and it keeps one activation less for the backward, so an
// INT8 convolution's float input is freed after the forward.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include "core/allocator.h"
#include "core/cpu/isa.h"
#include "core/gradcheck.h"
#include "core/octet.h"
#include "layers/layers.h"
#include "models/resnet.h"
#include "quant/int8_model.h"

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

// MobileNetV2's block: Sequential::forward_add(x, x) adds in the last batch norm's output pass and
// gives x + forward(x)'s bits, in the output and the gradients.
TEST(BatchNormAct, SequentialForwardAddGivesTheUnfusedBits) {
  manual_seed(5);
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Conv2d>(6, 12, 1));
  seq->push_back(std::make_shared<BatchNorm2d>(12));
  seq->push_back(std::make_shared<ReLU6>());
  seq->push_back(std::make_shared<Conv2d>(12, 6, 1));
  seq->push_back(std::make_shared<BatchNorm2d>(6));
  seq->train();
  Generator g(6);
  const Tensor x0 = randn({2, 6, 7, 7}, DType::f32, &g);
  auto run = [&](bool fused) {
    seq->zero_grad();
    Tensor x = x0.clone().requires_grad_(true);
    Tensor y = fused ? seq->forward_add(x, x) : x + seq->forward(x);
    sum(y * y).backward();
    std::vector<Tensor> out{y.detach(), x.grad()};
    for (const auto& [name, p] : seq->named_parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const std::vector<Tensor> want = run(false), got = run(true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "tensor " << i;
}

// The ResNet blocks run relu(bn(y) + identity) as one op: the bits of the blocks' modules called
// one by one with a separate add and relu, with an identity and with a projection shortcut.
TEST(BatchNormAct, ResNetBlocksGiveTheUnfusedBits) {
  manual_seed(7);
  auto basic_id = std::make_shared<BasicBlock>(8, 8, 1), basic_proj = std::make_shared<BasicBlock>(8, 16, 2);
  auto bottle_id = std::make_shared<Bottleneck>(16, 4, 1), bottle_proj = std::make_shared<Bottleneck>(8, 4, 2);
  auto unfused_basic = [](BasicBlock& b, const Tensor& x) {
    Tensor y = b.bn2_->forward(b.conv2_->forward(relu(b.bn1_->forward(b.conv1_->forward(x)))));
    return relu(y + (b.downsample_ ? b.downsample_->forward(x) : x));
  };
  auto unfused_bottleneck = [](Bottleneck& b, const Tensor& x) {
    Tensor y = relu(b.bn1_->forward(b.conv1_->forward(x)));
    y = relu(b.bn2_->forward(b.conv2_->forward(y)));
    y = b.bn3_->forward(b.conv3_->forward(y));
    return relu(y + (b.downsample_ ? b.downsample_->forward(x) : x));
  };
  Generator g(8);
  const Tensor x8 = randn({2, 8, 9, 9}, DType::f32, &g), x16 = randn({2, 16, 9, 9}, DType::f32, &g);
  auto run = [](Module& m, const Tensor& x0, const std::function<Tensor(const Tensor&)>& f) {
    m.train();
    m.zero_grad();
    Tensor x = x0.clone().requires_grad_(true);
    Tensor y = f(x);
    sum(y * y).backward();
    std::vector<Tensor> out{y.detach(), x.grad()};
    for (const auto& [name, p] : m.named_parameters()) out.push_back(p.grad().clone());
    return out;
  };
  auto expect_same = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << what << " tensor " << i;
  };
  for (const auto& [b, x, what] :
       {std::tuple{basic_id, x8, "basic, identity"}, {basic_proj, x8, "basic, projection"}}) {
    BasicBlock& blk = *b;
    expect_same(run(blk, x, [&](const Tensor& t) { return blk.forward(t); }),
                run(blk, x, [&](const Tensor& t) { return unfused_basic(blk, t); }), what);
  }
  for (const auto& [b, x, what] :
       {std::tuple{bottle_id, x16, "bottleneck, identity"}, {bottle_proj, x8, "bottleneck, projection"}}) {
    Bottleneck& blk = *b;
    expect_same(run(blk, x, [&](const Tensor& t) { return blk.forward(t); }),
                run(blk, x, [&](const Tensor& t) { return unfused_bottleneck(blk, t); }), what);
  }
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

// Conv -> BN -> ReLU6 in a Sequential: the same output and gradients as the three modules called
// one by one, and one activation fewer alive between forward and backward.
TEST(BatchNormAct, SequentialFusesAndKeepsLess) {
  manual_seed(3);
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Conv2d>(3, 8, 3, Conv2dOptions().padding(1)));
  seq->push_back(std::make_shared<BatchNorm2d>(8));
  seq->push_back(std::make_shared<ReLU6>());
  seq->push_back(std::make_shared<Conv2d>(8, 4, 3, Conv2dOptions().padding(1)));
  seq->train();
  Generator g(4);
  const Tensor x = randn({2, 3, 9, 9}, DType::f32, &g);
  auto run = [&](bool fused) {
    seq->zero_grad();
    const size_t before = cpu_memory_stats().allocated;
    Tensor y =
        fused ? seq->forward(x) : (*seq)[3]->forward((*seq)[2]->forward((*seq)[1]->forward((*seq)[0]->forward(x))));
    const size_t kept = cpu_memory_stats().allocated - before;
    sum(y * y).backward();
    std::vector<Tensor> out{y.detach()};
    for (const auto& [name, p] : seq->named_parameters()) out.push_back(p.grad().clone());
    return std::make_pair(out, kept);
  };
  const auto [want, kept_unfused] = run(false);
  const auto [got, kept_fused] = run(true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "tensor " << i;
  const size_t activation = 2 * 8 * 9 * 9 * sizeof(float);
  EXPECT_LE(kept_fused + activation, kept_unfused);
}

// The point of the fusion for INT8 training: conv -> BN -> ReLU6 -> INT8 conv keeps the INT8 conv's
// int8 codes and not its float input.
TEST(BatchNormAct, Int8ConvolutionAfterItKeepsOnlyCodes) {
  manual_seed(5);
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Conv2d>(3, 16, 3, Conv2dOptions().padding(1)));
  seq->push_back(std::make_shared<BatchNorm2d>(16));
  seq->push_back(std::make_shared<ReLU6>());
  seq->push_back(std::make_shared<Conv2d>(16, 16, 3, Conv2dOptions().padding(1)));
  quant::enable_int8(*seq, quant::Int8Config(), /*keep_first_last_float=*/false, 0);
  seq->train();
  Generator g(6);
  const Tensor x = randn({4, 3, 16, 16}, DType::f32, &g);
  const size_t before = cpu_memory_stats().allocated;
  Tensor y = seq->forward(x);
  const size_t kept = cpu_memory_stats().allocated - before;
  const size_t plane = 4 * 16 * 16 * 16;  // elements of one activation
  // The first conv's output (kept by the batch norm), the int8 codes of the INT8 conv's input and
  // its output; no float copy of the ReLU6 output.
  EXPECT_LT(kept, plane * (4 + 1 + 4) + plane);
  sum(y).backward();
}

}  // namespace
}  // namespace octet
