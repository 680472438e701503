// CUDA parity of the optimizers (32-bit state) and clip_grad_norm: the same init, gradients and
// state on the CPU and on the GPU, compared.
//
// What is expected, and why. The CUDA kernels run the CPU's own per-element code
// (optim/update_rules.h), compiled with --fmad=false: the same IEEE adds, multiplies, divisions
// and square roots in the same order, on float / double without flush to zero. So every
// elementwise update (SGD, Adam, AdamW, RMSprop, Lion; also LAMB's moments) is bit-identical.
// Only sums are ordered differently (layer-wise norms, clip_grad_norm: a
// tree on the GPU, serial per block on the CPU): double sums then differ by a few ulps, the f32
// factors they make by at most one float ulp, so those results get a float-rounding tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "core/cuda.h"
#include "core/octet.h"
#include "optim/clip.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"

namespace octet {
namespace {

// A factor computed from a differently ordered double sum may differ by one float ulp (2^-23
// relative); over a few steps the parameters then differ by a small multiple of that.
constexpr double kF32ReorderTol = 1e-5;
constexpr double kF64ReorderTol = 1e-12;

Tensor host(const Tensor& t) { return t.to(Device::cpu()); }
Tensor device(const Tensor& t) { return t.to(Device::cuda()); }

// Element-by-element comparison in double: how many differ in their bits, and how many are
// further apart than atol + rtol * |want| (NaN must meet NaN).
struct Diff {
  int64_t not_identical = 0, out_of_tol = 0;
  std::string first;
};

Diff compare(const Tensor& got_any, const Tensor& want_any, double tol) {
  Tensor got = host(got_any).contiguous(), want = want_any.contiguous();
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.dtype(), want.dtype());
  Diff d;
  const size_t bytes = dtype_size(want.dtype());
  const auto* gb = static_cast<const unsigned char*>(got.raw_data());
  const auto* wb = static_cast<const unsigned char*>(want.raw_data());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < w.size() && i < g.size(); ++i) {
    // NaN meets NaN: the payloads differ (x86 propagates an input NaN, the GPU makes a canonical one).
    if (std::memcmp(gb + i * bytes, wb + i * bytes, bytes) == 0 || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    ++d.not_identical;
    const bool ok = g[i] == w[i] || std::abs(g[i] - w[i]) <= tol + tol * std::abs(w[i]);
    if (!ok && d.out_of_tol++ == 0)
      d.first = "element " + std::to_string(i) + ": cuda " + std::to_string(g[i]) + " cpu " + std::to_string(w[i]);
  }
  return d;
}

// got (any device) equals want (CPU) bit for bit.
void expect_identical(const Tensor& got, const Tensor& want, const std::string& what) {
  Diff d = compare(got, want, 0.0);
  EXPECT_EQ(d.not_identical, 0) << what << ": " << d.not_identical << " elements differ; " << d.first;
}

// Within `tol` (absolute + relative); `exact` also demands identical bits.
void expect_close(const Tensor& got, const Tensor& want, double tol, bool exact, const std::string& what) {
  Diff d = compare(got, want, tol);
  EXPECT_EQ(d.out_of_tol, 0) << what << ": " << d.out_of_tol << " elements off by more than " << tol << "; " << d.first;
  if (exact) {
    EXPECT_EQ(d.not_identical, 0) << what << ": " << d.not_identical << " elements not bit-identical";
  }
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&, const StateOptions&)>;

struct OptCase {
  std::string name;
  MakeOpt make;
  bool layerwise;  // a norm-ratio factor (differently ordered sums): float-rounding tolerance
};

template <typename Opt, typename Options>
OptCase make_case(std::string name, Options o, bool layerwise = false) {
  return {std::move(name), [o](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Opt>(p, o, s); },
          layerwise};
}

std::vector<OptCase> cases() {
  return {
      make_case<SGD>("sgd", SGDOptions(0.1)),
      make_case<SGD>("sgd_decay", SGDOptions(0.1).weight_decay(0.01)),
      make_case<SGD>("sgd_momentum_dampening", SGDOptions(0.1).momentum(0.9).dampening(0.2).weight_decay(0.01)),
      make_case<SGD>("sgd_nesterov", SGDOptions(0.1).momentum(0.9).nesterov(true)),
      make_case<Adam>("adam", AdamOptions(1e-2)),
      make_case<Adam>("adam_amsgrad_l2", AdamOptions(1e-2).amsgrad(true).weight_decay(0.1)),
      make_case<AdamW>("adamw", AdamWOptions(1e-2).weight_decay(0.1)),
      make_case<AdamW>("adamw_amsgrad", AdamWOptions(1e-2).amsgrad(true)),
      make_case<RMSprop>("rmsprop", RMSpropOptions(1e-2)),
      make_case<RMSprop>("rmsprop_centered", RMSpropOptions(1e-2).centered(true)),
      make_case<RMSprop>("rmsprop_all", RMSpropOptions(1e-2).momentum(0.9).centered(true).weight_decay(0.01)),
      make_case<Lion>("lion", LionOptions(1e-3).weight_decay(0.1)),
      make_case<Lamb>("lamb", LambOptions(1e-2).weight_decay(0.01), true),
      make_case<Lamb>("lamb_trust_clip", LambOptions(1e-2).trust_clip(true), true),
      make_case<Lamb>("lamb_no_adaptation", LambOptions(1e-2).layer_adaptation(false).weight_decay(0.01)),
      make_case<LARS>("lars", LARSOptions(0.1).momentum(0.9).weight_decay(1e-4).trust_coefficient(0.02), true),
      make_case<LARS>("lars_no_momentum", LARSOptions(0.1).momentum(0).trust_coefficient(0.02), true),
      make_case<LARS>("lars_no_adaptation", LARSOptions(0.1).layer_adaptation(false)),
  };
}

// Shapes with odd sizes: several reduction chunks (4096) and CPU blocks (32768), a partial last
// one, and a single element.
const std::vector<Shape> kShapes = {{37, 29}, {70001}, {1}};

struct Pair {
  std::vector<Tensor> cpu, gpu;
  NamedTensors named_cpu, named_gpu;
};

Pair make_params(DType dtype, uint64_t seed) {
  Generator g(seed);
  Pair p;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    Tensor init = randn(kShapes[i], dtype, &g);
    Tensor a = init.clone().requires_grad_(true), b = device(init).requires_grad_(true);
    p.cpu.push_back(a);
    p.gpu.push_back(b);
    const std::string name = std::string("p").append(std::to_string(i));  // not "p" + ...: GCC 12's -Wrestrict
    p.named_cpu.emplace_back(name, a);
    p.named_gpu.emplace_back(name, b);
  }
  return p;
}

