#include "core/ops/linalg.h"

#include <algorithm>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

namespace {

// A 2-D view as the GEMM sees it: row-major (or transposed) with a leading dimension.
struct Operand {
  Tensor t;
  bool trans;
  int64_t ld;
};

Operand operand(const Tensor& m) {
  int64_t r = m.size(0), c = m.size(1);
  if ((m.stride(1) == 1 || c == 1)) {
    int64_t ld = r > 1 ? m.stride(0) : c;
    if (ld >= std::max<int64_t>(c, 1)) return {m, false, ld};
  }
  if ((m.stride(0) == 1 || r == 1)) {
    int64_t ld = c > 1 ? m.stride(1) : r;
    if (ld >= std::max<int64_t>(r, 1)) return {m, true, ld};
  }
  Tensor cm = m.contiguous();
  return {cm, false, std::max<int64_t>(c, 1)};
}

void check_mm(const char* op, const Tensor& a, const Tensor& b, int64_t dims) {
  OCTET_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  OCTET_CHECK(a.dim() == dims && b.dim() == dims, op, ": expected ", dims, "-D tensors, got shapes ", a.shape(),
              " and ", b.shape());
  if (!autocast::lowers(op, {a, b})) {
    OCTET_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.dtype(), " and ", b.dtype());
    OCTET_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64, op, ": expected dtype f32, f64 or bf16, got ",
                a.dtype());
  }
  OCTET_CHECK(a.device() == b.device(), op, ": tensors are on different devices: ", a.device(), " and ", b.device());
  OCTET_CHECK(a.size(-1) == b.size(-2), op, ": inner dimensions differ: ", a.shape(), " x ", b.shape());
}

// out [M, N] = a [M, K] x b [K, N]; out contiguous.
void gemm_into(const Tensor& a, const Tensor& b, const Tensor& out) {
  Operand oa = operand(a), ob = operand(b);
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (k == 0) {
    kernels::fill(out, 0.0);
    return;
  }
  kernels::gemm(oa.trans, ob.trans, m, n, k, 1.0, oa.t, oa.ld, ob.t, ob.ld, 0.0, out, std::max<int64_t>(n, 1));
}

