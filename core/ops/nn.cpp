#include "core/ops/nn.h"

#include "core/autograd.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/memory_format.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"

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

namespace {
DropoutShard& current_dropout_shard() {
  static DropoutShard shard;
  return shard;
}
}  // namespace

DropoutShard dropout_shard() { return current_dropout_shard(); }
DropoutShardGuard::DropoutShardGuard(DropoutShard s) : previous_(current_dropout_shard()) {
  OCTET_CHECK(s.count >= 1 && s.rank >= 0 && s.rank < s.count, "DropoutShard: expected rank in [0, count), got rank ",
              s.rank, " of ", s.count);
  current_dropout_shard() = s;
}
DropoutShardGuard::~DropoutShardGuard() { current_dropout_shard() = previous_; }

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen, int64_t batch_dim) {
  OCTET_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * zeros_like(x);
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  const DropoutShard shard = current_dropout_shard();
  Tensor u;
  if (shard.count == 1) {
    u = rand(x.shape(), opts, gen);
  } else {
    const int64_t d = wrap_dim(batch_dim, x.dim(), "dropout");
    Shape global = x.shape();
    global[d] *= shard.count;
    u = rand(global, opts, gen).narrow(d, shard.rank * x.size(d), x.size(d));
  }
  Tensor keep = lt(u, 1.0 - p).to(x.dtype());
  return x * (keep * (1.0 / (1.0 - p)));
}

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

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  OCTET_CHECK(x.defined() && k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
              "layer_norm: input shape ", x.defined() ? x.shape() : Shape{}, " does not end with normalized_shape ",
              normalized_shape);
  OCTET_CHECK(!weight.defined() || weight.shape() == normalized_shape, "layer_norm: weight shape ",
              weight.defined() ? weight.shape() : Shape{}, " differs from ", normalized_shape);
  OCTET_CHECK(!bias.defined() || bias.shape() == normalized_shape, "layer_norm: bias shape ",
              bias.defined() ? bias.shape() : Shape{}, " differs from ", normalized_shape);
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor centered = x - mu;
  Tensor y = centered * rsqrt(mean(centered * centered, dims, true) + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& invstd, int64_t count, double momentum, double eps) {
  if (!running_mean.defined() || !running_var.defined()) return;
  NoGradGuard ng;
  // invstd = 1/sqrt(var + eps)  ->  unbiased var = (1/invstd^2 - eps) * n/(n-1)
  Tensor biased_var = reciprocal(invstd * invstd) - eps;
  Tensor unbiased = biased_var * (static_cast<double>(count) / static_cast<double>(count - 1));
  running_mean.detach().copy_(running_mean * (1.0 - momentum) + mean * momentum);
  running_var.detach().copy_(running_var * (1.0 - momentum) + unbiased * momentum);
}

