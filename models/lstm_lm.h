// LstmLm: the word/character-level LSTM language model of the PrecisionBatching paper
// (../shared/papers/precisionbatching.md): embedding (plain or StableEmbedding) -> dropout ->
// LSTM (num_layers, batch-first) -> dropout -> Linear decoder to vocabulary logits, the decoder
// optionally tied to the embedding weight (then embed_dim must equal hidden_size).
//   auto lm = std::make_shared<LstmLm>(LstmLmOptions().vocab_size(10000).hidden_size(650).num_layers(2));
//   LstmState st = lm->initial_state(batch);               // zeros, [num_layers, B, H] each
//   auto [logits, next] = lm->forward(ids, st);            // ids i64 [B,T] -> logits [B,T,V]
//   st = detach(next);                                      // truncated BPTT: carry, cut the graph
#pragma once

#include <utility>

#include "core/ops/nn.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/module.h"

namespace octet {

struct LstmLmOptions {
  int64_t vocab_size_ = 0;  // required, > 0
  int64_t embed_dim_ = 0;   // 0: same as hidden_size
  int64_t hidden_size_ = 650;
  int64_t num_layers_ = 1;
  double dropout_ = 0.5;           // after the embedding, between LSTM layers, before the decoder
  bool tie_weights_ = false;       // decoder.weight is embedding.weight
  bool stable_embedding_ = false;  // StableEmbedding (Xavier init + LayerNorm, 32-bit optimizer state)

  LstmLmOptions& vocab_size(int64_t v) {
    vocab_size_ = v;
    return *this;
  }
  LstmLmOptions& embed_dim(int64_t v) {
    embed_dim_ = v;
    return *this;
  }
  LstmLmOptions& hidden_size(int64_t v) {
    hidden_size_ = v;
    return *this;
  }
  LstmLmOptions& num_layers(int64_t v) {
    num_layers_ = v;
    return *this;
  }
  LstmLmOptions& dropout(double v) {
    dropout_ = v;
    return *this;
  }
  LstmLmOptions& tie_weights(bool v) {
    tie_weights_ = v;
    return *this;
  }
  LstmLmOptions& stable_embedding(bool v) {
    stable_embedding_ = v;
    return *this;
  }
};

// h and c of every layer, each [num_layers, B, H].
LstmState detach(const LstmState& s);

class LstmLm : public Module {
 public:
  // Bad options (vocab_size <= 0, tie_weights with embed_dim != hidden_size, ...) are octet::Errors.
  explicit LstmLm(const LstmLmOptions& opts);
  // ids i64 [B,T] (values in [0, vocab_size), else octet::Error) -> logits [B,T,V] and the state
  // after the last step. An undefined state (LstmState{}) means zeros.
  std::pair<Tensor, LstmState> forward(const Tensor& ids, const LstmState& state);
  // Module interface: zero initial state, logits only.
  Tensor forward(const Tensor& ids) override { return forward(ids, LstmState{}).first; }
  // Zeros [num_layers, batch, hidden_size] on the parameters' device and dtype.
  LstmState initial_state(int64_t batch) const;
  std::string type_name() const override { return "LstmLm"; }
  std::string extra_repr() const override;

  LstmLmOptions opts_;
  // Children, registered as "embedding", "drop", "lstm", "decoder" (a tied decoder.weight is the
  // same tensor as embedding.weight). Initialization as PyTorch's word_language_model example:
  // a plain embedding and the decoder weight from U(-0.1, 0.1), decoder bias 0 (a StableEmbedding
  // keeps its Xavier init); the LSTM has its default init.
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<LSTM> lstm_;
  std::shared_ptr<Linear> decoder_;
};

}  // namespace octet
