// CUDA parity of the optimizers (32-bit, 8-bit and 4-bit state), clip_grad_norm and block-wise
// quantization: the same init, gradients and state on the CPU and on the GPU, compared.
//
// What is expected, and why. The CUDA kernels run the CPU's own per-element code
// (optim/update_rules.h, quant/block_code.h), compiled with --fmad=false: the same IEEE adds,
// multiplies, divisions and square roots in the same order, on float / double without flush to
// zero. So every elementwise update (SGD, Adam, AdamW, RMSprop, Lion, Adagrad) is bit-identical,
// and so are block-wise codes and absmax (same finite-only max, same division, same code table).
// The norms of LAMB, LARS and clip_grad_norm are the CPU's sums too (units of 64 elements added in
// order, the units' sums added exactly: optim/cuda/update.cu, core/exact_digits.h), so their
// factors, and every parameter and state they touch, are bit-identical as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "optim/clip.h"
#include "optim/kernels.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/lowbit_state.h"
#include "optim/rmsprop.h"
#include "quant/blockwise.h"

namespace octet {
namespace {

Tensor host(const Tensor& t) { return t.to(Device::cpu()); }
Tensor device(const Tensor& t) { return t.to(Device::cuda()); }

// got (any device) equals want (CPU) bit for bit (NaN meets NaN: the payloads differ, x86
// propagates an input NaN, the GPU makes a canonical one).
void expect_identical(const Tensor& got_any, const Tensor& want_any, const std::string& what) {
  Tensor got = host(got_any).contiguous(), want = want_any.contiguous();
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const size_t bytes = dtype_size(want.dtype());
  const auto* gb = static_cast<const unsigned char*>(got.raw_data());
  const auto* wb = static_cast<const unsigned char*>(want.raw_data());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int64_t differ = 0;
  std::string first;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::memcmp(gb + i * bytes, wb + i * bytes, bytes) == 0 || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    if (differ++ == 0)
      first = "element " + std::to_string(i) + ": cuda " + std::to_string(g[i]) + " cpu " + std::to_string(w[i]);
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " elements differ; first " << first;
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&, const StateOptions&)>;

struct OptCase {
  std::string name;
  MakeOpt make;
  bool layerwise;  // a factor from norms of whole parameters (LAMB, LARS)
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
      make_case<Adagrad>("adagrad", AdagradOptions(1e-2)),
      make_case<Adagrad>("adagrad_all",
                         AdagradOptions(1e-2).lr_decay(0.1).weight_decay(0.01).initial_accumulator_value(0.1)),
      make_case<Lion>("lion", LionOptions(1e-3).weight_decay(0.1)),
      make_case<Lamb>("lamb", LambOptions(1e-2).weight_decay(0.01), true),
      make_case<Lamb>("lamb_trust_clip", LambOptions(1e-2).trust_clip(true), true),
      make_case<Lamb>("lamb_no_adaptation", LambOptions(1e-2).layer_adaptation(false).weight_decay(0.01)),
      make_case<Lars>("lars", LarsOptions(0.1).momentum(0.9).weight_decay(1e-4).trust_coefficient(0.02), true),
      make_case<Lars>("lars_no_momentum", LarsOptions(0.1).momentum(0).trust_coefficient(0.02), true),
      make_case<Lars>("lars_no_adaptation", LarsOptions(0.1).layer_adaptation(false)),
  };
}

// Shapes with odd sizes: many units of the sums (64) and several CPU blocks (32768), a partial last
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
      for (int s = 0; s < kSteps; ++s) {
        set_grads(p, g);
        cpu_opt->step();
        gpu_opt->step();
        for (size_t i = 0; i < p.cpu.size(); ++i)
          expect_identical(p.gpu[i], p.cpu[i], what + " step " + std::to_string(s) + " p" + std::to_string(i));
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
          expect_identical(got[i].second, want[i].second, what + " " + want[i].first);
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

// ---- 8-bit state

// The CPU's state, loaded into the GPU optimizer, and the CPU's parameters copied over.
void resync(const Optimizer& from, Optimizer& to, Pair& p) {
  NoGradGuard no_grad;
  for (size_t i = 0; i < p.cpu.size(); ++i) p.gpu[i].copy_(p.cpu[i]);
  to.load_state_dict(from.state_dict());
}

// Every step starts both sides from the CPU's state, so each comparison covers exactly one update
// of the fused kernel against the CPU's dequantize -> update -> quantize.
TEST(CudaOptim8bit, FusedUpdateMatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int kSteps = 4;
  for (int64_t bs : {int64_t{64}, int64_t{256}, int64_t{2048}, int64_t{4096}}) {
    // p0 (1073) and p1 (70001) get 8-bit state; p2 (1 element) stays dense.
    const StateOptions eight = StateOptions().state_bits(8).min_8bit_size(100).block_size(bs);
    for (const OptCase& c : cases()) {
      const std::string what = c.name + " bs " + std::to_string(bs);
      Pair p = make_params(DType::f32, 31);
      auto cpu_opt = c.make(p.named_cpu, eight);
      auto gpu_opt = c.make(p.named_gpu, eight);
      if (cpu_opt->num_8bit_params() == 0) continue;  // SGD / LARS without momentum: no state
      ASSERT_EQ(gpu_opt->num_8bit_params(), 2) << what;
      Generator g(32);
      for (int s = 0; s < kSteps; ++s) {
        if (s > 0) resync(*cpu_opt, *gpu_opt, p);
        set_grads(p, g);
        cpu_opt->step();
        gpu_opt->step();
        const std::string at = what + " step " + std::to_string(s);
        for (size_t i = 0; i < p.cpu.size(); ++i) expect_identical(p.gpu[i], p.cpu[i], at + " p" + std::to_string(i));
        NamedTensors want = cpu_opt->state_dict(), got = gpu_opt->state_dict();
        ASSERT_EQ(got.size(), want.size()) << at;
        for (size_t i = 0; i < want.size(); ++i) {
          const std::string key = want[i].first;
          ASSERT_EQ(got[i].first, key) << at;
          if (want[i].second.dtype() == DType::i64) continue;
          expect_identical(got[i].second, want[i].second, at + " " + key);  // codes, absmax, dense buffers
        }
      }
    }
  }
}

// 4-bit state (optim/lowbit_state.h): block-wise and rank-1 buffers, 1-, 2- and 3-dim parameters
// with odd sizes, against the CPU's update one step at a time (each step starts from the CPU's
// state): parameters, codes, absmax and rank-1 maxima bit for bit (rank-1 maxima are atomic maxima
// on the GPU, exact in any order). LAMB's read-only pass decodes the 4-bit state on the GPU too.
TEST(CudaOptim4bit, FusedUpdateMatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Shape> shapes = {{256, 300}, {70001}, {4, 130, 141}, {1, 4099}, {256, 1, 300}};
  const StateOptions four = StateOptions().state_bits(4).min_8bit_size(100);
  for (const OptCase& c : cases()) {
    Generator g(41);
    std::vector<Tensor> cpu, gpu;
    NamedTensors named_cpu, named_gpu;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor init = randn(shapes[i], DType::f32, &g);
      cpu.push_back(init.clone().requires_grad_(true));
      gpu.push_back(device(init).requires_grad_(true));
      const std::string name = std::string("w").append(std::to_string(i));
      named_cpu.emplace_back(name, cpu.back());
      named_gpu.emplace_back(name, gpu.back());
    }
    auto cpu_opt = c.make(named_cpu, four);
    auto gpu_opt = c.make(named_gpu, four);
    if (cpu_opt->num_4bit_params() == 0) continue;  // SGD / LARS without momentum: no state
    for (int s = 0; s < 3; ++s) {
      {
        NoGradGuard no_grad;
        for (size_t i = 0; i < cpu.size(); ++i) gpu[i].copy_(cpu[i]);
        gpu_opt->load_state_dict(cpu_opt->state_dict());
      }
      for (size_t i = 0; i < cpu.size(); ++i) {
        Tensor grad = randn(cpu[i].shape(), DType::f32, &g);
        cpu[i].set_grad(grad);
        gpu[i].set_grad(device(grad));
      }
      const std::string at = c.name + " step " + std::to_string(s);
      cpu_opt->step();
      gpu_opt->step();
      for (size_t i = 0; i < cpu.size(); ++i) expect_identical(gpu[i], cpu[i], at + " w" + std::to_string(i));
      NamedTensors want = cpu_opt->state_dict(), got = gpu_opt->state_dict();
      ASSERT_EQ(got.size(), want.size()) << at;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].first, want[i].first) << at;
        if (want[i].second.dtype() == DType::i64) continue;
        expect_identical(got[i].second, want[i].second, at + " " + want[i].first);
      }
    }
  }
}

