// Tensor-level INT8 quantization (quant/int8_tensor.h): argument checks, then the device kernels
// through quant/kernels.h (the CPU loops of quant/cpu/int8_quant.h or the CUDA kernels).
#include <cmath>

#include "core/error.h"
#include "quant/int8_tensor.h"
#include "quant/kernels.h"

namespace octet::quant {

float int8_absmax(const Tensor& x) { return dispatch::absmax_of(int8_f32_operand(x, "int8_absmax")); }

Tensor int8_quantize(const Tensor& x, float clip, Int8Rounding rounding, uint64_t seed) {
  Tensor c = int8_f32_operand(x, "int8_quantize");
  OCTET_CHECK(!(clip < 0.0f), "int8_quantize: expected a clip >= 0, got ", clip);
  OCTET_CHECK(rounding == Int8Rounding::nearest || rounding == Int8Rounding::stochastic,
              "int8_quantize: unknown rounding ", static_cast<int>(rounding));
  Tensor q = empty(x.shape(), TensorOptions(DType::i8).device(x.device()));
  dispatch::int8_quantize_into(c, int8_inv_scale(clip), rounding, seed, q);
  return q;
}

Tensor int8_dequantize(const Tensor& q, float clip) {
  OCTET_CHECK(q.defined(), "int8_dequantize: expected a defined tensor");
  OCTET_CHECK(q.dtype() == DType::i8, "int8_dequantize: expected dtype i8, got ", q.dtype());
  check_int8_device(q.device(), "int8_dequantize");
  Tensor c = q.contiguous();
  Tensor out = empty(q.shape(), TensorOptions(DType::f32).device(q.device()));
  dispatch::int8_dequantize_into(c, int8_scale(clip), out);
  return out;
}

Tensor int8_f32_operand(const Tensor& x, const char* op) {
  OCTET_CHECK(x.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected dtype f32, got ", x.dtype());
  check_int8_device(x.device(), op);
  return x.detach().contiguous();
}

void check_int8_device(Device d, const char* op) { check_kernel_device(d, op, "INT8"); }

uint64_t int8_backward_seed(uint64_t layer_seed, int64_t step) {
  const auto t = static_cast<uint64_t>(step);
  // Counter word 2 spells "int8": a stream apart from the Generator draws under the same key.
  const std::array<uint32_t, 4> w =
      philox4x32({static_cast<uint32_t>(t), static_cast<uint32_t>(t >> 32), 0x696e7438u, 0u}, layer_seed);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

}  // namespace octet::quant
