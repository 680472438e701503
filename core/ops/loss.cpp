#include "core/ops/loss.h"

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

// softmax over `dim` as rows: move dim last, run the row kernel, move it back.
static Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  if (autocast::widens(op, x)) return softmax_impl(x.to(DType::f32), dim, log);
  OCTET_CHECK(x.defined() && x.dim() >= 1, op, ": expected a tensor with at least 1 dim");
  int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor out;
  {
    NoGradGuard ng;
    Tensor moved = x.transpose(d, -1).contiguous();
    Tensor rows = empty(moved.shape(), TensorOptions(x.dtype()).device(x.device()));
    kernels::softmax_rows(log, moved.reshape({-1, moved.size(-1)}), rows.reshape({-1, moved.size(-1)}));
    out = rows.transpose(d, -1).contiguous();
  }
  if (autograd::needs_grad({x})) {
    autograd::SavedTensor y = saved(out);
    // log: g - exp(y) * sum(g), softmax: y * (g - sum(g * y)), over dim d as rows, one kernel.
    autograd::record(op, {x}, {out}, [y, d, log](const Grads& g) {
      const Tensor& yv = y.get();
      Tensor y_rows = yv.transpose(d, -1).contiguous(), g_rows = g[0].transpose(d, -1).contiguous();
      Tensor dx = empty(y_rows.shape(), TensorOptions(yv.dtype()).device(yv.device()));
      const int64_t r = y_rows.size(-1);
      kernels::softmax_backward_rows(log, y_rows.reshape({-1, r}), g_rows.reshape({-1, r}), dx.reshape({-1, r}));
      return Grads{dx.transpose(d, -1)};
    });
  }
  return out;
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

static Tensor reduce_loss(const Tensor& per_item, const Tensor& weight_sum, Reduction r) {
  switch (r) {
    case Reduction::none:
      return per_item;
    case Reduction::sum:
      return sum(per_item);
    case Reduction::mean:
      return weight_sum.defined() ? sum(per_item) / weight_sum : mean(per_item);
  }
  return per_item;
}

static void check_classification(const char* op, const Tensor& x, const Tensor& target) {
  OCTET_CHECK(x.defined() && x.dim() == 2, op, ": expected input [N, C], got ", x.defined() ? x.shape() : Shape{});
  OCTET_CHECK(target.defined() && target.dtype() == DType::i64, op, ": target must be an i64 tensor of class indices");
  OCTET_CHECK(target.dim() == 1 && target.size(0) == x.size(0), op, ": target must have shape [", x.size(0), "], got ",
              target.shape());
}

// 1 where the target is kept, 0 where it is ignore_index (u8).
static Tensor kept_targets(const Tensor& target, int64_t ignore_index) {
  return ne(target,
            scalar_tensor(static_cast<double>(ignore_index), TensorOptions(DType::i64).device(target.device())));
}

// -logp[i, target[i]] with ignored targets giving 0, and the count of kept targets.
static std::pair<Tensor, Tensor> picked_nll(const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  Tensor keep = kept_targets(target, ignore_index);
  Tensor safe = where(keep, target, zeros_like(target));
  Tensor keep_f = keep.to(logp.dtype());
  Tensor picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  return {-picked * keep_f, sum(keep_f)};
}

Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  if (autocast::widens("nll_loss", logp)) return nll_loss(logp.to(DType::f32), target, ignore_index, reduction);
  check_classification("nll_loss", logp, target);
  auto [loss, count] = picked_nll(logp, target, ignore_index);
  return reduce_loss(loss, count, reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts) {
  if (autocast::widens("cross_entropy", logits)) return cross_entropy(logits.to(DType::f32), target, opts);
  check_classification("cross_entropy", logits, target);
  double eps = opts.label_smoothing_;
  OCTET_CHECK(eps >= 0.0 && eps <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ", eps);
  const int64_t ignore_index = opts.ignore_index_;
  const Reduction reduction = opts.reduction_;
  Tensor logp, loss, count;
  {
    NoGradGuard ng;
    logp = log_softmax(logits, 1);
    auto [picked, kept] = picked_nll(logp, target, ignore_index);
    if (eps > 0.0) {
      Tensor smooth = -mean(logp, {1}) * kept_targets(target, ignore_index).to(logits.dtype());
      picked = picked * (1.0 - eps) + smooth * eps;
    }
    loss = reduce_loss(picked, kept, reduction);
    count = kept;
  }
  if (autograd::needs_grad({logits})) {
    // d loss / d logits[i, j] = coef[i] * (softmax - (1 - eps) * onehot - eps / C), coef[i] the
    // loss's gradient for row i (0 where the target is ignored): one kernel pass over the logits.
    autograd::record("cross_entropy", {logits}, {loss},
                     [logp, target, count, eps, ignore_index, reduction](const Grads& g) {
                       Tensor coef = kept_targets(target, ignore_index).to(logp.dtype()) * g[0];
                       if (reduction == Reduction::mean) coef = coef / count;
                       Tensor dx = empty(logp.shape(), TensorOptions(logp.dtype()).device(logp.device()));
                       kernels::cross_entropy_backward_rows(logp, target.contiguous(), coef.contiguous(), eps, dx);
                       return Grads{dx};
                     });
  }
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (autocast::widens("mse_loss", input) || autocast::widens("mse_loss", target))
    return mse_loss(input.to(DType::f32), target.to(DType::f32), reduction);
  OCTET_CHECK(input.defined() && target.defined() && input.shape() == target.shape(),
              "mse_loss: shapes differ: ", input.defined() ? input.shape() : Shape{}, " and ",
              target.defined() ? target.shape() : Shape{});
  Tensor d = input - target;
  return reduce_loss(d * d, Tensor(), reduction);
}

}  // namespace octet
