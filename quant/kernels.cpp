// Device dispatch for quant/kernels.h: each kernel calls the CPU's or (in builds with OCTET_CUDA)
// the CUDA's version by the device of its first tensor, with that device current. The only file
// of quant/ that knows whether CUDA is built.
#include "quant/kernels.h"

#include "core/cuda.h"
#include "core/error.h"
#include "quant/cpu/kernels.h"
#ifdef OCTET_WITH_CUDA
#include "core/cuda/kernels.h"
#include "quant/cuda/kernels.h"
#endif

namespace octet::quant {

void check_kernel_device(Device d, const char* op, const char* family) {
  if (cuda_compiled()) {
    OCTET_CHECK(d.is_cpu() || d.is_cuda(), op, ": no ", family, " kernels for device ", d);
  } else {
    OCTET_CHECK(d.is_cpu(), op, ": no ", family, " kernels for device ", d, " in this build (CPU only)");
  }
}

namespace dispatch {

// Calls cpu::kernel or cuda::kernel with the arguments, by the device `d`.
#ifdef OCTET_WITH_CUDA
#define OCTET_QUANT_DISPATCH(kernel, d, ...)     \
  do {                                           \
    const Device dev_ = (d);                     \
    if (dev_.is_cuda()) {                        \
      ::octet::cuda::DeviceGuard on(dev_.index); \
      return cuda::kernel(__VA_ARGS__);          \
    }                                            \
    return cpu::kernel(__VA_ARGS__);             \
  } while (0)
#else
#define OCTET_QUANT_DISPATCH(kernel, d, ...)                                                         \
  do {                                                                                               \
    const Device dev_ = (d);                                                                         \
    OCTET_CHECK(dev_.is_cpu(), "quant::" #kernel ": no kernel for device ", dev_, " in this build"); \
    return cpu::kernel(__VA_ARGS__);                                                                 \
  } while (0)
#endif

float absmax_of(const Tensor& x) { OCTET_QUANT_DISPATCH(absmax_of, x.device(), x); }

std::array<float, 2> absmax_pair(const Tensor& a, const Tensor& b) {
  OCTET_QUANT_DISPATCH(absmax_pair, a.device(), a, b);
}

void int8_quantize_into(const Tensor& x, float inv_scale, Int8Rounding rounding, uint64_t seed, const Tensor& codes) {
  OCTET_QUANT_DISPATCH(int8_quantize_into, x.device(), x, inv_scale, rounding, seed, codes);
}

void int8_dequantize_into(const Tensor& codes, float scale, const Tensor& out) {
  OCTET_QUANT_DISPATCH(int8_dequantize_into, codes.device(), codes, scale, out);
}

std::vector<CosineSums> nearest_sums(const Tensor& g, const std::vector<float>& inv_scales) {
  OCTET_QUANT_DISPATCH(nearest_sums, g.device(), g, inv_scales);
}

CosineSums rounded_sums(const Tensor& g, float inv_scale, Int8Rounding rounding, uint64_t seed) {
  OCTET_QUANT_DISPATCH(rounded_sums, g.device(), g, inv_scale, rounding, seed);
}

Int8ConvKept int8_conv_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                               float clip_x, float clip_w, const Tensor& out) {
  OCTET_QUANT_DISPATCH(int8_conv_forward, x.device(), g, x, w, bias, clip_x, clip_w, out);
}

Int8ConvGrads int8_conv_backward(const Conv2dGeometry& g, const Tensor& dy, const Int8ConvKept& kept, float clip,
                                 Int8Rounding rounding, uint64_t seed, float sx, float sw, bool want_db) {
  OCTET_QUANT_DISPATCH(int8_conv_backward, dy.device(), g, dy, kept, clip, rounding, seed, sx, sw, want_db);
}

std::array<Int8ConvPath, 3> last_paths(const Tensor& x, const Conv2dGeometry& g) {
  OCTET_QUANT_DISPATCH(last_paths, x.device(), x, g);
}

void blockwise_quantize_into(const Tensor& x, int64_t block_size, QuantMap map, const Tensor& codes,
                             const Tensor& absmax) {
  OCTET_QUANT_DISPATCH(blockwise_quantize_into, x.device(), x, block_size, map, codes, absmax);
}

void blockwise_dequantize_into(const Tensor& codes, int64_t block_size, const Tensor& absmax, QuantMap map,
                               const Tensor& out) {
  OCTET_QUANT_DISPATCH(blockwise_dequantize_into, out.device(), codes, block_size, absmax, map, out);
}

PbActivations pb_quantize(const Tensor& x, int bits) { OCTET_QUANT_DISPATCH(pb_quantize, x.device(), x, bits); }
PbActivations pb_quantize_fixed(const Tensor& x, int bits, int shift) {
  OCTET_QUANT_DISPATCH(pb_quantize_fixed, x.device(), x, bits, shift);
}

Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias) {
  OCTET_QUANT_DISPATCH(pb_linear, w.planes.device(), w, x, bias);
}

Tensor qlinear_rows(const QLinearWeights& w, const Tensor& x, const Tensor& bias) {
  OCTET_QUANT_DISPATCH(qlinear_rows, x.device(), w, x, bias);
}

}  // namespace dispatch
}  // namespace octet::quant
