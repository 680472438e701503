// A non-finite gradient element (NaN, +inf, -inf) leaves that element's parameter and state as
// they were, on every optimizer, with 32-bit and 8-bit state, as the reference's kernels do
// (optim/update_rules.h: finite_grad); the other elements update as they would without it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/octet.h"

namespace octet {
namespace {

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&, const StateOptions&)>;
struct Case {
  const char* name;
  bool elementwise;  // LAMB and LARS scale by norms over the whole tensor
  MakeOpt make;
};

std::vector<Case> cases() {
  auto opt = [](auto make) { return MakeOpt(make); };
  return {
      {"sgd", true, opt([](const NamedTensors& p, const StateOptions& s) { return std::make_unique<SGD>(p, SGDOptions(1e-2), s); })},
      {"momentum", true, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<SGD>(p, SGDOptions(1e-2).momentum(0.9).nesterov(true).weight_decay(1e-2), s);
       })},
      {"adam", true, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<Adam>(p, AdamOptions(1e-3).amsgrad(true).weight_decay(1e-2), s);
       })},
      {"adamw", true, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<AdamW>(p, AdamWOptions(1e-3).weight_decay(0.01), s);
       })},
      {"rmsprop", true, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<RMSprop>(p, RMSpropOptions(1e-3).momentum(0.9).centered(true), s);
       })},
      {"adagrad", true, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<Adagrad>(p, AdagradOptions(1e-2).lr_decay(0.1).weight_decay(1e-2), s);
       })},
      {"lion", true, opt([](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Lion>(p, LionOptions(1e-4), s); })},
      {"lamb", false, opt([](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Lamb>(p, LambOptions(1e-3), s); })},
      {"lars", false, opt([](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<Lars>(p, LarsOptions(0.1).momentum(0.9), s);
       })},
  };
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
const int64_t kBad[] = {3, 300, 1000};  // NaN, +inf, -inf; 1000 is in a partial last block

// Three finite steps, then one whose gradient has non-finite elements at kBad.
struct Trained {
  Tensor p;
  std::unique_ptr<Optimizer> opt;
  NamedTensors before;  // the state before the last step
};
Trained train(const Case& c, const StateOptions& so, bool poison) {
  Generator g(5);
  Trained r;
  r.p = randn({1003}, DType::f32, &g) * 0.1;
  r.p.requires_grad_();
  r.opt = c.make({{"w", r.p}}, so);
  for (int s = 0; s < 4; ++s) {
    Tensor grad = randn({1003}, DType::f32, &g) * 0.01;
    if (s == 3) {
      r.before = r.opt->state_dict();
      for (auto& [k, t] : r.before) t = t.clone();
      if (poison) {
        float* d = grad.data<float>();
        d[kBad[0]] = kNaN, d[kBad[1]] = kInf, d[kBad[2]] = -kInf;
      }
    }
    r.p.set_grad(grad);
    r.opt->step();
  }
  return r;
}

TEST(NonFiniteGradients, LeaveTheirElementsParameterAndStateUnchanged) {
  const StateOptions eight = StateOptions().state_bits(8).min_8bit_size(0).block_size(256);
  for (const Case& c : cases())
    for (bool eight_bit : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (eight_bit ? " 8-bit" : " 32-bit"));
      Trained poisoned = train(c, eight_bit ? eight : StateOptions(), true);
      Trained last_good = train(c, eight_bit ? eight : StateOptions(), false);
      // The parameters before the last step: the good run's, with the last step undone is not
      // available, so take them from a run of three steps.
      Generator g(5);
      Tensor p3 = randn({1003}, DType::f32, &g) * 0.1;
      {
        auto o = c.make({{"w", p3}}, eight_bit ? eight : StateOptions());
        p3.requires_grad_();
        for (int s = 0; s < 3; ++s) {
          p3.set_grad(randn({1003}, DType::f32, &g) * 0.01);
          o->step();
        }
      }
      const float* got = poisoned.p.data<float>();
      for (int64_t i : kBad) EXPECT_EQ(got[i], p3.data<float>()[i]) << "element " << i;
      for (int64_t i = 0; i < 1003; ++i) ASSERT_TRUE(std::isfinite(got[i])) << i;
      // Every other element moved as without the bad ones (elementwise rules, 32-bit state).
      if (c.elementwise && !eight_bit) {
        const float* want = last_good.p.data<float>();
        for (int64_t i = 0; i < 1003; ++i) {
          if (i != kBad[0] && i != kBad[1] && i != kBad[2]) {
            ASSERT_EQ(got[i], want[i]) << i;
          }
        }
      }
      // The state: the bad elements' values as before the step (32-bit), everything finite.
      const NamedTensors after = poisoned.opt->state_dict();
      for (size_t k = 0; k < after.size(); ++k) {
        const Tensor& t = after[k].second;
        if (t.dtype() != DType::f32 || t.numel() != 1003) continue;  // counters, 8-bit codes, absmax, maps
        for (int64_t i : kBad) EXPECT_EQ(t.data<float>()[i], poisoned.before[k].second.data<float>()[i]) << after[k].first;
      }
      for (const auto& [key, t] : after)
        if (t.dtype() == DType::f32) {
          const float* v = t.data<float>();
          for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << key << " " << i;
        }
    }
}

}  // namespace
}  // namespace octet
