#include "layers/module.h"

#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/autograd.h"

namespace octet {

namespace {

// Points the handle `dst` at the data of `src` (same shape), keeping dst's identity and
// requires_grad, as PyTorch's set_data: every holder of the handle sees the new data. The grad
// and the grad accumulator (whose recorded dtype/device would be stale) are dropped.
void set_data(Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.impl();
  const TensorImpl* s = src.impl();
  d->storage = s->storage;
  d->shape = s->shape;
  d->strides = s->strides;
  d->offset = s->offset;
  d->dtype = s->dtype;
  d->grad = Tensor();
  d->grad_accumulator.reset();
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

}  // namespace

// ---------------------------------------------------------------- registration

void Module::check_new_name(const std::string& name, const char* what) const {
  OCTET_CHECK(!name.empty(), type_name(), "::", what, ": name must not be empty");
  OCTET_CHECK(name.find('.') == std::string::npos, type_name(), "::", what, ": name must not contain '.', got '", name,
              "'");
  auto taken = [&](const auto& entries) {
    for (const auto& e : entries)
      if (e.first == name) return true;
    return false;
  };
  OCTET_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(), "::", what, ": name '", name,
              "' is already registered in this module");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name(name, "register_parameter");
  OCTET_CHECK(t.defined(), type_name(), "::register_parameter: tensor '", name, "' is undefined");
  OCTET_CHECK(is_floating(t.dtype()), type_name(), "::register_parameter: parameter '", name,
              "' must be floating-point, got ", t.dtype());
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(true);
  params_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name, "register_buffer");
  OCTET_CHECK(t.defined(), type_name(), "::register_buffer: tensor '", name, "' is undefined");
  if (t.requires_grad()) t = t.detach();
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *buffers_.back().second;
}

Tensor& Module::set_parameter(const std::string& name, const Tensor& t) {
  for (auto& [pname, p] : params_) {
    if (pname != name) continue;
    OCTET_CHECK(t.defined() && t.is_leaf() && t.requires_grad(), type_name(), "::set_parameter: '", name,
                "' must be replaced by a leaf that requires grad");
    OCTET_CHECK(t.shape() == p->shape() && t.dtype() == p->dtype() && t.device() == p->device(), type_name(),
                "::set_parameter: '", name, "' is ", p->dtype(), " ", p->shape(), " on ", p->device(), ", got ",
                t.dtype(), " ", t.shape(), " on ", t.device());
    *p = t;
    return *p;
  }
  OCTET_FAIL(type_name(), "::set_parameter: no parameter named '", name, "' in this module");
}

void Module::mark_keep_32bit_state(const std::string& name) {
  for (auto& [pname, p] : params_)
    if (pname == name) {
      p->impl()->keep_32bit_state = true;
      return;
    }
  OCTET_FAIL(type_name(), "::mark_keep_32bit_state: no parameter named '", name, "' in this module");
}

std::vector<std::string> Module::keep_32bit_state_names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : named_parameters())
    if (t.impl()->keep_32bit_state) out.push_back(name);
  return out;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "register_module");
  OCTET_CHECK(m != nullptr, type_name(), "::register_module: module '", name, "' is null");
  OCTET_CHECK(m.get() != this, type_name(), "::register_module: a module cannot be its own child ('", name, "')");
  children_.emplace_back(name, std::move(m));
}

std::shared_ptr<Module> Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  OCTET_CHECK(m != nullptr, type_name(), "::replace_module: module '", name, "' is null");
  OCTET_CHECK(m.get() != this, type_name(), "::replace_module: a module cannot be its own child ('", name, "')");
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].first != name) continue;
    on_child_replaced(i, m);
    return std::exchange(children_[i].second, std::move(m));
  }
  OCTET_FAIL(type_name(), "::replace_module: no child named '", name, "'");
}

void Module::on_child_replaced(size_t index, const std::shared_ptr<Module>& m) {
  OCTET_FAIL(type_name(), "::replace_module: ", type_name(), " calls its children through its own members, so '",
             children_[index].first, "' cannot be replaced (its forward would keep the old ",
             children_[index].second->type_name(),
             "); replace inside a Sequential, or set the layer's options instead");
}

// ---------------------------------------------------------------- accessors

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (const auto& [name, t] : params_) out.emplace_back(prefix + name, *t);
  if (buffers)
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, *t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, buffers, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors all, out;
  collect("", true, false, all);
  std::set<const TensorImpl*> seen;
  for (auto& e : all)
    if (seen.insert(e.second.impl()).second) out.push_back(std::move(e));
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

