// quant/'s one dispatch point: the kernel list of quant/kernel_signatures.inc declared in
// octet::quant::dispatch, whose functions (quant/kernels.cpp) run the CPU's (quant/cpu/kernels.h)
// or the CUDA's (quant/cuda/kernels.h) version by the device of their tensors, with that device
// current, and throw an octet::Error for a device without the kernel. The public ops of quant/
// check their arguments, then call these; no other file of quant/ calls cpu:: or cuda:: kernels
// or knows whether CUDA is built. Internal: not installed.
//   check_kernel_device(x.device(), "int8_absmax", "INT8");
//   float m = dispatch::absmax_of(x.contiguous());
//   if (dispatch::supported(dispatch::Kernel::int8_conv_forward_codes, x.device())) ...
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/kernels.h"
#include "core/tensor.h"
#include "quant/cosine_sums.h"
#include "quant/int8_conv.h"
#include "quant/int8_tensor.h"
#include "quant/maps.h"
#include "quant/pbatch.h"
#include "quant/qgemm.h"

namespace octet::quant {

using kernels::Conv2dGeometry;

// What the INT8 convolution's forward keeps for its backward: w's codes for dx; for dw, x's codes
// [C,N,H,W] (CPU) or x itself (CUDA, whose kernels quantize it again on load, to the same codes).
struct Int8ConvKept {
  Tensor wq, x;
  float inv_x = 0.0f;
};

// The INT8 convolution's gradients (those asked for) and the statistics of dy's quantization.
struct Int8ConvGrads {
  Tensor dx, dw, db;
  CosineSums sums;
};

// An Error unless this build has `family` kernels for device d: "op: no <family> kernels for
// device d" (with " in this build (CPU only)" where CUDA is not built).
void check_kernel_device(Device d, const char* op, const char* family);

// Return types of the list written without a comma (a macro argument).
using AbsmaxPair = std::array<float, 2>;
using Int8ConvPaths = std::array<Int8ConvPath, 3>;

namespace dispatch {

#include "quant/kernel_signatures.inc"

// Each kernel of the list by name, and whether this build runs it on device d (the CPU always; a
// CUDA device where CUDA is built and the kernel is not OCTET_CPU_KERNEL).
enum class Kernel : uint8_t {
#define OCTET_KERNEL(ret, name, params, args) name,
#include "quant/kernel_signatures.inc"
};
bool supported(Kernel kernel, Device d);

}  // namespace dispatch

}  // namespace octet::quant
