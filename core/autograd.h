// Define-by-run autograd. An op that has a differentiable input records a Node holding its
// backward (written in tensor ops, so it runs on every device) and the edges to its inputs'
// nodes; Tensor::backward() runs the recorded graph in reverse topological order.
//   Tensor y = some_kernel(x);
//   autograd::record("relu", {x}, {y}, [m = saved(y > 0)](const Grads& g) { return Grads{g[0] * m}; });
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace octet::autograd {

using Grads = std::vector<Tensor>;
// Gets the gradients of a node's outputs (zeros for outputs no gradient reached) and returns
// one gradient per input (undefined for inputs that do not need one).
using BackwardFn = std::function<Grads(const Grads& dout)>;

struct Edge {
  std::shared_ptr<Node> node;  // null: the input needs no gradient
  uint32_t input_nr = 0;       // which output of `node` the input was
};

struct OutputMeta {
  Shape shape;
  DType dtype;
  Device device;
};

class Node {
 public:
  Node(std::string name, std::vector<Edge> next, std::vector<OutputMeta> outputs, BackwardFn fn);
  virtual ~Node() = default;

  const std::string& name() const { return name_; }
  const std::vector<Edge>& next_edges() const { return next_; }
  const std::vector<OutputMeta>& outputs() const { return outputs_; }
  uint64_t sequence_nr() const { return seq_; }
  void add_hook(uint32_t output_nr, GradHook hook) { hooks_.at(output_nr).push_back(std::move(hook)); }

  // Runs hooks on `dout`, then the backward. Throws if the graph was released.
  virtual Grads apply(Grads dout);
  // Frees saved tensors after a backward without retain_graph.
  virtual void release() {
    fn_ = nullptr;
    released_ = true;
  }

 protected:
  void run_hooks(Grads& dout);
  std::string name_;
  std::vector<Edge> next_;
  std::vector<OutputMeta> outputs_;
  std::vector<std::vector<GradHook>> hooks_;
  BackwardFn fn_;
  bool released_ = false;
  uint64_t seq_;
};

// The node at the end of every leaf that requires grad: adds the incoming gradient to .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  Grads apply(Grads dout) override;
  void release() override {}  // nothing saved; the leaf may be used again
  // Runs after every accumulation into the leaf's .grad, which then holds the gradient so far
  // (how DistributedDataParallel learns that a parameter's gradient is complete). A hook lives as
  // long as this node: keep the node (grad_accumulator(leaf)) to keep the hook.
  void add_post_hook(std::function<void()> hook) { post_hooks_.push_back(std::move(hook)); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
  std::vector<std::function<void()>> post_hooks_;
};

// ---- grad mode
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// Returns the AccumulateGrad node of a leaf that requires grad (created on first use).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// The edge a gradient for `t` flows along (null node if t needs no gradient).
Edge edge_of(const Tensor& t);

// A tensor kept inside a backward closure: a detached handle (an output captured with its grad_fn
// would keep its own node alive in a cycle) and the version of its storage when it was saved.
// Reading it after an in-place write (copy_, fill_, ... under NoGradGuard) would give silently
// wrong gradients, so that is an octet::Error instead.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t)
      : t_(t.defined() ? t.detach() : t), version_(t.defined() ? t.storage()->version() : 0) {}
  const Tensor& get() const {
    OCTET_CHECK(!t_.defined() || t_.storage()->version() == version_, "backward: a tensor of shape ", t_.shape(),
                " saved for the backward pass was modified in place "
                "after it was used (storage version ",
                t_.storage()->version(), ", saved at ", version_, ")");
    return t_;
  }
  operator const Tensor&() const { return get(); }  // NOLINT(google-explicit-constructor)
  const Tensor* operator->() const { return &get(); }

 private:
  Tensor t_;
  uint64_t version_ = 0;
};

inline SavedTensor saved(const Tensor& t) { return SavedTensor(t); }

// True when an op over `inputs` must record a node.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records a node named `name` linking `outputs` to `inputs` when grad mode is on and some input
// requires grad; otherwise does nothing. Outputs become non-leaf tensors that require grad.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn);

// Runs backward from `roots` with `grads` (one per root; undefined = ones for scalars).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace octet::autograd

namespace octet {
// Disables recording in its scope (evaluation, optimizer updates, in-place initialization).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_mode_enabled()) { autograd::set_grad_mode(false); }
  ~NoGradGuard() { autograd::set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
}  // namespace octet