BatchNormGrads batch_norm_act_backward(const Tensor& dout, const Tensor& x3, const Tensor& weight, const Tensor& bias,
                                       const Tensor& mean, const Tensor& invstd, NormActivation act, bool want_dx,
                                       bool want_dweight, bool want_dbias) {
  TensorOptions o = TensorOptions(x3.dtype()).device(x3.device());
  BatchNormGrads r;
  r.dout = dout;
  if (act != NormActivation::none) {
    r.dout = empty_in_format_of(x3, x3.shape(), o);
    kernels::batch_norm_act_grad(dout, x3, weight, bias, mean, invstd, act, r.dout);
  }
  const int64_t c = x3.size(1);
  if (want_dx) r.dx = empty_in_format_of(x3, x3.shape(), o);
  if (want_dweight) r.dweight = empty({c}, o);
  if (want_dbias) r.dbias = empty({c}, o);
  kernels::batch_norm_backward(r.dout, x3, weight, mean, invstd, r.dx, r.dweight, r.dbias);
  return r;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, NormActivation act,
                  const Tensor& residual) {
  OCTET_CHECK(x.defined() && x.dim() >= 2, "batch_norm: expected input [N, C, ...], got ",
              x.defined() ? x.shape() : Shape{});
  OCTET_CHECK(!residual.defined() ||
                  (residual.shape() == x.shape() && residual.dtype() == x.dtype() && residual.device() == x.device()),
              "batch_norm: the residual must have the input's shape ", x.shape(), ", dtype ", x.dtype(),
              " and device, got ", residual.defined() ? residual.shape() : Shape{});
  int64_t c = x.size(1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias})
    OCTET_CHECK(!t->defined() || t->shape() == Shape{c}, "batch_norm: per-channel tensors must have shape [", c,
                "], got ", t->shape());
  // Per-channel tensors broadcast as [1, C, 1, ...].
  Shape bshape(x.dim(), 1);
  bshape[1] = c;
  auto per_channel = [&](const Tensor& t) { return t.reshape(bshape); };
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != 1) dims.push_back(i);
  Tensor y;
  if (training) {
    int64_t n = x.numel() / std::max<int64_t>(c, 1);
    OCTET_CHECK(n > 1, "batch_norm: training needs more than one value per channel, got input shape ", x.shape());
    OCTET_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "batch_norm: expected dtype f32 or f64, got ",
                x.dtype());
    for (const Tensor* t : {&running_mean, &running_var, &weight, &bias})
      OCTET_CHECK(!t->defined() || t->dtype() == x.dtype(), "batch_norm: per-channel tensors must be ", x.dtype(),
                  ", got ", t->dtype());
    // One fused kernel for statistics + normalization + affine, one for the whole backward. On the
    // CPU a 4-D channels-last input stays channels-last, and so do the output and the gradients
    // (core/memory_format.h); elsewhere the kernels take [N, C, S] contiguous.
    TensorOptions like = TensorOptions(x.dtype()).device(x.device());
    const bool channels_last = keeps_channels_last(x);
    const Shape shape3{x.size(0), c, x.numel() / std::max<int64_t>(x.size(0) * c, 1)};
    // t (x's shape) as the kernels' [N, C, S] in x's layout; gradients arrive in any layout.
    auto as_x3 = [channels_last, shape3](const Tensor& t) {
      return channels_last ? reshape_planes(to_channels_last(t.detach()), shape3) : t.contiguous().reshape(shape3);
    };
    // and back, from [N, C, S] to x's shape
    auto from_x3 = [channels_last](const Tensor& t, const Shape& shape) {
      return channels_last ? reshape_planes(t, shape) : t.reshape(shape);
    };
    Tensor x3 = channels_last ? reshape_planes(x, shape3) : x.contiguous().reshape(shape3);
    Tensor w = weight.defined() ? weight.contiguous() : Tensor(), b = bias.defined() ? bias.contiguous() : Tensor();
    Tensor r3 = residual.defined() ? as_x3(residual) : Tensor();
    Tensor out = empty_in_format_of(x3, shape3, like), mu = empty({c}, like), invstd = empty({c}, like);
    {
      NoGradGuard ng;
      kernels::batch_norm_forward(x3.detach(), w.defined() ? w.detach() : w, b.defined() ? b.detach() : b, eps, out, mu,
                                  invstd, act, r3.defined() ? r3.detach() : r3);
    }
    y = from_x3(out, x.shape());
    batch_norm_update_running(running_mean, running_var, mu, invstd, n, momentum, eps);
    if (autograd::needs_grad({x, weight, bias, residual})) {
      bool rx = x.requires_grad(), rw = weight.defined() && weight.requires_grad(),
           rb = bias.defined() && bias.requires_grad(), rr = residual.defined() && residual.requires_grad();
      // The activation's backward: without a residual, from the pre-activation recomputed from x
      // and the statistics (nothing more kept); with one, from the output, as relu's backward
      // (relu6's input is inside (0, 6) exactly where its output is), which the unfused relu kept
      // too and which is the next block's input, kept by its convolution anyway.
      const bool has_act = act != NormActivation::none, from_output = has_act && residual.defined();
      Tensor act_bias = has_act && !from_output ? b : Tensor(), act_out = from_output ? out : Tensor();
      autograd::record(
          "batch_norm", {x, weight, bias, residual}, {y},
          [=, sx = saved(x3), sw = saved(w), sb = saved(act_bias), sm = saved(mu), si = saved(invstd),
           so = saved(act_out)](const Grads& g) {
            const Tensor& x3v = sx.get();
            Tensor dout = as_x3(g[0]);
            if (from_output) {
              Tensor masked = empty_in_format_of(x3v, x3v.shape(), TensorOptions(x3v.dtype()).device(x3v.device()));
              kernels::binary(act == NormActivation::relu ? BinaryOp::relu_grad : BinaryOp::relu6_grad, dout, so.get(),
                              masked);
              dout = masked;
            }
            BatchNormGrads r = batch_norm_act_backward(dout, x3v, sw.get(), sb.get(), sm.get(), si.get(),
                                                       from_output ? NormActivation::none : act, rx, rw, rb);
            // The residual's gradient is the (masked) output gradient itself.
            return Grads{rx ? from_x3(r.dx, g[0].shape()) : Tensor(), r.dweight, r.dbias,
                         rr ? from_x3(r.dout, g[0].shape()) : Tensor()};
          });
    }
    return y;
  } else {
    OCTET_CHECK(running_mean.defined() && running_var.defined(),
                "batch_norm: evaluation mode needs running_mean and running_var");
    y = (x - per_channel(running_mean)) * rsqrt(per_channel(running_var) + eps);
  }
  if (weight.defined()) y = y * per_channel(weight);
  if (bias.defined()) y = y + per_channel(bias);
  if (residual.defined()) y = y + residual;
  if (act == NormActivation::relu) return relu(y);
  if (act == NormActivation::relu6) return relu6(y);
  return y;
}

LstmState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih, const Tensor& b_hh) {
  OCTET_CHECK(x.defined() && h.defined() && c.defined() && x.dim() == 2 && h.dim() == 2 && c.dim() == 2,
              "lstm_cell: expected 2-D x [B, I], h [B, H], c [B, H]");
  int64_t hs = h.size(1);
  OCTET_CHECK(c.shape() == h.shape() && x.size(0) == h.size(0), "lstm_cell: shapes differ: x ", x.shape(), ", h ",
              h.shape(), ", c ", c.shape());
  OCTET_CHECK(w_ih.defined() && w_ih.shape() == (Shape{4 * hs, x.size(1)}), "lstm_cell: w_ih must be [", 4 * hs, ", ",
              x.size(1), "], got ", w_ih.defined() ? w_ih.shape() : Shape{});
  OCTET_CHECK(w_hh.defined() && w_hh.shape() == (Shape{4 * hs, hs}), "lstm_cell: w_hh must be [", 4 * hs, ", ", hs,
              "], got ", w_hh.defined() ? w_hh.shape() : Shape{});
  Tensor gates = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh);
  Tensor i = sigmoid(gates.narrow(1, 0, hs));
  Tensor f = sigmoid(gates.narrow(1, hs, hs));
  Tensor g = tanh(gates.narrow(1, 2 * hs, hs));
  Tensor o = sigmoid(gates.narrow(1, 3 * hs, hs));
  Tensor c1 = f * c + i * g;
  return {o * tanh(c1), c1};
}

}  // namespace octet
