// Convolution geometries the INT8 convolution tests share (tests/quant/test_int8_conv.cpp,
// tests/quant/test_int8_cuda_emulation.cpp, tests/cuda/test_cuda_int8.cpp): odd sizes, channel counts that are not
// multiples of four, strides, padding (larger than the kernel too), dilation, groups, depthwise, pointwise, a kernel as
// large as the input, and one whose every code is +-127.
//   for (const Int8ConvCase& c : int8_conv_cases()) { Conv2dGeometry g = int8_conv_geometry(c); ... }
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/kernels.h"
#include "core/ops/conv.h"

namespace octet::quant {

struct Int8ConvCase {
  std::string name;
  int64_t n, c, h, w, k, r, s;
  Conv2dOptions opts;
  bool bias = true;
  double scale = 1.0;  // > 1: every value is +-scale, so every code is +-127
};

inline void PrintTo(const Int8ConvCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<Int8ConvCase> int8_conv_cases() {
  return {
      {"basic3x3", 2, 3, 9, 7, 4, 3, 3, Conv2dOptions().padding(1)},
      {"stride2", 2, 3, 9, 7, 4, 3, 3, Conv2dOptions().stride(2)},
      {"stride2_pad1_odd_channels", 2, 5, 10, 9, 7, 3, 3, Conv2dOptions().stride(2).padding(1), false},
      {"stride_mixed_dilated", 1, 3, 10, 6, 4, 3, 2, Conv2dOptions().stride(2, 1).padding(1, 0).dilation(1, 2)},
      {"stride3", 2, 6, 11, 10, 5, 3, 3, Conv2dOptions().stride(3).padding(1)},
      {"dilation2", 1, 2, 11, 9, 3, 3, 3, Conv2dOptions().dilation(2).padding(2)},
      {"large_pad", 1, 2, 5, 5, 3, 3, 3, Conv2dOptions().padding(3)},
      {"groups2", 2, 4, 7, 7, 6, 3, 3, Conv2dOptions().padding(1).groups(2)},
      {"groups3_strided", 1, 6, 9, 8, 3, 2, 3, Conv2dOptions().stride(2, 1).padding(1, 0).groups(3)},
      {"groups2_wide", 1, 18, 6, 5, 22, 3, 3, Conv2dOptions().padding(1).groups(2)},
      {"depthwise", 2, 5, 9, 9, 5, 3, 3, Conv2dOptions().stride(2).padding(1).groups(5)},
      {"depthwise_x2", 2, 3, 8, 7, 6, 3, 3, Conv2dOptions().padding(1).groups(3)},
      {"depthwise_nonsquare", 1, 4, 7, 10, 8, 3, 2, Conv2dOptions().stride(1, 2).padding(1, 1).dilation(2, 1).groups(4),
       false},
      {"depthwise_dilated", 2, 4, 9, 8, 4, 3, 3, Conv2dOptions().padding(2, 1).dilation(2, 1).groups(4)},
      {"depthwise_stride3", 2, 3, 11, 10, 3, 3, 3, Conv2dOptions().stride(3).padding(1).groups(3)},
      {"depthwise_s2_dilated_x2", 1, 2, 12, 9, 4, 3, 3, Conv2dOptions().stride(2).padding(2).dilation(2).groups(2)},
      {"depthwise_s2_5x5", 2, 3, 13, 12, 3, 5, 5, Conv2dOptions().stride(2).padding(2).groups(3), false},
      {"depthwise_big_pad", 1, 3, 5, 5, 3, 3, 3, Conv2dOptions().padding(3).groups(3)},
      {"pointwise", 2, 5, 6, 7, 4, 1, 1, Conv2dOptions()},
      {"pointwise_groups", 2, 4, 5, 3, 6, 1, 1, Conv2dOptions().groups(2)},
      {"pointwise_stride2", 1, 3, 7, 5, 2, 1, 1, Conv2dOptions().stride(2)},
      {"pointwise_pad1", 1, 3, 4, 5, 2, 1, 1, Conv2dOptions().padding(1)},
      {"pointwise_stride2_pad1", 1, 3, 7, 5, 2, 1, 1, Conv2dOptions().stride(2).padding(1)},
      {"kernel_equals_input", 2, 2, 4, 3, 3, 4, 3, Conv2dOptions()},
      {"single_channel_in", 2, 1, 9, 9, 3, 5, 5, Conv2dOptions().padding(2)},
      {"wide_k", 2, 16, 5, 5, 40, 3, 3, Conv2dOptions().padding(1)},
      {"saturated", 2, 9, 6, 6, 6, 3, 3, Conv2dOptions().padding(1), true, 1e6},
  };
}

inline kernels::Conv2dGeometry int8_conv_geometry(const Int8ConvCase& c) {
  const Conv2dOptions& o = c.opts;
  kernels::Conv2dGeometry g{};
  g.n = c.n, g.c = c.c, g.h = c.h, g.w = c.w, g.k = c.k, g.r = c.r, g.s = c.s;
  g.p = (c.h + 2 * o.pad_h_ - o.dil_h_ * (c.r - 1) - 1) / o.stride_h_ + 1;
  g.q = (c.w + 2 * o.pad_w_ - o.dil_w_ * (c.s - 1) - 1) / o.stride_w_ + 1;
  g.stride_h = o.stride_h_, g.stride_w = o.stride_w_, g.pad_h = o.pad_h_, g.pad_w = o.pad_w_;
  g.dil_h = o.dil_h_, g.dil_w = o.dil_w_, g.groups = o.groups_;
  return g;
}

}  // namespace octet::quant
