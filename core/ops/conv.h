// 2-D convolution (NCHW) with stride, padding, dilation and groups, forward and backward.
//   Tensor y = conv2d(x, w, b, Conv2dOptions().stride(2).padding(1));      // 3x3, stride 2
//   Tensor d = conv2d(x, w_dw, {}, Conv2dOptions().padding(1).grouped(C));  // depthwise
// Field names match the recipe keys (stride_h, pad_w, dil_h, groups, ...).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace octet {

struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;

  Conv2dOptions& stride(int64_t s) { return stride(s, s); }
  Conv2dOptions& stride(int64_t h, int64_t w) { stride_h = h; stride_w = w; return *this; }
  Conv2dOptions& padding(int64_t p) { return padding(p, p); }
  Conv2dOptions& padding(int64_t h, int64_t w) { pad_h = h; pad_w = w; return *this; }
  Conv2dOptions& dilation(int64_t d) { return dilation(d, d); }
  Conv2dOptions& dilation(int64_t h, int64_t w) { dil_h = h; dil_w = w; return *this; }
  // Not `groups(g)`: a member function cannot share the field's (recipe key's) name.
  Conv2dOptions& grouped(int64_t g) { groups = g; return *this; }
};

// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> [N,K,P,Q] with
// P = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1 (likewise Q). f32 or f64.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), const Conv2dOptions& opts = {});

}  // namespace octet
