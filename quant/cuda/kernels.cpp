// The CUDA side of quant/'s kernel list (quant/cuda/kernels.h): each entry calls the kernels of
// quant/cuda/*.h on device tensors. quant/kernels.cpp calls these for CUDA tensors, with their
// device current.
#include "quant/cuda/kernels.h"

#include "quant/cuda/blockwise.h"
#include "quant/cuda/int8_conv.h"
#include "quant/cuda/int8_quant.h"
#include "quant/cuda/pbatch.h"
#include "quant/cuda/qgemm.h"

namespace octet::quant::cuda {

// ---- INT8 quantization and its cosine statistics

float absmax_of(const Tensor& x) { return absmax({{x.data<float>(), x.numel()}})[0]; }

void int8_quantize_into(const Tensor& x, float inv_scale, Int8Rounding rounding, uint64_t seed, const Tensor& codes) {
  quantize(x.data<float>(), x.numel(), inv_scale, rounding, seed, codes.data<int8_t>());
}

void int8_dequantize_into(const Tensor& codes, float scale, const Tensor& out) {
  dequantize(codes.data<int8_t>(), codes.numel(), scale, out.data<float>());
}

std::vector<CosineSums> nearest_sums(const Tensor& g, const std::vector<float>& inv_scales) {
  return cosine_sums_nearest(g.data<float>(), g.numel(), inv_scales);
}

CosineSums rounded_sums(const Tensor& g, float inv_scale, Int8Rounding rounding, uint64_t seed) {
  if (rounding == Int8Rounding::nearest) return nearest_sums(g, {inv_scale})[0];
  Tensor codes = empty({std::max<int64_t>(g.numel(), 1)}, TensorOptions(DType::i8).device(g.device()));
  return quantize_channel_major(g.data<float>(), 1, 1, g.numel(), g.numel(), inv_scale, rounding, seed,
                                codes.data<int8_t>())
      .read();
}

// ---- the INT8 convolution

Int8ConvKept int8_conv_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                               float clip_x, float clip_w, const Tensor& out) {
  Int8ConvKept k;
  k.wq = int8_conv2d_forward(g, x, w, bias, clip_x, clip_w, out);
  k.x = x, k.inv_x = int8_inv_scale(clip_x);
  return k;
}

Int8ConvGrads int8_conv_backward(const Conv2dGeometry& g, const Tensor& dy, const Int8ConvKept& kept, float clip,
                                 Int8Rounding rounding, uint64_t seed, float sx, float sw, bool want_db) {
  return int8_conv2d_backward(g, dy, kept.x, kept.inv_x, kept.wq, clip, rounding, seed, sx, sw,
                              {kept.wq.defined(), kept.x.defined(), want_db});
}

std::array<Int8ConvPath, 3> last_paths(const Tensor&, const Conv2dGeometry& g) { return last_paths(g); }

// ---- block-wise quantization

void blockwise_quantize_into(const Tensor& x, int64_t block_size, QuantMap map, const Tensor& codes,
                             const Tensor& absmax) {
  quantize_blocks(x.data<float>(), x.numel(), block_size, device_tables(map, x.device().index), codes.data<uint8_t>(),
                  absmax.data<float>());
}

void blockwise_dequantize_into(const Tensor& codes, int64_t block_size, const Tensor& absmax, QuantMap map,
                               const Tensor& out) {
  dequantize_blocks(codes.data<uint8_t>(), codes.numel(), block_size, absmax.data<float>(),
                    device_tables(map, out.device().index), out.data<float>());
}

// ---- the zero-point int8 Linear

Tensor qlinear_rows(const QLinearWeights& w, const Tensor& x, const Tensor& bias) {
  const RowQuantized xq = quantize_rows_u8(x);
  const Tensor acc = qgemm(xq.codes, xq.zero_point, QType::u8, w.codes, 0, QType::s8, w.row_sums);
  return dequantize_linear(acc, xq.scale, w.w.scale, bias);
}

}  // namespace octet::quant::cuda
