// optim/'s one dispatch point: the kernel list of optim/kernel_signatures.inc declared in
// octet::optim::dispatch, whose functions (optim/kernels.cpp) run the CPU's (optim/cpu/kernels.h)
// or the CUDA's (optim/cuda/kernels.h) version by the device of their tensors, with that device
// current, and throw an octet::Error for a device without kernels. The optimizers build their rule
// (optim/update_rules.h) and call run_rule() or these; no other file of optim/ calls cpu:: or
// cuda:: kernels or knows whether CUDA is built. Internal: not installed.
//   dispatch_float(param.dtype(), "SGD", [&]<typename T>() { run_rule(sgd_rule<T>(o), param, grad, state, "SGD"); });
//   double sum_sq = optim::dispatch::sum_squares(grads_on_one_device).value();
#pragma once

#include <cstddef>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "optim/optimizer.h"
#include "optim/update_rules.h"

// The list's templates instantiated for every rule of optim/update_rules.h, in f32 and f64: written
// once, expanded in the namespace of each version (optim::dispatch, optim::cpu, optim::cuda).
#define OCTET_OPTIM_RULE_UPDATE(Rule) \
  template void rule_update(const Rule&, const Tensor&, const Tensor&, ParamState&, const char*);
#define OCTET_OPTIM_KERNELS_OF(T)                                                                         \
  OCTET_OPTIM_RULE_UPDATE(SgdRule<T>)                                                                     \
  OCTET_OPTIM_RULE_UPDATE(AdamRule<T>)                                                                    \
  OCTET_OPTIM_RULE_UPDATE(RmspropRule<T>)                                                                 \
  OCTET_OPTIM_RULE_UPDATE(AdagradRule<T>)                                                                 \
  OCTET_OPTIM_RULE_UPDATE(LionRule<T>)                                                                    \
  OCTET_OPTIM_RULE_UPDATE(LambRule<T>)                                                                    \
  OCTET_OPTIM_RULE_UPDATE(LarsRule<T>)                                                                    \
  template void lamb_update(const LambRule<T>&, double, bool, const Tensor&, const Tensor&, ParamState&); \
  template LayerSums lamb_sums(const LambRule<T>&, const Tensor&, const Tensor&, ParamState&);            \
  template void lars_update(const LarsRule<T>&, double, double, double, const Tensor&, const Tensor&, ParamState&);
#define OCTET_OPTIM_INSTANTIATE_KERNELS() OCTET_OPTIM_KERNELS_OF(float) OCTET_OPTIM_KERNELS_OF(double)

namespace octet::optim::dispatch {
#include "optim/kernel_signatures.inc"
}  // namespace octet::optim::dispatch

namespace octet {

// An Error unless `rule` and `state` agree on the number of state buffers.
template <typename Rule>
void check_rule_state(const Rule& rule, const ParamState& state, const char* name) {
  OCTET_CHECK(static_cast<size_t>(rule.buffers) == state.buffer_names().size(), name, ": the update uses ",
              rule.buffers, " state buffers, the state has ", state.buffer_names().size());
}

// The entry point of the elementwise optimizers: `rule` over one parameter, on its device.
template <typename Rule>
void run_rule(const Rule& rule, const Tensor& param, const Tensor& grad, ParamState& state, const char* name) {
  check_rule_state(rule, state, name);
  optim::dispatch::rule_update(rule, param, grad, state, name);
}

}  // namespace octet
