// The fused gradients of log_softmax, softmax and cross_entropy (core/cpu/reduce.cpp,
// kernels::softmax_backward_rows and cross_entropy_backward_rows): every ISA path gives the same
// bits, the f32 gradients are within float rounding of the f64 ones computed from the same
// values by composed operations, on odd row lengths, every reduction, label smoothing and ignored
// targets. (gradcheck in test_nn.cpp checks the f64 gradients against finite differences.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"

namespace octet {
namespace {

Tensor logits(int64_t rows, int64_t r, uint64_t seed) {
  Generator g(seed);
  return randn({rows, r}, DType::f32, &g) * 4.0;
}

Tensor targets(int64_t rows, int64_t r, int64_t ignore_index) {
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) t[i] = i % 4 == 3 ? ignore_index : (i * 7919) % r;
  return from_vector<int64_t>(t, {rows});
}

// d/dx of sum(f(x) * weights) for f32 x, through autograd.
template <typename F>
Tensor grad_of(const Tensor& x0, const Tensor& weights, F f) {
  Tensor x = x0.detach().clone().requires_grad_(true);
  Tensor y = f(x);
  sum(weights.defined() ? y * weights : y).backward();
  return x.grad().detach().clone();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

// |a - want| <= tol * (|want| + scale) elementwise, want in f64.
void expect_close(const Tensor& a, const Tensor& want, double tol, double scale, const std::string& what) {
  const std::vector<float> av = a.to_vector<float>();
  const std::vector<double> wv = want.to_vector<double>();
  ASSERT_EQ(av.size(), wv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i)
    ASSERT_LE(std::abs(av[i] - wv[i]), tol * (std::abs(wv[i]) + scale)) << what << " element " << i;
}

struct Case {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  bool weighted;  // the output is [N, C] and gets random upstream weights
};

std::vector<Case> cases(int64_t rows, int64_t r) {
  std::vector<Case> out;
  out.push_back({"log_softmax", [](const Tensor& x) { return log_softmax(x, 1); }, true});
  out.push_back({"softmax", [](const Tensor& x) { return softmax(x, 1); }, true});
  out.push_back({"log_softmax dim 0", [](const Tensor& x) { return log_softmax(x, 0); }, true});
  for (Reduction red : {Reduction::mean, Reduction::sum, Reduction::none})
    for (double eps : {0.0, 0.1})
      out.push_back({"cross_entropy",
                     [=](const Tensor& x) {
                       return cross_entropy(x, targets(rows, r, -100),
                                            CrossEntropyOptions().reduction(red).label_smoothing(eps));
                     },
                     false});
  return out;
}

TEST(SoftmaxBackward, EveryIsaGivesTheSameBits) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t r : {1, 7, 8, 9, 257, 31001}) {
    const int64_t rows = 6;
    const Tensor x = logits(rows, r, 40 + r), w = logits(rows, r, 80 + r);
    for (const Case& c : cases(rows, r)) {
      const Tensor weights = c.weighted ? w : Tensor();
      cpu::set_active_isa(cpu::Isa::portable);
      const Tensor ref = grad_of(x, weights, c.f);
      for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (!cpu::isa_supported(isa)) continue;
        cpu::set_active_isa(isa);
        EXPECT_TRUE(same_bits(grad_of(x, weights, c.f), ref)) << c.name << " " << cpu::isa_name(isa) << " r " << r;
      }
      cpu::set_active_isa(best);
    }
  }
}

TEST(SoftmaxBackward, F32WithinRoundingOfF64) {
  for (int64_t r : {3, 9, 1000}) {
    const int64_t rows = 8;
    const Tensor x = logits(rows, r, 7 + r), w = logits(rows, r, 9 + r);
    for (const Case& c : cases(rows, r)) {
      const Tensor weights = c.weighted ? w : Tensor();
      const Tensor got = grad_of(x, weights, c.f);
      const Tensor want = grad_of(x.to(DType::f64), c.weighted ? w.to(DType::f64) : Tensor(), c.f);
      // Each element is a few float operations on values of the gradient's scale (the largest
      // |g| of its row): relative 1e-5 of that.
      const double scale = max(abs(want)).item();
      expect_close(got, want, 1e-5, scale, std::string(c.name) + " r " + std::to_string(r));
    }
  }
}

// Ignored rows get exactly zero; a mean over no kept target is NaN, as in PyTorch.
TEST(SoftmaxBackward, CrossEntropyIgnoredRows) {
  const Tensor x = logits(4, 5, 3);
  const Tensor g = grad_of(x, Tensor(), [](const Tensor& v) {
    return cross_entropy(v, from_vector<int64_t>({1, -100, 4, -100}, {4}));
  });
  const std::vector<float> gv = g.to_vector<float>();
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(gv[5 + j], 0.0f);
    EXPECT_EQ(gv[15 + j], 0.0f);
  }
  for (int64_t i : {0, 2}) {  // each kept row sums to zero (softmax minus one-hot), / 2 kept
    double s = 0;
    for (int64_t j = 0; j < 5; ++j) s += gv[i * 5 + j];
    EXPECT_NEAR(s, 0.0, 1e-6);
  }
}

}  // namespace
}  // namespace octet
