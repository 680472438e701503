#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "core/autograd.h"
#include "core/cuda.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"

namespace octet {

// ---------------------------------------------------------------- shape helpers

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = -std::max<int64_t>(ndim, 1), hi = std::max<int64_t>(ndim, 1) - 1;
  OCTET_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a ", ndim, "-D tensor (expected ", lo,
              "..", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    OCTET_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static void check_shape(const Shape& shape, const char* op) {
  for (int64_t s : shape) OCTET_CHECK(s >= 0, op, ": negative size in shape ", shape);
}

// ---------------------------------------------------------------- metadata

void Tensor::check_defined(const char* what) const {
  OCTET_CHECK(impl_ != nullptr, what, ": called on an undefined tensor");
}

const Shape& Tensor::shape() const {
  check_defined("shape");
  return impl_->shape;
}
const Shape& Tensor::strides() const {
  check_defined("strides");
  return impl_->strides;
}
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::offset() const {
  check_defined("offset");
  return impl_->offset;
}
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const {
  check_defined("dtype");
  return impl_->dtype;
}
Device Tensor::device() const {
  check_defined("device");
  return impl_->storage->device();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  check_defined("storage");
  return impl_->storage;
}

bool Tensor::is_contiguous() const {
  const Shape& sh = shape();
  const Shape& st = strides();
  int64_t expected = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  check_defined("data");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(impl_->dtype);
}

template <typename T>
T Tensor::item() const {
  OCTET_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor src = device().is_cpu() ? *this : to(Device::cpu());
  Tensor dst = empty(shape(), dtype_of<T>);
  {
    NoGradGuard g;
    kernels::copy(dst, src);
  }
  const T* p = dst.data<T>();
  return std::vector<T>(p, p + dst.numel());
}

#define OCTET_INSTANTIATE(T)          \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
OCTET_INSTANTIATE(float)
OCTET_INSTANTIATE(double)
OCTET_INSTANTIATE(int8_t)
OCTET_INSTANTIATE(uint8_t)
OCTET_INSTANTIATE(int32_t)
OCTET_INSTANTIATE(int64_t)
OCTET_INSTANTIATE(BFloat16)
#undef OCTET_INSTANTIATE

// ---------------------------------------------------------------- views

static Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(impl);
}

static Shape infer_shape(Shape shape, int64_t numel, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      OCTET_CHECK(infer < 0, op, ": only one dim may be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      OCTET_CHECK(shape[i] >= 0, op, ": invalid size in shape ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    OCTET_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for ", numel, " elements");
    shape[infer] = numel / known;
  }
  OCTET_CHECK(shape_numel(shape) == numel, op, ": shape ", shape, " is invalid for ", numel, " elements");
  return shape;
}

Tensor Tensor::view(const Shape& new_shape) const {
  Shape sh = infer_shape(new_shape, numel(), "view");
  OCTET_CHECK(is_contiguous(), "view: tensor of shape ", shape(), " with strides ", strides(),
              " is not contiguous; use reshape()");
  Tensor out = make_view(*this, sh, contiguous_strides(sh), offset());
  Shape in_shape = shape();
  autograd::record("view", {*this}, {out},
                   [in_shape](const autograd::Grads& g) { return autograd::Grads{g[0].reshape(in_shape)}; });
  return out;
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  return is_contiguous() ? view(new_shape) : contiguous().view(new_shape);
}

Tensor Tensor::permute(const Shape& dims) const {
  int64_t n = dim();
  OCTET_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: expected ", n, " dims, got ", dims);
  Shape sh(n), st(n), inverse(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    OCTET_CHECK(!seen[d], "permute: dim ", d, " repeated in ", dims);
    seen[d] = true;
    sh[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  Tensor out = make_view(*this, sh, st, offset());
  autograd::record("permute", {*this}, {out},
                   [inverse](const autograd::Grads& g) { return autograd::Grads{g[0].permute(inverse)}; });
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  Shape dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::t() const {
  OCTET_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", shape());
  return transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  OCTET_CHECK(step >= 1, "slice: step must be >= 1, got ", step);
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = shape(), st = strides();
  sh[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = make_view(*this, sh, st, offset() + start * strides()[d]);
  Shape in_shape = shape();
  DType dt = dtype();
  autograd::record("slice", {*this}, {out}, [=](const autograd::Grads& g) {
    Tensor dx = zeros(in_shape, TensorOptions(dt).device(g[0].device()));
    dx.slice(d, start, end, step).copy_(g[0]);
    return autograd::Grads{dx};
  });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  OCTET_CHECK(start >= 0 && length >= 0 && start + length <= shape()[d], "narrow: range [", start, ", ", start + length,
              ") is out of bounds for dim ", d, " of size ", shape()[d]);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape()[d];
  OCTET_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  int64_t n = static_cast<int64_t>(target.size());
  OCTET_CHECK(n >= dim(), "expand: cannot expand shape ", shape(), " to ", target);
  Shape sh(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - dim());
    int64_t have = j >= 0 ? shape()[j] : 1;
    int64_t want = target[i] == -1 ? have : target[i];
    OCTET_CHECK(j >= 0 || target[i] != -1, "expand: -1 is not allowed for new leading dims in ", target);
    OCTET_CHECK(have == want || have == 1, "expand: cannot expand shape ", shape(), " to ", target);
    sh[i] = want;
    st[i] = (j >= 0 && have == want) ? strides()[j] : 0;
  }
  Tensor out = make_view(*this, sh, st, offset());
  Shape in_shape = shape();
  autograd::record("expand", {*this}, {out},
                   [in_shape](const autograd::Grads& g) { return autograd::Grads{sum_to(g[0], in_shape)}; });
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[d] != 1) return *this;
  Shape sh = shape(), st = strides();
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(*this, sh, st, offset());
  Shape in_shape = shape();
  autograd::record("squeeze", {*this}, {out},
                   [in_shape](const autograd::Grads& g) { return autograd::Grads{g[0].reshape(in_shape)}; });
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sh = shape(), st = strides();
  int64_t s = d < dim() ? strides()[d] * shape()[d] : 1;
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, s);
  Tensor out = make_view(*this, sh, st, offset());
  autograd::record("unsqueeze", {*this}, {out},
                   [d](const autograd::Grads& g) { return autograd::Grads{g[0].squeeze(d)}; });
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  OCTET_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " > end_dim ", end_dim);
  Shape sh(shape().begin(), shape().begin() + start_dim);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m *= shape()[i];
  sh.push_back(m);
  sh.insert(sh.end(), shape().begin() + end_dim + 1, shape().end());
  return reshape(sh);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), TensorOptions(dtype()).device(device()));
  kernels::copy(out, *this);
  autograd::record("clone", {*this}, {out}, [](const autograd::Grads& g) { return autograd::Grads{g[0]}; });
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor out = empty(shape(), TensorOptions(t).device(device()));
  kernels::copy(out, *this);
  if (is_floating(t) && is_floating(dtype())) {
    DType from = dtype();
    autograd::record("to", {*this}, {out}, [from](const autograd::Grads& g) { return autograd::Grads{g[0].to(from)}; });
  }
  return out;
}

