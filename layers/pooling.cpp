#include "layers/pooling.h"

#include "core/ops/pool.h"

namespace octet {

static void check_window(const char* op, int64_t kernel, int64_t stride, int64_t padding) {
  OCTET_CHECK(kernel > 0, op, ": expected kernel_size > 0, got ", kernel);
  OCTET_CHECK(stride >= 0, op, ": expected stride >= 0 (0 = kernel_size), got ", stride);
  OCTET_CHECK(padding >= 0 && 2 * padding <= kernel, op, ": expected padding in [0, kernel_size/2], got ", padding,
              " for kernel_size ", kernel);
}

static void check_input(const char* op, const Tensor& x) {
  OCTET_CHECK(x.defined() && (x.dim() == 4 || x.dim() == 3), op, ": expected input [N, C, H, W] or [C, H, W], got ",
              x.defined() ? x.shape() : Shape{});
}

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : kernel_size_(kernel_size), stride_(stride == 0 ? kernel_size : stride), padding_(padding) {
  check_window("MaxPool2d", kernel_size, stride, padding);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  check_input("MaxPool2d", x);
  return max_pool2d(x, {kernel_size_}, {stride_}, {padding_});
}

std::string MaxPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", kernel_size_, ", stride=", stride_, ", padding=", padding_);
}

AvgPool2d::AvgPool2d(int64_t kernel_size, int64_t stride, int64_t padding, bool count_include_pad)
    : kernel_size_(kernel_size),
      stride_(stride == 0 ? kernel_size : stride),
      padding_(padding),
      count_include_pad_(count_include_pad) {
  check_window("AvgPool2d", kernel_size, stride, padding);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  check_input("AvgPool2d", x);
  return avg_pool2d(x, {kernel_size_}, {stride_}, {padding_}, count_include_pad_);
}

std::string AvgPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", kernel_size_, ", stride=", stride_, ", padding=", padding_,
                         count_include_pad_ ? "" : ", count_include_pad=false");
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t output_h, int64_t output_w) : output_h_(output_h), output_w_(output_w) {
  OCTET_CHECK(output_h > 0 && output_w > 0, "AdaptiveAvgPool2d: expected positive output size, got ", output_h, "x",
              output_w);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  check_input("AdaptiveAvgPool2d", x);
  return adaptive_avg_pool2d(x, {output_h_, output_w_});
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return output_h_ == output_w_ ? detail::str_cat("output_size=", output_h_)
                                : detail::str_cat("output_size=(", output_h_, ", ", output_w_, ")");
}

}  // namespace octet