// A 4-bit state over ranges of one parameter, as Optimizer::shard_state makes it on each rank (over
// NCCL across GPUs; tests/dist/test_dist_zero.cpp): each range's update reads and writes the
// rank-1 maxima at its offset, LAMB's read pass decodes at it, and a range writes its codes only
// after its new maxima are merged with the other ranges'. With one device the ranges update one
// after the other, so the merge is played by the whole parameter's state, updated first: a range
// returns max(its own maxima, the whole's), which is the whole's; that the ranges' own maxima max
// to the whole's is checked apart. Adam's moments, three steps, then LAMB's sums from the state:
// codes, block scales, maxima and weights bit for bit, the sums exactly (ExactSum). The range
// [n, n) holds nothing and still joins the merge. Run on the CPU too (CI), so the harness is
// checked where no GPU is.
void ranges_in_turn_match_whole_state(const Device& dev) {
  const Shape shape{24, 24, 24};  // 13824 elements: rank-1 second moment over 3 dims
  const int64_t n = 24 * 24 * 24;
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 40 * 128}, {40 * 128, n}, {n, n}};
  const std::vector<std::string> names = {"exp_avg", "exp_avg_sq"};
  Generator gen(5);
  const Tensor init = randn(shape, DType::f32, &gen);
  Tensor whole_p = init.to(dev).clone(), ranged_p = init.to(dev).clone();  // .to(cpu) may alias
  LowBitState whole(whole_p, names, {true, false});
  ASSERT_TRUE(whole.buffer(1).rank1);
  std::vector<Tensor> snapshot;                         // the whole state's new maxima, this step
  std::vector<std::vector<Tensor>> own(ranges.size());  // each range's own, this step
  std::vector<std::unique_ptr<LowBitState>> parts;
  for (size_t r = 0; r < ranges.size(); ++r) {
    auto exchange = [&, r](std::vector<Tensor>& maxima) {
      own[r].clear();
      for (Tensor& m : maxima) {
        own[r].push_back(m.clone());
        m = maximum(m, snapshot.at(own[r].size() - 1));
      }
    };
    parts.push_back(std::make_unique<LowBitState>(whole_p, names, std::vector<bool>{true, false},
                                                  LowBitState::Shard{ranges[r].first, ranges[r].second, exchange}));
  }
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f;
  for (int t = 1; t <= 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const Tensor g = randn({n}, DType::f32, &gen).to(dev);
    const float c1 = 1.0f - std::pow(b1, float(t)), c2 = 1.0f - std::pow(b2, float(t));
    const AdamRule<float> rule{.step_size = lr / c1,
                               .bias_c2_sqrt = std::sqrt(c2),
                               .b1 = b1,
                               .b2 = b2,
                               .one_b1 = 1.0f - b1,
                               .one_b2 = 1.0f - b2,
                               .eps = 1e-8f,
                               .wd = 0.0f,
                               .shrink = 1.0f,
                               .l2 = false,
                               .decay = false,
                               .amsgrad = false,
                               .buffers = 2};
    optim::dispatch::rule_update(rule, whole_p.view({-1}), g, whole, "Adam");
    snapshot = whole.buffer(1).maxima;
    for (Tensor& m : snapshot) m = m.clone();
    for (size_t r = 0; r < ranges.size(); ++r) {
      const auto [first, last] = ranges[r];
      optim::dispatch::rule_update(rule, ranged_p.view({-1}).narrow(0, first, last - first),
                                   g.narrow(0, first, last - first), *parts[r], "Adam");
    }
    for (size_t d = 0; d < snapshot.size(); ++d) {
      Tensor merged = own[0].at(d);
      for (size_t r = 1; r < ranges.size(); ++r) merged = maximum(merged, own[r].at(d));
      expect_identical(merged, host(snapshot[d]), "the ranges' own maxima of dim " + std::to_string(d));
    }
  }
  expect_identical(ranged_p, host(whole_p), "weights");
  for (size_t i = 0; i < names.size(); ++i) {
    const LowBitState::Buffer& w = whole.buffer(i);
    const Tensor codes = host(w.codes), absmax = w.rank1 ? Tensor() : host(w.absmax);
    for (size_t r = 0; r < ranges.size(); ++r) {
      const auto [first, last] = ranges[r];
      const LowBitState::Buffer& b = parts[r]->buffer(i);
      const std::string what = names[i] + " of range " + std::to_string(r);
      expect_identical(b.codes, codes.narrow(0, first / 2, b.codes.numel()), what + " codes");
      if (!w.rank1) {
        expect_identical(b.absmax, absmax.narrow(0, first / 128, b.absmax.numel()), what + " absmax");
        continue;
      }
      for (size_t d = 0; d < w.maxima.size(); ++d) expect_identical(b.maxima[d], host(w.maxima[d]), what + " maxima");
    }
  }
  // LAMB's first pass, read-only, from these moments: the ranges' sums add up to the whole's.
  const LambRule<float> lamb{.b1 = b1,
                             .b2 = b2,
                             .one_b1 = 1.0f - b1,
                             .one_b2 = 1.0f - b2,
                             .bias_c1 = 1.0f - b1 * b1,
                             .bias_c2_sqrt = std::sqrt(1.0f - b2 * b2),
                             .eps = 1e-6f,
                             .wd = 0.01f,
                             .decay = true,
                             .step = 0.0f,
                             .buffers = 2};
  const Tensor g = randn({n}, DType::f32, &gen).to(dev);
  const LayerSums want = optim::dispatch::lamb_sums(lamb, whole_p.view({-1}), g, whole);
  LayerSums got{};
  for (size_t r = 0; r < ranges.size(); ++r) {
    const auto [first, last] = ranges[r];
    const LayerSums part = optim::dispatch::lamb_sums(lamb, ranged_p.view({-1}).narrow(0, first, last - first),
                                                      g.narrow(0, first, last - first), *parts[r]);
    for (int k = 0; k < 2; ++k) got[k].merge(part[k]);
  }
  for (int k = 0; k < 2; ++k) EXPECT_EQ(got[k].value(), want[k].value()) << "LAMB sum " << k;
}

