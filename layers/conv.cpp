#include "layers/conv.h"

#include <cmath>

#include "core/memory_format.h"
#include "layers/fusion.h"
#include "layers/init.h"
#include "quant/int8_conv.h"

namespace octet {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& opts, bool bias)
    : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size), options_(opts) {
  OCTET_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0,
              "Conv2d: expected positive in_channels, out_channels and kernel_size, got ", in_channels, ", ",
              out_channels, ", ", kernel_size);
  OCTET_CHECK(opts.groups_ > 0 && in_channels % opts.groups_ == 0 && out_channels % opts.groups_ == 0,
              "Conv2d: groups must divide in_channels and out_channels, got groups=", opts.groups_,
              " for in_channels=", in_channels, ", out_channels=", out_channels);
  OCTET_CHECK(opts.stride_h_ > 0 && opts.stride_w_ > 0 && opts.dil_h_ > 0 && opts.dil_w_ > 0 && opts.pad_h_ >= 0 &&
                  opts.pad_w_ >= 0,
              "Conv2d: expected positive stride and dilation and non-negative padding");
  weight_ = register_parameter("weight", empty({out_channels, in_channels / opts.groups_, kernel_size, kernel_size}));
  if (bias) bias_ = register_parameter("bias", empty({out_channels}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight_, std::sqrt(5.0));
  double bound = 1.0 / std::sqrt(static_cast<double>(init::compute_fans(weight_).fan_in));
  if (bias_.defined()) init::uniform_(bias_, -bound, bound);
}

Tensor Conv2d::forward(const Tensor& x) {
  OCTET_CHECK(x.defined() && x.dim() == 4 && x.size(1) == in_channels_, "Conv2d: expected input [N, ", in_channels_,
              ", H, W], got ", x.defined() ? x.shape() : Shape{});
  const Tensor in = channels_last_ == ChannelsLastAt::input ? to_format(x) : x;
  Tensor y;
  if (const std::shared_ptr<BatchNorm2d> bn = input_bn_.lock(); bn && applies(*bn)) {
    bn->check_input(in);
    const quant::BatchNormArgs args{bn->running_mean_, bn->running_var_, bn->weight_, bn->bias_,
                                    bn->momentum_,     bn->eps_,         bn->act_};
    y = quant::int8_conv2d_batch_norm(in, args, weight_, bias_, options_, int8_);
    bn->count_batch();
  } else if (int8_) {
    y = quant::int8_conv2d(in, weight_, bias_, options_, int8_);
  } else {
    y = conv2d(in, weight_, bias_, options_);
  }
  if (channels_last_ == ChannelsLastAt::output) y = to_format(y);
  fusion::record(*this, {x}, y);
  return y;
}

bool Conv2d::applies(const BatchNorm2d& bn) const {
  return int8_ && input_bn_.lock().get() == &bn && bn.fusable() && quant::int8_bn_fusion();
}

Tensor Conv2d::to_format(const Tensor& t) const {
  const bool wanted =
      channels_last_pays(t) && (channels_last_auto_ || channels_last_selector().active() == ChannelsLastMode::on);
  return wanted ? to_channels_last(t) : t;
}

void Conv2d::clear_fusion() {
  input_bn_.reset();
  channels_last_ = ChannelsLastAt::none;
  channels_last_auto_ = false;
}

std::string Conv2d::extra_repr() const {
  const Conv2dOptions& o = options_;
  auto pair = [](int64_t h, int64_t w) { return h == w ? std::to_string(h) : detail::str_cat("(", h, ", ", w, ")"); };
  std::string s = detail::str_cat(in_channels_, ", ", out_channels_, ", kernel_size=", kernel_size_);
  if (o.stride_h_ != 1 || o.stride_w_ != 1) s += ", stride=" + pair(o.stride_h_, o.stride_w_);
  if (o.pad_h_ != 0 || o.pad_w_ != 0) s += ", padding=" + pair(o.pad_h_, o.pad_w_);
  if (o.dil_h_ != 1 || o.dil_w_ != 1) s += ", dilation=" + pair(o.dil_h_, o.dil_w_);
  if (o.groups_ != 1) s += ", groups=" + std::to_string(o.groups_);
  if (!bias_.defined()) s += ", bias=false";
  if (int8_) s += ", int8";
  return s;
}

}  // namespace octet
