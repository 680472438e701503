// Sequential: a chain of modules named "0", "1", ... whose forward feeds each output to the next.
//   auto net = std::make_shared<Sequential>();
//   net->push_back(std::make_shared<Linear>(4, 8));  net->push_back(std::make_shared<ReLU>());
//   Tensor y = (*net)(x);
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "layers/module.h"

namespace octet {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);

  // Appends `m` under the name of its position; returns it.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    OCTET_CHECK(m != nullptr, "Sequential::push_back: module is null");
    register_module(std::to_string(modules_.size()), m);
    modules_.push_back(m);
    return m;
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // The module at `i`; an octet::Error when out of range.
  const std::shared_ptr<Module>& at(size_t i) const;
  const std::shared_ptr<Module>& operator[](size_t i) const { return at(i); }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

  // An empty Sequential returns its input. A BatchNorm2d followed by a ReLU or ReLU6 runs as one
  // op (BatchNorm2d::forward(x, act)): the same result, one pass less, and no activation kept for
  // the backward. Where the pair's output goes straight into a Conv2d -- the next module, or
  // across nested Sequentials the next one to run (MobileNetV2's conv-BN-ReLU6 blocks) -- the
  // Conv2d takes the pair (Conv2d::forward_after: for an INT8 layer one op that writes its int8
  // codes). The same results.
  Tensor forward(const Tensor& x) override;
  // forward(x) + residual; where the last module is a BatchNorm2d, it adds the residual in its
  // output pass (the same bits, one pass less): MobileNetV2's inverted residual block.
  Tensor forward_add(const Tensor& x, const Tensor& residual);
  std::string type_name() const override { return "Sequential"; }

 private:
  // Modules [begin, end) in turn, with the fusions above (forward is run(x, 0, size())).
  Tensor run(const Tensor& x, size_t begin, size_t end);
  struct Flow;
  // Modules [begin, end) from f; what they return may still be a pending BN -> act.
  Flow flow(Flow f, size_t begin, size_t end);
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace octet