Tensor Tensor::to(Device d, bool non_blocking) const {
  check_defined("to");
  if (d == device()) return *this;
  OCTET_CHECK(cuda_compiled(), "to: device ", d, " requested, but the CUDA backend is not built (configure with ",
              "-DOCTET_CUDA=ON)");
  Tensor src = contiguous();
  Tensor out = empty(shape(), TensorOptions(dtype()).device(d));
  cuda::copy_between_devices(out, src, non_blocking);
  Device from = device();
  autograd::record("to", {*this}, {out}, [from](const autograd::Grads& g) { return autograd::Grads{g[0].to(from)}; });
  return out;
}

static void check_inplace(const Tensor& t, const char* op) {
  OCTET_CHECK(!(autograd::grad_mode_enabled() && t.requires_grad()), op,
              ": in-place operation on a tensor that requires grad (use NoGradGuard or detach())");
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  OCTET_CHECK(src.defined(), "copy_: source tensor is undefined");
  OCTET_CHECK(broadcast_shapes(src.shape(), shape(), "copy_") == shape(), "copy_: source shape ", src.shape(),
              " does not broadcast to destination shape ", shape());
  kernels::copy(*this, src);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  kernels::fill(*this, value);
  storage()->bump_version();
  return *this;
}

static void random_fill(Tensor& t, bool normal, double a, double b, Generator* gen, const char* op) {
  check_inplace(t, op);
  OCTET_CHECK(is_floating(t.dtype()), op, ": expected a floating-point tensor, got ", t.dtype());
  Generator& g = gen ? *gen : default_generator();
  Tensor dst = t.is_contiguous() && t.dtype() != DType::bf16
                   ? t
                   : empty(t.shape(), TensorOptions(t.dtype() == DType::f64 ? DType::f64 : DType::f32).device(t.device()));
  uint64_t off = g.advance(static_cast<uint64_t>(t.numel()));
  if (normal)
    kernels::normal(dst, a, b, g.seed(), off);
  else
    kernels::uniform(dst, a, b, g.seed(), off);
  if (!dst.same(t)) kernels::copy(t, dst);
  t.storage()->bump_version();
}

