// 2-D convolution (NCHW) with stride, padding, dilation and groups, forward and backward.
//   Tensor y = conv2d(x, w, b, Conv2dOptions().stride(2).padding(1));      // 3x3, stride 2
//   Tensor d = conv2d(x, w_dw, {}, Conv2dOptions().padding(1).groups(C));  // depthwise
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace octet {

// Fields are the recipe keys with the member suffix `_`; setters carry the key names.
struct Conv2dOptions {
  int64_t stride_h_ = 1, stride_w_ = 1;
  int64_t pad_h_ = 0, pad_w_ = 0;
  int64_t dil_h_ = 1, dil_w_ = 1;
  int64_t groups_ = 1;

  Conv2dOptions& stride(int64_t s) { return stride(s, s); }
  Conv2dOptions& stride(int64_t h, int64_t w) {
    stride_h_ = h;
    stride_w_ = w;
    return *this;
  }
  Conv2dOptions& padding(int64_t p) { return padding(p, p); }
  Conv2dOptions& padding(int64_t h, int64_t w) {
    pad_h_ = h;
    pad_w_ = w;
    return *this;
  }
  Conv2dOptions& dilation(int64_t d) { return dilation(d, d); }
  Conv2dOptions& dilation(int64_t h, int64_t w) {
    dil_h_ = h;
    dil_w_ = w;
    return *this;
  }
  Conv2dOptions& groups(int64_t g) {
    groups_ = g;
    return *this;
  }
};

// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> [N,K,P,Q] with
// P = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1 (likewise Q). f32 or f64.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), const Conv2dOptions& opts = {});

}  // namespace octet
