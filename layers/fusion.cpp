#include "layers/fusion.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "core/autograd.h"
#include "core/generator.h"
#include "layers/activation.h"
#include "layers/add.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"

namespace octet {

// ---------------------------------------------------------------- the trace

namespace fusion {
namespace {

struct Call {
  Module* module;
  std::vector<Tensor> inputs;
  Tensor output;
};

thread_local std::vector<Call>* active_trace = nullptr;

}  // namespace

void record(Module& m, std::initializer_list<Tensor> inputs, const Tensor& output) {
  if (active_trace != nullptr) active_trace->push_back({&m, inputs, output});
}

}  // namespace fusion

namespace {

using fusion::Call;
using UseKey = std::pair<const autograd::Node*, uint32_t>;

// Puts back on scope exit what tracing changes: the training flags, grad mode, the trace pointer
// and the default generator (eval mode draws nothing; this holds for a model that would).
class TraceScope {
 public:
  TraceScope(Module& model, std::vector<Call>* calls)
      : grad_(autograd::grad_mode_enabled()), seed_(default_generator().seed()), offset_(default_generator().offset()) {
    flags_.emplace_back(&model, model.is_training());
    for (const auto& [name, m] : model.named_modules()) flags_.emplace_back(m.get(), m->is_training());
    model.eval();
    autograd::set_grad_mode(true);
    fusion::active_trace = calls;
  }
  ~TraceScope() {
    fusion::active_trace = nullptr;
    autograd::set_grad_mode(grad_);
    default_generator().set_state(seed_, offset_);
    for (const auto& [m, on] : flags_) m->train(on);  // pre-order: each call fixes its subtree after its parent's
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> flags_;
  bool grad_;
  uint64_t seed_, offset_;
};

// One forward of the plain model, the calls the matched modules recorded, and how often each
// tensor of the graph is used.
class Trace {
 public:
  Trace(Module& model, const Tensor& example) : root_(model), input_(example) {
    try {
      TraceScope scope(model, &calls_);
      output_ = model.forward(input_);
    } catch (const Error& e) {
      OCTET_FAIL("fuse: the traced forward of ", model.type_name(), " on an example input of shape ", example.shape(),
                 " failed: ", e.what());
    }
    for (const Call& c : calls_) ++times_called_[c.module];
    count_uses();
    names_[&model] = "";
    for (const auto& [name, m] : model.named_modules()) names_.emplace(m.get(), name);
  }

  Module& root() const { return root_; }
  const Tensor& input() const { return input_; }
  const std::vector<Call>& calls() const { return calls_; }
  // The module's dotted name; a module the forward called without registering it has none.
  std::string name(const Module* m) const {
    const auto it = names_.find(m);
    return it != names_.end() ? it->second : "(unregistered " + m->type_name() + ")";
  }
  // Called once in the trace and registered in the model (a module the forward makes on the fly
  // would not carry what the pass sets into the next forward).
  bool once(const Module* m) const { return times_called_.at(m) == 1 && names_.count(m) != 0; }

  // The call of a module called once that is the only use of `t` (in the graph and among the calls);
  // null if there is none, t is used elsewhere too, or its uses are unknown (t needs no grad).
  const Call* sole_consumer(const Tensor& t) const {
    if (!t.defined() || !t.requires_grad()) return nullptr;
    const autograd::Edge e = autograd::edge_of(t);
    const auto uses = uses_.find({e.node.get(), e.input_nr});
    if (uses == uses_.end() || uses->second != 1) return nullptr;
    const Call* found = nullptr;
    for (const Call& c : calls_)
      for (const Tensor& in : c.inputs)
        if (in.same(t)) {
          if (found != nullptr) return nullptr;
          found = &c;
        }
    return found != nullptr && once(found->module) ? found : nullptr;
  }

 private:
  // Every edge of the graph from the output, and the output itself, is one use of a tensor.
  void count_uses() {
    if (!output_.requires_grad()) return;
    const autograd::Edge root = autograd::edge_of(output_);
    ++uses_[{root.node.get(), root.input_nr}];
    std::vector<const autograd::Node*> todo{root.node.get()};
    std::set<const autograd::Node*> seen{root.node.get()};
    while (!todo.empty()) {
      const autograd::Node* n = todo.back();
      todo.pop_back();
      for (const autograd::Edge& e : n->next_edges()) {
        if (!e.node) continue;
        ++uses_[{e.node.get(), e.input_nr}];
        if (seen.insert(e.node.get()).second) todo.push_back(e.node.get());
      }
    }
  }

