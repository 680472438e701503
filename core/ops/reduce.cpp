#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

namespace {

// A reduction seen as rows: the kept dims first, the reduced dims last, as a contiguous [M, R].
struct RowView {
  Tensor rows;          // [M, R]
  Shape kept_shape;     // output shape with reduced dims dropped
  Shape keepdim_shape;  // output shape with reduced dims as 1
  Shape permuted;       // x's shape in kept-then-reduced order
  Shape perm;           // the permutation applied to x
  int64_t r = 1;
};

// The layout only (no copy); as_rows() also materializes the rows.
RowView layout(const Tensor& x, const std::vector<int64_t>& dims_in, const char* op) {
  OCTET_CHECK(x.defined(), op, ": undefined tensor argument");
  int64_t nd = x.dim();
  std::vector<bool> reduce(nd, dims_in.empty());
  for (int64_t d : dims_in) {
    int64_t w = wrap_dim(d, nd, op);
    OCTET_CHECK(nd == 0 || !reduce[w], op, ": dim ", d, " repeated");
    if (nd > 0) reduce[w] = true;
  }
  RowView v;
  Shape tail;
  for (int64_t i = 0; i < nd; ++i) {
    if (reduce[i]) {
      tail.push_back(i);
      v.r *= x.shape()[i];
      v.keepdim_shape.push_back(1);
    } else {
      v.perm.push_back(i);
      v.kept_shape.push_back(x.shape()[i]);
      v.keepdim_shape.push_back(x.shape()[i]);
    }
  }
  v.perm.insert(v.perm.end(), tail.begin(), tail.end());
  for (int64_t d : v.perm) v.permuted.push_back(x.shape()[d]);
  return v;
}

RowView as_rows(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  RowView v = layout(x, dims, op);
  NoGradGuard ng;
  v.rows = x.permute(v.perm).contiguous().reshape({shape_numel(v.kept_shape), v.r});
  return v;
}

Shape out_shape(const RowView& v, bool keepdim) { return keepdim ? v.keepdim_shape : v.kept_shape; }

Tensor reduce_forward(ReduceOp op, const RowView& v, const Tensor& x, bool keepdim) {
  Tensor out = empty({v.rows.size(0)}, TensorOptions(x.dtype()).device(x.device()));
  kernels::reduce_rows(op, v.rows, out);
  return out.reshape(out_shape(v, keepdim));
}

// A sum or sum of squares over leading dims (and, after the kept ones, trailing dims) of a
// contiguous x: x as [a, k, b] with the kept dims one block in the middle, reduced without the
// permuted copy as_rows makes (kernels::reduce_outer; the same sums in the same order). Undefined
// where that layout does not apply (nothing leading reduced: the rows need no copy then).
Tensor reduce_outer_forward(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                            const char* name) {
  const RowView v = layout(x, dims, name);
  const int64_t kept = static_cast<int64_t>(v.kept_shape.size());
  if (!x.is_contiguous() || kept == 0 || kept == x.dim() || v.perm[0] == 0) return Tensor();
  for (int64_t i = 1; i < kept; ++i)
    if (v.perm[i] != v.perm[i - 1] + 1) return Tensor();
  int64_t a = 1, k = 1, b = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < v.perm[0] ? a : d < v.perm[0] + kept ? k : b) *= x.shape()[d];
  Tensor out = empty({k}, TensorOptions(x.dtype()).device(x.device()));
  kernels::reduce_outer(op, x, a, k, b, out);
  return out.reshape(out_shape(v, keepdim));
}

// Gradient of a reduction as rows [M, R] -> back to x's shape.
Tensor from_rows(const Tensor& rows, const RowView& v) {
  Shape inverse(v.perm.size());
  for (size_t i = 0; i < v.perm.size(); ++i) inverse[v.perm[i]] = static_cast<int64_t>(i);
  return rows.reshape(v.permuted).permute(inverse);
}

