#include "layers/attention.h"

#include "core/ops/attention.h"
#include "core/ops/concat.h"
#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"

namespace octet {

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool causal)
    : embed_dim_(embed_dim), num_heads_(num_heads), dropout_(dropout), causal_(causal) {
  OCTET_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0,
              "MultiheadAttention: embed_dim must be a positive multiple of num_heads, got ", embed_dim, " and ",
              num_heads);
  OCTET_CHECK(dropout >= 0.0 && dropout < 1.0, "MultiheadAttention: dropout must be in [0, 1), got ", dropout);
  c_attn_ = register_module("c_attn", std::make_shared<Linear>(embed_dim, 3 * embed_dim));
  c_proj_ = register_module("c_proj", std::make_shared<Linear>(embed_dim, embed_dim));
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, Tensor()); }

std::vector<Tensor> MultiheadAttention::heads_of(const Tensor& x) const {
  OCTET_CHECK(x.defined() && x.dim() == 3 && x.size(2) == embed_dim_, "MultiheadAttention: expected x [B, T, ",
              embed_dim_, "], got ", x.defined() ? x.shape() : Shape{});
  const int64_t b = x.size(0), t = x.size(1), hd = embed_dim_ / num_heads_;
  // [B, T, 3C] -> q, k, v [B, T, C] (one node: its backward fills one [B, T, 3C] gradient)
  std::vector<Tensor> qkv = split((*c_attn_)(x), embed_dim_, 2);
  for (Tensor& part : qkv) part = part.reshape({b, t, num_heads_, hd}).transpose(1, 2);  // [B, H, T, C/H]
  return qkv;
}

Tensor MultiheadAttention::merge_heads(const Tensor& y) const {
  return (*c_proj_)(y.transpose(1, 2).reshape({y.size(0), y.size(2), embed_dim_}));  // [B, T, C]
}

Tensor MultiheadAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  const std::vector<Tensor> qkv = heads_of(x);
  AttentionOptions o = AttentionOptions().causal(causal_);
  if (key_padding_mask.defined()) o.key_padding_mask(key_padding_mask);
  if (is_training() && dropout_ > 0) o.dropout(dropout_);
  return dropout(merge_heads(scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], o)), dropout_, is_training());
}

Tensor MultiheadAttention::forward_cached(const Tensor& x, KvCache& cache) {
  const std::vector<Tensor> qkv = heads_of(x);
  const int64_t b = x.size(0), t = x.size(1);
  const bool empty = cache.length() == 0;
  OCTET_CHECK(empty || t == 1, "MultiheadAttention::forward_cached: ", t, " new tokens after a cache of ",
              cache.length(), " (several only on an empty cache)");
  OCTET_CHECK(empty || cache.k.size(0) == b, "MultiheadAttention::forward_cached: a batch of ", b,
              " against a cache of ", cache.k.size(0));
  cache.k = empty ? qkv[1].contiguous() : cat({cache.k, qkv[1]}, 2);
  cache.v = empty ? qkv[2].contiguous() : cat({cache.v, qkv[2]}, 2);
  // One new token attends every key (nothing masked); a prompt on an empty cache is causal as in
  // forward(). Dropout is training's, never decoding's.
  const AttentionOptions o = AttentionOptions().causal(causal_ && t > 1);
  return merge_heads(scaled_dot_product_attention(qkv[0], cache.k, cache.v, o));
}

std::string MultiheadAttention::extra_repr() const {
  return detail::str_cat("embed_dim=", embed_dim_, ", num_heads=", num_heads_, ", dropout=", dropout_,
                         causal_ ? ", causal" : "");
}

TransformerMlp::TransformerMlp(int64_t embed_dim, double dropout) : dropout_(dropout) {
  OCTET_CHECK(dropout >= 0.0 && dropout < 1.0, "TransformerMlp: dropout must be in [0, 1), got ", dropout);
  c_fc_ = register_module("c_fc", std::make_shared<Linear>(embed_dim, 4 * embed_dim));
  c_proj_ = register_module("c_proj", std::make_shared<Linear>(4 * embed_dim, embed_dim));
}

Tensor TransformerMlp::forward(const Tensor& x) {
  return dropout((*c_proj_)(gelu((*c_fc_)(x))), dropout_, is_training());
}

TransformerBlock::TransformerBlock(int64_t embed_dim, int64_t num_heads, double dropout, bool causal) {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(embed_dim));
  attn_ = register_module("attn", std::make_shared<MultiheadAttention>(embed_dim, num_heads, dropout, causal));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(embed_dim));
  mlp_ = register_module("mlp", std::make_shared<TransformerMlp>(embed_dim, dropout));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor y = x + (*attn_)((*ln_1_)(x));
  return y + (*mlp_)((*ln_2_)(y));
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KvCache& cache) {
  Tensor y = x + attn_->forward_cached((*ln_1_)(x), cache);
  return y + (*mlp_)((*ln_2_)(y));
}

}  // namespace octet