  Module& root_;
  Tensor input_, output_;
  std::vector<Call> calls_;
  std::map<const Module*, int> times_called_;
  std::map<UseKey, int> uses_;
  std::map<const Module*, std::string> names_;
};

template <class M>
M* as(const Call* c) {
  return c != nullptr ? dynamic_cast<M*>(c->module) : nullptr;
}

template <class M>
std::shared_ptr<M> shared(M* m) {
  return std::static_pointer_cast<M>(m->shared_from_this());
}

// The activation a ReLU / ReLU6 call applies (none for another module).
NormActivation activation_of(const Call* c) {
  if (as<ReLU>(c) != nullptr) return NormActivation::relu;
  if (as<ReLU6>(c) != nullptr) return NormActivation::relu6;
  return NormActivation::none;
}

void absorb(const Call* act) {
  if (auto* r = as<ReLU>(act)) r->absorbed_ = true;
  if (auto* r = as<ReLU6>(act)) r->absorbed_ = true;
}

const char* act_name(NormActivation act) { return act == NormActivation::relu ? "relu" : "relu6"; }

// The batch norms called once, with their calls.
std::vector<std::pair<BatchNorm2d*, const Call*>> batch_norms(const Trace& t) {
  std::vector<std::pair<BatchNorm2d*, const Call*>> out;
  for (const Call& c : t.calls())
    if (auto* bn = as<BatchNorm2d>(&c); bn != nullptr && t.once(bn)) out.emplace_back(bn, &c);
  return out;
}

// ---------------------------------------------------------------- the rules

// bn -> Add (-> ReLU/ReLU6): relu(bn(y) + r) in the norm's output pass (batch_norm's residual).
void fuse_residual(const Trace& t, FusionReport& report) {
  for (const auto& [bn, call] : batch_norms(t)) {
    const Call* next = t.sole_consumer(call->output);
    auto* add = as<Add>(next);
    if (add == nullptr || !add->input_bn_.expired()) continue;
    add->input_bn_ = shared(bn);
    add->bn_feeds_b_ = next->inputs[1].same(call->output);
    bn->consumer_ = shared(add);
    FusionReport::Group g{"batch_norm+add", {t.name(bn), t.name(add)}};
    const Call* after = t.sole_consumer(next->output);
    if (NormActivation act = activation_of(after); act != NormActivation::none) {
      add->act_ = act;
      absorb(after);
      g.rule += std::string("+") + act_name(act);
      g.modules.push_back(t.name(after->module));
    }
    report.groups.push_back(std::move(g));
  }
}

// bn -> ReLU/ReLU6: one op, no activation kept for the backward.
void fuse_batch_norm_act(const Trace& t, FusionReport& report) {
  for (const auto& [bn, call] : batch_norms(t)) {
    if (!bn->consumer_.expired()) continue;
    const Call* next = t.sole_consumer(call->output);
    const NormActivation act = activation_of(next);
    if (act == NormActivation::none) continue;
    bn->act_ = act;
    absorb(next);
    report.groups.push_back({std::string("batch_norm+") + act_name(act), {t.name(bn), t.name(next->module)}});
  }
}

// bn -> ReLU/ReLU6 -> INT8 Conv2d: in training the convolution takes the batch norm into its int8
// codes (Conv2d::applies decides at each forward: training mode, unsynchronized, the setting on).
void fuse_into_int8_conv(const Trace& t, FusionReport& report) {
  for (const auto& [bn, call] : batch_norms(t)) {
    if (bn->act_ == NormActivation::none || !bn->consumer_.expired()) continue;
    const Call* act = t.sole_consumer(call->output);
    const Call* next = act != nullptr ? t.sole_consumer(act->output) : nullptr;
    auto* conv = as<Conv2d>(next);
    if (conv == nullptr || !conv->int8() || !conv->input_bn_.expired()) continue;
    conv->input_bn_ = shared(bn);
    bn->consumer_ = shared(conv);
    report.groups.push_back({std::string("batch_norm+") + act_name(bn->act_) + "+int8_conv",
                             {t.name(bn), t.name(act->module), t.name(conv)}});
  }
}

// The models measured faster channels-last under OCTET_CHANNELS_LAST=auto (tools/bench/RESULTS.md:
// MobileNetV2 and the CIFAR ResNets; ResNet-18/50 ran 2-4% slower with AVX-512, oneDNN's blocked
// kernels outrunning its nhwc ones by about the reorders saved).
bool measured_faster_channels_last(const Module& model) {
  const std::string type = model.type_name();
  return type == "MobileNetV2" || type == "CifarResNet";
}

// The model's input -> its first Conv2d: channels-last from there (the convolutions, batch norms,
// adds and pools keep the format), at the convolution's output for a one-channel input.
void fuse_channels_last(const Trace& t, FusionReport& report) {
  const auto first = std::find_if(t.calls().begin(), t.calls().end(), [&](const Call& c) {
    return as<Conv2d>(&c) != nullptr && c.inputs[0].same(t.input());
  });
  if (first == t.calls().end()) return;
  bool int8 = false;
  t.root().apply([&](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m); conv != nullptr && conv->int8()) int8 = true;
  });
  auto* conv = as<Conv2d>(&*first);
  conv->channels_last_ = t.input().size(1) == 1 ? ChannelsLastAt::output : ChannelsLastAt::input;
  conv->channels_last_auto_ = measured_faster_channels_last(t.root()) && !int8;
  report.groups.push_back({"channels_last", {t.name(conv)}});
}

struct Rule {
  const char* name;
  void (*apply)(const Trace&, FusionReport&);
};

// In this order: a batch norm feeding a residual add is not also one feeding an activation.
constexpr Rule kRules[] = {
    {"residual", fuse_residual},
    {"batch norm + activation", fuse_batch_norm_act},
    {"batch norm into an INT8 convolution", fuse_into_int8_conv},
    {"channels-last", fuse_channels_last},
};

bool has_fusable_module(Module& model) {
  bool found = false;
  model.apply([&](Module& m) {
    if (dynamic_cast<BatchNorm2d*>(&m) != nullptr || dynamic_cast<Conv2d*>(&m) != nullptr) found = true;
  });
  return found;
}

// The example as the model computes: its floating dtype, its device.
Tensor example_for(const Module& model, const Tensor& example) {
  OCTET_CHECK(example.defined(), "fuse: expected an example input, got an undefined tensor");
  const std::vector<Tensor> params = model.parameters();
  if (params.empty()) return example;
  Tensor x = example.to(params.front().device());
  return is_floating(x.dtype()) ? x.to(params.front().dtype()) : x;
}

}  // namespace

