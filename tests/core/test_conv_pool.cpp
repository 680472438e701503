// conv2d and the 2-D pooling ops against naive double-precision references, finite-difference
// gradient checks in f64, f32/f64 agreement, thread-count determinism and input validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/conv_dnnl.h"
#include "core/octet.h"
#include "tests/core/gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;

// f64 kernels against an f64 reference: only summation order differs (~1e-16 per term).
constexpr double kF64Tol = 1e-12;
// f32 kernels against an f64 reference on O(1) data with up to ~200-term sums: a few ulp of 1e-7
// per term, plus oneDNN's blocked summation order.
constexpr double kF32Tol = 1e-4;

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " element " << i;
}

// ---------------------------------------------------------------- conv2d reference

struct ConvCase {
  std::string name;
  int64_t n, c, h, w, k, r, s;
  Conv2dOptions opts;
  bool bias = true;
};

// The direct 7-loop convolution in double.
std::vector<double> conv_reference(const ConvCase& cc, const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, int64_t& p_out, int64_t& q_out) {
  const Conv2dOptions& o = cc.opts;
  int64_t p = (cc.h + 2 * o.pad_h_ - o.dil_h_ * (cc.r - 1) - 1) / o.stride_h_ + 1;
  int64_t q = (cc.w + 2 * o.pad_w_ - o.dil_w_ * (cc.s - 1) - 1) / o.stride_w_ + 1;
  int64_t cg = cc.c / o.groups_, kg = cc.k / o.groups_;
  std::vector<double> out(cc.n * cc.k * p * q, 0.0);
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t k = 0; k < cc.k; ++k)
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          double acc = cc.bias ? b[k] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t r = 0; r < cc.r; ++r)
              for (int64_t s = 0; s < cc.s; ++s) {
                int64_t ih = i * o.stride_h_ - o.pad_h_ + r * o.dil_h_;
                int64_t iw = j * o.stride_w_ - o.pad_w_ + s * o.dil_w_;
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                int64_t c = (k / kg) * cg + ci;
                acc += x[((n * cc.c + c) * cc.h + ih) * cc.w + iw] * w[((k * cg + ci) * cc.r + r) * cc.s + s];
              }
          out[((n * cc.k + k) * p + i) * q + j] = acc;
        }
  p_out = p;
  q_out = q;
  return out;
}

std::vector<ConvCase> conv_cases() {
  return {
      {"stride2", 2, 3, 9, 7, 4, 3, 3, Conv2dOptions().stride(2)},
      {"padding1", 2, 3, 7, 8, 5, 3, 3, Conv2dOptions().padding(1), false},
      {"dilation2", 1, 2, 11, 9, 3, 3, 3, Conv2dOptions().dilation(2).padding(2)},
      {"groups2", 2, 4, 7, 7, 6, 3, 3, Conv2dOptions().padding(1).groups(2)},
      {"groups3_strided", 1, 6, 9, 8, 3, 2, 3, Conv2dOptions().stride(2, 1).padding(1, 0).groups(3)},
      {"depthwise", 2, 5, 9, 9, 5, 3, 3, Conv2dOptions().stride(2).padding(1).groups(5)},
      {"depthwise_x2", 2, 3, 8, 7, 6, 3, 3, Conv2dOptions().padding(1).groups(3)},
      {"depthwise_nonsquare", 1, 4, 7, 10, 8, 3, 2, Conv2dOptions().stride(1, 2).padding(1, 1).dilation(2, 1).groups(4),
       false},
      {"pointwise", 2, 5, 6, 7, 4, 1, 1, Conv2dOptions()},
      {"pointwise_groups", 2, 4, 5, 3, 6, 1, 1, Conv2dOptions().groups(2)},
      {"pointwise_stride2", 1, 3, 7, 5, 2, 1, 1, Conv2dOptions().stride(2)},
      {"nonsquare", 1, 3, 10, 6, 4, 3, 2, Conv2dOptions().stride(2, 1).padding(1, 0).dilation(1, 2)},
      {"kernel_equals_input", 2, 2, 4, 3, 3, 4, 3, Conv2dOptions()},
      {"single_channel_in", 2, 1, 9, 9, 3, 5, 5, Conv2dOptions().padding(2)},
  };
}

