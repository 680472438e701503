// Scaled dot-product attention as one op, as torch.nn.functional.scaled_dot_product_attention:
// softmax(q k^T * scale + mask) v with the causal mask, a key padding mask and attention dropout.
// The fused kernels (core/cpu/attention.cpp, core/cuda/attention.cu) tile the keys with an online
// softmax and keep only each row's log-sum-exp for the backward, which recomputes the
// probabilities: memory O(T) per head, never a [Tq, Tk] matrix. attention_reference is the plain
// composed path (matmul, mask, softmax, dropout, matmul) the fused op is tested against.
//   Tensor y = scaled_dot_product_attention(q, k, v, AttentionOptions().causal(true));
//   Tensor y = scaled_dot_product_attention(q, k, v, AttentionOptions().key_padding_mask(pad).dropout(0.1, &gen));
#pragma once

#include <optional>

#include "core/tensor.h"

namespace octet {

class Generator;

struct AttentionOptions {
  // Query i attends keys j <= i (top-left aligned when Tq != Tk, as PyTorch's is_causal).
  AttentionOptions& causal(bool v) {
    causal_ = v;
    return *this;
  }
  // [B, Tk], nonzero (u8) where a key is padding and takes no attention (nn.MultiheadAttention's
  // key_padding_mask). A query with every key masked gets 0, as PyTorch's SDPA gives.
  AttentionOptions& key_padding_mask(Tensor m) {
    key_padding_mask_ = std::move(m);
    return *this;
  }
  // Drops each attention probability with probability p (scaling the rest by 1/(1-p)); draws from
  // `gen` (default_generator() when null). Pass 0 outside training, as F.scaled_dot_product_attention.
  AttentionOptions& dropout(double p, Generator* gen = nullptr) {
    dropout_p_ = p;
    generator_ = gen;
    return *this;
  }
  // The scores' scale; unset: 1/sqrt(head dim).
  AttentionOptions& scale(double s) {
    scale_ = s;
    return *this;
  }

  bool causal_ = false;
  Tensor key_padding_mask_;
  double dropout_p_ = 0.0;
  Generator* generator_ = nullptr;
  std::optional<double> scale_;
};

// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] -> [B, H, Tq, Dv]; f32 or f64, one device.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opts = {});

// The same result by the composed ops (O(Tq Tk) memory), for tests. With dropout, `keep` is the
// mask the fused op drew (attention_dropout_keep with its seed and offset); opts.dropout's p scales.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts = {},
                           const Tensor& keep = Tensor());

// The dropout mask the fused op draws from (seed, offset) for p: u8 [B, H, Tq, Tk], 1 where kept.
Tensor attention_dropout_keep(const Shape& shape, double p, uint64_t seed, uint64_t offset);

}  // namespace octet