TEST(Optim4bit, RangesInTurnMatchTheWholeState) { ranges_in_turn_match_whole_state(Device::cpu()); }

TEST(CudaOptim4bit, RangesInTurnMatchTheWholeState) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ranges_in_turn_match_whole_state(Device::cuda());
}

// More quantization blocks than the warp kernel's grid has warps (optim/cuda/update.cu: 1024
// thread blocks of 8 warps), so each warp loops over several; the last block is partial.
TEST(CudaOptim8bit, ManyBlocksMatchCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 64 * 9000 + 17;
  Generator g(41);
  Tensor init = randn({n}, DType::f32, &g), grad = randn({n}, DType::f32, &g);
  Tensor a = init.clone().requires_grad_(true), b = device(init).requires_grad_(true);
  const StateOptions eight = StateOptions().state_bits(8).min_8bit_size(0).block_size(64);
  Adam cpu_opt({{"w", a}}, AdamOptions(1e-2), eight), gpu_opt({{"w", b}}, AdamOptions(1e-2), eight);
  for (int s = 0; s < 2; ++s) {
    a.set_grad(grad * (s + 1.0));
    b.set_grad(device(grad * (s + 1.0)));
    cpu_opt.step();
    gpu_opt.step();
  }
  expect_identical(b, a, "parameters");
  NamedTensors want = cpu_opt.state_dict(), got = gpu_opt.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& w = want[i].second;
    if (w.dtype() == DType::u8) {
      EXPECT_TRUE(host(got[i].second).to_vector<uint8_t>() == w.to_vector<uint8_t>()) << want[i].first;
    }
    if (w.dtype() == DType::f32) expect_identical(got[i].second, w, want[i].first);
  }
}

