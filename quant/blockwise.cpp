// Block-wise quantization: argument checks and allocation, then the device kernels through
// quant/kernels.h (quant/cpu/blockwise.cpp or quant/cuda/blockwise.cu); plus the scalar reference
// kernels (the fast raw block kernels are the CPU's: quant/cpu/blockwise.cpp).
#include "quant/blockwise.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "quant/kernels.h"

namespace octet::quant {

void check_block_size(int64_t block_size, const char* op) {
  OCTET_CHECK(block_size >= kMinBlockSize && block_size <= kMaxBlockSize && (block_size & (block_size - 1)) == 0, op,
              ": expected a block size that is a power of two in [", kMinBlockSize, ", ", kMaxBlockSize, "], got ",
              block_size);
}

namespace {

void check_map(QuantMap map, const char* op) {
  OCTET_CHECK(std::find(std::begin(kAllQuantMaps), std::end(kAllQuantMaps), map) != std::end(kAllQuantMaps), op,
              ": expected a QuantMap (dynamic_signed, dynamic_unsigned, linear or dynamic_unsigned_nonzero), got ",
              static_cast<int>(map));
}

// Kernels run on the device of their tensors: the CPU, or a CUDA device in builds with CUDA.
void check_device(Device d, const char* op) { check_kernel_device(d, op, "block-wise quantization"); }

// codes u8 [n] and absmax f32 [num_blocks] (contiguous, on `device`) of an existing q.
void check_storage(const BlockwiseQuantized& q, int64_t n, Device device, const char* op) {
  check_block_size(q.block_size, op);
  check_map(q.map, op);
  OCTET_CHECK(q.codes.defined() && q.absmax.defined(), op, ": expected codes and absmax tensors, got undefined ones");
  OCTET_CHECK(q.codes.dtype() == DType::u8 && q.codes.is_contiguous() && q.codes.numel() == n, op,
              ": expected codes u8 contiguous with ", n, " elements, got ", q.codes.dtype(), " ", q.codes.shape(),
              q.codes.is_contiguous() ? "" : " (not contiguous)");
  int64_t blocks = num_blocks(n, q.block_size);
  OCTET_CHECK(q.absmax.dtype() == DType::f32 && q.absmax.is_contiguous() && q.absmax.numel() == blocks, op,
              ": expected absmax f32 contiguous with ", blocks, " elements (", n, " elements in blocks of ",
              q.block_size, "), got ", q.absmax.dtype(), " ", q.absmax.shape(),
              q.absmax.is_contiguous() ? "" : " (not contiguous)");
  OCTET_CHECK(q.codes.device() == device && q.absmax.device() == device, op, ": expected codes and absmax on ", device,
              ", got ", q.codes.device(), " and ", q.absmax.device());
}

void check_input(const Tensor& x, const char* op) {
  OCTET_CHECK(x.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected dtype f32, got ", x.dtype());
  OCTET_CHECK(x.is_contiguous(), op, ": expected a contiguous tensor, got shape ", x.shape(), " strides ", x.strides());
}

}  // namespace

BlockwiseQuantized blockwise_zeros(const Shape& shape, QuantMap map, int64_t block_size, Device device) {
  const char* op = "quant::blockwise_zeros";
  check_block_size(block_size, op);
  check_map(map, op);
  int64_t n = shape_numel(shape);
  BlockwiseQuantized q;
  q.codes = full({n}, nearest_code(quant_map(map), 0.0f), TensorOptions(DType::u8).device(device));
  q.absmax = zeros({num_blocks(n, block_size)}, TensorOptions(DType::f32).device(device));
  q.block_size = block_size;
  q.map = map;
  q.shape = shape;
  return q;
}

BlockwiseQuantized quantize_blockwise(const Tensor& x, QuantMap map, int64_t block_size) {
  const char* op = "quant::quantize_blockwise";
  check_input(x, op);
  check_block_size(block_size, op);
  check_map(map, op);
  int64_t n = x.numel();
  BlockwiseQuantized q;
  q.codes = empty({n}, TensorOptions(DType::u8).device(x.device()));
  q.absmax = empty({num_blocks(n, block_size)}, TensorOptions(DType::f32).device(x.device()));
  q.block_size = block_size;
  q.map = map;
  quantize_blockwise_into(x, q);
  return q;
}

void quantize_blockwise_into(const Tensor& x, BlockwiseQuantized& q) {
  const char* op = "quant::quantize_blockwise_into";
  check_input(x, op);
  check_storage(q, x.numel(), x.device(), op);
  check_device(x.device(), op);
  q.shape = x.shape();
  if (x.numel() == 0) return;
  dispatch::blockwise_quantize_into(x, q.block_size, q.map, q.codes, q.absmax);
}

Tensor dequantize_blockwise(const BlockwiseQuantized& q) {
  const char* op = "quant::dequantize_blockwise";
  OCTET_CHECK(q.codes.defined(), op, ": expected a quantized tensor, got undefined codes");
  Tensor out = empty(q.shape, TensorOptions(DType::f32).device(q.codes.device()));
  dequantize_blockwise_into(q, out);
  return out;
}

void dequantize_blockwise_into(const BlockwiseQuantized& q, const Tensor& out) {
  const char* op = "quant::dequantize_blockwise_into";
  int64_t n = q.numel();
  OCTET_CHECK(out.defined(), op, ": expected a defined output tensor");
  check_storage(q, n, out.device(), op);
  OCTET_CHECK(out.dtype() == DType::f32 && out.is_contiguous() && out.numel() == n, op,
              ": expected an f32 contiguous output with ", n, " elements, got ", out.dtype(), " ", out.shape(),
              out.is_contiguous() ? "" : " (not contiguous)");
  check_device(out.device(), op);
  if (n == 0) return;
  dispatch::blockwise_dequantize_into(q.codes, q.block_size, q.absmax, q.map, out);
}

// ---- raw block kernels

void quantize_block_ref(const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) a = std::max(a, std::fabs(x[i]));
  }
  *absmax = a;
  for (int64_t i = 0; i < n; ++i) codes[i] = nearest_code(map, x[i] / a);  // 0/0 is NaN -> the code of 0
}

void dequantize_block_ref(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = map[codes[i]] * absmax;
}

}  // namespace octet::quant
