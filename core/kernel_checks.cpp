#include "core/kernel_checks.h"

#include "core/error.h"
#include "core/memory_format.h"

namespace octet::kernels {

void check_rows(std::initializer_list<Tensor> ts, const char* op) {
  for (const Tensor& t : ts)
    OCTET_CHECK(t.dim() == 2 && t.is_contiguous(), op, ": kernel requires contiguous 2-D tensors, got shape ",
                t.shape());
}

void check_plane_tensor(const char* op, const char* what, const Tensor& t, int64_t numel) {
  OCTET_CHECK(t.is_contiguous() && t.numel() == numel, op, ": expected a contiguous ", what, " of ", numel,
              " elements, got shape ", t.shape());
}

AdaptiveShape adaptive_shape(const char* op, const Tensor& in, const Tensor& out) {
  OCTET_CHECK(in.dim() >= 2 && out.dim() == in.dim(), op, ": expected input and output of equal rank >= 2, got ",
              in.shape(), " and ", out.shape());
  OCTET_CHECK(in.is_contiguous() && out.is_contiguous(), op, ": expected contiguous tensors");
  OCTET_CHECK(in.dtype() == out.dtype(), op, ": dtypes differ: ", in.dtype(), " and ", out.dtype());
  AdaptiveShape a{1, in.size(-2), in.size(-1), out.size(-2), out.size(-1)};
  for (int64_t d = 0; d + 2 < in.dim(); ++d) {
    OCTET_CHECK(in.size(d) == out.size(d), op, ": leading dims differ: ", in.shape(), " and ", out.shape());
    a.planes *= in.size(d);
  }
  OCTET_CHECK(a.p > 0 && a.q > 0, op, ": expected a positive output size, got ", out.shape());
  return a;
}

bool in_kernel_layout(const Tensor& t, ChannelsLast allowed) {
  return t.is_contiguous() || (allowed == ChannelsLast::yes && is_channels_last(t));
}

void check_bn(const char* op, const Tensor& x, std::initializer_list<Tensor> per_channel, ChannelsLast allowed) {
  OCTET_CHECK(x.dim() == 3 && in_kernel_layout(x, allowed), op, ": kernel requires a ",
              allowed == ChannelsLast::yes ? "contiguous or channels-last" : "contiguous", " [N, C, S] input, got ",
              x.shape(), " with strides ", x.strides());
  for (const Tensor& t : per_channel)
    OCTET_CHECK(!t.defined() || (t.numel() == x.size(1) && t.is_contiguous() && t.dtype() == opmath_dtype(x.dtype())),
                op, ": per-channel tensors must be contiguous ", opmath_dtype(x.dtype()), " [", x.size(1), "]");
}

void check_bn_like_x(const char* op, const Tensor& x, std::initializer_list<Tensor> like_x) {
  for (const Tensor& t : like_x)
    OCTET_CHECK(!t.defined() ||
                    (t.shape() == x.shape() && (x.is_contiguous() ? t.is_contiguous() : t.strides() == x.strides()) &&
                     t.dtype() == x.dtype()),
                op, ": expected a ", x.dtype(), " ", x.shape(), " laid out as the input (strides ", x.strides(),
                "), got ", t.defined() ? t.shape() : Shape{}, " with strides ", t.defined() ? t.strides() : Shape{});
}

void check_conv_operands(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                         ChannelsLast allowed) {
  OCTET_CHECK(in_kernel_layout(x, allowed) && w.is_contiguous(), op, ": expected ",
              allowed == ChannelsLast::yes ? "a contiguous or channels-last" : "a contiguous",
              " input and a contiguous weight");
  OCTET_CHECK(x.dtype() == w.dtype(), op, ": dtypes differ: input ", x.dtype(), ", weight ", w.dtype());
  OCTET_CHECK(x.numel() == g.n * g.c * g.h * g.w && w.numel() == g.k * (g.c / g.groups) * g.r * g.s, op,
              ": operand sizes do not match the geometry: input ", x.shape(), ", weight ", w.shape());
}

void check_conv_grads(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout,
                      const Tensor& dx, const Tensor& dw, ChannelsLast allowed) {
  const DType grad_t = x.dtype() == DType::bf16 ? DType::f32 : x.dtype();  // autocast: bf16 in, f32 gradients
  OCTET_CHECK(in_kernel_layout(dout, allowed) && dout.dtype() == x.dtype() && dout.numel() == g.n * g.k * g.p * g.q, op,
              ": expected a ", x.dtype(), " dout of ", g.n * g.k * g.p * g.q, " elements, got ", dout.dtype(), " ",
              dout.shape());
  // autocast's bf16 activations: dx in bf16, or in f32 where a caller wants it widened
  const bool dx_dtype = dx.defined() && (dx.dtype() == grad_t || (x.dtype() == DType::bf16 && dx.dtype() == x.dtype()));
  OCTET_CHECK(!dx.defined() || (in_kernel_layout(dx, allowed) && dx_dtype && dx.numel() == x.numel()), op, ": dx must be ",
              grad_t, x.dtype() == DType::bf16 ? " or bf16" : "", ", laid out as the kernel takes it and match the input ",
              x.shape());
  OCTET_CHECK(!dw.defined() || (dw.is_contiguous() && dw.dtype() == grad_t && dw.numel() == w.numel()), op,
              ": dw must be a contiguous ", grad_t, " and match the weight ", w.shape());
}

int64_t check_lstm_gates(const char* op, const Tensor& gates, const Tensor& bias,
                         std::initializer_list<Tensor> gate_like, std::initializer_list<Tensor> state_like,
                         std::initializer_list<Tensor> optional_state_like) {
  OCTET_CHECK(gates.dim() == 2 && gates.size(1) % 4 == 0 && gates.is_contiguous(), op,
              ": expected contiguous gates [B, 4H], got shape ", gates.shape());
  OCTET_CHECK(gates.dtype() == DType::f32 || gates.dtype() == DType::f64, op, ": expected dtype f32 or f64, got ",
              gates.dtype());
  const int64_t b = gates.size(0), h = gates.size(1) / 4;
  auto check = [&](const Tensor& t, const Shape& shape) {
    OCTET_CHECK(!t.defined() || (t.shape() == shape && t.is_contiguous() && t.dtype() == gates.dtype()), op,
                ": expected a contiguous ", gates.dtype(), " tensor of shape ", shape, ", got ", t.dtype(), " ",
                t.shape());
  };
  for (const Tensor& t : gate_like) OCTET_CHECK(t.defined(), op, ": an output [B, 4H] is undefined");
  for (const Tensor& t : state_like) OCTET_CHECK(t.defined(), op, ": a required [B, H] tensor is undefined");
  check(bias, {4 * h});
  for (const Tensor& t : gate_like) check(t, {b, 4 * h});
  for (const Tensor& t : state_like) check(t, {b, h});
  for (const Tensor& t : optional_state_like) check(t, {b, h});
  return h;
}

}  // namespace octet::kernels
