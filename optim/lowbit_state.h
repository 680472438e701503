// 4-bit optimizer state (Li et al., "Memory Efficient Optimizers with 4-bit States", NeurIPS
// 2023): every state buffer is stored as 4-bit codes, two per byte (quant/lowbit.h), with the
// paper's choices per buffer:
//   signed buffers (first moments, momenta) -- block-wise, blocks of 128, QuantMap4::dynamic_signed;
//   unsigned buffers (second moments) -- QuantMap4::linear_unsigned (no 0: the zero-point fix),
//     rank-1 normalized when the parameter has >= 2 dims of extent > 1 (a scale per row and per
//     column, in general per index of each such dim) and those scales cost no more than
//     block-wise ones (their count * 128 <= the element count: not a [n, 2] parameter), else
//     block-wise as the signed ones.
// An update runs block by block as BlockwiseState's does: a block's buffers are decoded into f32,
// the optimizer's ordinary f32 rule runs on them, and they are encoded back. A rank-1 buffer's new
// scales depend on the whole tensor's new values, so its new values go to a temporary f32 copy of
// that buffer (4 bytes per element, freed after the update); its maxima are taken from the copy and
// it is encoded in a second pass. The state costs 0.5 byte per element and buffer, plus 4 bytes per
// block (block-wise) or per row and column (rank-1).
// The state lives on the parameter's device. On CUDA the blocks are not handed to a callback:
// the kernels of optim/cuda/update.cu run the same rule, one warp per block of 128, and encode a
// rank-1 buffer in a second kernel; LAMB's read-only pass decodes the same way in its sums kernel
// (for_each_block and read_blocks are host code and refuse a device state).
// Sharded (Optimizer::shard_state), a state holds a range of the flattened parameter, whose bounds
// fall on blocks of 128; whether a buffer is rank-1 is decided on the whole parameter's shape, its
// maxima are the whole parameter's (each rank takes them over its range, then Shard::max_over_ranks
// makes them the maxima over every rank's), so its codes are those of the unsharded state.
//   auto s = std::make_unique<LowBitState>(param, {"exp_avg", "exp_avg_sq"}, {true, false});
#pragma once

#include <functional>

#include "optim/optimizer.h"
#include "quant/maps.h"

namespace octet {

class LowBitState : public ParamState {
 public:
  static constexpr int64_t kBlock = 128;
  // The range [first, last) of the flattened parameter a state holds (last -1: to the end; first a
  // multiple of kBlock), and, when other ranks hold the rest, how the maxima of the rank-1 buffers
  // become the whole parameter's: max_over_ranks replaces each tensor with its elementwise maximum
  // over the ranks (every rank calls it together, with tensors of the same shapes).
  struct Shard {
    int64_t first = 0, last = -1;
    std::function<void(std::vector<Tensor>&)> max_over_ranks;
  };
  // is_signed[i]: buffer i may be negative (Optimizer::state_buffers). The whole parameter's shape
  // decides rank-1; f32 parameters.
  LowBitState(const Tensor& param, std::vector<std::string> buffer_names, const std::vector<bool>& is_signed,
              Shard shard);
  LowBitState(const Tensor& param, std::vector<std::string> buffer_names, const std::vector<bool>& is_signed);
  void for_each_block(const BlockUpdate<float>& fn) override;
  void for_each_block(const BlockUpdate<double>& fn) override;  // an error: 4-bit state is for f32
  void read_blocks(const BlockRead<float>& fn) override;        // decodes only: the state is unchanged
  // "<buffer>.codes" (u8, ceil(n / 2)), "<buffer>.map" (f32 [16], the map's values) and either
  // "<buffer>.absmax" (f32, one per block of 128) or, rank-1, "<buffer>.max<d>" (f32 [extent]
  // for the d-th dim of extent > 1).
  NamedTensors tensors() const override;
  void check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const override;
  // Codes: 2 elements per byte; absmax: kBlock; the maps and rank-1 maxima: whole on every rank.
  int64_t elements_per_entry(const std::string& suffix) const override;
  // Sharded with a rank-1 buffer: its maxima are max-reduced over the ranks every update.
  bool collective() const override;
  // The new maxima of the rank-1 buffers, taken over this state's range, made the whole
  // parameter's (Shard::max_over_ranks; nothing to do when the state holds all of it). The device
  // update calls it between its two kernels.
  void merge_maxima(std::vector<Tensor>& maxima) const;
  // The index in the flattened parameter of the state's element 0.
  int64_t offset() const { return offset_; }

  struct Buffer {
    quant::QuantMap4 map;
    bool rank1 = false;
    Tensor codes;                // u8 [ceil(n / 2)]
    Tensor absmax;               // f32 [blocks] (block-wise)
    std::vector<Tensor> maxima;  // f32 [shape[d]] per dim (rank-1)
    Tensor map_values;           // f32 [16]
  };
  const Buffer& buffer(size_t i) const { return buffers_.at(i); }
  // The dims a rank-1 buffer is normalized over (the parameter's dims of extent > 1).
  const Shape& rank1_shape() const { return shape_; }

 private:
  // Updates run over chunks of kChunk elements (whole blocks; the last one shorter):
  // body(first chunk, end chunk, per-thread scratch of kChunk floats per buffer, kChunk scales).
  static constexpr int64_t kChunk = 16 * kBlock;
  template <typename Body>
  void chunks(Body body);
  // Decodes elements [start, start + n) of buffer i into out (scales: scratch).
  void decode_chunk(size_t i, int64_t start, int64_t n, float* scales, float* out) const;
  // Encodes values of elements [start, start + n) into block-wise buffer i, block by block.
  void encode_blockwise(size_t i, int64_t start, int64_t n, const float* values);
  std::vector<Buffer> buffers_;
  Shape shape_;  // rank-1: the parameter's dims of extent > 1
  int64_t numel_;
  int64_t offset_;  // Shard::first
  std::function<void(std::vector<Tensor>&)> max_over_ranks_;
};

}  // namespace octet
