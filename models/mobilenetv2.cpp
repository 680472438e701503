#include "models/mobilenetv2.h"

#include <algorithm>
#include <cmath>

#include "core/ops/elementwise.h"
#include "core/ops/pool.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/init.h"
#include "layers/linear.h"

namespace octet {

int64_t make_divisible(double v, int64_t divisor) {
  auto d = static_cast<double>(divisor);
  int64_t rounded = static_cast<int64_t>(v + d / 2) / divisor * divisor;
  int64_t new_v = std::max(divisor, rounded);
  if (static_cast<double>(new_v) < 0.9 * v) new_v += divisor;
  return new_v;
}

std::shared_ptr<Sequential> conv_bn_relu6(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups) {
  auto seq = std::make_shared<Sequential>();
  Conv2dOptions opts = Conv2dOptions().stride(stride).padding((kernel - 1) / 2).groups(groups);
  seq->push_back(std::make_shared<Conv2d>(in, out, kernel, opts, /*bias=*/false));
  seq->push_back(std::make_shared<BatchNorm2d>(out));
  seq->push_back(std::make_shared<ReLU6>());
  return seq;
}

InvertedResidual::InvertedResidual(int64_t in, int64_t out, int64_t stride, int64_t expand_ratio)
    : in_(in), out_(out), stride_(stride), expand_ratio_(expand_ratio), use_residual_(stride == 1 && in == out) {
  OCTET_CHECK(stride == 1 || stride == 2, "InvertedResidual: expected stride 1 or 2, got ", stride);
  OCTET_CHECK(expand_ratio >= 1, "InvertedResidual: expected expand_ratio >= 1, got ", expand_ratio);
  int64_t hidden = in * expand_ratio;
  conv_ = register_module("conv", std::make_shared<Sequential>());
  if (expand_ratio != 1) conv_->push_back(conv_bn_relu6(in, hidden, 1));
  conv_->push_back(conv_bn_relu6(hidden, hidden, 3, stride, hidden));
  conv_->push_back(std::make_shared<Conv2d>(hidden, out, 1, Conv2dOptions(), /*bias=*/false));
  conv_->push_back(std::make_shared<BatchNorm2d>(out));
  if (use_residual_) add_ = register_module("add", std::make_shared<Add>());
}

Tensor InvertedResidual::forward(const Tensor& x) {
  return add_ ? add_->forward(conv_->forward(x), x) : conv_->forward(x);
}

std::string InvertedResidual::extra_repr() const {
  return detail::str_cat(in_, ", ", out_, ", stride=", stride_, ", expand_ratio=", expand_ratio_);
}

namespace {
struct StageSpec {
  int64_t t, c, n, s;  // expansion, output channels, repeats, stride of the first block
};
constexpr StageSpec kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
}  // namespace

MobileNetV2::MobileNetV2(int64_t num_classes, double width_mult, bool cifar, int64_t in_channels, double dropout)
    : num_classes_(num_classes), width_mult_(width_mult), cifar_(cifar) {
  OCTET_CHECK(num_classes > 0, "MobileNetV2: expected num_classes > 0, got ", num_classes);
  OCTET_CHECK(width_mult > 0, "MobileNetV2: expected width_mult > 0, got ", width_mult);
  OCTET_CHECK(in_channels > 0, "MobileNetV2: expected in_channels > 0, got ", in_channels);
  int64_t channels = make_divisible(32 * width_mult);
  last_channel_ = make_divisible(1280 * std::max(1.0, width_mult));

  features_ = register_module("features", std::make_shared<Sequential>());
  features_->push_back(conv_bn_relu6(in_channels, channels, 3, cifar ? 1 : 2));
  for (const StageSpec& st : kStages) {
    int64_t out = make_divisible(static_cast<double>(st.c) * width_mult);
    int64_t stride = cifar && st.c == 24 ? 1 : st.s;
    for (int64_t i = 0; i < st.n; ++i) {
      features_->push_back(std::make_shared<InvertedResidual>(channels, out, i == 0 ? stride : 1, st.t));
      channels = out;
    }
  }
  features_->push_back(conv_bn_relu6(channels, last_channel_, 1));

  classifier_ = register_module("classifier", std::make_shared<Sequential>());
  classifier_->push_back(std::make_shared<Dropout>(dropout));
  classifier_->push_back(std::make_shared<Linear>(last_channel_, num_classes));

  apply([](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m)) {
      init::kaiming_normal_(conv->weight_, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu);
      if (conv->bias_.defined()) init::zeros_(conv->bias_);
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) {
      bn->reset_parameters();
    } else if (auto* fc = dynamic_cast<Linear*>(&m)) {
      init::normal_(fc->weight_, 0.0, 0.01);
      if (fc->bias_.defined()) init::zeros_(fc->bias_);
    }
  });
}

Tensor MobileNetV2::forward(const Tensor& x) {
  Tensor y = features_->forward(x);
  y = adaptive_avg_pool2d(y, {1, 1}).flatten(1);
  return classifier_->forward(y);
}

std::string MobileNetV2::extra_repr() const {
  return detail::str_cat("num_classes=", num_classes_, ", width_mult=", width_mult_, cifar_ ? ", cifar" : "");
}

}  // namespace octet