NamedModules Module::named_children() const { return children_; }

void Module::collect_modules(const std::string& prefix, NamedModules& out) const {
  for (const auto& [name, child] : children_) {
    out.emplace_back(prefix + name, child);
    child->collect_modules(prefix + name + ".", out);
  }
}

NamedModules Module::named_modules() const {
  NamedModules out;
  collect_modules("", out);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children_) child->apply(fn);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

// ---------------------------------------------------------------- modes and placement

void Module::train(bool on) {
  apply([on](Module& m) { m.training_ = on; });
}

void Module::for_each_tensor(const std::function<void(Tensor&)>& fn) {
  apply([&fn](Module& m) {
    for (auto& e : m.params_) fn(*e.second);
    for (auto& e : m.buffers_) fn(*e.second);
  });
}

void Module::to(Device d) {
  OCTET_CHECK(d.is_cpu() || cuda_compiled(), type_name(), "::to: device ", d,
              " requested, but the CUDA backend is not built (configure with -DOCTET_CUDA=ON)");
  NoGradGuard ng;
  for_each_tensor([d](Tensor& t) {
    if (t.device() != d) set_data(t, t.detach().to(d));
  });
}

void Module::to(DType dtype) {
  OCTET_CHECK(is_floating(dtype), type_name(), "::to: expected a floating-point dtype, got ", dtype);
  NoGradGuard ng;
  for_each_tensor([dtype](Tensor& t) {
    if (is_floating(t.dtype()) && t.dtype() != dtype) set_data(t, t.detach().to(dtype));
  });
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

// ---------------------------------------------------------------- checkpoints

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, out);
  for (auto& e : out) e.second = e.second.detach();
  return out;
}

void Module::load_state_dict(const NamedTensors& sd, bool strict) {
  NamedTensors own;
  collect("", true, true, own);
  std::map<std::string, const Tensor*> given;
  std::vector<std::string> unexpected, missing, problems;
  for (const auto& [name, t] : sd) {
    if (!given.emplace(name, &t).second) problems.push_back("duplicate key '" + name + "'");
  }
  std::set<std::string> own_names;
  for (const auto& [name, t] : own) {
    own_names.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& src = *it->second;
    if (!src.defined()) {
      problems.push_back("'" + name + "' is undefined");
    } else if (src.shape() != t.shape()) {
      problems.push_back(
          detail::str_cat("shape mismatch for '", name, "': expected ", t.shape(), ", got ", src.shape()));
    } else if (src.dtype() != t.dtype()) {
      problems.push_back(
          detail::str_cat("dtype mismatch for '", name, "': expected ", t.dtype(), ", got ", src.dtype()));
    }
  }
  for (const auto& [name, t] : sd)
    if (!own_names.count(name)) unexpected.push_back(name);
  if (strict) {
    if (!missing.empty()) problems.push_back("missing keys: " + join(missing));
    if (!unexpected.empty()) problems.push_back("unexpected keys: " + join(unexpected));
  }
  if (!problems.empty()) {
    std::string msg = type_name() + "::load_state_dict: " + std::to_string(problems.size()) + " error(s):";
    for (const auto& p : problems) msg += "\n  " + p;
    OCTET_FAIL(msg);
  }
  NoGradGuard ng;
  for (auto& [name, t] : own) {
    auto it = given.find(name);
    if (it != given.end() && !it->second->same(t)) Tensor(t).copy_(*it->second);
  }
}

// ---------------------------------------------------------------- printing

void Module::summary_into(std::string& out, const std::string& name, int indent) const {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  int64_t n = num_parameters();
  std::string count = n > 0 ? "  # " + with_commas(n) + " params" : "";
  out += pad + (name.empty() ? "" : "(" + name + "): ") + type_name() + "(";
  if (children_.empty()) {
    out += extra_repr() + ")" + count + "\n";
    return;
  }
  // As PyTorch: a module with children shows its arguments on a line of their own.
  out += count + "\n";
  if (!extra_repr().empty()) out += pad + "  " + extra_repr() + "\n";
  for (const auto& [child_name, child] : children_) child->summary_into(out, child_name, indent + 1);
  out += pad + ")\n";
}

std::string Module::summary() const {
  std::string out;
  summary_into(out, "", 0);
  return out;
}

}  // namespace octet
