#include "models/gpt.h"

#include <cmath>

#include "core/autograd.h"
#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"
#include "layers/init.h"

namespace octet {

namespace {

void check_options(const GptOptions& o) {
  OCTET_CHECK(o.vocab_size_ > 0, "Gpt: vocab_size must be positive, got ", o.vocab_size_);
  OCTET_CHECK(o.context_length_ > 0, "Gpt: context_length must be positive, got ", o.context_length_);
  OCTET_CHECK(o.num_layers_ > 0, "Gpt: num_layers must be positive, got ", o.num_layers_);
  OCTET_CHECK(o.num_heads_ > 0 && o.width_ > 0 && o.width_ % o.num_heads_ == 0,
              "Gpt: width must be a positive multiple of num_heads, got width ", o.width_, " and ", o.num_heads_,
              " heads");
  OCTET_CHECK(o.dropout_ >= 0 && o.dropout_ < 1, "Gpt: dropout must be in [0, 1), got ", o.dropout_);
}

}  // namespace

GptTransformer::GptTransformer(const GptOptions& o) : options_(o) {
  check_options(o);
  if (o.stable_embedding_)
    wte_ = register_module("wte", std::make_shared<StableEmbedding>(o.vocab_size_, o.width_));
  else
    wte_ = register_module("wte", std::make_shared<Embedding>(o.vocab_size_, o.width_));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(o.context_length_, o.width_));
  h_ = register_module("h", std::make_shared<Sequential>());
  for (int64_t i = 0; i < o.num_layers_; ++i)
    h_->push_back(std::make_shared<TransformerBlock>(o.width_, o.num_heads_, o.dropout_));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(o.width_));
}

Tensor GptTransformer::forward(const Tensor& ids) {
  OCTET_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == DType::i64, "Gpt: expected ids i64 [B, T], got ",
              ids.defined() ? ids.shape() : Shape{});
  const int64_t t = ids.size(1);
  OCTET_CHECK(t <= options_.context_length_, "Gpt: a sequence of ", t, " tokens is longer than context_length ",
              options_.context_length_);
  Tensor pos = arange(t, TensorOptions(DType::i64).device(ids.device()));
  Tensor x = dropout((*wte_)(ids) + (*wpe_)(pos), options_.dropout_, is_training());
  return (*ln_f_)((*h_)(x));
}

Tensor GptTransformer::forward_cached(const Tensor& ids, GptCache& cache) {
  OCTET_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == DType::i64, "Gpt: expected ids i64 [B, T], got ",
              ids.defined() ? ids.shape() : Shape{});
  const int64_t past = cache.length(), t = ids.size(1);
  OCTET_CHECK(past + t <= options_.context_length_, "Gpt::forward_cached: ", past, " cached and ", t,
              " new tokens pass context_length ", options_.context_length_);
  cache.layers.resize(h_->size());
  Tensor pos = arange(static_cast<double>(past), static_cast<double>(past + t), 1.0,
                      TensorOptions(DType::i64).device(ids.device()));
  Tensor x = (*wte_)(ids) + (*wpe_)(pos);
  for (size_t i = 0; i < h_->size(); ++i) {
    auto* block = dynamic_cast<TransformerBlock*>(h_->at(i).get());
    OCTET_CHECK(block != nullptr, "Gpt::forward_cached: layer transformer.h.", i, " is a ", h_->at(i)->type_name(),
                ", not a TransformerBlock");
    x = block->forward_cached(x, cache.layers[i]);
  }
  return (*ln_f_)(x);
}

Gpt::Gpt(const GptOptions& o) : options_(o) {
  transformer_ = register_module("transformer", std::make_shared<GptTransformer>(o));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(o.width_, o.vocab_size_, /*bias=*/false));
  // nanoGPT's _init_weights, then its scaled c_proj weights.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(o.num_layers_));
  apply([&](Module& m) {
    if (auto* lin = dynamic_cast<Linear*>(&m)) {
      init::normal_(lin->weight_, 0.0, 0.02);
      if (lin->bias_.defined()) init::zeros_(lin->bias_);
    } else if (auto* emb = dynamic_cast<Embedding*>(&m); emb != nullptr && !dynamic_cast<StableEmbedding*>(emb)) {
      init::normal_(emb->weight_, 0.0, 0.02);
    }
  });
  for (const auto& [name, p] : named_parameters())
    if (name.ends_with("c_proj.weight")) init::normal_(p, 0.0, proj_std);
  if (o.tie_weights_) lm_head_->weight_ = lm_head_->set_parameter("weight", transformer_->wte_->weight_);
}

Tensor Gpt::forward(const Tensor& ids) { return (*lm_head_)((*transformer_)(ids)); }

Tensor Gpt::forward_cached(const Tensor& ids, GptCache& cache) {
  NoGradGuard no_grad;
  return (*lm_head_)(transformer_->forward_cached(ids, cache));
}

std::string Gpt::extra_repr() const {
  const GptOptions& o = options_;
  return detail::str_cat("vocab_size=", o.vocab_size_, ", context_length=", o.context_length_,
                         ", num_layers=", o.num_layers_, ", num_heads=", o.num_heads_, ", width=", o.width_,
                         ", dropout=", o.dropout_, o.tie_weights_ ? ", tied" : "",
                         o.stable_embedding_ ? ", stable embedding" : "");
}

}  // namespace octet
