#include "models/small_cnn.h"

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/shape.h"

namespace octet {

SmallCnn::SmallCnn(int64_t num_classes, int64_t in_channels, int64_t image_size, double dropout)
    : in_channels_(in_channels), image_size_(image_size) {
  OCTET_CHECK(num_classes > 0 && in_channels > 0, "SmallCnn: expected positive num_classes and in_channels, got ",
              num_classes, " and ", in_channels);
  OCTET_CHECK(image_size >= 4, "SmallCnn: expected image_size >= 4, got ", image_size);
  features_ = register_module("features", std::make_shared<Sequential>());
  int64_t in = in_channels;
  for (int64_t out : {32, 64}) {
    features_->push_back(std::make_shared<Conv2d>(in, out, 3, Conv2dOptions().padding(1), /*bias=*/false));
    features_->push_back(std::make_shared<BatchNorm2d>(out));
    features_->push_back(std::make_shared<ReLU>());
    features_->push_back(std::make_shared<MaxPool2d>(2));
    in = out;
  }
  int64_t side = image_size / 4;
  classifier_ = register_module("classifier", std::make_shared<Sequential>());
  classifier_->push_back(std::make_shared<Flatten>());
  classifier_->push_back(std::make_shared<Linear>(64 * side * side, 128));
  classifier_->push_back(std::make_shared<ReLU>());
  classifier_->push_back(std::make_shared<Dropout>(dropout));
  classifier_->push_back(std::make_shared<Linear>(128, num_classes));
}

Tensor SmallCnn::forward(const Tensor& x) {
  OCTET_CHECK(
      x.defined() && x.dim() == 4 && x.size(1) == in_channels_ && x.size(2) == image_size_ && x.size(3) == image_size_,
      "SmallCnn: expected input [N, ", in_channels_, ", ", image_size_, ", ", image_size_, "], got ",
      x.defined() ? x.shape() : Shape{});
  return classifier_->forward(features_->forward(x));
}

std::string SmallCnn::extra_repr() const {
  return detail::str_cat("in_channels=", in_channels_, ", image_size=", image_size_);
}

}  // namespace octet
