#include "core/memory_format.h"

#include <numeric>

#include "core/cpu/conv_dnnl.h"

namespace octet {

namespace {

// The order of dims in channels-last memory, outermost first: N, then the planes' dims, then C.
Shape channels_last_order(int64_t ndim) {
  Shape order(ndim);
  std::iota(order.begin() + 1, order.end() - 1, 2);
  order[0] = 0, order[ndim - 1] = 1;
  return order;
}

// The inverse permutation: channels-last memory order back to [N, C, ...].
Shape channels_first_order(int64_t ndim) {
  Shape order(ndim);
  std::iota(order.begin() + 2, order.end(), 1);
  order[0] = 0, order[1] = ndim - 1;
  return order;
}

void check_rank(const Tensor& t, const char* op) {
  OCTET_CHECK(t.defined() && (t.dim() == 3 || t.dim() == 4), op, ": expected a 3-D [N, C, S] or 4-D [N, C, H, W] ",
              "tensor, got ", t.defined() ? t.shape() : Shape{});
}

}  // namespace

Selector<ChannelsLastMode>& channels_last_selector() {
  static Selector<ChannelsLastMode> selector{
      "channels-last mode",
      "OCTET_CHANNELS_LAST",
      {{ChannelsLastMode::automatic, "auto"}, {ChannelsLastMode::on, "on"}, {ChannelsLastMode::off, "off"}},
      [](ChannelsLastMode) { return true; },
      [] { return ChannelsLastMode::automatic; }};
  return selector;
}

bool channels_last_pays(const Tensor& x) {
  // Only the CPU ops keep the format; the CUDA ones compute NCHW.
  if (!x.defined() || x.dim() != 4 || !x.device().is_cpu()) return false;
  switch (channels_last_selector().active()) {
    case ChannelsLastMode::on:
      return true;
    case ChannelsLastMode::off:
      return false;
    case ChannelsLastMode::automatic:
      break;
  }
  // Only oneDNN's f32 convolutions take channels-last as it lies; the plain kernels would copy.
  return x.dtype() == DType::f32 && cpu::conv2d_selector().active() == cpu::Conv2dPath::dnnl;
}

bool is_channels_last(const Tensor& t) {
  if (!t.defined() || (t.dim() != 3 && t.dim() != 4)) return false;
  const Shape& sh = t.shape();
  const Shape& st = t.strides();
  int64_t expected = 1;
  const Shape order = channels_last_order(t.dim());
  for (size_t i = order.size(); i-- > 0;) {
    const int64_t d = order[i];
    if (sh[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= sh[d];
  }
  return true;
}

bool keeps_channels_last(const Tensor& t) {
  return t.defined() && t.dim() == 4 && t.device().is_cpu() && !t.is_contiguous() && is_channels_last(t);
}

Tensor to_channels_last(const Tensor& t) {
  check_rank(t, "to_channels_last");
  if (is_channels_last(t)) return t;
  return t.permute(channels_last_order(t.dim())).contiguous().permute(channels_first_order(t.dim()));
}

Tensor empty_channels_last(const Shape& shape, TensorOptions opts) {
  OCTET_CHECK(shape.size() == 3 || shape.size() == 4, "empty_channels_last: expected a 3-D or 4-D shape, got ", shape);
  const int64_t ndim = static_cast<int64_t>(shape.size());
  Shape memory_shape;
  for (int64_t d : channels_last_order(ndim)) memory_shape.push_back(shape[d]);
  return empty(memory_shape, opts.requires_grad(false)).permute(channels_first_order(ndim));
}

Tensor empty_in_format_of(const Tensor& ref, const Shape& shape, TensorOptions opts) {
  if (ref.dim() == static_cast<int64_t>(shape.size()) && !ref.is_contiguous() && is_channels_last(ref))
    return empty_channels_last(shape, opts);
  return empty(shape, opts);
}

Tensor reshape_planes(const Tensor& t, const Shape& shape) {
  check_rank(t, "reshape_planes");
  OCTET_CHECK(shape.size() == 3 || shape.size() == 4, "reshape_planes: expected a 3-D or 4-D shape, got ", shape);
  if (t.is_contiguous()) return t.view(shape);
  OCTET_CHECK(is_channels_last(t), "reshape_planes: expected a contiguous or channels-last tensor, got strides ",
              t.strides());
  const int64_t ndim = static_cast<int64_t>(shape.size());
  Shape memory_shape;
  for (int64_t d : channels_last_order(ndim)) memory_shape.push_back(shape[d]);
  return t.permute(channels_last_order(t.dim())).view(memory_shape).permute(channels_first_order(ndim));
}

}  // namespace octet
