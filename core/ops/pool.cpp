#include "core/ops/pool.h"

#include <utility>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/memory_format.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

namespace {

TensorOptions like(const Tensor& x) { return TensorOptions(x.dtype()).device(x.device()); }

// A size argument of one value (both dims) or two (h, w).
std::pair<int64_t, int64_t> pair_of(const char* op, const char* what, const Shape& v) {
  OCTET_CHECK(v.size() == 1 || v.size() == 2, op, ": expected ", what, " of one or two values, got ", v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

// Checks x and makes it a contiguous 4-D tensor; `batched` says whether it already was.
Tensor as_batched(const char* op, const Tensor& x, bool& batched) {
  OCTET_CHECK(x.defined(), op, ": undefined input");
  OCTET_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected 3-D [C,H,W] or 4-D [N,C,H,W] input, got ", x.shape());
  OCTET_CHECK(is_floating(x.dtype()), op, ": expected dtype f32, f64 or bf16, got ", x.dtype());
  OCTET_CHECK(x.size(-1) > 0 && x.size(-2) > 0, op, ": expected a nonempty plane, got input ", x.shape());
  batched = x.dim() == 4;
  return batched ? x : x.unsqueeze(0);
}

// Geometry of max / avg pooling with validation shared by both.
kernels::Pool2dGeometry pool_geometry(const char* op, const Tensor& x4, const Shape& kernel, const Shape& stride,
                                      const Shape& padding, const Shape& dilation) {
  auto [kh, kw] = pair_of(op, "kernel", kernel);
  auto [sh, sw] = stride.empty() ? std::pair{kh, kw} : pair_of(op, "stride", stride);
  auto [ph, pw] = pair_of(op, "padding", padding);
  auto [dh, dw] = pair_of(op, "dilation", dilation);
  OCTET_CHECK(kh > 0 && kw > 0, op, ": expected a positive kernel size, got (", kh, ", ", kw, ")");
  OCTET_CHECK(sh > 0 && sw > 0, op, ": expected a positive stride, got (", sh, ", ", sw, ")");
  OCTET_CHECK(dh > 0 && dw > 0, op, ": expected a positive dilation, got (", dh, ", ", dw, ")");
  OCTET_CHECK(ph >= 0 && pw >= 0 && ph <= kh / 2 && pw <= kw / 2, op,
              ": expected padding between 0 and half the kernel (", kh / 2, ", ", kw / 2, "), got (", ph, ", ", pw,
              ")");
  kernels::Pool2dGeometry g{};
  g.n = x4.size(0), g.c = x4.size(1), g.h = x4.size(2), g.w = x4.size(3);
  g.kh = kh, g.kw = kw, g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw, g.dil_h = dh, g.dil_w = dw;
  const int64_t span_h = dh * (kh - 1) + 1, span_w = dw * (kw - 1) + 1;
  OCTET_CHECK(span_h <= g.h + 2 * ph && span_w <= g.w + 2 * pw, op, ": kernel (", span_h, ", ", span_w,
              ") is larger than the padded input (", g.h + 2 * ph, ", ", g.w + 2 * pw, ")");
  g.p = (g.h + 2 * ph - span_h) / sh + 1;
  g.q = (g.w + 2 * pw - span_w) / sw + 1;
  return g;
}

Tensor unbatch(const Tensor& y, bool batched) { return batched ? y : y.squeeze(0); }

}  // namespace

// A channels-last input on the CPU (core/memory_format.h) keeps its format: max pooling has
// channels-last kernels; average pooling computes on an NCHW copy and makes the output
// channels-last again (two copies, against a reorder around every later convolution).

// x [N,C,H,W] -> [N,C,P,Q]
Tensor max_pool2d(const Tensor& x, Shape kernel, Shape stride, Shape padding, Shape dilation) {
  bool batched;
  Tensor x4 = as_batched("max_pool2d", x, batched);
  kernels::Pool2dGeometry g = pool_geometry("max_pool2d", x4, kernel, stride, padding, dilation);
  const bool cl = keeps_channels_last(x4);
  auto alloc = [cl](const Shape& shape, TensorOptions opts) {
    return cl ? empty_channels_last(shape, opts) : empty(shape, opts);
  };
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = cl ? x4.detach() : x4.contiguous();
  }
  Tensor out = alloc({g.n, g.c, g.p, g.q}, like(x));
  Tensor indices = alloc({g.n, g.c, g.p, g.q}, TensorOptions(DType::i64).device(x.device()));
  kernels::max_pool2d_forward(g, xc, out, indices);
  autograd::record("max_pool2d", {x4}, {out}, [g, cl, alloc, like_x = like(x), idx = indices](const Grads& gr) {
    Tensor dx = alloc({g.n, g.c, g.h, g.w}, like_x);
    kernels::max_pool2d_backward(g, cl ? to_channels_last(gr[0].detach()) : gr[0].contiguous(), idx, dx);
    return Grads{dx};
  });
  return unbatch(out, batched);
}

// x [N,C,H,W] -> [N,C,P,Q]
Tensor avg_pool2d(const Tensor& x, Shape kernel, Shape stride, Shape padding, bool count_include_pad) {
  if (keeps_channels_last(x))
    return to_channels_last(avg_pool2d(x.contiguous(), kernel, stride, padding, count_include_pad));
  bool batched;
  Tensor x4 = as_batched("avg_pool2d", x, batched);
  kernels::Pool2dGeometry g = pool_geometry("avg_pool2d", x4, kernel, stride, padding, {1, 1});
  g.count_include_pad = count_include_pad;
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = x4.contiguous();
  }
  Tensor out = empty({g.n, g.c, g.p, g.q}, like(x));
  kernels::avg_pool2d_forward(g, xc, out);
  autograd::record("avg_pool2d", {x4}, {out}, [g, like_x = like(x)](const Grads& gr) {
    Tensor dx = empty({g.n, g.c, g.h, g.w}, like_x);
    kernels::avg_pool2d_backward(g, gr[0].contiguous(), dx);
    return Grads{dx};
  });
  return unbatch(out, batched);
}

// x [N,C,H,W] -> [N,C,P,Q]
Tensor adaptive_avg_pool2d(const Tensor& x, Shape output_size) {
  bool batched;
  Tensor x4 = as_batched("adaptive_avg_pool2d", x, batched);
  auto [p, q] = pair_of("adaptive_avg_pool2d", "output_size", output_size);
  OCTET_CHECK(p > 0 && q > 0, "adaptive_avg_pool2d: expected a positive output size, got (", p, ", ", q, ")");
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = x4.contiguous();
  }
  Tensor out = empty({x4.size(0), x4.size(1), p, q}, like(x));
  kernels::adaptive_avg_pool2d_forward(xc, out);
  autograd::record("adaptive_avg_pool2d", {x4}, {out}, [in_shape = x4.shape(), like_x = like(x)](const Grads& gr) {
    Tensor dx = empty(in_shape, like_x);
    kernels::adaptive_avg_pool2d_backward(gr[0].contiguous(), dx);
    return Grads{dx};
  });
  return unbatch(out, batched);
}

}  // namespace octet