class ConvValues : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvValues, MatchesNaiveReference) {
  const ConvCase& cc = GetParam();
  for (DType dt : {DType::f64, DType::f32}) {
    Tensor x = random({cc.n, cc.c, cc.h, cc.w}, dt, 1);
    Tensor w = random({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, dt, 2);
    Tensor b = cc.bias ? random({cc.k}, dt, 3) : Tensor();
    int64_t p = 0, q = 0;
    std::vector<double> want = conv_reference(cc, x.to_vector<double>(), w.to_vector<double>(),
                                              cc.bias ? b.to_vector<double>() : std::vector<double>{}, p, q);
    Tensor y = conv2d(x, w, b, cc.opts);
    ASSERT_EQ(y.shape(), (Shape{cc.n, cc.k, p, q})) << cc.name;
    ASSERT_EQ(y.dtype(), dt);
    expect_close(y.to_vector<double>(), want, dt == DType::f64 ? kF64Tol : kF32Tol,
                 cc.name + " " + std::string(dtype_name(dt)));
  }
}

TEST_P(ConvValues, GradcheckF64) {
  const ConvCase& cc = GetParam();
  Tensor x = testing::rand_input({cc.n, cc.c, cc.h, cc.w}, 11);
  Tensor w = testing::rand_input({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, 12);
  Tensor b = cc.bias ? testing::rand_input({cc.k}, 13) : Tensor();
  Conv2dOptions opts = cc.opts;
  gradcheck([opts](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], opts); }, {x, w, b});
}

// The f32 oneDNN path against the plain f32 kernels, forward and both gradients.
TEST_P(ConvValues, DnnlMatchesPlainKernels) {
  const ConvCase& cc = GetParam();
  auto run = [&](bool dnnl) {
    const cpu::Conv2dPath prev = cpu::conv2d_selector().set(dnnl ? cpu::Conv2dPath::dnnl : cpu::Conv2dPath::loops);
    Tensor x = random({cc.n, cc.c, cc.h, cc.w}, DType::f32, 41).requires_grad_(true);
    Tensor w = random({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, DType::f32, 42).requires_grad_(true);
    Tensor b = cc.bias ? random({cc.k}, DType::f32, 43).requires_grad_(true) : Tensor();
    Tensor y = conv2d(x, w, b, cc.opts);
    y.backward(random(y.shape(), DType::f32, 44));
    cpu::conv2d_selector().set(prev);
    return std::vector<std::vector<double>>{y.to_vector<double>(), x.grad().to_vector<double>(),
                                            w.grad().to_vector<double>()};
  };
  auto plain = run(false), dnnl = run(true);
  const char* what[] = {"output", "dx", "dw"};
  for (int i = 0; i < 3; ++i) expect_close(dnnl[i], plain[i], kF32Tol, cc.name + " " + what[i]);
}

INSTANTIATE_TEST_SUITE_P(Conv2d, ConvValues, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name; });

TEST(Conv2d, GradOnlyForInputsThatNeedIt) {
  Tensor x = testing::rand_input({1, 2, 5, 5}, 21);
  Tensor w = random({3, 2, 3, 3}, DType::f64, 22);  // no grad
  Tensor b = testing::rand_input({3}, 23);
  sum(conv2d(x, w, b, Conv2dOptions().padding(1))).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  ASSERT_TRUE(b.grad().defined());
  // d sum(y) / d b[k] = number of output positions.
  for (double v : b.grad().to_vector<double>()) EXPECT_DOUBLE_EQ(v, 25.0);
}

