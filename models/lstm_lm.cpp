#include "models/lstm_lm.h"

#include "layers/init.h"

namespace octet {

LstmState detach(const LstmState& s) {
  return {s.h.defined() ? s.h.detach() : Tensor(), s.c.defined() ? s.c.detach() : Tensor()};
}

namespace {

// The options with embed_dim resolved, after checking them.
LstmLmOptions checked(LstmLmOptions o) {
  OCTET_CHECK(o.vocab_size_ > 0, "LstmLm: vocab_size must be positive, got ", o.vocab_size_);
  OCTET_CHECK(o.hidden_size_ > 0, "LstmLm: hidden_size must be positive, got ", o.hidden_size_);
  OCTET_CHECK(o.num_layers_ > 0, "LstmLm: num_layers must be positive, got ", o.num_layers_);
  OCTET_CHECK(o.embed_dim_ >= 0, "LstmLm: embed_dim must be positive (or 0: hidden_size), got ", o.embed_dim_);
  OCTET_CHECK(o.dropout_ >= 0 && o.dropout_ < 1, "LstmLm: dropout must be in [0, 1), got ", o.dropout_);
  if (o.embed_dim_ == 0) o.embed_dim_ = o.hidden_size_;
  OCTET_CHECK(!o.tie_weights_ || o.embed_dim_ == o.hidden_size_,
              "LstmLm: tie_weights needs embed_dim == hidden_size, got embed_dim=", o.embed_dim_,
              ", hidden_size=", o.hidden_size_);
  return o;
}

}  // namespace

LstmLm::LstmLm(const LstmLmOptions& opts) : opts_(checked(opts)) {
  const LstmLmOptions& o = opts_;
  if (o.stable_embedding_) {
    embedding_ = register_module("embedding", std::make_shared<StableEmbedding>(o.vocab_size_, o.embed_dim_));
  } else {
    embedding_ = register_module("embedding", std::make_shared<Embedding>(o.vocab_size_, o.embed_dim_));
    init::uniform_(embedding_->weight_, -0.1, 0.1);
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(o.dropout_));
  lstm_ = register_module("lstm", std::make_shared<LSTM>(o.embed_dim_, o.hidden_size_, o.num_layers_,
                                                         /*batch_first=*/true, o.dropout_));
  decoder_ = register_module("decoder", std::make_shared<Linear>(o.hidden_size_, o.vocab_size_));
  init::zeros_(decoder_->bias_);
  if (o.tie_weights_)
    decoder_->weight_ = decoder_->set_parameter("weight", embedding_->weight_);
  else
    init::uniform_(decoder_->weight_, -0.1, 0.1);
}

std::pair<Tensor, LstmState> LstmLm::forward(const Tensor& ids, const LstmState& state) {
  OCTET_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2,
              "LstmLm: expected token ids i64 [B, T], got ",
              ids.defined() ? detail::str_cat(ids.dtype(), " ", ids.shape()) : std::string("an undefined tensor"));
  Tensor e = (*drop_)((*embedding_)(ids));
  auto [y, next] = lstm_->forward(e, state);
  return {(*decoder_)((*drop_)(y)), next};
}

LstmState LstmLm::initial_state(int64_t batch) const {
  OCTET_CHECK(batch > 0, "LstmLm::initial_state: batch must be positive, got ", batch);
  const Tensor& w = lstm_->weight_hh_[0];
  TensorOptions like = TensorOptions(w.dtype()).device(w.device());
  const Shape shape{opts_.num_layers_, batch, opts_.hidden_size_};
  return {zeros(shape, like), zeros(shape, like)};
}

std::string LstmLm::extra_repr() const {
  const LstmLmOptions& o = opts_;
  return detail::str_cat("vocab_size=", o.vocab_size_, ", embed_dim=", o.embed_dim_, ", hidden_size=", o.hidden_size_,
                         ", num_layers=", o.num_layers_, ", dropout=", o.dropout_,
                         ", tie_weights=", o.tie_weights_ ? "true" : "false",
                         ", stable_embedding=", o.stable_embedding_ ? "true" : "false");
}

}  // namespace octet
