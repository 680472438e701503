// The optimizers the quantized-state tests run (8-bit: test_8bit.cpp, 4-bit: test_4bit.cpp), each
// made from parameters and StateOptions, and the checkpoint round trip both state kinds must pass.
//   for (const OptCase& c : state_cases()) expect_resume_is_exact(c, StateOptions().state_bits(4));
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/octet.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "tests/quant/same_bytes.h"

namespace octet::testing {

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&, const StateOptions&)>;

struct OptCase {
  const char* name;
  MakeOpt make;
};

inline std::vector<OptCase> state_cases() {
  return {
      {"adam",
       [](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Adam>(p, AdamOptions(1e-3), s); }},
      {"adamw",
       [](const NamedTensors& p, const StateOptions& s) {
         return std::make_unique<AdamW>(p, AdamWOptions(1e-3).weight_decay(0.01), s);
       }},
      {"amsgrad", [](const NamedTensors& p,
                     const StateOptions& s) { return std::make_unique<Adam>(p, AdamOptions(1e-3).amsgrad(true), s); }},
      {"momentum", [](const NamedTensors& p,
                      const StateOptions& s) { return std::make_unique<SGD>(p, SGDOptions(1e-2).momentum(0.9), s); }},
      {"rmsprop", [](const NamedTensors& p,
                     const StateOptions& s) { return std::make_unique<RMSprop>(p, RMSpropOptions(1e-3), s); }},
      {"adagrad", [](const NamedTensors& p,
                     const StateOptions& s) { return std::make_unique<Adagrad>(p, AdagradOptions(1e-2), s); }},
      {"lion",
       [](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Lion>(p, LionOptions(1e-4), s); }},
      {"lamb",
       [](const NamedTensors& p, const StateOptions& s) { return std::make_unique<Lamb>(p, LambOptions(1e-3), s); }},
      {"lars", [](const NamedTensors& p,
                  const StateOptions& s) { return std::make_unique<Lars>(p, LarsOptions(0.1).momentum(0.9), s); }},
  };
}

// Six steps straight, and three steps, a checkpoint, a new optimizer loading it and three more
// steps, give the same parameter and state, bit for bit.
inline void expect_resume_is_exact(const OptCase& c, const StateOptions& state) {
  Generator g(3);
  Tensor a = randn({300, 50}, DType::f32, &g), b = a.clone();
  a.requires_grad_(true);
  b.requires_grad_(true);
  std::vector<Tensor> grads;
  for (int s = 0; s < 6; ++s) grads.push_back(randn({300, 50}, DType::f32, &g));
  auto full = c.make({{"w", a}}, state);
  for (int s = 0; s < 6; ++s) {
    a.set_grad(grads[s]);
    full->step();
  }
  auto first = c.make({{"w", b}}, state);
  for (int s = 0; s < 3; ++s) {
    b.set_grad(grads[s]);
    first->step();
  }
  NamedTensors saved = first->state_dict();
  auto second = c.make({{"w", b}}, state);
  second->load_state_dict(saved);
  for (int s = 3; s < 6; ++s) {
    b.set_grad(grads[s]);
    second->step();
  }
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << c.name;  // bit for bit
  NamedTensors sa = full->state_dict(), sb = second->state_dict();
  ASSERT_EQ(sa.size(), sb.size()) << c.name;
  for (size_t i = 0; i < sa.size(); ++i) {
    const Tensor x = sa[i].second.contiguous(), y = sb[i].second.contiguous();
    ASSERT_EQ(x.shape(), y.shape()) << c.name << " " << sa[i].first;
    EXPECT_TRUE(same_bytes(x.raw_data(), y.raw_data(), x.numel(), dtype_size(x.dtype()), sa[i].first)) << c.name;
  }
}

}  // namespace octet::testing