TEST(Conv2d, NonContiguousInputs) {
  Tensor x = random({2, 3, 6, 5}, DType::f64, 31).transpose(2, 3);  // [2,3,5,6], strided
  Tensor w = random({4, 3, 3, 3}, DType::f64, 32);
  Tensor y = conv2d(x, w, {}, Conv2dOptions().padding(1));
  Tensor y_ref = conv2d(x.contiguous(), w, {}, Conv2dOptions().padding(1));
  expect_close(y.to_vector<double>(), y_ref.to_vector<double>(), 0.0, "transposed input");
}

// A larger case in f32 against the same case in f64, forward and backward, for the GEMM path and
// the depthwise kernel.
TEST(Conv2d, F32MatchesF64) {
  // f32 sums of up to C*R*S*N*P*Q ~ 16*9*2*225 terms of O(1) values: ~1e-7 * sqrt(terms) relative
  // to the magnitude; 1e-4 relative to (1 + |value|) leaves a wide margin.
  constexpr double kTol = 1e-4;
  for (int64_t groups : {int64_t{1}, int64_t{16}}) {
    const int64_t n = 2, c = 16, h = 15, k = groups == 1 ? 24 : 32, cg = c / groups;  // depthwise: x2
    Conv2dOptions opts = Conv2dOptions().padding(1).groups(groups);
    Tensor x64 = random({n, c, h, h}, DType::f64, 41).requires_grad_();
    Tensor w64 = (random({k, cg, 3, 3}, DType::f64, 42) * (1.0 / std::sqrt(9.0 * cg))).detach().requires_grad_();
    Tensor b64 = random({k}, DType::f64, 43).requires_grad_();
    Tensor x32 = x64.detach().to(DType::f32).requires_grad_();
    Tensor w32 = w64.detach().to(DType::f32).requires_grad_();
    Tensor b32 = b64.detach().to(DType::f32).requires_grad_();
    Tensor dout = random({n, k, h, h}, DType::f64, 44);
    Tensor y64 = conv2d(x64, w64, b64, opts);
    Tensor y32 = conv2d(x32, w32, b32, opts);
    y64.backward(dout);
    y32.backward(dout.to(DType::f32));
    std::string tag = "groups " + std::to_string(groups);
    expect_close(y32.to_vector<double>(), y64.to_vector<double>(), kTol, tag + " y");
    expect_close(x32.grad().to_vector<double>(), x64.grad().to_vector<double>(), kTol, tag + " dx");
    expect_close(w32.grad().to_vector<double>(), w64.grad().to_vector<double>(), kTol, tag + " dw");
    expect_close(b32.grad().to_vector<double>(), b64.grad().to_vector<double>(), kTol, tag + " db");
  }
}

