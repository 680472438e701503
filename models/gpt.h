// Gpt: a GPT-2-style decoder-only transformer with nanoGPT's module names and initialization, so a
// nanoGPT state_dict loads (tests/models/data/make_gpt_golden.py makes the f64 goldens):
//   transformer.wte [V, C] (Embedding, or StableEmbedding), transformer.wpe [context, C],
//   transformer.drop, transformer.h.{i} (TransformerBlock: ln_1, attn.c_attn, attn.c_proj, ln_2,
//   mlp.c_fc, mlp.c_proj), transformer.ln_f, lm_head [V, C] (its weight is wte's when tied).
// Initialization as nanoGPT: Linear and Embedding weights N(0, 0.02), biases 0, each c_proj
// weight N(0, 0.02 / sqrt(2 * num_layers)), LayerNorms 1 and 0 (a StableEmbedding keeps its Xavier
// initialization).
//   auto gpt =
//   std::make_shared<Gpt>(GptOptions().vocab_size(65).context_length(256).num_layers(6).num_heads(6).width(384));
//   Tensor logits = (*gpt)(ids);   // ids i64 [B, T], T <= context_length -> [B, T, V]
//   GptCache cache;                 // decoding: each token read once, its keys and values kept
//   Tensor l = gpt->forward_cached(prompt_ids, cache);   // then one id [B, 1] at a time
#pragma once

#include <memory>
#include <vector>

#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/sequential.h"

namespace octet {

struct GptOptions {
  int64_t vocab_size_ = 0;  // required, > 0
  int64_t context_length_ = 256;
  int64_t num_layers_ = 6;
  int64_t num_heads_ = 6;
  int64_t width_ = 384;  // a multiple of num_heads
  double dropout_ = 0.0;
  bool tie_weights_ = true;        // lm_head.weight is transformer.wte.weight
  bool stable_embedding_ = false;  // transformer.wte is a StableEmbedding

  GptOptions& vocab_size(int64_t v) {
    vocab_size_ = v;
    return *this;
  }
  GptOptions& context_length(int64_t v) {
    context_length_ = v;
    return *this;
  }
  GptOptions& num_layers(int64_t v) {
    num_layers_ = v;
    return *this;
  }
  GptOptions& num_heads(int64_t v) {
    num_heads_ = v;
    return *this;
  }
  GptOptions& width(int64_t v) {
    width_ = v;
    return *this;
  }
  GptOptions& dropout(double v) {
    dropout_ = v;
    return *this;
  }
  GptOptions& tie_weights(bool v) {
    tie_weights_ = v;
    return *this;
  }
  GptOptions& stable_embedding(bool v) {
    stable_embedding_ = v;
    return *this;
  }
};

// Every layer's keys and values of the tokens read so far (Gpt::forward_cached).
struct GptCache {
  std::vector<KvCache> layers;
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
};

// The body under "transformer": embeddings, blocks and the final LayerNorm.
class GptTransformer : public Module {
 public:
  explicit GptTransformer(const GptOptions& o);
  // ids i64 [B, T] -> hidden states [B, T, C] after ln_f
  Tensor forward(const Tensor& ids) override;
  // The same for the tokens after those in `cache` (positions cache.length() on), appending theirs.
  Tensor forward_cached(const Tensor& ids, GptCache& cache);
  std::string type_name() const override { return "GptTransformer"; }

  GptOptions options_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Sequential> h_;
  std::shared_ptr<LayerNorm> ln_f_;
};

class Gpt : public Module {
 public:
  explicit Gpt(const GptOptions& o);
  // ids i64 [B, T] -> logits [B, T, vocab_size]
  Tensor forward(const Tensor& ids) override;
  // Incremental decoding with a key/value cache: ids [B, Tn] are the tokens after the cache's
  // (several only on an empty cache: the prompt, then one at a time); the logits [B, Tn, V] are
  // forward()'s on the whole sequence's last Tn positions, each token costing O(its context) rather
  // than a pass over the prefix. The whole sequence stays within context_length (an Error beyond:
  // the positions are absolute, so a longer text needs the window read again, as `octet generate`
  // does). Evaluation only: no autograd, no dropout.
  Tensor forward_cached(const Tensor& ids, GptCache& cache);
  std::string type_name() const override { return "Gpt"; }
  std::string extra_repr() const override;

  GptOptions options_;
  std::shared_ptr<GptTransformer> transformer_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace octet
