// The model the quantized-inference harnesses convert: a 2-layer LSTM language model small enough
// that converting and running it costs microseconds (vocabulary 11, embedding 6, hidden 8: odd K
// for the kernels' tails), with layers "lstm" and "decoder" as in octet's LM recipes; and the batch
// each input runs through it. make_quant_seeds writes exports of this same model.
#pragma once

#include <memory>

#include "core/octet.h"
#include "models/lstm_lm.h"

namespace octet::fuzz {

inline std::shared_ptr<LstmLm> quant_model() {
  manual_seed(1);
  auto m = std::make_shared<LstmLm>(
      LstmLmOptions().vocab_size(11).embed_dim(6).hidden_size(8).num_layers(2).dropout(0));
  m->eval();
  return m;
}

// Token ids [2, 3].
inline Tensor quant_batch() { return from_vector<int64_t>(std::vector<int64_t>{1, 4, 10, 0, 7, 3}, {2, 3}); }

}  // namespace octet::fuzz