// Gradients of the direct (depthwise) kernels and the pooling backward do not depend on threads.
TEST(Conv2d, DepthwiseDeterministicAcrossThreads) {
  auto run = [](int threads) {
    int prev = get_num_threads();
    set_num_threads(threads);
    Tensor x = random({3, 8, 12, 12}, DType::f32, 51).requires_grad_();
    Tensor w = random({16, 1, 3, 3}, DType::f32, 52).requires_grad_();
    Tensor y = conv2d(x, w, {}, Conv2dOptions().padding(1).groups(8));
    y.backward(random(y.shape(), DType::f32, 53));
    set_num_threads(prev);
    std::vector<float> all = y.to_vector<float>();
    for (float v : x.grad().to_vector<float>()) all.push_back(v);
    for (float v : w.grad().to_vector<float>()) all.push_back(v);
    return all;
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(Conv2d, RejectsBadInputs) {
  Tensor x = random({1, 4, 5, 5}, DType::f32, 61);
  Tensor w = random({6, 4, 3, 3}, DType::f32, 62);
  EXPECT_THROW(conv2d(random({4, 5, 5}, DType::f32, 1), w), Error);     // 3-D input
  EXPECT_THROW(conv2d(x, random({6, 4, 3}, DType::f32, 1)), Error);     // 3-D weight
  EXPECT_THROW(conv2d(x, random({6, 3, 3, 3}, DType::f32, 1)), Error);  // channel mismatch
  EXPECT_THROW(conv2d(x, w.to(DType::f64)), Error);                     // dtype mismatch
  EXPECT_THROW(conv2d(x, w, random({5}, DType::f32, 1)), Error);        // bias size
  EXPECT_THROW(conv2d(x, w, random({6, 1}, DType::f32, 1)), Error);     // bias rank
  EXPECT_THROW(conv2d(x, random({6, 4, 3, 3}, DType::f32, 1), {}, Conv2dOptions().groups(3)), Error);  // C % g
  EXPECT_THROW(conv2d(x, random({5, 2, 3, 3}, DType::f32, 1), {}, Conv2dOptions().groups(2)), Error);  // K % g
  EXPECT_THROW(conv2d(x, random({6, 4, 3, 3}, DType::f32, 1), {}, Conv2dOptions().groups(2)), Error);  // w.size(1)
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().groups(0)), Error);
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().stride(0)), Error);
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().stride(1, -1)), Error);
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().dilation(0)), Error);
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().padding(-1)), Error);
  EXPECT_THROW(conv2d(x, random({6, 4, 7, 3}, DType::f32, 1)), Error);  // kernel > input
  EXPECT_THROW(conv2d(x, w, {}, Conv2dOptions().dilation(3)), Error);   // dilated kernel 7 > 5
  EXPECT_NO_THROW(conv2d(x, random({6, 4, 7, 3}, DType::f32, 1), {}, Conv2dOptions().padding(1)));
  EXPECT_THROW(conv2d(x.to(DType::i64), w.to(DType::i64)), Error);  // integer dtype
  EXPECT_THROW(conv2d(Tensor(), w), Error);
}

// ---------------------------------------------------------------- pooling references

struct PoolCase {
  std::string name;
  int64_t n, c, h, w;
  Shape kernel, stride, padding, dilation;
};

std::vector<PoolCase> pool_cases() {
  return {
      {"k2", 2, 3, 8, 6, {2}, {}, {0}, {1}},
      {"k3s2p1", 2, 2, 9, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
      {"nonsquare", 1, 3, 7, 10, {2, 3}, {1, 2}, {1, 1}, {1, 1}},
      {"overlap_odd", 1, 2, 5, 5, {3}, {1}, {1}, {1}},
      {"dilated", 1, 2, 9, 8, {2, 3}, {2, 1}, {1, 0}, {2, 2}},
  };
}

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}
int64_t at(const Shape& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; }

std::vector<double> max_pool_reference(const PoolCase& pc, const std::vector<double>& x, int64_t& p_out,
                                       int64_t& q_out) {
  int64_t kh = at(pc.kernel, 0), kw = at(pc.kernel, 1);
  int64_t sh = pc.stride.empty() ? kh : at(pc.stride, 0), sw = pc.stride.empty() ? kw : at(pc.stride, 1);
  int64_t ph = at(pc.padding, 0), pw = at(pc.padding, 1), dh = at(pc.dilation, 0), dw = at(pc.dilation, 1);
  int64_t p = pool_out(pc.h, kh, sh, ph, dh), q = pool_out(pc.w, kw, sw, pw, dw);
  std::vector<double> out;
  for (int64_t plane = 0; plane < pc.n * pc.c; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t r = 0; r < kh; ++r)
          for (int64_t s = 0; s < kw; ++s) {
            int64_t ih = i * sh - ph + r * dh, iw = j * sw - pw + s * dw;
            if (ih >= 0 && ih < pc.h && iw >= 0 && iw < pc.w) best = std::max(best, x[(plane * pc.h + ih) * pc.w + iw]);
          }
        out.push_back(best);
      }
  p_out = p;
  q_out = q;
  return out;
}

