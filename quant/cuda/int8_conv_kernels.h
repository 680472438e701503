// The CUDA INT8 convolution's kernels by path (quant/cuda/int8_conv_paths.h), on the current device
// and stream; int8_conv.cpp chooses among them. Pure C++ declarations: no CUDA headers here.
//   if (!run_forward(Int8ConvPath::tensor_core, args)) run_forward(Int8ConvPath::dp4a, args);
#pragma once

#include "quant/cuda/int8_conv_paths.h"
#include "quant/int8_conv.h"

namespace octet::quant::cuda {

// Run the product by `path` (dp4a, tensor_core or direct); false when the path cannot run this
// geometry (nothing was launched then). The outputs are overwritten, never accumulated into.
bool run_forward(Int8ConvPath path, const paths::ForwardArgs& args);
bool run_backward_input(Int8ConvPath path, const paths::BackwardInputArgs& args);
bool run_backward_weight(Int8ConvPath path, const paths::BackwardWeightArgs& args);

}  // namespace octet::quant::cuda
