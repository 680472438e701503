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

Tensor MultiheadAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  OCTET_CHECK(x.defined() && x.dim() == 3 && x.size(2) == embed_dim_, "MultiheadAttention: expected x [B, T, ",
              embed_dim_, "], got ", x.defined() ? x.shape() : Shape{});
  const int64_t b = x.size(0), t = x.size(1), hd = embed_dim_ / num_heads_;
  // [B, T, 3C] -> q, k, v [B, T, C] (one node: its backward fills one [B, T, 3C] gradient)
  const std::vector<Tensor> qkv = split((*c_attn_)(x), embed_dim_, 2);
  auto heads = [&](int64_t part) {  // [B, T, C] -> [B, H, T, C/H]
    return qkv[static_cast<size_t>(part)].reshape({b, t, num_heads_, hd}).transpose(1, 2);
  };
  AttentionOptions o = AttentionOptions().causal(causal_);
  if (key_padding_mask.defined()) o.key_padding_mask(key_padding_mask);
  if (is_training() && dropout_ > 0) o.dropout(dropout_);
  Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), o);  // [B, H, T, C/H]
  y = y.transpose(1, 2).reshape({b, t, embed_dim_});
  return dropout((*c_proj_)(y), dropout_, is_training());
}

Tensor MultiheadAttention::forward_cached(const Tensor& x, KvCache& cache) {
  OCTET_CHECK(x.defined() && x.dim() == 3 && x.size(2) == embed_dim_, "MultiheadAttention: expected x [B, T, ",
              embed_dim_, "], got ", x.defined() ? x.shape() : Shape{});
  const int64_t b = x.size(0), t = x.size(1), hd = embed_dim_ / num_heads_;
  OCTET_CHECK(cache.length() == 0 || t == 1, "MultiheadAttention::forward_cached: ", t, " new tokens after a cache of ",
              cache.length(), " (several only on an empty cache)");
  OCTET_CHECK(cache.length() == 0 || cache.k.size(0) == b, "MultiheadAttention::forward_cached: a batch of ", b,
              " against a cache of ", cache.k.size(0));
  const std::vector<Tensor> qkv = split((*c_attn_)(x), embed_dim_, 2);
  auto heads = [&](int64_t part) {  // [B, T, C] -> [B, H, T, C/H]
    return qkv[static_cast<size_t>(part)].reshape({b, t, num_heads_, hd}).transpose(1, 2).contiguous();
  };
  cache.k = cache.length() == 0 ? heads(1) : cat({cache.k, heads(1)}, 2);
  cache.v = cache.v.defined() ? cat({cache.v, heads(2)}, 2) : heads(2);
  // One new token attends every key (nothing masked); a prompt on an empty cache is causal as in
  // forward(). Dropout is training's, never decoding's.
  const AttentionOptions o = AttentionOptions().causal(causal_ && t > 1);
  Tensor y = scaled_dot_product_attention(heads(0), cache.k, cache.v, o);  // [B, H, Tn, C/H]
  y = y.transpose(1, 2).reshape({b, t, embed_dim_});
  return (*c_proj_)(y);
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
