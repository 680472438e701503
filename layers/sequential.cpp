#include "layers/sequential.h"

#include <typeinfo>

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

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < modules_.size(); ++i) {
    // Exact types: a subclass may override forward.
    auto* bn = typeid(*modules_[i]) == typeid(BatchNorm2d) ? static_cast<BatchNorm2d*>(modules_[i].get()) : nullptr;
    const Module* next = i + 1 < modules_.size() ? modules_[i + 1].get() : nullptr;
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
