// Per-parameter lr factors (Optimizer::set_lr_scale, used by DCLR): a scaled parameter moves
// exactly as it would under an optimizer built with lr * scale, the other parameters exactly as
// without the factor, for every optimizer with 32- and 8-bit state, on the CPU and on CUDA.
#include <gtest/gtest.h>

#include <functional>

#include "core/cuda.h"
#include "core/octet.h"
#include "optim/adam.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace octet {
namespace {

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&, double lr, const StateOptions&)>;

struct OptCase {
  const char* name;
  double lr;
  MakeOpt make;
};

std::vector<OptCase> cases() {
  return {
      {"sgd", 0.1,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<SGD>(p, SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(5e-4), s);
       }},
      {"adam", 1e-2,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<Adam>(p, AdamOptions(lr).weight_decay(1e-3), s);
       }},
      {"adamw", 1e-2,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<AdamW>(p, AdamWOptions(lr).weight_decay(0.05), s);
       }},
      {"rmsprop", 1e-2,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<RMSprop>(p, RMSpropOptions(lr).momentum(0.5).centered(true), s);
       }},
      {"lion", 1e-3,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<Lion>(p, LionOptions(lr).weight_decay(0.1), s);
       }},
      {"lamb", 1e-2,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<Lamb>(p, LambOptions(lr).weight_decay(0.01), s);
       }},
      {"lars", 0.1,
       [](const NamedTensors& p, double lr, const StateOptions& s) {
         return std::make_unique<Lars>(p, LarsOptions(lr).momentum(0.9).weight_decay(1e-4), s);
       }},
  };
}

constexpr int64_t kNumel = 512;  // two 8-bit blocks of 256
constexpr int kSteps = 5;
constexpr double kScale = 0.37;

StateOptions state_of(int64_t bits) { return StateOptions().state_bits(bits).min_8bit_size(0).block_size(256); }

Tensor param(uint64_t seed, Device d) {
  Generator g(seed);
  return randn({kNumel}, DType::f32, &g).to(d).requires_grad_(true);
}

// A gradient that depends on the parameter (so a wrong step shows in the next) and on the step.
void set_grads(const std::vector<Tensor>& params, int k) {
  NoGradGuard ng;
  for (const Tensor& p : params) p.set_grad(tanh(p * 3.0) + 0.01 * static_cast<double>(k));
}

// Steps `opt` kSteps times; halfway the group's lr changes, as a schedule would change it.
void run(Optimizer& opt, const std::vector<Tensor>& params, double lr) {
  for (int k = 0; k < kSteps; ++k) {
    if (k == kSteps / 2) opt.set_lr(0, lr * 0.5);
    set_grads(params, k);
    opt.step();
  }
}

void expect_scaled_like_lr_times_scale(Device d) {
  for (const OptCase& c : cases()) {
    for (int64_t bits : {32, 8}) {
      SCOPED_TRACE(std::string(c.name) + (bits == 8 ? " 8-bit" : " 32-bit"));
      Tensor a = param(1, d), b = param(2, d);
      auto opt = c.make({{"a", a}, {"b", b}}, c.lr, state_of(bits));
      EXPECT_EQ(opt->lr_scale("a"), 1.0);
      opt->set_lr_scale("a", kScale);
      EXPECT_EQ(opt->lr_scale("a"), kScale);
      EXPECT_EQ(opt->lr_scale("b"), 1.0);
      run(*opt, {a, b}, c.lr);

      // References: each parameter alone; a under lr * scale (the schedule's change scaled too).
      Tensor ra = param(1, d), rb = param(2, d);
      auto opt_a = c.make({{"a", ra}}, c.lr * kScale, state_of(bits));
      for (int k = 0; k < kSteps; ++k) {
        if (k == kSteps / 2) opt_a->set_lr(0, c.lr * 0.5 * kScale);
        set_grads({ra}, k);
        opt_a->step();
      }
      auto opt_b = c.make({{"b", rb}}, c.lr, state_of(bits));
      run(*opt_b, {rb}, c.lr);
      EXPECT_EQ(a.to_vector<float>(), ra.to_vector<float>());  // bit for bit
      EXPECT_EQ(b.to_vector<float>(), rb.to_vector<float>());
      EXPECT_NE(a.to_vector<float>(), param(1, d).to_vector<float>());  // it did move
      EXPECT_EQ(opt->num_8bit_params(), bits == 8 ? 2 : 0);
    }
  }
}

TEST(OptimLrScale, MovesLikeLrTimesScale) { expect_scaled_like_lr_times_scale(Device::cpu()); }

TEST(OptimLrScale, ZeroFreezesAndOneIsNeutral) {
  Tensor a = param(1, Device::cpu()), b = param(2, Device::cpu());
  std::vector<float> a0 = a.to_vector<float>();
  Adam opt({{"a", a}, {"b", b}}, AdamOptions(1e-2));
  opt.set_lr_scale("a", 0.0);
  opt.set_lr_scale("b", 1.0);
  run(opt, {a, b}, 1e-2);
  EXPECT_EQ(a.to_vector<float>(), a0);
  Tensor rb = param(2, Device::cpu());
  Adam ref({{"b", rb}}, AdamOptions(1e-2));
  run(ref, {rb}, 1e-2);
  EXPECT_EQ(b.to_vector<float>(), rb.to_vector<float>());
  // The factor is no state: a checkpoint holds the same keys with and without it.
  Adam plain({{"a", param(1, Device::cpu())}, {"b", param(2, Device::cpu())}}, AdamOptions(1e-2));
  EXPECT_EQ(opt.state_dict().size(), plain.state_dict().size());
}

TEST(OptimLrScale, Errors) {
  Tensor a = param(1, Device::cpu());
  SGD opt({{"a", a}}, SGDOptions(0.1));
  for (const auto& fn :
       std::vector<std::function<void()>>{[&] { opt.set_lr_scale("nope", 0.5); }, [&] { opt.lr_scale("nope"); }}) {
    try {
      fn();
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no parameter named 'nope'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(opt.set_lr_scale("a", -0.1), Error);
  EXPECT_THROW(opt.set_lr_scale("a", std::nan("")), Error);
  EXPECT_EQ(opt.lr_scale("a"), 1.0);  // unchanged by the rejected calls
}

TEST(CudaOptimLrScale, MovesLikeLrTimesScale) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_scaled_like_lr_times_scale(Device::cuda(0));
}

}  // namespace
}  // namespace octet
