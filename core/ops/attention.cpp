#include "core/ops/attention.h"

#include <cmath>
#include <vector>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/loss.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

namespace {

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const char* op = "scaled_dot_product_attention";
  OCTET_CHECK(q.defined() && k.defined() && v.defined(), op, ": undefined q, k or v");
  OCTET_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": expected q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv], got shapes ", q.shape(), ", ", k.shape(),
              ", ", v.shape());
  const bool bf16 = autocast::lowers(op, {q, k, v});  // f32 with bf16 too
  OCTET_CHECK(bf16 || (q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating(q.dtype())), op,
              ": expected q, k, v of one dtype (f32, f64 or bf16; or f32 with bf16), got ", q.dtype(), ", ", k.dtype(),
              ", ", v.dtype());
  OCTET_CHECK(q.device() == k.device() && q.device() == v.device(), op, ": q, k, v on different devices: ", q.device(),
              ", ", k.device(), ", ", v.device());
  OCTET_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1), op,
              ": batch and heads differ: q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  OCTET_CHECK(k.size(3) == q.size(3), op, ": q and k head dims differ: ", q.shape(), " and ", k.shape());
  OCTET_CHECK(v.size(2) == k.size(2), op, ": k and v lengths differ: ", k.shape(), " and ", v.shape());
  const Tensor& m = o.key_padding_mask_;
  if (m.defined()) {
    OCTET_CHECK(m.dtype() == DType::u8 && m.shape() == (Shape{q.size(0), k.size(2)}), op,
                ": key_padding_mask must be u8 [B, Tk] = [", q.size(0), ", ", k.size(2), "], got ", m.dtype(), " ",
                m.shape());
    OCTET_CHECK(m.device() == q.device(), op, ": key_padding_mask is on ", m.device(), ", q on ", q.device());
  }
  OCTET_CHECK(o.dropout_p_ >= 0.0 && o.dropout_p_ < 1.0, op, ": dropout must be in [0, 1), got ", o.dropout_p_);
  OCTET_CHECK(!o.scale_ || std::isfinite(*o.scale_), op, ": scale must be finite, got ", o.scale_.value_or(0.0));
}

double scale_of(const Tensor& q, const AttentionOptions& o) {
  return o.scale_ ? *o.scale_ : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  check_inputs(q, k, v, o);
  kernels::AttentionGeometry g{q.size(0),      q.size(1), q.size(2),    k.size(2), q.size(3), v.size(3),
                               scale_of(q, o), o.causal_, o.dropout_p_, 0,         0};
  if (g.dropout_p > 0) {
    Generator& gen = o.generator_ ? *o.generator_ : default_generator();
    g.seed = gen.seed();
    g.offset = gen.advance(static_cast<uint64_t>(g.b * g.h * g.tq * g.tk));
  }
  Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  // autocast (core/autocast.h), or bf16 q, k, v (autocast's activations): q, k, v (and, in the
  // backward, the output's gradient) rounded to bf16, the products summed in f32, the output
  // rounded to autocast::output_dtype; the probabilities and dS rounded to bf16 before the
  // products that take them, as FlashAttention's (g.round_bf16). Both devices' kernels take the
  // bf16 tensors (the CPU's products run in bf16 on CPUs that have it, CUDA's on tensor cores) and
  // write the bf16 output, which the backward keeps with the bf16 copies (both devices' backward
  // kernels take the rounded O in their row sums of dO * O).
  const bool bf16 = autocast::lowers("scaled_dot_product_attention", {q, k, v});
  g.round_bf16 = bf16;
  const DType compute = bf16 ? DType::f32 : q.dtype(), out_t = bf16 ? autocast::output_dtype(q.device()) : compute;
  const TensorOptions opts = TensorOptions(compute).device(q.device());
  Tensor qk = qc, kk = kc, vk = vc;  // what the backward keeps
  if (bf16)
    qk = autocast::cast(qc, DType::bf16), kk = autocast::cast(kc, DType::bf16), vk = autocast::cast(vc, DType::bf16);
  Tensor pad = o.key_padding_mask_.defined() ? o.key_padding_mask_.contiguous() : Tensor();
  Tensor out = empty({g.b, g.h, g.tq, g.dv}, TensorOptions(out_t).device(q.device()));
  Tensor lse = empty({g.b, g.h, g.tq}, opts);
  {
    NoGradGuard ng;
    kernels::attention_forward(g, qk, kk, vk, pad, out, lse);
  }
  if (autograd::needs_grad({q, k, v})) {
    const bool rq = q.requires_grad(), rk = k.requires_grad(), rv = v.requires_grad();
    autograd::SavedTensor sq = saved(qk), sk = saved(kk), sv = saved(vk), sout = saved(out), slse = saved(lse);
    autograd::SavedTensor spad = saved(pad);
    autograd::record("scaled_dot_product_attention", {q, k, v}, {out}, [=](const Grads& grads) {
      NoGradGuard ng;
      const Tensor &qq = sq.get(), &kq = sk.get(), &vq = sv.get();
      const TensorOptions to = TensorOptions(compute).device(qq.device());
      Tensor dq = rq ? empty(qq.shape(), to) : Tensor();
      Tensor dk = rk ? empty(kq.shape(), to) : Tensor();
      Tensor dv = rv ? empty(vq.shape(), to) : Tensor();
      const Tensor dout = bf16 ? autocast::cast(grads[0].contiguous(), DType::bf16) : grads[0].contiguous();
      kernels::attention_backward(g, qq, kq, vq, spad, sout, dout, slse, dq, dk, dv);
      return Grads{dq, dk, dv};
    });
  }
  return out;
}