void set_grads(Pair& p, Generator& g) {
  for (size_t i = 0; i < p.cpu.size(); ++i) {
    Tensor grad = randn(p.cpu[i].shape(), p.cpu[i].dtype(), &g);
    p.cpu[i].set_grad(grad);
    p.gpu[i].set_grad(device(grad));
  }
}

// ---- 32-bit (dense) state

TEST(CudaOptim, DenseStateMatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int kSteps = 5;
  for (const OptCase& c : cases()) {
    for (DType dtype : {DType::f32, DType::f64}) {
      const std::string what = c.name + (dtype == DType::f32 ? " f32" : " f64");
      Pair p = make_params(dtype, 11);
      auto cpu_opt = c.make(p.named_cpu, StateOptions());
      auto gpu_opt = c.make(p.named_gpu, StateOptions());
      Generator g(12);
      const double tol = dtype == DType::f32 ? kF32ReorderTol : kF64ReorderTol;
      for (int s = 0; s < kSteps; ++s) {
        set_grads(p, g);
        cpu_opt->step();
        gpu_opt->step();
        for (size_t i = 0; i < p.cpu.size(); ++i)
          expect_close(p.gpu[i], p.cpu[i], tol, !c.layerwise,
                       what + " step " + std::to_string(s) + " p" + std::to_string(i));
      }
      NamedTensors want = cpu_opt->state_dict(), got = gpu_opt->state_dict();
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].first, want[i].first) << what;
        if (want[i].second.dtype() == DType::i64) {
          EXPECT_EQ(host(got[i].second).item<int64_t>(), want[i].second.item<int64_t>())
              << what << " " << want[i].first;
        } else {
          EXPECT_TRUE(got[i].second.device().is_cuda())
              << what << " " << want[i].first << ": state lives on the device";
          expect_close(got[i].second, want[i].second, tol, !c.layerwise, what + " " + want[i].first);
        }
      }
    }
  }
}

