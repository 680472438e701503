// Tensor: a cheap handle (shared ownership) to a strided view of a Storage, with autograd state.
// Copying a Tensor copies the handle, not the data; views share storage with their base.
//   Tensor x = randn({2, 3}, TensorOptions().requires_grad(true));
//   Tensor y = (x * x).sum();  y.backward();  x.grad();   // == 2x
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/storage.h"

namespace octet {

using Shape = std::vector<int64_t>;

namespace autograd {
class Node;
}
class Generator;
struct TensorImpl;

// What a new tensor is made of. Implicit from a DType so `zeros({2}, DType::f64)` reads well.
struct TensorOptions {
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}    // NOLINT(google-explicit-constructor)
  TensorOptions(Device d) : device_(d) {}  // NOLINT(google-explicit-constructor)
  TensorOptions dtype(DType t) const {
    auto o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r = true) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
};

// A gradient hook sees the gradient flowing into a tensor and may return a replacement
// (an undefined Tensor keeps the gradient as it is).
using GradHook = std::function<class Tensor(const class Tensor&)>;

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata
  const Shape& shape() const;
  const Shape& strides() const;  // in elements
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t offset() const;  // in elements, into the storage
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;

  // ---- data access (CPU). data<T>() checks T against the dtype and points at element 0.
  void* raw_data() const;
  template <typename T>
  T* data() const {
    OCTET_CHECK(dtype() == dtype_of<T>, "data<", dtype_name(dtype_of<T>), ">: tensor has dtype ", dtype());
    return static_cast<T*>(raw_data());
  }
  // The single element of a one-element tensor, converted to T.
  template <typename T = double>
  T item() const;
  // All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- views (share storage; differentiable)
  Tensor view(const Shape& shape) const;     // needs a contiguous tensor; one dim may be -1
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow + squeeze
  Tensor expand(const Shape& shape) const;          // -1 keeps a size; new dims go in front
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // ---- copies and conversions (differentiable)
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // To another device. Host memory is ready when it returns, unless non_blocking and the host side
  // is pinned (cuda::pin_memory): then the copy is queued on the current stream and may still run.
  Tensor to(Device device, bool non_blocking = false) const;

  // ---- in-place (not recorded by autograd; refused on tensors that need grad in grad mode)
  Tensor& copy_(const Tensor& src);  // src broadcasts to this shape; dtypes convert
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& uniform_(double low = 0.0, double high = 1.0, Generator* gen = nullptr);
  Tensor& normal_(double mean = 0.0, double std = 1.0, Generator* gen = nullptr);

  // ---- autograd
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward pass reaches this leaf
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  // Backward from this tensor. A non-scalar needs `grad` of the same shape.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same data, no history
  void register_hook(GradHook hook) const;

  std::string str() const;  // shape, dtype and (small tensors) values

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // set on outputs of recorded ops
  uint32_t output_nr = 0;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves that require grad
  // A hint that travels with a parameter to whatever optimizer is built over it: an 8-bit-state
  // optimizer keeps this parameter's state in 32 bits (StableEmbedding's weight). Set by the owning
  // layer through Module::mark_keep_32bit_state; views and detached handles do not inherit it.
  bool keep_32bit_state = false;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Tensors by name, in a meaningful order (registration order for modules): parameters, buffers,
// optimizer state and checkpoint contents all travel in this form.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// ---- helpers on shapes
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); an octet::Error naming `op` if out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting of two shapes; an octet::Error naming `op` if incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- creation
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor arange(double start, double end, double step = 1.0, TensorOptions opts = {});
Tensor arange(double end, TensorOptions opts = {});
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);   // U[0,1)
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);  // N(0,1)
// Copies `data` (row-major, numel(shape) elements) into a new tensor of dtype_of<T>.
template <typename T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, bool requires_grad = false);
// Copies numel(shape) elements of `dtype` from `data` into a new CPU tensor.
Tensor from_blob(const void* data, const Shape& shape, DType dtype);
// A contiguous tensor over an existing storage (which must hold numel(shape) elements of dtype).
Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

}  // namespace octet
