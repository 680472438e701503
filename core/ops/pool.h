// 2-D pooling over [N,C,H,W] (or [C,H,W]) inputs, forward and backward, PyTorch semantics
// (floor output size; padding at most half the kernel).
//   Tensor y = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});         // ResNet stem
//   Tensor a = avg_pool2d(x, {2, 2});                          // stride defaults to the kernel
//   Tensor g = adaptive_avg_pool2d(x, {1, 1});                 // global average pool
// Each size is one value (both dims) or two (h, w).
#pragma once

#include "core/tensor.h"

namespace octet {

// Padding acts as -inf; the gradient goes to the first maximum of each window.
Tensor max_pool2d(const Tensor& x, Shape kernel, Shape stride = {}, Shape padding = {0, 0}, Shape dilation = {1, 1});
// count_include_pad: divide by the window size including padding (true) or by the number of
// input elements the window covers (false).
Tensor avg_pool2d(const Tensor& x, Shape kernel, Shape stride = {}, Shape padding = {0, 0},
                  bool count_include_pad = true);
// Output [.., P, Q]; window i spans [floor(i*H/P), ceil((i+1)*H/P)).
Tensor adaptive_avg_pool2d(const Tensor& x, Shape output_size);

}  // namespace octet
