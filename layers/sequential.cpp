#include "layers/sequential.h"

#include <typeinfo>

#include "core/ops/elementwise.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"

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

// The module as a BatchNorm2d if it is exactly one (a subclass may override forward).
BatchNorm2d* exact_batch_norm(const std::shared_ptr<Module>& m) {
  return typeid(*m) == typeid(BatchNorm2d) ? static_cast<BatchNorm2d*>(m.get()) : nullptr;
}

}  // namespace

Tensor Sequential::forward(const Tensor& x) { return run(x, modules_.size()); }

Tensor Sequential::forward_add(const Tensor& x, const Tensor& residual) {
  BatchNorm2d* last = modules_.empty() ? nullptr : exact_batch_norm(modules_.back());
  if (last == nullptr) return forward(x) + residual;
  return last->forward(run(x, modules_.size() - 1), NormActivation::none, residual);
}

Tensor Sequential::run(const Tensor& x, size_t count) {
  Tensor y = x;
  for (size_t i = 0; i < count; ++i) {
    // Exact types: a subclass may override forward.
    BatchNorm2d* bn = exact_batch_norm(modules_[i]);
    const Module* next = i + 1 < count ? modules_[i + 1].get() : nullptr;
    if (bn != nullptr && next != nullptr && typeid(*next) == typeid(ReLU)) {
      y = bn->forward(y, NormActivation::relu), ++i;
    } else if (bn != nullptr && next != nullptr && typeid(*next) == typeid(ReLU6)) {
      y = bn->forward(y, NormActivation::relu6), ++i;
    } else {
      y = modules_[i]->forward(y);
    }
  }
  return y;
}

}  // namespace octet