void check_float(const Tensor& x, const char* op) {
  OCTET_CHECK(is_floating(x.dtype()) && x.dtype() != DType::bf16, op, ": expected dtype f32 or f64, got ", x.dtype());
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (autocast::widens("sum", x)) return sum(x.to(DType::f32), dims, keepdim);
  Tensor out = reduce_outer_forward(ReduceOp::sum, x, dims, keepdim, "sum");
  const RowView v = out.defined() ? layout(x, dims, "sum") : as_rows(x, dims, "sum");
  if (!out.defined()) out = reduce_forward(ReduceOp::sum, v, x, keepdim);
  autograd::record("sum", {x}, {out}, [ks = v.keepdim_shape, xs = x.shape()](const Grads& g) {
    return Grads{g[0].reshape(ks).expand(xs).contiguous()};
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (autocast::widens("mean", x)) return mean(x.to(DType::f32), dims, keepdim);
  check_float(x, "mean");
  int64_t n = layout(x, dims, "mean").r;
  OCTET_CHECK(n > 0, "mean: reducing over zero elements");
  return sum(x, dims, keepdim) * (1.0 / static_cast<double>(n));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  check_float(x, "var");
  int64_t n = layout(x, dims, "var").r;
  OCTET_CHECK(n - correction > 0, "var: ", n, " elements are too few for correction ", correction);
  Tensor d = x - mean(x, dims, true);
  return sum(d * d, dims, keepdim) * (1.0 / static_cast<double>(n - correction));
}

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  check_float(x, "norm");
  OCTET_CHECK(p > 0, "norm: expected p > 0, got ", p);
  if (std::isinf(p)) {
    RowView v = layout(x, dims, "norm");
    Tensor a = abs(x);
    // max over the reduced dims: flatten them to one and take the max.
    Tensor rows = a.permute(v.perm).reshape({shape_numel(v.kept_shape), v.r});
    return max(rows, 1).values.reshape(out_shape(v, keepdim));
  }
  if (p == 1.0) return sum(abs(x), dims, keepdim);
  if (p != 2.0) return pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  Tensor out = reduce_outer_forward(ReduceOp::sum_sq, x, dims, keepdim, "norm");
  const RowView v = out.defined() ? layout(x, dims, "norm") : as_rows(x, dims, "norm");
  if (!out.defined()) out = reduce_forward(ReduceOp::sum_sq, v, x, keepdim);
  kernels::unary(UnaryOp::sqrt, out, out);
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor sx = saved(x), so = saved(out);
    autograd::record("norm", {x}, {out}, [sx, so, ks = v.keepdim_shape](const Grads& g) {
      Tensor n = so->reshape(ks);
      Tensor safe = where(eq(n, 0.0), ones_like(n), n);
      return Grads{g[0].reshape(ks) * sx / safe};
    });
  }
  return out;
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_float(x, "logsumexp");
  RowView v = as_rows(x, dims, "logsumexp");
  Tensor out = reduce_forward(ReduceOp::logsumexp, v, x, keepdim);
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor sx = saved(x), so = saved(out);
    autograd::record("logsumexp", {x}, {out}, [sx, so, ks = v.keepdim_shape](const Grads& g) {
      return Grads{g[0].reshape(ks) * exp(sx - so->reshape(ks))};
    });
  }
  return out;
}

static ValuesIndices extreme(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  OCTET_CHECK(x.defined(), op, ": undefined tensor argument");
  if (x.dtype() == DType::bf16) {  // bf16 activations (logits under autocast): exact in f32
    ValuesIndices r = extreme(x.to(DType::f32), dim, keepdim, is_max);
    return {r.values.to(DType::bf16), r.indices};
  }
  int64_t d = wrap_dim(dim, x.dim(), op);
  RowView v = as_rows(x, x.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d}, op);
  OCTET_CHECK(v.r > 0, op, ": reducing over an empty dim");
  Tensor idx = empty({v.rows.size(0)}, TensorOptions(DType::i64).device(x.device()));
  kernels::arg_reduce_rows(is_max, v.rows, idx);
  Tensor values = reduce_forward(is_max ? ReduceOp::max : ReduceOp::min, v, x, keepdim);
  Shape os = out_shape(v, keepdim);
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor si = saved(idx);
    Shape rows_shape = v.rows.shape();
    v.rows = Tensor();  // the backward needs only the layout
    autograd::record(op, {x}, {values}, [si, v, rows_shape](const Grads& g) {
      Tensor rows = zeros(rows_shape, TensorOptions(g[0].dtype()).device(g[0].device()));
      kernels::scatter_add_rows(rows, si->reshape({-1, 1}), g[0].contiguous().reshape({-1, 1}));
      return Grads{from_rows(rows, v)};
    });
  }
  return {values, idx.reshape(os)};
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, true); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, false); }
Tensor max(const Tensor& x) { return max(x.reshape({-1}), 0).values; }
Tensor min(const Tensor& x) { return min(x.reshape({-1}), 0).values; }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return max(x, dim, keepdim).indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return min(x, dim, keepdim).indices;
}

}  // namespace octet
