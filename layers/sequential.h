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

  // Each module's output to the next; an empty Sequential returns its input. (The fusion pass,
  // layers/fusion.h, fuses across modules and nested Sequentials alike.)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }

 protected:
  void on_child_replaced(size_t index, const std::shared_ptr<Module>& m) override { modules_.at(index) = m; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace octet