TEST(CudaOptim, LayerwiseNormsAreDeterministic) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // The same run twice on the GPU gives the same bits: the sums have a fixed order.
  for (const OptCase& c : cases()) {
    if (!c.layerwise) continue;
    std::vector<Tensor> runs;
    for (int run = 0; run < 2; ++run) {
      Pair p = make_params(DType::f32, 21);
      auto opt = c.make(p.named_gpu, StateOptions());
      Generator g(22);
      for (int s = 0; s < 3; ++s) {
        set_grads(p, g);
        opt->step();
      }
      runs.push_back(host(p.gpu[1]));
    }
    expect_identical(runs[1], runs[0], c.name + " rerun");
  }
}

// ---- clip_grad_norm

TEST(CudaClip, MatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr double kNormTol = 1e-12;  // relative: a differently ordered double sum
  auto make = [](bool on_gpu, double scale) {
    Generator g(51);
    std::vector<Tensor> ps;
    for (auto [shape, dtype] : std::vector<std::pair<Shape, DType>>{
             {{1000}, DType::f32}, {{37, 29}, DType::f64}, {{70001}, DType::f32}, {{5, 8}, DType::f32}}) {
      const bool transposed = shape == Shape{5, 8};  // a non-contiguous gradient
      Tensor p = zeros(shape, dtype);
      Tensor grad = transposed ? (randn({8, 5}, dtype, &g) * scale).t() : randn(shape, dtype, &g) * scale;
      if (on_gpu) {
        p = device(p);
        grad = transposed ? device(grad.t()).t() : device(grad);
      }
      p.requires_grad_(true);
      p.set_grad(grad);
      ps.push_back(p);
    }
    ps.push_back(on_gpu ? device(zeros({3})).requires_grad_(true) : zeros({3}).requires_grad_(true));  // no grad
    return ps;
  };
  for (double max_norm : {1.0, 1e9}) {
    std::vector<Tensor> cpu = make(false, 1.0), gpu = make(true, 1.0);
    const double want = clip_grad_norm(cpu, max_norm), got = clip_grad_norm(gpu, max_norm);
    EXPECT_NEAR(got, want, kNormTol * want) << "max_norm " << max_norm;
    for (size_t i = 0; i + 1 < cpu.size(); ++i)
      expect_close(gpu[i].grad(), cpu[i].grad(), cpu[i].dtype() == DType::f32 ? kF32ReorderTol : kF64ReorderTol, false,
                   "clipped grad " + std::to_string(i));
  }
  // A non-finite norm is returned and nothing is scaled.
  std::vector<Tensor> gpu = make(true, 1.0);
  gpu[0].set_grad(device(full({1000}, std::numeric_limits<double>::infinity())));
  Tensor before = host(gpu[1].grad());
  EXPECT_TRUE(std::isinf(clip_grad_norm(gpu, 1.0)));
  expect_identical(gpu[1].grad(), before, "untouched after inf");
}

}  // namespace
}  // namespace octet