size_t FusionReport::count(const std::string& rule) const {
  return static_cast<size_t>(
      std::count_if(groups.begin(), groups.end(), [&](const Group& g) { return g.rule == rule; }));
}

std::string FusionReport::describe() const {
  if (groups.empty()) return "nothing to fuse";
  std::vector<std::string> rules;  // in first-seen order
  for (const Group& g : groups)
    if (std::find(rules.begin(), rules.end(), g.rule) == rules.end()) rules.push_back(g.rule);
  std::string s;
  for (const std::string& r : rules) s += (s.empty() ? "" : ", ") + r + " x" + std::to_string(count(r));
  return s;
}

void unfuse(Module& model) {
  model.apply([](Module& m) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) bn->clear_fusion();
    if (auto* conv = dynamic_cast<Conv2d*>(&m)) conv->clear_fusion();
    if (auto* add = dynamic_cast<Add*>(&m)) add->clear_fusion();
    if (auto* r = dynamic_cast<ReLU*>(&m)) r->absorbed_ = false;
    if (auto* r = dynamic_cast<ReLU6*>(&m)) r->absorbed_ = false;
  });
}

FusionReport fuse(Module& model, const Tensor& example) {
  unfuse(model);
  FusionReport report;
  if (!has_fusable_module(model)) return report;
  const Trace trace(model, example_for(model, example));
  for (const Rule& rule : kRules) rule.apply(trace, report);
  return report;
}

}  // namespace octet