std::vector<double> avg_pool_reference(const PoolCase& pc, const std::vector<double>& x, bool include_pad) {
  int64_t kh = at(pc.kernel, 0), kw = at(pc.kernel, 1);
  int64_t sh = pc.stride.empty() ? kh : at(pc.stride, 0), sw = pc.stride.empty() ? kw : at(pc.stride, 1);
  int64_t ph = at(pc.padding, 0), pw = at(pc.padding, 1);
  int64_t p = pool_out(pc.h, kh, sh, ph, 1), q = pool_out(pc.w, kw, sw, pw, 1);
  std::vector<double> out;
  for (int64_t plane = 0; plane < pc.n * pc.c; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        double acc = 0;
        int64_t inside = 0;
        for (int64_t r = 0; r < kh; ++r)
          for (int64_t s = 0; s < kw; ++s) {
            int64_t ih = i * sh - ph + r, iw = j * sw - pw + s;
            if (ih >= 0 && ih < pc.h && iw >= 0 && iw < pc.w) {
              acc += x[(plane * pc.h + ih) * pc.w + iw];
              ++inside;
            }
          }
        out.push_back(acc / static_cast<double>(include_pad ? kh * kw : inside));
      }
  return out;
}

class PoolValues : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolValues, MaxPoolMatchesReference) {
  const PoolCase& pc = GetParam();
  for (DType dt : {DType::f64, DType::f32}) {
    Tensor x = random({pc.n, pc.c, pc.h, pc.w}, dt, 71);
    int64_t p = 0, q = 0;
    std::vector<double> want = max_pool_reference(pc, x.to_vector<double>(), p, q);
    Tensor y = max_pool2d(x, pc.kernel, pc.stride, pc.padding, pc.dilation);
    ASSERT_EQ(y.shape(), (Shape{pc.n, pc.c, p, q})) << pc.name;
    expect_close(y.to_vector<double>(), want, 0.0, pc.name);  // a max is exact
  }
}

TEST_P(PoolValues, AvgPoolMatchesReference) {
  const PoolCase& pc = GetParam();
  for (bool include_pad : {true, false}) {
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor x = random({pc.n, pc.c, pc.h, pc.w}, dt, 72);
      std::vector<double> want = avg_pool_reference(pc, x.to_vector<double>(), include_pad);
      Tensor y = avg_pool2d(x, pc.kernel, pc.stride, pc.padding, include_pad);
      expect_close(y.to_vector<double>(), want, dt == DType::f64 ? kF64Tol : kF32Tol, pc.name);
    }
  }
}

TEST_P(PoolValues, MaxPoolGradcheck) {
  const PoolCase& pc = GetParam();
  Tensor x = testing::rand_input({pc.n, pc.c, pc.h, pc.w}, 73);
  gradcheck(
      [pc](const std::vector<Tensor>& v) { return max_pool2d(v[0], pc.kernel, pc.stride, pc.padding, pc.dilation); },
      {x});
}

TEST_P(PoolValues, AvgPoolGradcheck) {
  const PoolCase& pc = GetParam();
  for (bool include_pad : {true, false}) {
    Tensor x = testing::rand_input({pc.n, pc.c, pc.h, pc.w}, 74);
    gradcheck(
        [pc, include_pad](const std::vector<Tensor>& v) {
          return avg_pool2d(v[0], pc.kernel, pc.stride, pc.padding, include_pad);
        },
        {x});
  }
}

INSTANTIATE_TEST_SUITE_P(Pool2d, PoolValues, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) { return info.param.name; });

