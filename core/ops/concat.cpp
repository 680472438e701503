#include "core/ops/concat.h"

#include <algorithm>

#include "core/autograd.h"

namespace octet {

using autograd::Grads;

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  OCTET_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors[0];
  int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    OCTET_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    OCTET_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype() && t.device() == first.device(), "cat: tensor ", i,
                " (", t.dim(), "-D ", t.dtype(), " on ", t.device(), ") does not match tensor 0 (", first.dim(), "-D ",
                first.dtype(), " on ", first.device(), ")");
    for (int64_t k = 0; k < t.dim(); ++k)
      OCTET_CHECK(k == d || t.size(k) == first.size(k), "cat: tensor ", i, " has shape ", t.shape(), ", expected ",
                  first.shape(), " outside dim ", d);
    shape[d] += t.size(d);
  }
  Tensor out = empty(shape, TensorOptions(first.dtype()).device(first.device()));
  std::vector<int64_t> starts;
  {
    NoGradGuard ng;
    int64_t at = 0;
    for (const Tensor& t : tensors) {
      starts.push_back(at);
      out.narrow(d, at, t.size(d)).copy_(t);
      at += t.size(d);
    }
  }
  std::vector<int64_t> lengths;
  for (const Tensor& t : tensors) lengths.push_back(t.size(d));
  autograd::record("cat", tensors, {out}, [d, starts, lengths](const Grads& g) {
    Grads dx;
    for (size_t i = 0; i < starts.size(); ++i) dx.push_back(g[0].narrow(d, starts[i], lengths[i]));
    return dx;
  });
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  OCTET_CHECK(x.defined(), "split: undefined tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  OCTET_CHECK(size >= 1, "split: size must be >= 1, got ", size);
  const int64_t n = x.size(d);
  std::vector<Tensor> pieces;
  std::vector<int64_t> starts, lengths;
  {
    NoGradGuard ng;  // one node below for all the pieces
    for (int64_t at = 0; at < n || (n == 0 && pieces.empty()); at += size) {
      const int64_t len = std::min(size, n - at);
      pieces.push_back(x.narrow(d, at, len));
      starts.push_back(at);
      lengths.push_back(len);
    }
  }
  const Shape shape = x.shape();
  autograd::record("split", {x}, pieces, [d, starts, lengths, shape](const Grads& g) {
    Tensor dx = empty(shape, TensorOptions(g[0].dtype()).device(g[0].device()));
    for (size_t i = 0; i < starts.size(); ++i) dx.narrow(d, starts[i], lengths[i]).copy_(g[i]);
    return Grads{dx};
  });
  return pieces;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  OCTET_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    OCTET_CHECK(t.defined() && t.shape() == tensors[0].shape(), "stack: shapes differ: ", t.shape(), " and ",
                tensors[0].shape());
    parts.push_back(t.unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace octet
