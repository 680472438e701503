// 4-bit optimizer state (Li et al., "Memory Efficient Optimizers with 4-bit States", NeurIPS
// 2023): every state buffer is stored as 4-bit codes, two per byte (quant/lowbit.h), with the
// paper's choices per buffer:
//   signed buffers (first moments, momenta) -- block-wise, blocks of 128, QuantMap4::dynamic_signed;
//   unsigned buffers (second moments) -- QuantMap4::linear_unsigned (no 0: the zero-point fix),
//     rank-1 normalized when the parameter has >= 2 dims (a scale per row and per column, in
//     general per index of each dim), else block-wise as the signed ones.
// An update runs block by block as BlockwiseState's does: a block's buffers are decoded into f32,
// the optimizer's ordinary f32 rule runs on them, and they are encoded back. A rank-1 buffer's new
// scales depend on the whole tensor's new values, so its new values go to a temporary f32 copy of
// that buffer (4 bytes per element, freed after the update); its maxima are taken from the copy and
// it is encoded in a second pass. The state costs 0.5 byte per element and buffer, plus 4 bytes per
// block (block-wise) or per row and column (rank-1).
// Host only (CPU): a CUDA parameter with 4-bit state is refused by the device update.
//   auto s = std::make_unique<LowBitState>(param, {"exp_avg", "exp_avg_sq"}, {true, false});
#pragma once

#include "optim/optimizer.h"
#include "quant/maps.h"

namespace octet {

class LowBitState : public ParamState {
 public:
  static constexpr int64_t kBlock = 128;
  // is_signed[i]: buffer i may be negative (Optimizer::state_buffers). The parameter's shape decides
  // rank-1; f32 parameters on the CPU only.
  LowBitState(const Tensor& param, std::vector<std::string> buffer_names, const std::vector<bool>& is_signed);
  void for_each_block(const BlockUpdate<float>& fn) override;
  void for_each_block(const BlockUpdate<double>& fn) override;  // an error: 4-bit state is for f32
  void read_blocks(const BlockRead<float>& fn) override;        // decodes only: the state is unchanged
  // "<buffer>.codes" (u8, ceil(n / 2)), "<buffer>.map" (f32 [16], the map's values) and either
  // "<buffer>.absmax" (f32, one per block of 128) or, rank-1, "<buffer>.max<d>" (f32 [shape[d]]
  // for each dim d).
  NamedTensors tensors() const override;
  void check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const override;

  struct Buffer {
    quant::QuantMap4 map;
    bool rank1 = false;
    Tensor codes;                // u8 [ceil(n / 2)]
    Tensor absmax;               // f32 [blocks] (block-wise)
    std::vector<Tensor> maxima;  // f32 [shape[d]] per dim (rank-1)
    Tensor map_values;           // f32 [16]
  };
  const Buffer& buffer(size_t i) const { return buffers_.at(i); }

 private:
  template <typename Body>
  void blocks(Body body);
  // Decodes block [start, start + n) of buffer i into out.
  void decode_block(size_t i, int64_t start, int64_t n, int64_t block, float* scratch_scales, float* out) const;
  std::vector<Buffer> buffers_;
  Shape shape_;
  int64_t numel_;
};

}  // namespace octet
