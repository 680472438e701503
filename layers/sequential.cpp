#include "layers/sequential.h"

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
  for (const std::shared_ptr<Module>& m : modules_) y = m->forward(y);
  return y;
}

}  // namespace octet
