#include "layers/embedding.h"

#include "core/autograd.h"
#include "core/ops/index.h"
#include "layers/init.h"

namespace octet {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim), padding_idx_(padding_idx < 0 ? -1 : padding_idx) {
  OCTET_CHECK(num_embeddings > 0 && embedding_dim > 0, type_name(),
              ": expected positive sizes, got num_embeddings=", num_embeddings, ", embedding_dim=", embedding_dim);
  OCTET_CHECK(padding_idx < num_embeddings, type_name(), ": padding_idx ", padding_idx, " is out of range for ",
              num_embeddings, " rows");
  weight_ = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  Embedding::reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight_);
  zero_padding_row();
}

void Embedding::zero_padding_row() {
  if (padding_idx_ < 0) return;
  NoGradGuard ng;
  weight_.select(0, padding_idx_).zero_();
}

Tensor Embedding::lookup(const Tensor& ids) const {
  OCTET_CHECK(ids.defined() && ids.dtype() == DType::i64, type_name(), ": expected i64 token ids, got ",
              ids.defined() ? dtype_name(ids.dtype()) : std::string_view("an undefined tensor"));
  return embedding(weight_, ids, padding_idx_);
}

Tensor Embedding::forward(const Tensor& ids) { return lookup(ids); }

std::string Embedding::extra_repr() const {
  return detail::str_cat(num_embeddings_, ", ", embedding_dim_,
                         padding_idx_ >= 0 ? detail::str_cat(", padding_idx=", padding_idx_) : std::string());
}

StableEmbedding::StableEmbedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx)
    : Embedding(num_embeddings, embedding_dim, padding_idx) {
  norm_ = register_module("norm", std::make_shared<LayerNorm>(embedding_dim));
  StableEmbedding::reset_parameters();
  mark_keep_32bit_state("weight");
}

void StableEmbedding::reset_parameters() {
  init::xavier_uniform_(weight_);
  zero_padding_row();
  if (norm_) norm_->reset_parameters();
}

Tensor StableEmbedding::forward(const Tensor& ids) { return (*norm_)(lookup(ids)); }

}  // namespace octet
