// f32 convolution through oneDNN's convolution primitives (the library PyTorch's CPU path uses).
// For NCHW tensors the primitives pick blocked layouts (nChw8c, ...) and JIT kernels for this CPU,
// so each call reorders in and out; channels-last tensors (core/memory_format.h) go to the nhwc
// kernels as they lie, with no reorder. Measured 1.4x (3x3) to 2.7x (depthwise) faster
// than im2col+GEMM / the direct depthwise kernel here (tools/bench/RESULTS.md). The plain kernels
// in conv.cpp remain the f64 path and the reference this one is tested against.
#pragma once

#include <cstdint>

#include "core/cpu/kernels.h"
#include "core/selector.h"

namespace octet::cpu {

// Whether f32 convolutions go through oneDNN (default) or the plain kernels (core/selector.h;
// OCTET_CONV2D_PATH=dnnl|loops). For tests and benchmarks that compare the two:
//   Conv2dPath previous = conv2d_selector().set(Conv2dPath::loops);  ...  conv2d_selector().set(previous);
enum class Conv2dPath : uint8_t { dnnl, loops };
Selector<Conv2dPath>& conv2d_selector();

void dnnl_conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                         const Tensor& out);
void dnnl_conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout,
                          const Tensor& dx, const Tensor& dw);

}  // namespace octet::cpu
