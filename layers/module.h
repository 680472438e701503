// Module: the base of every layer and model. A module owns named parameters (leaves that require
// grad), buffers (state that is saved but not trained, e.g. BatchNorm running statistics) and
// child modules, each registered once under a unique name and kept in registration order, so
// names like "features.0.conv.weight" are stable and match PyTorch's state_dict keys.
//   auto net = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
//       std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 2)});
//   Tensor y = (*net)(x);  net->named_parameters();  net->load_state_dict(other->state_dict());
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace octet {

class Module;
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Layers hold tensor handles that alias the registered ones; a copy would alias them too.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- registration. Names are non-empty, contain no '.', and are unique within a module
  // across parameters, buffers and children. The returned reference stays valid for the
  // module's lifetime; layers usually keep a copy of the handle (it shares the tensor).
  // A parameter becomes a floating-point leaf that requires grad (a non-leaf is detached).
  Tensor& register_parameter(const std::string& name, Tensor t);
  // A buffer of any dtype; it never requires grad.
  Tensor& register_buffer(const std::string& name, Tensor t);
  // Replaces the tensor registered as parameter `name` of this module by `t`, a leaf that requires
  // grad with the same shape, dtype and device: weight tying. The layer's own member handle is the
  // caller's to update too. named_parameters() then lists the shared tensor once.
  //   decoder->weight_ = decoder->set_parameter("weight", embedding->weight_);
  Tensor& set_parameter(const std::string& name, const Tensor& t);
  // Marks parameter `name` of this module (registered directly in it) so that an optimizer with
  // 8-bit state keeps 32-bit state for it, whoever builds the optimizer (C++ API or CLI): the hint
  // travels with the tensor (TensorImpl::keep_32bit_state). StableEmbedding marks its weight.
  void mark_keep_32bit_state(const std::string& name);
  // Dotted names (as in named_parameters()) of the parameters so marked, here and in descendants.
  std::vector<std::string> keep_32bit_state_names() const;
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // Replaces child `name` (registered directly in this module) by `m`, in place: the same name and
  // position, so state_dict names stay. Returns the old child. Only modules that reach their
  // children through the registry take it (Sequential; a subclass that overrides
  // on_child_replaced): a model calling a child through its own typed member would keep calling
  // the old one, so replacing there is an octet::Error naming the module, never a silent no-op.
  //   seq->replace_module("2", std::make_shared<ReLU6>());   // Sequential: its forward uses the new one
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> m);

  // ---- recursive accessors, in registration order (own entries first, then each child's).
  // named_parameters() lists a tensor registered in several places once, under its first name.
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> buffers() const;
  // Direct children only.
  NamedModules named_children() const;
  // Every descendant (not the module itself), depth first, with dotted names.
  NamedModules named_modules() const;
  // Calls fn on this module, then on every descendant depth first.
  void apply(const std::function<void(Module&)>& fn);
  // Total number of parameter elements.
  int64_t num_parameters() const;

  // ---- modes and placement (recursive)
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves parameters and buffers to `d`. The handles stay the same (their data is swapped in
  // place), so layers and optimizers holding them see the moved tensors.
  void to(Device d);
  // Converts floating-point parameters and buffers to the floating dtype `t` (integer buffers
  // such as num_batches_tracked stay as they are); handles stay the same as with to(Device).
  void to(DType t);
  // Sets every parameter's grad to undefined.
  void zero_grad();

  // ---- checkpoints. Parameters then buffers, each module's own first, then its children's.
  // The tensors are detached handles sharing the module's storage.
  NamedTensors state_dict() const;
  // Copies `sd` into the module's tensors in place (no grad recorded). Every name, shape and
  // dtype is checked before anything is copied; the error lists all missing and unexpected
  // names (strict) and every shape/dtype mismatch (always).
  void load_state_dict(const NamedTensors& sd, bool strict = true);

  // ---- printing
  virtual std::string type_name() const { return "Module"; }
  // Constructor arguments shown after the type name, e.g. "3, 16, kernel_size=3".
  virtual std::string extra_repr() const { return ""; }
  // The module tree with parameter counts, like PyTorch's repr.
  std::string summary() const;

 protected:
  // Called by replace_module before the registry changes, with the child's position among the
  // children: a module whose forward reaches the child another way updates that way here, or
  // throws. The default throws (see replace_module).
  virtual void on_child_replaced(size_t index, const std::shared_ptr<Module>& m);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;
  void collect_modules(const std::string& prefix, NamedModules& out) const;
  void summary_into(std::string& out, const std::string& name, int indent) const;
  // Calls fn on every parameter and buffer handle of this module and its descendants.
  void for_each_tensor(const std::function<void(Tensor&)>& fn);

  // Vectors of unique_ptr so references returned by register_* survive later registrations.
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  NamedModules children_;
  bool training_ = true;
};

}  // namespace octet
