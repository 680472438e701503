#include "layers/sequential.h"

#include <typeinfo>

#include "core/ops/elementwise.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"

namespace octet {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

const std::shared_ptr<Module>& Sequential::at(size_t i) const {
  OCTET_CHECK(i < modules_.size(), "Sequential::at: index ", i, " out of range for ", modules_.size(), " modules");
  return modules_[i];
}

namespace {

// The module as a BatchNorm2d, Conv2d or Sequential if it is exactly one (a subclass may override
// forward).
template <class M>
M* exactly(const std::shared_ptr<Module>& m) {
  return typeid(*m) == typeid(M) ? static_cast<M*>(m.get()) : nullptr;
}

// The activation of a ReLU / ReLU6 module, none for another module.
NormActivation activation_of(const std::shared_ptr<Module>& m) {
  if (typeid(*m) == typeid(ReLU)) return NormActivation::relu;
  if (typeid(*m) == typeid(ReLU6)) return NormActivation::relu6;
  return NormActivation::none;
}

}  // namespace

// The value passed from module to module: t itself, or, while bn is set, act(bn(t)) not computed
// yet, so that a Conv2d receiving it -- in this Sequential or, across nesting, in another -- can
// take the batch norm into its own op (Conv2d::forward_after). Anything else computes it first.
struct Sequential::Flow {
  Tensor t;
  BatchNorm2d* bn = nullptr;
  NormActivation act = NormActivation::none;

  Tensor value() {
    if (bn != nullptr) t = bn->forward(t, act), bn = nullptr;
    return t;
  }
};

Tensor Sequential::forward(const Tensor& x) { return run(x, 0, modules_.size()); }

Tensor Sequential::forward_add(const Tensor& x, const Tensor& residual) {
  BatchNorm2d* last = modules_.empty() ? nullptr : exactly<BatchNorm2d>(modules_.back());
  if (last == nullptr) return forward(x) + residual;
  return last->forward(run(x, 0, modules_.size() - 1), NormActivation::none, residual);
}

Tensor Sequential::run(const Tensor& x, size_t begin, size_t end) { return flow(Flow{x}, begin, end).value(); }

Sequential::Flow Sequential::flow(Flow f, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const std::shared_ptr<Module>& m = modules_[i];
    if (Conv2d* conv = exactly<Conv2d>(m); conv != nullptr && f.bn != nullptr) {
      f = Flow{conv->forward_after(*f.bn, f.act, f.t)};
    } else if (Sequential* inner = exactly<Sequential>(m)) {
      f = inner->flow(std::move(f), 0, inner->size());
    } else {
      Tensor y = f.value();
      BatchNorm2d* bn = exactly<BatchNorm2d>(m);
      const NormActivation act = i + 1 < end ? activation_of(modules_[i + 1]) : NormActivation::none;
      if (bn != nullptr && act != NormActivation::none)
        f = Flow{y, bn, act}, ++i;  // BN -> act: computed by whoever receives it
      else
        f = Flow{m->forward(y)};
    }
  }
  return f;
}

}  // namespace octet