Tensor attention_dropout_keep(const Shape& shape, double p, uint64_t seed, uint64_t offset) {
  OCTET_CHECK(shape.size() == 4, "attention_dropout_keep: expected [B, H, Tq, Tk], got ", shape);
  Tensor keep = empty(shape, DType::u8);
  uint8_t* k = keep.data<uint8_t>();
  for (int64_t i = 0; i < keep.numel(); ++i) k[i] = dropout_keeps(seed, offset, static_cast<uint64_t>(i), p);
  return keep;
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                           const Tensor& keep) {
  check_inputs(q, k, v, o);
  const int64_t b = q.size(0), tq = q.size(2), tk = k.size(2);
  // allowed[b][i][j]: 1 where query i may attend key j.
  std::vector<uint8_t> allowed(static_cast<size_t>(b * tq * tk), 1);
  const Tensor pad = o.key_padding_mask_.defined() ? o.key_padding_mask_.to(Device::cpu()).contiguous() : Tensor();
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        if ((o.causal_ && j > i) || (pad.defined() && pad.data<uint8_t>()[n * tk + j] != 0))
          allowed[static_cast<size_t>((n * tq + i) * tk + j)] = 0;
  const TensorOptions opts = TensorOptions(q.dtype()).device(q.device());
  Tensor allow = from_blob(allowed.data(), {b, 1, tq, tk}, DType::u8).to(q.device());
  Tensor row_allowed = gt(sum(allow.to(q.dtype()), {3}, /*keepdim=*/true), 0.0);  // [B, 1, Tq, 1]
  Tensor scores = matmul(q, k.transpose(2, 3)) * scale_of(q, o);
  const Tensor ninf = full({}, -INFINITY, opts), zero = zeros({}, opts);
  // A fully masked row gets scores of 0 before the softmax (no NaN, even in the backward) and
  // probabilities of 0 after it, as PyTorch's safe softmax.
  scores = where(allow, scores, where(row_allowed, ninf, zero));
  Tensor p = where(row_allowed, softmax(scores, 3), zero);
  if (o.dropout_p_ > 0) {
    OCTET_CHECK(keep.defined(), "attention_reference: dropout needs the mask the fused op drew");
    p = p * (keep.to(q.dtype()).to(q.device()) * (1.0 / (1.0 - o.dropout_p_)));
  }
  return matmul(p, v);
}

}  // namespace octet
