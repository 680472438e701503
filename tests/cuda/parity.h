// CUDA-against-CPU parity harness shared by the tests in tests/cuda/ (ggml's idea: every backend
// is checked against the CPU one in one harness, with tolerances named per kind of op).
//   TEST_P(CudaElementwise, Relu) {
//     expect_parity("relu", [](const Inputs& v) { return Outputs{relu(v[0])}; }, {uniform_input({3, 4}, dtype(), 1)},
//                   kPointwise);
//   }
// expect_parity runs the function on CPU copies of the inputs and on CUDA copies (leaves that
// require grad where the given input does), compares every output, backpropagates the same seeded
// random upstream gradient through each differentiable output on both devices and compares every
// input's gradient. Failures name the op, the output or input, the first bad element, both values
// and the tolerance in force. Fixtures skip (GTEST_SKIP) when no CUDA device is usable, so on a
// machine without a GPU these tests show as SKIPPED, never as passed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"

namespace octet::testing {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using ParityFn = std::function<Outputs(const Inputs&)>;

// ---------------------------------------------------------------- tolerances

// An element passes when |cuda - cpu| <= atol * scale + rtol * |cpu|, with scale the largest
// magnitude in the CPU tensor (at least 1). Scaling atol by the tensor's own size follows ggml's
// normalized errors: a sum's rounding error grows with the size of its terms, not of its result,
// so an element that cancels to near zero may carry the error of its neighbours.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

struct Tolerances {
  Tolerance f32;
  Tolerance f64;
  Tolerance of(DType t) const { return t == DType::f64 ? f64 : f32; }
};

// Pure selection and data movement (copies, cat, gather, max pooling): nothing is rounded.
inline constexpr Tolerances kExact{{0, 0}, {0, 0}};
// Pointwise math, each element computed on its own: CUDA's math library and the CPU's libm are
// each within a few ulp (CUDA C Programming Guide, "Mathematical Functions": expf/logf/tanhf/erff
// 2-4 ulp, double versions 1-2 ulp). 1e-5 is ~80 f32 ulp; 1e-10 leaves six orders of f64 margin.
inline constexpr Tolerances kPointwise{{1e-5, 1e-6}, {1e-10, 1e-12}};
// Reductions, softmax, norms, GEMM, LSTM: K-term sums in another order (tree reductions, cuBLAS
// tiling against oneDNN/Eigen blocking). The error of a random-order sum is ~sqrt(K) ulp of the
// terms: for K up to ~4096, 6e-8 * 64 ~ 4e-6 of the scale in f32, 1e-14 in f64.
inline constexpr Tolerances kSums{{1e-4, 3e-5}, {1e-10, 1e-11}};
// Convolutions: besides the order, cuDNN may pick Winograd or FFT algorithms, whose f32 error is a
// small multiple of a direct sum's (Lavin & Gray 2016 report ~1e-5 relative for F(2x2,3x3)).
inline constexpr Tolerances kConv{{3e-4, 1e-4}, {1e-10, 1e-11}};

// ---------------------------------------------------------------- inputs

// OCTET_CUDA_TESTS_ON_CPU=1 runs the op parity suites (CudaDtypeTest, CudaCopy) with "the GPU"
// being the CPU: a check of the tests themselves (shapes, arguments, tolerances of exact ops) on a
// machine without a GPU. It proves nothing about CUDA and is never set in CI or by gpu_check.sh.
inline bool cpu_selftest() {
  const char* v = std::getenv("OCTET_CUDA_TESTS_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

inline Device gpu() { return cpu_selftest() ? Device::cpu() : Device::cuda(0); }

// A seeded U[lo, hi) CPU tensor. Drawn in f64 and converted, so an f32 case sees the f64 case's
// values rounded. Requires grad when `grad` and the dtype is floating.
inline Tensor uniform_input(const Shape& shape, DType dtype, uint64_t seed, double lo = -1.0, double hi = 1.0,
                            bool grad = true) {
  Generator g(seed);
  Tensor t = empty(shape, DType::f64);
  t.uniform_(lo, hi, &g);
  t = t.to(dtype);
  if (grad && is_floating(dtype)) t.requires_grad_(true);
  return t;
}

// A seeded N(0, 1) CPU tensor (drawn in f64, then converted), requiring grad when `grad`.
inline Tensor normal_input(const Shape& shape, DType dtype, uint64_t seed, bool grad = true) {
  Generator g(seed);
  Tensor t = randn(shape, DType::f64, &g).to(dtype);
  if (grad && is_floating(dtype)) t.requires_grad_(true);
  return t;
}

// Seeded N(0, 1) f32 rows [rows, cols] (no grad) for the quantized-inference tests; with
// `special`, row 1 zeros, a NaN in row 2 and an infinity in row 3 (where the rows exist).
inline Tensor quant_rows_input(int64_t rows, int64_t cols, uint64_t seed, bool special = false) {
  Tensor t = normal_input({rows, cols}, DType::f32, seed, false).contiguous();
  if (!special) return t;
  std::vector<float> v = t.to_vector<float>();
  if (rows > 1)
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(cols + c)] = 0.0f;
  if (rows > 2) v[static_cast<size_t>(2 * cols + cols / 2)] = std::numeric_limits<float>::quiet_NaN();
  if (rows > 3) v[static_cast<size_t>(3 * cols + cols - 1)] = std::numeric_limits<float>::infinity();
  return from_vector(v, {rows, cols});
}

// Seeded i64 indices in [0, hi).
inline Tensor index_input(const Shape& shape, int64_t hi, uint64_t seed) {
  Generator g(seed);
  Tensor t = empty(shape, DType::f64);
  t.uniform_(0.0, static_cast<double>(hi), &g);
  return t.to(DType::i64);  // truncation toward zero: uniform over [0, hi)
}

// ---------------------------------------------------------------- comparison

// Row-major multi-index of element `linear` of `shape`, for messages.
inline std::string index_str(const Shape& shape, int64_t linear) {
  Shape idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = linear % shape[d];
    linear /= shape[d];
  }
  std::ostringstream os;
  os << idx;
  return os.str();
}

// `got` (any device) against the CPU reference `want`: same shape and dtype; floating values
// within `tol` (NaN matches NaN, infinities must agree), other dtypes exactly.
inline ::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, Tolerances tols,
                                            const std::string& what) {
  if (got.defined() != want.defined())
    return ::testing::AssertionFailure() << what << ": defined on " << (got.defined() ? "cuda" : "cpu") << " only";
  if (!got.defined()) return ::testing::AssertionSuccess();
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << what << ": cuda gives " << got.dtype() << " "
                                         << ::testing::PrintToString(got.shape()) << ", cpu " << want.dtype() << " "
                                         << ::testing::PrintToString(want.shape());
  std::vector<double> g = got.to(Device::cpu()).to_vector<double>();
  std::vector<double> w = want.to_vector<double>();
  const Tolerance tol = is_floating(want.dtype()) ? tols.of(want.dtype()) : Tolerance{};
  double scale = 1.0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    bool ok;
    if (std::isnan(w[i]) || std::isnan(g[i]) || std::isinf(w[i]) || std::isinf(g[i])) {
      ok = (std::isnan(w[i]) && std::isnan(g[i])) || g[i] == w[i];
    } else {
      double diff = std::abs(g[i] - w[i]);
      ok = diff <= tol.atol * scale + tol.rtol * std::abs(w[i]);
      worst = std::max(worst, diff / scale);
    }
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(17);
  os << what << ": " << bad << " of " << w.size() << " elements differ; first at " << index_str(want.shape(), first)
     << ": cuda " << g[first] << ", cpu " << w[first] << ", |diff| " << std::abs(g[first] - w[first]) << " > allowed "
     << tol.atol * scale + tol.rtol * std::abs(w[first]) << " (" << want.dtype() << " tolerance rtol=" << tol.rtol
     << " atol=" << tol.atol << " x scale " << scale << "; largest |diff|/scale " << worst << ")";
  return ::testing::AssertionFailure() << os.str();
}

