// Tensor-level INT8 quantization (quant/int8_tensor.h): argument checks and the CPU loops of
// quant/cpu/int8_quant.h.
#include <cmath>

#include "core/error.h"
#include "quant/cpu/int8_quant.h"
#include "quant/int8_tensor.h"

namespace octet::quant {

namespace {

// A detached contiguous f32 CPU tensor with x's values.
Tensor f32_input(const Tensor& x, const char* op) {
  OCTET_CHECK(x.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected dtype f32, got ", x.dtype());
  OCTET_CHECK(x.device().is_cpu(), op, ": no INT8 kernels for device ", x.device(), " yet (CPU only)");
  return x.detach().contiguous();
}

}  // namespace

float int8_absmax(const Tensor& x) {
  Tensor c = f32_input(x, "int8_absmax");
  return cpu::absmax(c.data<float>(), c.numel());
}

Tensor int8_quantize(const Tensor& x, float clip, Int8Rounding rounding, uint64_t seed) {
  Tensor c = f32_input(x, "int8_quantize");
  OCTET_CHECK(!(clip < 0.0f), "int8_quantize: expected a clip >= 0, got ", clip);
  OCTET_CHECK(rounding == Int8Rounding::nearest || rounding == Int8Rounding::stochastic,
              "int8_quantize: unknown rounding ", static_cast<int>(rounding));
  Tensor q = empty(x.shape(), DType::i8);
  cpu::quantize(c.data<float>(), c.numel(), int8_inv_scale(clip), rounding, seed, 0, q.data<int8_t>());
  return q;
}

Tensor int8_dequantize(const Tensor& q, float clip) {
  OCTET_CHECK(q.defined(), "int8_dequantize: expected a defined tensor");
  OCTET_CHECK(q.dtype() == DType::i8, "int8_dequantize: expected dtype i8, got ", q.dtype());
  OCTET_CHECK(q.device().is_cpu(), "int8_dequantize: no INT8 kernels for device ", q.device(), " yet (CPU only)");
  Tensor c = q.contiguous();
  Tensor out = empty(q.shape(), DType::f32);
  cpu::dequantize(c.data<int8_t>(), c.numel(), int8_scale(clip), out.data<float>());
  return out;
}

uint64_t int8_backward_seed(uint64_t layer_seed, int64_t step) {
  const auto t = static_cast<uint64_t>(step);
  // Counter word 2 spells "int8": a stream apart from the Generator draws under the same key.
  const std::array<uint32_t, 4> w =
      philox4x32({static_cast<uint32_t>(t), static_cast<uint32_t>(t >> 32), 0x696e7438u, 0u}, layer_seed);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

}  // namespace octet::quant
