// Transformer layers with nanoGPT's module names, so a nanoGPT-style PyTorch state_dict loads:
//   MultiheadAttention  self-attention with one fused QKV projection: c_attn [3C, C], c_proj [C, C]
//                       (scaled_dot_product_attention, core/ops/attention.h: causal by default,
//                       attention dropout inside it and dropout after c_proj while training);
//   TransformerMlp      c_fc [4C, C] -> GELU (exact) -> c_proj [C, 4C] -> dropout;
//   TransformerBlock    pre-LayerNorm: x + attn(ln_1(x)), then + mlp(ln_2(x)).
//   auto block = std::make_shared<TransformerBlock>(384, 6, /*dropout=*/0.1);
//   Tensor y = (*block)(x);   // x [B, T, 384] -> [B, T, 384]
#pragma once

#include <memory>
#include <vector>

#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace octet {

// The keys and values of the tokens a decoder has read so far, one per attention layer, each
// [B, H, T, C/H]: incremental decoding reads each new token once (forward_cached) instead of the
// whole prefix again.
struct KvCache {
  Tensor k, v;  // undefined while empty
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
};

class MultiheadAttention : public Module {
 public:
  // embed_dim must be a multiple of num_heads; dropout in [0, 1).
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool causal = true);
  // x [B, T, C] -> [B, T, C]
  Tensor forward(const Tensor& x) override;
  // The same with a key padding mask [B, T] (u8, nonzero: a padding position no query attends).
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask);
  // x [B, Tn, C]: the tokens after those in `cache`, whose keys and values are appended to it; each
  // attends every cached token and (causal) the new ones up to itself. Tn may exceed 1 only on an
  // empty cache (a prompt). The same numbers as forward() on the whole sequence's last Tn rows.
  Tensor forward_cached(const Tensor& x, KvCache& cache);
  std::string type_name() const override { return "MultiheadAttention"; }
  std::string extra_repr() const override;

  int64_t embed_dim_, num_heads_;
  double dropout_;
  bool causal_;
  std::shared_ptr<Linear> c_attn_, c_proj_;

 private:
  // x [B, T, C] (checked) -> q, k, v [B, H, T, C/H] from c_attn; and attention's y [B, H, T, C/H]
  // back to [B, T, C] through c_proj.
  std::vector<Tensor> heads_of(const Tensor& x) const;
  Tensor merge_heads(const Tensor& y) const;
};

class TransformerMlp : public Module {
 public:
  TransformerMlp(int64_t embed_dim, double dropout = 0.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "TransformerMlp"; }

  double dropout_;
  std::shared_ptr<Linear> c_fc_, c_proj_;
};

class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool causal = true);
  Tensor forward(const Tensor& x) override;
  // forward() of the new tokens x given the keys and values of those before them (KvCache).
  Tensor forward_cached(const Tensor& x, KvCache& cache);
  std::string type_name() const override { return "TransformerBlock"; }

  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<MultiheadAttention> attn_;
  std::shared_ptr<TransformerMlp> mlp_;
};

}  // namespace octet