// The product a [M, K] x op(b), plus bias [N] (or undefined), as one node recorded as `op` against a,
// b and bias: op(b) = b^T with `trans_b` (a linear layer's weight [N, K], whose gradient is then
// formed as [N, K] directly, not as a transposed view copied back), else b [K, N] (or, with
// `batched`, 3-D operands). With `lower` (autocast's bf16 product): ab and bb are a's and b's bf16
// casts, the products accumulate in f32 (the bias added to the f32 sums) and the output is
// rounded once to autocast::output_dtype (bf16 on the CPU); the backward's products run in bf16
// too, the gradients of bf16 inputs in the output's dtype, of f32 ones (weights) in f32. Without
// it, ab and bb are a and b and everything is in their dtype.
Tensor product_node(const char* op, const Tensor& a, const Tensor& b, const Tensor& ab, const Tensor& bb, bool batched,
                    bool trans_b, bool lower, const Tensor& bias = Tensor()) {
  const DType out_t = lower ? autocast::output_dtype(a.device()) : a.dtype(), acc_t = lower ? DType::f32 : a.dtype();
  auto product = [batched](const Tensor& x, const Tensor& y, DType dtype) {  // no graph
    const TensorOptions o = TensorOptions(dtype).device(x.device());
    if (!batched) {
      Tensor out = empty({x.size(0), y.size(1)}, o);
      gemm_into(x, y, out);
      return out;
    }
    Tensor out = empty({x.size(0), x.size(1), y.size(2)}, o);
    for (int64_t i = 0; i < x.size(0); ++i) gemm_into(x.select(0, i), y.select(0, i), out.select(0, i));
    return out;
  };
  const int64_t last = batched ? 2 : 1, first = batched ? 1 : 0;
  Tensor out;
  {
    NoGradGuard ng;
    const Tensor rhs = trans_b ? bb.t() : bb;
    if (!bias.defined()) {
      out = product(ab, rhs, out_t);
    } else {
      const Tensor sum = product(ab, rhs, acc_t);
      out = out_t == acc_t ? sum : empty(sum.shape(), TensorOptions(out_t).device(sum.device()));
      kernels::binary(BinaryOp::add, sum, bias.detach(), out);
    }
  }
  if (autograd::needs_grad({a, b, bias})) {
    const bool ra = a.requires_grad(), rb = b.requires_grad(), rbias = bias.defined() && bias.requires_grad();
    auto grad_dtype = [&](const Tensor& t) { return lower && t.dtype() == DType::bf16 ? out_t : t.dtype(); };
    const DType ta = grad_dtype(a), tb = grad_dtype(b);
    // Saved with their versions: an operand changed in place before the backward is an error.
    autograd::record(op, {a, b, bias}, {out}, [=, sa = autograd::saved(ab), sb = autograd::saved(bb)](const Grads& g) {
      NoGradGuard ng;
      const Tensor &ab = sa.get(), &bb = sb.get();
      Tensor gb = lower ? autocast::cast(g[0], DType::bf16) : g[0];
      Tensor da = ra ? product(gb, trans_b ? bb : bb.transpose(first, last), ta) : Tensor();
      Tensor db = rb ? (trans_b ? product(gb.t(), ab, tb) : product(ab.transpose(first, last), gb, tb)) : Tensor();
      // The bias gradient, sum over the rows of g, as a product with a row of ones: columns summed
      // in place (a sum over dim 0 transposed g first) and, lowered, accumulated in f32.
      Tensor dbias;
      if (rbias) dbias = product(ones({1, gb.size(0)}, TensorOptions(gb.dtype()).device(gb.device())), gb, acc_t);
      return Grads{da, db, rbias ? dbias.reshape({-1}) : Tensor()};
    });
  }
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_mm("mm", a, b, 2);
  if (autocast::lowers("mm", {a, b}))
    return product_node("mm", a, b, autocast::cast(a, DType::bf16), autocast::cast(b, DType::bf16), false, false, true);
  Tensor out = empty({a.size(0), b.size(1)}, TensorOptions(a.dtype()).device(a.device()));
  {
    NoGradGuard ng;
    gemm_into(a, b, out);
  }
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sa = saved(a), sb = saved(b);
    bool ra = a.requires_grad(), rb = b.requires_grad();
    autograd::record("mm", {a, b}, {out}, [sa, sb, ra, rb](const Grads& g) {
      return Grads{ra ? mm(g[0], sb->t()) : Tensor(), rb ? mm(sa->t(), g[0]) : Tensor()};
    });
  }
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_mm("bmm", a, b, 3);
  OCTET_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", a.shape(), " x ", b.shape());
  if (autocast::lowers("bmm", {a, b}))
    return product_node("bmm", a, b, autocast::cast(a, DType::bf16), autocast::cast(b, DType::bf16), true, false, true);
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, TensorOptions(a.dtype()).device(a.device()));
  {
    NoGradGuard ng;
    for (int64_t i = 0; i < a.size(0); ++i) gemm_into(a.select(0, i), b.select(0, i), out.select(0, i));
  }
  if (autograd::needs_grad({a, b})) {
    autograd::SavedTensor sa = saved(a), sb = saved(b);
    bool ra = a.requires_grad(), rb = b.requires_grad();
    autograd::record("bmm", {a, b}, {out}, [sa, sb, ra, rb](const Grads& g) {
      return Grads{ra ? bmm(g[0], sb->transpose(1, 2)) : Tensor(), rb ? bmm(sa->transpose(1, 2), g[0]) : Tensor()};
    });
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  OCTET_CHECK(a.defined() && b.defined(), "matmul: undefined tensor argument");
  OCTET_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must be at least 1-D, got shapes ", a.shape(), " and ",
              b.shape());
  if (a.dim() == 1 && b.dim() == 1) return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  OCTET_CHECK(a.size(-1) == b.size(-2), "matmul: inner dimensions differ: ", a.shape(), " x ", b.shape());
  int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (b.dim() == 2) {
    // [..., M, K] x [K, N]: one GEMM over all rows.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(n);
    return mm(a.reshape({-1, k}), b).reshape(out_shape);
  }
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape ea = batch, eb = batch, out_shape = batch;
  ea.insert(ea.end(), {m, k});
  eb.insert(eb.end(), {k, n});
  out_shape.insert(out_shape.end(), {m, n});
  int64_t nb = shape_numel(batch);
  return bmm(a.expand(ea).reshape({nb, m, k}), b.expand(eb).reshape({nb, k, n})).reshape(out_shape);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  OCTET_CHECK(weight.defined() && weight.dim() == 2, "linear: weight must be 2-D [out, in], got ",
              weight.defined() ? weight.shape() : Shape{});
  OCTET_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input's last dim must be ",
              weight.size(1), ", got shape ", x.defined() ? x.shape() : Shape{});
  OCTET_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "linear: bias must have shape [",
              weight.size(0), "], got ", bias.defined() ? bias.shape() : Shape{});
  // One node against the weight itself (its gradient formed as [out, in]): autocast's bf16 product
  // (the weight cast once per scope; the bias added to the f32 sums before they are rounded), or the
  // plain one where x, weight and bias share a float dtype.
  const bool lower = autocast::lowers("linear", {x, weight}) && (!bias.defined() || bias.dtype() == DType::f32);
  const bool plain = (x.dtype() == DType::f32 || x.dtype() == DType::f64) && weight.dtype() == x.dtype() &&
                     (!bias.defined() || bias.dtype() == x.dtype()) && weight.device() == x.device() &&
                     (!bias.defined() || bias.device() == x.device());
  if (lower || plain) {
    const int64_t in = weight.size(1);
    Shape out_shape(x.shape().begin(), x.shape().end() - 1);
    out_shape.push_back(weight.size(0));
    Tensor x2 = x.reshape({-1, in});
    return product_node("linear", x2, weight, lower ? autocast::cast(x2, DType::bf16) : x2,
                        lower ? autocast::cast(weight, DType::bf16) : weight, false, true, lower, bias)
        .reshape(out_shape);
  }
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? y + bias : y;
}

}  // namespace octet
