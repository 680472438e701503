// 8-bit optimizer state (Dettmers et al., "8-bit Optimizers via Block-wise Quantization"): every
// state buffer is stored as u8 codes into a 256-value map plus one f32 absmax per block of
// `block_size` elements. An update runs block by block: the block's buffers are dequantized into
// per-thread scratch of block_size floats, the optimizer's ordinary f32 update runs on them, and
// they are quantized back (a new absmax from the updated values). A float32 copy of the whole
// state tensor never exists, so the state costs 1 + 4/block_size bytes per element and buffer.
// The state lives on the parameter's device. On CUDA the blocks are not handed to a callback:
// the fused kernel of optim/cuda/update.cu runs the same rule with one thread block per
// quantization block, dequantizing and requantizing in registers (for_each_block and
// read_blocks are host code and refuse a device state).
//   auto s = std::make_unique<BlockwiseState>(param, {"exp_avg", "exp_avg_sq"},
//                                             {QuantMap::dynamic_signed, QuantMap::dynamic_unsigned}, 256);
#pragma once

#include "optim/optimizer.h"
#include "quant/blockwise.h"

namespace octet {

class BlockwiseState : public ParamState {
 public:
  // One map per buffer: dynamic_signed for signed buffers (momentum, first moments),
  // dynamic_unsigned for non-negative ones (second moments). f32 parameters only.
  BlockwiseState(const Tensor& param, std::vector<std::string> buffer_names, std::vector<quant::QuantMap> maps,
                 int64_t block_size);
  void for_each_block(const BlockUpdate<float>& fn) override;
  void for_each_block(const BlockUpdate<double>& fn) override;  // an error: 8-bit state is for f32
  // Dequantizes only (the first, read-only pass of LAMB): the state is left exactly as it was.
  void read_blocks(const BlockRead<float>& fn) override;
  // "<buffer>.codes" (u8, the parameter's element count), "<buffer>.absmax" (f32, one per block)
  // and "<buffer>.map" (f32 [256], the values of the buffer's quantization map). A checkpoint's map
  // is found by its values, and of two maps with the same values (a rule for encoding, as
  // dynamic_unsigned_nonzero's) the one of this optimizer's settings is kept.
  NamedTensors tensors() const override;
  void check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const override;
  void loaded() override;
  // Codes: 1 element each; absmax: block_size; the maps: whole on every rank.
  int64_t elements_per_entry(const std::string& suffix) const override;
  int64_t block_size() const { return block_size_; }
  const quant::BlockwiseQuantized& buffer(size_t i) const { return buffers_.at(i); }

 private:
  // Runs body(begin, n, block index, scratch pointers) over the blocks, with per-thread scratch.
  template <typename Body>
  void blocks(Body body);
  std::vector<quant::BlockwiseQuantized> buffers_;
  std::vector<Tensor> map_values_;  // f32 [256] on the host: each buffer's map, as checkpoints store it
  int64_t numel_, block_size_;
};

}  // namespace octet