TEST(CudaOptim8bit, NonFiniteGradientsMatchCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // NaN and inf in the gradient: those elements keep their parameter and state (optim/
  // update_rules.h, finite_grad), the layer-wise norms leave them out, and the GPU does exactly
  // what the CPU does, with 32-bit and 8-bit state.
  const StateOptions eight = StateOptions().state_bits(8).min_8bit_size(0).block_size(256);
  for (const OptCase& c : cases())
    for (const StateOptions& so : {StateOptions(), eight}) {
      Generator g(41);
      Tensor init = randn({1000}, DType::f32, &g), grad = randn({1000}, DType::f32, &g);
      std::vector<float> gv = grad.to_vector<float>();
      gv[3] = std::numeric_limits<float>::quiet_NaN();
      gv[300] = std::numeric_limits<float>::infinity();
      gv[301] = -std::numeric_limits<float>::infinity();
      grad = from_vector(gv, {1000});
      Tensor a = init.clone().requires_grad_(true), b = device(init).requires_grad_(true);
      auto cpu_opt = c.make({{"w", a}}, so);
      auto gpu_opt = c.make({{"w", b}}, so);
      for (int s = 0; s < 2; ++s) {
        a.set_grad(grad);
        b.set_grad(device(grad));
        cpu_opt->step();
        gpu_opt->step();
      }
      const std::string what = c.name + (so.state_bits_ == 8 ? " 8-bit" : " 32-bit");
      expect_identical(b, a, what + " params");
      const std::vector<float> pb = host(b).to_vector<float>(), p0 = init.to_vector<float>();
      for (int i : {3, 300, 301}) EXPECT_EQ(pb[static_cast<size_t>(i)], p0[static_cast<size_t>(i)]) << what << " " << i;
      NamedTensors want = cpu_opt->state_dict(), got = gpu_opt->state_dict();
      for (size_t i = 0; i < want.size(); ++i) {
        if (want[i].second.dtype() == DType::i64) continue;
        expect_identical(got[i].second, want[i].second, what + " " + want[i].first);
        if (want[i].second.dtype() == DType::f32) {
          for (float v : host(got[i].second).to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << what;
        }
      }
    }
}

// ---- block-wise quantization

// Random values over several magnitudes, with the awkward ones mixed in: zeros, NaN, +-inf,
// subnormals, exact map values and exact decision thresholds (times the block's absmax 1).
Tensor awkward_data(int64_t n, quant::QuantMap map, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v = randn({n}, DType::f32, &g).to_vector<float>();
  std::vector<float> scale = rand({n}, DType::f32, &g).to_vector<float>();
  const auto& values = quant::quant_map(map);
  const auto& thresholds = quant::quant_thresholds(map);
  for (int64_t i = 0; i < n; ++i) {
    // |v| < 1, so every block holding a 1 (each 37th element) has absmax exactly 1 and the map
    // values and thresholds below stay exact after normalization (the tie rule is exercised).
    v[i] = std::clamp(0.25f * v[i], -0.999f, 0.999f) * std::pow(10.0f, -6.0f * scale[i]);
    switch (i % 37) {
      case 0:
        v[i] = 1.0f;  // the block's absmax, so map values and thresholds below are exact
        break;
      case 5:
        v[i] = values[static_cast<size_t>(i / 37) % 256];
        break;
      case 9:
        v[i] = thresholds[static_cast<size_t>(i / 37) % 255];
        break;
      case 13:
        v[i] = std::nextafter(thresholds[static_cast<size_t>(i / 37) % 255], 2.0f);
        break;
      case 17:
        v[i] = 0.0f;
        break;
      case 19:
        v[i] = -0.0f;
        break;
      case 23:
        v[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 5);
        break;
      case 29:
        if (i % 3 == 0) v[i] = std::numeric_limits<float>::quiet_NaN();
        if (i % 3 == 1) v[i] = std::numeric_limits<float>::infinity();
        if (i % 3 == 2) v[i] = -std::numeric_limits<float>::infinity();
        break;
      default:
        break;
    }
  }
  // An all-zero first block (absmax 0) when there are several blocks.
  if (n > 4096)
    for (int64_t i = 0; i < 64; ++i) v[i] = 0.0f;
  return from_vector(v, {n});
}

TEST(CudaQuant, BlockwiseMatchesCpuExactly) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (quant::QuantMap map : quant::kAllQuantMaps) {
    for (int64_t n :
         {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{1000}, int64_t{4097}, int64_t{100003}}) {
      Tensor x = awkward_data(n, map, static_cast<uint64_t>(n));
      // The unsigned maps' domain (negatives saturate; tested too).
      if (map == quant::QuantMap::dynamic_unsigned || map == quant::QuantMap::dynamic_unsigned_nonzero) x = abs(x);
      Tensor xd = device(x);
      for (int64_t bs = quant::kMinBlockSize; bs <= quant::kMaxBlockSize; bs *= 2) {
        const std::string what =
            std::string(quant::quant_map_name(map)) + " n " + std::to_string(n) + " bs " + std::to_string(bs);
        quant::BlockwiseQuantized want = quant::quantize_blockwise(x, map, bs);
        quant::BlockwiseQuantized got = quant::quantize_blockwise(xd, map, bs);
        ASSERT_TRUE(got.codes.device().is_cuda() && got.absmax.device().is_cuda()) << what;
        EXPECT_EQ(got.shape, want.shape) << what;
        expect_identical(got.codes, want.codes, what + " codes");
        expect_identical(got.absmax, want.absmax, what + " absmax");
        Tensor back = quant::dequantize_blockwise(got);
        ASSERT_TRUE(back.device().is_cuda()) << what;
        expect_identical(back, quant::dequantize_blockwise(want), what + " dequantized");
      }
    }
  }
  // Negative input to the unsigned map saturates to its lowest entry on both.
  Tensor neg = awkward_data(5000, quant::QuantMap::dynamic_unsigned, 7);
  quant::BlockwiseQuantized want = quant::quantize_blockwise(neg, quant::QuantMap::dynamic_unsigned, 128);
  quant::BlockwiseQuantized got = quant::quantize_blockwise(device(neg), quant::QuantMap::dynamic_unsigned, 128);
  expect_identical(got.codes, want.codes, "unsigned map, signed data: codes");
  expect_identical(got.absmax, want.absmax, "unsigned map, signed data: absmax");
}