TEST(MaxPool2d, KnownValuesAndFirstMaxGetsGradient) {
  Tensor x = arange(16.0, DType::f64).view({1, 1, 4, 4});
  EXPECT_EQ(max_pool2d(x, {2}).to_vector<double>(), (std::vector<double>{5, 7, 13, 15}));
  // Ties: all equal, so the first element of each window takes the whole gradient.
  Tensor t = ones({1, 1, 2, 4}, DType::f64).requires_grad_();
  sum(max_pool2d(t, {2})).backward();
  EXPECT_EQ(t.grad().to_vector<double>(), (std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0}));
  // Overlapping windows add their gradients into a shared maximum.
  Tensor u = from_vector<double>({0, 9, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 3, 3}, true);
  sum(max_pool2d(u, {2}, {1})).backward();
  EXPECT_EQ(u.grad().to_vector<double>(), (std::vector<double>{0, 2, 0, 1, 1, 0, 0, 0, 0}));
}

TEST(MaxPool2d, PaddingIsMinusInfinity) {
  Tensor x = full({1, 1, 2, 2}, -5.0, DType::f32);
  Tensor y = max_pool2d(x, {3}, {1}, {1});
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, -5.0f);
}

TEST(MaxPool2d, NanPropagatesAndGetsTheGradient) {
  Tensor x = from_vector<double>({1, NAN, 3, 2}, {1, 1, 2, 2}, true);
  Tensor y = max_pool2d(x, {2});
  EXPECT_TRUE(std::isnan(y.item<double>()));
  y.backward(ones({1, 1, 1, 1}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>()[1], 1.0);
}

TEST(AvgPool2d, CountIncludePad) {
  Tensor x = ones({1, 1, 3, 3}, DType::f64);
  // With padding 1 and a 3x3 kernel, a corner window covers 4 inputs of 9 positions.
  std::vector<double> incl = avg_pool2d(x, {3}, {1}, {1}, true).to_vector<double>();
  EXPECT_DOUBLE_EQ(incl[0], 4.0 / 9.0);
  EXPECT_DOUBLE_EQ(incl[1], 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(incl[4], 1.0);
  for (double v : avg_pool2d(x, {3}, {1}, {1}, false).to_vector<double>()) EXPECT_DOUBLE_EQ(v, 1.0);
}

TEST(Pool2d, ThreeDimensionalInput) {
  Tensor x = random({3, 7, 6}, DType::f64, 81);
  Tensor x4 = x.unsqueeze(0);
  EXPECT_EQ(max_pool2d(x, {2}).shape(), (Shape{3, 3, 3}));
  expect_close(max_pool2d(x, {2}).to_vector<double>(), max_pool2d(x4, {2}).to_vector<double>(), 0.0, "max 3-D");
  expect_close(avg_pool2d(x, {3}, {2}, {1}).to_vector<double>(), avg_pool2d(x4, {3}, {2}, {1}).to_vector<double>(), 0.0,
               "avg 3-D");
  expect_close(adaptive_avg_pool2d(x, {2, 3}).to_vector<double>(), adaptive_avg_pool2d(x4, {2, 3}).to_vector<double>(),
               0.0, "adaptive 3-D");
  Tensor g = testing::rand_input({2, 5, 4}, 82);
  gradcheck([](const std::vector<Tensor>& v) { return max_pool2d(v[0], {2}, {1}); }, {g});
}

TEST(Pool2d, DeterministicAcrossThreads) {
  auto run = [](int threads) {
    int prev = get_num_threads();
    set_num_threads(threads);
    Tensor x = random({4, 8, 13, 11}, DType::f32, 83).requires_grad_();
    Tensor y = max_pool2d(x, {3}, {1}, {1}) + avg_pool2d(x, {3}, {1}, {1}) + mean(adaptive_avg_pool2d(x, {6, 4}));
    y.backward(random(y.shape(), DType::f32, 84));
    set_num_threads(prev);
    std::vector<float> all = y.to_vector<float>();
    for (float v : x.grad().to_vector<float>()) all.push_back(v);
    return all;
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(Pool2d, RejectsBadInputs) {
  Tensor x = random({1, 2, 5, 5}, DType::f32, 91);
  EXPECT_THROW(max_pool2d(random({5, 5}, DType::f32, 1), {2}), Error);           // 2-D input
  EXPECT_THROW(max_pool2d(random({1, 1, 2, 5, 5}, DType::f32, 1), {2}), Error);  // 5-D input
  EXPECT_THROW(max_pool2d(x, {0}), Error);                                       // zero kernel
  EXPECT_THROW(max_pool2d(x, {2}, {0}), Error);                                  // zero stride
  EXPECT_THROW(max_pool2d(x, {2}, {1}, {2}), Error);                             // padding > kernel/2
  EXPECT_THROW(max_pool2d(x, {2}, {1}, {-1}), Error);
  EXPECT_THROW(max_pool2d(x, {2}, {1}, {0}, {0}), Error);  // zero dilation
  EXPECT_THROW(max_pool2d(x, {6}), Error);                 // kernel > input
  EXPECT_THROW(max_pool2d(x, {3}, {1}, {0}, {3}), Error);  // dilated kernel 7 > 5
  EXPECT_THROW(max_pool2d(x, {2, 2, 2}), Error);           // three kernel values
  EXPECT_THROW(avg_pool2d(x, {6}), Error);
  EXPECT_THROW(avg_pool2d(x, {3}, {1}, {2}), Error);
  EXPECT_THROW(avg_pool2d(x, {2}, {0}), Error);
  EXPECT_THROW(avg_pool2d(x.to(DType::i64), {2}), Error);
  EXPECT_THROW(adaptive_avg_pool2d(x, {0, 1}), Error);
  EXPECT_THROW(adaptive_avg_pool2d(x, {1, 2, 3}), Error);
  EXPECT_THROW(adaptive_avg_pool2d(random({5, 5}, DType::f32, 1), {1}), Error);
}

// ---------------------------------------------------------------- adaptive average pooling

std::vector<double> adaptive_reference(int64_t planes, int64_t h, int64_t w, int64_t p, int64_t q,
                                       const std::vector<double>& x) {
  std::vector<double> out;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        auto h0 = static_cast<int64_t>(std::floor(static_cast<double>(i * h) / p));
        auto h1 = static_cast<int64_t>(std::ceil(static_cast<double>((i + 1) * h) / p));
        auto w0 = static_cast<int64_t>(std::floor(static_cast<double>(j * w) / q));
        auto w1 = static_cast<int64_t>(std::ceil(static_cast<double>((j + 1) * w) / q));
        double acc = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += x[(plane * h + ih) * w + iw];
        out.push_back(acc / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return out;
}

TEST(AdaptiveAvgPool2d, MatchesReference) {
  struct Case {
    int64_t h, w, p, q;
  };
  for (Case cs : {Case{7, 7, 1, 1}, Case{7, 9, 3, 4}, Case{5, 4, 5, 4}, Case{3, 5, 7, 2}, Case{10, 6, 4, 3}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor x = random({2, 3, cs.h, cs.w}, dt, 101);
      std::vector<double> want = adaptive_reference(6, cs.h, cs.w, cs.p, cs.q, x.to_vector<double>());
      Tensor y = adaptive_avg_pool2d(x, {cs.p, cs.q});
      ASSERT_EQ(y.shape(), (Shape{2, 3, cs.p, cs.q}));
      expect_close(y.to_vector<double>(), want, dt == DType::f64 ? kF64Tol : kF32Tol,
                   "adaptive " + std::to_string(cs.h) + "x" + std::to_string(cs.w));
    }
    Tensor xg = testing::rand_input({1, 2, cs.h, cs.w}, 102);
    gradcheck([cs](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {cs.p, cs.q}); }, {xg});
  }
}

TEST(AdaptiveAvgPool2d, GlobalPoolIsMean) {
  Tensor x = random({2, 4, 5, 3}, DType::f64, 111);
  Tensor y = adaptive_avg_pool2d(x, {1});
  expect_close(y.to_vector<double>(), mean(x, {2, 3}, true).to_vector<double>(), kF64Tol, "global");
}

}  // namespace
}  // namespace octet
