// Embedding: a lookup table of `num_embeddings` rows of `embedding_dim`, as torch.nn.Embedding.
// StableEmbedding: the 8-bit optimizers paper's variant (Dettmers et al. 2022, section 2.3,
// bitsandbytes' StableEmbedding): Xavier-uniform weight, LayerNorm right after the lookup, and
// its weight marked for 32-bit optimizer state (Module::mark_keep_32bit_state), so an optimizer
// with 8-bit state built over any model that contains it keeps that one tensor in 32 bits.
//   auto emb = std::make_shared<StableEmbedding>(10000, 512);
//   Tensor e = (*emb)(ids);                                 // ids i64 [B, T] -> [B, T, 512]
//   Adam opt(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));  // emb 32-bit
#pragma once

#include <memory>

#include "layers/layer_norm.h"
#include "layers/module.h"

namespace octet {

class Embedding : public Module {
 public:
  // weight [num_embeddings, embedding_dim] from N(0, 1); row padding_idx (if >= 0) zeroed, and it
  // gets no gradient. A negative padding_idx means none.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1);
  // ids i64, any shape, values in [0, num_embeddings) (else an octet::Error) -> [..., embedding_dim]
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  virtual void reset_parameters();

  int64_t num_embeddings_, embedding_dim_, padding_idx_;
  Tensor weight_;

 protected:
  Tensor lookup(const Tensor& ids) const;
  void zero_padding_row();
};

class StableEmbedding : public Embedding {
 public:
  // weight Xavier-uniform (padding row zeroed), norm = LayerNorm(embedding_dim).
  StableEmbedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "StableEmbedding"; }
  void reset_parameters() override;

  std::shared_ptr<LayerNorm> norm_;
};

}  // namespace octet