// Byte-for-byte equality of two tensors' elements (any devices, any strides).
inline ::testing::AssertionResult bits_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << what << ": " << got.dtype() << " " << ::testing::PrintToString(got.shape())
                                         << " vs " << want.dtype() << " " << ::testing::PrintToString(want.shape());
  Tensor a = got.to(Device::cpu()).contiguous(), b = want.to(Device::cpu()).contiguous();
  const size_t es = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pb = static_cast<const unsigned char*>(b.raw_data());
  // A NaN matches any NaN: its sign and payload carry nothing, and the devices make different ones
  // (x86's SSE gives the "default NaN" 0xFFC00000 for 0 * inf, CUDA its canonical 0x7FFFFFFF).
  const bool floating = is_floating(a.dtype());
  const std::vector<double> va = floating ? a.to_vector<double>() : std::vector<double>();
  const std::vector<double> vb = floating ? b.to_vector<double>() : std::vector<double>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const auto k = static_cast<size_t>(i);
    if (floating && std::isnan(va[k]) && std::isnan(vb[k])) continue;
    if (std::memcmp(pa + i * es, pb + i * es, es) != 0) {
      ::testing::AssertionResult r = ::testing::AssertionFailure();
      r << what << ": " << a.dtype() << " element " << index_str(a.shape(), i) << " of " << a.numel()
        << " differs in its bits";
      if (floating) r << ": got " << va[k] << ", want " << vb[k];
      return r;
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- the harness

struct ParityOptions {
  Tolerances tol = kPointwise;
  Tolerances grad_tol = kPointwise;
  uint64_t grad_seed = 9001;  // seeds the upstream gradients
};

inline ParityOptions tolerances(Tolerances forward, Tolerances backward) { return {forward, backward}; }

// The inputs a parity run ended with (in-place updates such as BatchNorm's running statistics
// are visible here), on each device.
struct ParityRun {
  Inputs cpu, cuda;
};

// Runs f on CPU and CUDA copies of `inputs` and compares outputs and input gradients (see the
// header comment). An octet::Error from either side is reported as a failure naming `what`.
inline ParityRun expect_parity(const std::string& what, const ParityFn& f, const Inputs& inputs,
                               const ParityOptions& opts) {
  ParityRun run;
  try {
    for (const Tensor& x : inputs) {
      if (!x.defined()) {
        run.cpu.emplace_back();
        run.cuda.emplace_back();
        continue;
      }
      Tensor c = x.detach().clone(), g = x.detach().to(gpu());
      if (x.requires_grad()) {
        c.requires_grad_(true);
        g.requires_grad_(true);
      }
      run.cpu.push_back(c);
      run.cuda.push_back(g);
    }
    Outputs want = f(run.cpu);
    Outputs got = f(run.cuda);
    EXPECT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
      std::string name = what + " output " + std::to_string(k);
      if (got[k].defined()) {
        EXPECT_EQ(got[k].device(), gpu()) << name;
      }
      EXPECT_TRUE(all_close(got[k], want[k], opts.tol, name));
    }
    // Backward through each differentiable output in turn; leaves accumulate on both sides alike.
    bool any = false;
    for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
      if (!want[k].defined() || !want[k].requires_grad()) continue;
      Tensor r = uniform_input(want[k].shape(), want[k].dtype(), opts.grad_seed + k, -1.0, 1.0, false);
      want[k].backward(r, /*retain_graph=*/true);
      got[k].backward(r.to(gpu()), /*retain_graph=*/true);
      any = true;
    }
    if (!any) return run;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
      std::string name = what + " d(input " + std::to_string(i) + ")";
      Tensor dg = run.cuda[i].grad(), dc = run.cpu[i].grad();
      if (dg.defined()) {
        EXPECT_EQ(dg.device(), gpu()) << name;
      }
      EXPECT_TRUE(all_close(dg, dc, opts.grad_tol, name));
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw: " << e.what();
  }
  return run;
}

