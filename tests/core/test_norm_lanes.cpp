// The CPU batch norm's per-ISA channel loops (core/cpu/norm.cpp: sums in 8 double lanes plus a
// scalar tail) and the one-select relu/relu6 gradients (BinaryOp::relu_grad, relu6_grad): every
// ISA path gives the same bits on odd plane sizes, f32 is within rounding of f64, and the
// gradient masks match PyTorch's threshold rule at the edges. The fused layer norm the same way,
// against its composed reference (layer_norm_reference) in f64, f32 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"

namespace octet {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.numel() * dtype_size(a.dtype())) == 0;
}

// Output, dx, dweight, dbias of a training-mode batch norm with upstream gradient dy.
std::vector<Tensor> bn_step(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy) {
  Tensor x = x0.detach().clone().requires_grad_(true), w = w0.detach().clone().requires_grad_(true),
         b = b0.detach().clone().requires_grad_(true);
  Tensor y = batch_norm(x, {.weight = w, .bias = b, .training = true});
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST(NormLanes, BatchNormEveryIsaGivesTheSameBits) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t hw : {1, 7, 8, 9, 61}) {
    Generator g(hw);
    const Tensor x = randn({3, 5, hw}, DType::f32, &g) * 3.0 + 2.0, w = randn({5}, DType::f32, &g),
                 b = randn({5}, DType::f32, &g), dy = randn({3, 5, hw}, DType::f32, &g);
    cpu::set_active_isa(cpu::Isa::portable);
    const std::vector<Tensor> ref = bn_step(x, w, b, dy);
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      cpu::set_active_isa(isa);
      const std::vector<Tensor> got = bn_step(x, w, b, dy);
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_TRUE(same_bits(got[i], ref[i])) << cpu::isa_name(isa) << " hw " << hw << " output " << i;
    }
    cpu::set_active_isa(best);
    const std::vector<Tensor> f64 = bn_step(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64), dy.to(DType::f64));
    for (size_t i = 0; i < ref.size(); ++i) {
      const std::vector<float> a = ref[i].to_vector<float>();
      const std::vector<double> e = f64[i].to_vector<double>();
      const double scale = max(abs(f64[i])).item();
      for (size_t k = 0; k < a.size(); ++k)
        ASSERT_LE(std::abs(a[k] - e[k]), 1e-5 * (std::abs(e[k]) + scale)) << "hw " << hw << " output " << i;
    }
  }
}

// Output, dx, dweight, dbias of layer_norm (or its composed reference) over the last dim.
std::vector<Tensor> ln_step(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy, bool reference) {
  Tensor x = x0.detach().clone().requires_grad_(true), w = w0.detach().clone().requires_grad_(true),
         b = b0.detach().clone().requires_grad_(true);
  const Shape last{x.size(-1)};
  Tensor y = reference ? layer_norm_reference(x, last, w, b, 1e-5) : layer_norm(x, last, w, b, 1e-5);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

// The largest |a - b| over max(1e-30, max |b|), both taken to f64.
double rel_err(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  return max(abs(a64 - b64)).item() / std::max(1e-30, max(abs(b64)).item());
}

TEST(NormLanes, LayerNormMatchesItsReferenceOnEveryIsa) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t n : {1, 7, 8, 9, 61, 384}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Generator g(n);
    const Tensor x = randn({2, 5, n}, DType::f64, &g) * 3.0 + 2.0, w = randn({n}, DType::f64, &g),
                 b = randn({n}, DType::f64, &g), dy = randn({2, 5, n}, DType::f64, &g);
    // f64: the composed ops' numbers to rounding.
    const std::vector<Tensor> f64 = ln_step(x, w, b, dy, false), ref = ln_step(x, w, b, dy, true);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LT(rel_err(f64[i], ref[i]), 1e-12) << "output " << i;
    // f32 on every ISA: the same bits, within f32 rounding of f64.
    auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
    cpu::set_active_isa(cpu::Isa::portable);
    const std::vector<Tensor> portable = ln_step(f32(x), f32(w), f32(b), f32(dy), false);
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      cpu::set_active_isa(isa);
      const std::vector<Tensor> got = ln_step(f32(x), f32(w), f32(b), f32(dy), false);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(same_bits(got[i], portable[i])) << cpu::isa_name(isa) << " output " << i;
    }
    cpu::set_active_isa(best);
    for (size_t i = 0; i < portable.size(); ++i) EXPECT_LT(rel_err(portable[i], ref[i]), 2e-5) << "output " << i;
    // bf16 activations: the f32 kernel on the widened input, the output rounded once; dx within a
    // bf16 unit of the f32 one; the parameter gradients f32.
    const Tensor xb = x.to(DType::bf16), dyb = dy.to(DType::bf16);
    const std::vector<Tensor> bf = ln_step(xb, f32(w), f32(b), dyb, false),
                              wide = ln_step(f32(xb), f32(w), f32(b), f32(dyb), false);
    EXPECT_EQ(bf[0].dtype(), DType::bf16);
    EXPECT_TRUE(same_bits(bf[0], wide[0].to(DType::bf16)));
    EXPECT_EQ(bf[1].dtype(), DType::bf16);
    EXPECT_LT(rel_err(bf[1], wide[1]), 1.0 / 128);
    EXPECT_TRUE(same_bits(bf[2], wide[2]));
    EXPECT_TRUE(same_bits(bf[3], wide[3]));
  }
}

// relu passes the gradient where the output is > 0, relu6 where the input is in (0, 6); NaN inputs
// and the edges 0 and 6 pass none; a NaN or infinite upstream gradient stays where it passes.
TEST(NormLanes, ReluGradientsSelect) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x0 = from_vector<float>({-1, 0, 3, 6, 7, nan}, {6});
  const Tensor dy = from_vector<float>({nan, inf, 2, 5, inf, 1}, {6});
  for (bool six : {false, true}) {
    Tensor x = x0.clone().requires_grad_(true);
    (six ? relu6(x) : relu(x)).backward(dy);
    const std::vector<float> g = x.grad().to_vector<float>();
    const std::vector<float> want = six ? std::vector<float>{0, 0, 2, 0, 0, 0} : std::vector<float>{0, 0, 2, 5, inf, 0};
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], want[i]) << (six ? "relu6 " : "relu ") << i;
  }
}

}  // namespace
}  // namespace octet
