#include "core/autograd.h"

#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/ops/elementwise.h"

namespace octet::autograd {

static std::atomic<uint64_t> next_sequence_nr{0};
static thread_local bool grad_mode = true;

bool grad_mode_enabled() { return grad_mode; }
void set_grad_mode(bool enabled) { grad_mode = enabled; }

Node::Node(std::string name, std::vector<Edge> next, std::vector<OutputMeta> outputs, BackwardFn fn)
    : name_(std::move(name)),
      next_(std::move(next)),
      outputs_(std::move(outputs)),
      hooks_(outputs_.size()),
      fn_(std::move(fn)),
      seq_(next_sequence_nr++) {}

void Node::run_hooks(Grads& dout) {
  for (size_t i = 0; i < hooks_.size(); ++i) {
    for (auto& hook : hooks_[i]) {
      Tensor replaced = hook(dout[i]);
      if (!replaced.defined()) continue;
      OCTET_CHECK(replaced.shape() == outputs_[i].shape, "gradient hook on ", name_, " returned shape ",
                  replaced.shape(), ", expected ", outputs_[i].shape);
      dout[i] = replaced;
    }
  }
}

Grads Node::apply(Grads dout) {
  OCTET_CHECK(!released_, "backward: trying to backward through the graph a second time (through ", name_,
              "); pass retain_graph=true to the first backward");
  run_hooks(dout);
  Grads dx = fn_(dout);
  OCTET_CHECK(dx.size() == next_.size(), "backward of ", name_, " returned ", dx.size(), " gradients for ",
              next_.size(), " inputs");
  return dx;
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf)
    : Node("AccumulateGrad", {}, {{leaf->shape, leaf->dtype, leaf->storage->device()}}, nullptr), leaf_(leaf) {}

Grads AccumulateGrad::apply(Grads dout) {
  run_hooks(dout);
  auto leaf = leaf_.lock();
  if (!leaf) return {};
  Tensor g = dout[0];
  // Always own the stored gradient: dout may alias another tensor or be a broadcast view.
  leaf->grad = leaf->grad.defined() ? add(leaf->grad, g) : g.clone();
  for (const auto& hook : post_hooks_) hook();
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  TensorImpl* impl = leaf.impl();
  if (auto acc = impl->grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
  impl->grad_accumulator = acc;
  return acc;
}

Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  return {grad_accumulator(t), 0};
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn) {
  if (!needs_grad(inputs)) return;
  std::vector<Edge> next;
  next.reserve(inputs.size());
  for (const Tensor& t : inputs) next.push_back(edge_of(t));
  std::vector<OutputMeta> meta;
  meta.reserve(outputs.size());
  for (const Tensor& t : outputs) meta.push_back({t.shape(), t.dtype(), t.device()});
  auto node = std::make_shared<Node>(name, std::move(next), std::move(meta), std::move(fn));
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* impl = outputs[i].impl();
    // Integer outputs (argmax indices) carry no gradient.
    if (!is_floating(impl->dtype)) continue;
    impl->grad_fn = node;
    impl->output_nr = static_cast<uint32_t>(i);
    impl->requires_grad = true;
  }
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  OCTET_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(), " gradients");
  NoGradGuard no_grad;  // backward closures compute in tensor ops without recording

  // Gradients waiting at each node's outputs.
  std::unordered_map<Node*, Grads> pending;
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    OCTET_CHECK(r.defined(), "backward: root tensor is undefined");
    OCTET_CHECK(r.requires_grad(), "backward: tensor does not require grad and has no grad_fn");
    Tensor g = grads[i];
    if (!g.defined()) {
      OCTET_CHECK(r.numel() == 1, "backward: grad can be implicitly created only for scalar outputs; got shape ",
                  r.shape(), " (pass a gradient of that shape)");
      g = ones(r.shape(), TensorOptions(r.dtype()).device(r.device()));
    } else {
      OCTET_CHECK(g.shape() == r.shape(), "backward: gradient shape ", g.shape(), " does not match output shape ",
                  r.shape());
      OCTET_CHECK(g.dtype() == r.dtype(), "backward: gradient dtype ", g.dtype(), " does not match output dtype ",
                  r.dtype());
    }
    Edge e = edge_of(r);
    Grads& buf = pending[e.node.get()];
    buf.resize(e.node->outputs().size());
    buf[e.input_nr] = buf[e.input_nr].defined() ? add(buf[e.input_nr], g) : g;
    starts.push_back(e.node);
  }

  // Count how many edges lead into each node reachable from the roots.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& s : starts)
    if (seen.insert(s.get()).second) stack.push_back(s.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.node) continue;
      deps[e.node.get()]++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  // Process nodes whose every consumer has run; later-created nodes first among those ready.
  auto later = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence_nr() < b->sequence_nr();
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later)> ready(later);
  std::unordered_set<Node*> queued;
  for (auto& s : starts)
    if (deps[s.get()] == 0 && queued.insert(s.get()).second) ready.push(s);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    auto it = pending.find(node.get());
    bool reached = it != pending.end();
    Grads dout = reached ? std::move(it->second) : Grads{};
    if (reached) pending.erase(it);
    if (!reached) {
      // No gradient flowed into this node: nothing to propagate, but its inputs may still wait on it.
      for (const Edge& e : node->next_edges())
        if (e.node && --deps[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node);
      continue;
    }
    dout.resize(node->outputs().size());
    for (size_t i = 0; i < dout.size(); ++i) {
      if (!dout[i].defined()) {
        const OutputMeta& m = node->outputs()[i];
        dout[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
      }
    }
    Grads dx = node->apply(std::move(dout));
    if (!retain_graph) node->release();
    const auto& next = node->next_edges();
    for (size_t i = 0; i < next.size(); ++i) {
      const Edge& e = next[i];
      if (!e.node) continue;
      if (i < dx.size() && dx[i].defined()) {
        const OutputMeta& m = e.node->outputs()[e.input_nr];
        OCTET_CHECK(dx[i].shape() == m.shape, "backward of ", node->name(), ": gradient ", i, " has shape ",
                    dx[i].shape(), ", expected ", m.shape);
        OCTET_CHECK(dx[i].device() == m.device, "backward of ", node->name(), ": gradient ", i, " is on ",
                    dx[i].device(), ", expected ", m.device);
        // A gradient takes its input's dtype (as PyTorch's engine casts it): an op computing in
        // another dtype (autocast's bf16 products of an f32 input, or the reverse) need not cast.
        if (dx[i].dtype() != m.dtype && is_floating(m.dtype)) dx[i] = dx[i].to(m.dtype);
        Grads& buf = pending[e.node.get()];
        buf.resize(e.node->outputs().size());
        buf[e.input_nr] = buf[e.input_nr].defined() ? add(buf[e.input_nr], dx[i]) : dx[i];
      }
      if (--deps[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node);
    }
  }
}

}  // namespace octet::autograd