// After the same training step of two copies of a model, `got` on CUDA and `want` on the CPU:
// every parameter's gradient (defined on both, of `grad_dtype`) and every buffer agree within
// `tol`. `what` names the step in failures.
inline void expect_same_grads_and_buffers(const Module& got, const Module& want, Tolerances tol,
                                          const std::string& what, DType grad_dtype) {
  NamedTensors pw = want.named_parameters(), pg = got.named_parameters();
  ASSERT_EQ(pw.size(), pg.size()) << what;
  for (size_t i = 0; i < pw.size(); ++i) {
    ASSERT_TRUE(pg[i].second.grad().defined()) << what << " " << pg[i].first << " got no gradient on CUDA";
    EXPECT_EQ(pg[i].second.grad().dtype(), grad_dtype) << what << " " << pg[i].first;
    EXPECT_TRUE(all_close(pg[i].second.grad(), pw[i].second.grad(), tol, what + " d" + pw[i].first));
  }
  NamedTensors bw = want.named_buffers(), bg = got.named_buffers();
  ASSERT_EQ(bw.size(), bg.size()) << what;
  for (size_t i = 0; i < bw.size(); ++i)
    EXPECT_TRUE(all_close(bg[i].second, bw[i].second, tol, what + " buffer " + bw[i].first));
}

inline ParityRun expect_parity(const std::string& what, const ParityFn& f, const Inputs& inputs, Tolerances tol) {
  return expect_parity(what, f, inputs, ParityOptions{tol, tol});
}

// ---------------------------------------------------------------- fixtures

inline std::string no_cuda_reason() {
  return cuda_compiled() ? "this build has the CUDA backend, but no usable GPU or driver was found"
                         : "the CUDA backend is not built (configure with -DOCTET_CUDA=ON)";
}

// Base of every CUDA test: skips without a device, and keeps FP32 GEMMs and convolutions off
// TF32 tensor cores (the default) so f32 tolerances mean full f32 arithmetic.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << no_cuda_reason();
    cuda::set_allow_tf32(false);
  }
};

// A CUDA-against-CPU parity test (honours OCTET_CUDA_TESTS_ON_CPU, unlike CudaTest, whose
// runtime tests need a real device).
class CudaParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu_selftest()) return;
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << no_cuda_reason();
    cuda::set_allow_tf32(false);
  }
};

// A CUDA op test run once per floating dtype the CPU computes in.
class CudaDtypeTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cpu_selftest()) return;
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << no_cuda_reason();
    cuda::set_allow_tf32(false);
  }
  DType dtype() const { return GetParam(); }
};

inline std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

}  // namespace octet::testing

// Instantiates a CudaDtypeTest suite for f32 and f64 (test names end in /f32, /f64).
#define OCTET_CUDA_FLOAT_SUITE(suite)                                                                 \
  INSTANTIATE_TEST_SUITE_P(Float, suite, ::testing::Values(::octet::DType::f32, ::octet::DType::f64), \
                           ::octet::testing::dtype_param_name)