TEST(CudaQuant, ZerosAndIntoVariantsOnDevice) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  quant::BlockwiseQuantized z = quant::blockwise_zeros({3, 700}, quant::QuantMap::dynamic_signed, 256, Device::cuda());
  EXPECT_TRUE(z.codes.device().is_cuda());
  expect_identical(quant::dequantize_blockwise(z), zeros({3, 700}), "zeros dequantize to zeros");
  // Into preallocated device storage, and a CPU quantization moved to the device decodes the same.
  Tensor x = awkward_data(2100, quant::QuantMap::dynamic_signed, 3).reshape({3, 700});
  quant::quantize_blockwise_into(device(x), z);
  quant::BlockwiseQuantized want = quant::quantize_blockwise(x, quant::QuantMap::dynamic_signed, 256);
  expect_identical(z.codes, want.codes, "into: codes");
  expect_identical(z.absmax, want.absmax, "into: absmax");
  quant::BlockwiseQuantized moved{device(want.codes), device(want.absmax), want.block_size, want.map, want.shape};
  Tensor out = empty({2100}, TensorOptions(DType::f32).device(Device::cuda()));
  quant::dequantize_blockwise_into(moved, out);
  expect_identical(out, quant::dequantize_blockwise(want).reshape({2100}), "into: dequantized");
  // Mixed devices are an error.
  EXPECT_THROW(quant::quantize_blockwise_into(x, z), Error);
}

// ---- clip_grad_norm

TEST(CudaClip, MatchesCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
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
    EXPECT_EQ(got, want) << "max_norm " << max_norm;  // the same exact sum
    for (size_t i = 0; i + 1 < cpu.size(); ++i)
      expect_identical(gpu[i].grad(), cpu[i].grad(), "clipped grad " + std::to_string(i));
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
