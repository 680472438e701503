#include "core/ops/index.h"

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  OCTET_CHECK(x.defined() && index.defined(), "gather: undefined tensor argument");
  OCTET_CHECK(index.dtype() == DType::i64, "gather: index must be i64, got ", index.dtype());
  OCTET_CHECK(index.dim() == x.dim(), "gather: index rank ", index.dim(), " differs from input rank ", x.dim());
  int64_t d = wrap_dim(dim, x.dim(), "gather");
  for (int64_t i = 0; i < x.dim(); ++i)
    OCTET_CHECK(i == d || index.size(i) == x.size(i), "gather: index shape ", index.shape(), " must match input shape ",
                x.shape(), " except in dim ", d);
  Tensor out;
  Shape moved_shape;
  {
    NoGradGuard ng;
    Tensor xr = x.transpose(d, -1).contiguous();
    Tensor ir = index.transpose(d, -1).contiguous();
    moved_shape = xr.shape();
    Tensor rows = empty(ir.shape(), TensorOptions(x.dtype()).device(x.device()));
    kernels::gather_rows(xr.reshape({-1, xr.size(-1)}), ir.reshape({-1, ir.size(-1)}), rows.reshape({-1, ir.size(-1)}));
    out = rows.transpose(d, -1).contiguous();
  }
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor si = saved(index);
    autograd::record("gather", {x}, {out}, [si, d, moved_shape](const Grads& g) {
      Tensor dx = zeros(moved_shape, TensorOptions(g[0].dtype()).device(g[0].device()));
      Tensor ir = si->transpose(d, -1).contiguous();
      Tensor gr = g[0].transpose(d, -1).contiguous();
      kernels::scatter_add_rows(dx.reshape({-1, dx.size(-1)}), ir.reshape({-1, ir.size(-1)}),
                                gr.reshape({-1, gr.size(-1)}));
      return Grads{dx.transpose(d, -1)};
    });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  OCTET_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be 2-D [V, D]");
  OCTET_CHECK(ids.defined() && ids.dtype() == DType::i64, "embedding: ids must be an i64 tensor");
  OCTET_CHECK(padding_idx < weight.size(0), "embedding: padding_idx ", padding_idx, " is out of range for ",
              weight.size(0), " rows");
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.size(1));
  Tensor out;
  Tensor flat_ids;
  {
    NoGradGuard ng;
    flat_ids = ids.reshape({-1}).contiguous();
    out = empty({flat_ids.numel(), weight.size(1)}, TensorOptions(weight.dtype()).device(weight.device()));
    kernels::index_select_rows(weight.contiguous(), flat_ids, out);
    out = out.reshape(out_shape);
  }
  if (autograd::needs_grad({weight})) {
    autograd::SavedTensor si = saved(flat_ids);
    autograd::record("embedding", {weight}, {out}, [si, padding_idx, ws = weight.shape()](const Grads& g) {
      Tensor src = g[0].reshape({-1, ws[1]}).contiguous();
      if (padding_idx >= 0) {
        Tensor pad = scalar_tensor(static_cast<double>(padding_idx), TensorOptions(DType::i64).device(si->device()));
        Tensor keep = ne(si, pad).to(src.dtype());
        src = (src * keep.unsqueeze(1)).contiguous();
      }
      Tensor dw = zeros(ws, TensorOptions(g[0].dtype()).device(g[0].device()));
      kernels::index_add_rows(dw, si, src);
      return Grads{dw};
    });
  }
  return out;
}

}  // namespace octet