Tensor& Tensor::uniform_(double low, double high, Generator* gen) {
  OCTET_CHECK(low <= high, "uniform_: expected low <= high, got ", low, " > ", high);
  random_fill(*this, false, low, high, gen, "uniform_");
  return *this;
}

Tensor& Tensor::normal_(double mean, double std, Generator* gen) {
  OCTET_CHECK(std >= 0, "normal_: expected std >= 0, got ", std);
  random_fill(*this, true, mean, std, gen, "normal_");
  return *this;
}

// ---------------------------------------------------------------- autograd state

bool Tensor::requires_grad() const {
  check_defined("requires_grad");
  return impl_->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  check_defined("requires_grad_");
  OCTET_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad (use detach())");
  OCTET_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating-point tensors can require grad, got ",
              dtype());
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  check_defined("is_leaf");
  return impl_->grad_fn == nullptr;
}
Tensor Tensor::grad() const {
  check_defined("grad");
  return impl_->grad;
}

void Tensor::set_grad(const Tensor& g) const {
  check_defined("set_grad");
  OCTET_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient shape ", g.shape(),
              " does not match tensor shape ", shape());
  impl_->grad = g;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  check_defined("grad_fn");
  return impl_->grad_fn;
}
uint32_t Tensor::output_nr() const {
  check_defined("output_nr");
  return impl_->output_nr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::run_backward({*this}, {grad}, retain_graph);
}

Tensor Tensor::detach() const {
  check_defined("detach");
  return make_view(*this, shape(), strides(), offset());
}

void Tensor::register_hook(GradHook hook) const {
  check_defined("register_hook");
  OCTET_CHECK(requires_grad(), "register_hook: tensor does not require grad");
  if (impl_->grad_fn)
    impl_->grad_fn->add_hook(impl_->output_nr, std::move(hook));
  else
    autograd::grad_accumulator(*this)->add_hook(0, std::move(hook));
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape() << ", dtype=" << dtype() << ", device=" << device();
  if (numel() <= 64) {
    os << ", values=[";
    std::vector<double> v = to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << std::setprecision(6) << v[i];
    os << "]";
  }
  if (requires_grad()) os << ", requires_grad";
  return os.str() + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---------------------------------------------------------------- creation

Tensor empty(const Shape& shape, TensorOptions opts) {
  check_shape(shape, "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(shape_numel(shape) * dtype_size(opts.dtype_), opts.device_);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opts.dtype_;
  Tensor t(impl);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

// A new leaf filled by `fill` before requires_grad is set (in-place fills refuse tensors needing grad).
template <typename Fill>
static Tensor filled_leaf(const Shape& shape, TensorOptions opts, Fill fill) {
  Tensor t = empty(shape, opts.requires_grad(false));
  fill(t);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  return filled_leaf(shape, opts, [value](Tensor& t) { kernels::fill(t, value); });
}

Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double value, TensorOptions opts) { return full({}, value, opts); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype()).device(t.device())); }

Tensor arange(double start, double end, double step, TensorOptions opts) {
  OCTET_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
              "arange: invalid range start=", start, " end=", end, " step=", step);
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  Tensor t = from_vector(v, {n}).to(opts.dtype_).to(opts.device_);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor arange(double end, TensorOptions opts) { return arange(0.0, end, 1.0, opts); }

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  return filled_leaf(shape, opts, [gen](Tensor& t) { t.uniform_(0.0, 1.0, gen); });
}

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  return filled_leaf(shape, opts, [gen](Tensor& t) { t.normal_(0.0, 1.0, gen); });
}

Tensor from_blob(const void* data, const Shape& shape, DType dtype) {
  check_shape(shape, "from_blob");
  OCTET_CHECK(data != nullptr || shape_numel(shape) == 0, "from_blob: null data pointer");
  Tensor t = empty(shape, dtype);
  if (t.numel() > 0) std::memcpy(t.raw_data(), data, t.numel() * dtype_size(dtype));
  return t;
}

Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  check_shape(shape, "from_storage");
  OCTET_CHECK(storage != nullptr, "from_storage: null storage");
  const size_t need = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  OCTET_CHECK(storage->nbytes() >= need, "from_storage: storage of ", storage->nbytes(), " bytes is too small for ",
              dtype, " ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

template <typename T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, bool requires_grad) {
  check_shape(shape, "from_vector");
  OCTET_CHECK(static_cast<int64_t>(data.size()) == shape_numel(shape), "from_vector: ", data.size(),
              " values do not fill shape ", shape);
  Tensor t = from_blob(data.data(), shape, dtype_of<T>);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, bool);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, bool);
template Tensor from_vector<int8_t>(const std::vector<int8_t>&, const Shape&, bool);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&, bool);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, bool);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, bool);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, bool);

}  // namespace octet
