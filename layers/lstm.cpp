#include "layers/lstm.h"

#include <cmath>

#include "core/ops/concat.h"
#include "core/ops/dropout.h"
#include "core/ops/rnn.h"
#include "layers/init.h"
#include "layers/quantized.h"

namespace octet {

LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool batch_first, double dropout, bool bias)
    : input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      batch_first_(batch_first),
      dropout_(dropout) {
  OCTET_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0,
              "LSTM: expected positive sizes, got input_size=", input_size, ", hidden_size=", hidden_size,
              ", num_layers=", num_layers);
  OCTET_CHECK(dropout >= 0.0 && dropout <= 1.0, "LSTM: expected dropout in [0, 1], got ", dropout);
  const int64_t g = 4 * hidden_size;
  for (int64_t l = 0; l < num_layers; ++l) {
    const std::string k = std::to_string(l);
    weight_ih_.push_back(register_parameter("weight_ih_l" + k, empty({g, l == 0 ? input_size : hidden_size})));
    weight_hh_.push_back(register_parameter("weight_hh_l" + k, empty({g, hidden_size})));
    bias_ih_.push_back(bias ? register_parameter("bias_ih_l" + k, empty({g})) : Tensor());
    bias_hh_.push_back(bias ? register_parameter("bias_hh_l" + k, empty({g})) : Tensor());
  }
  reset_parameters();
}

void LSTM::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size_));
  for (const auto& [name, p] : named_parameters()) init::uniform_(p, -bound, bound);
}

std::pair<Tensor, LstmState> LSTM::forward(const Tensor& x, const LstmState& state) {
  OCTET_CHECK(x.defined() && x.dim() == 3 && x.size(2) == input_size_, "LSTM: expected input ",
              batch_first_ ? "[B, T, " : "[T, B, ", input_size_, "], got ", x.defined() ? x.shape() : Shape{});
  const int64_t batch = x.size(batch_first_ ? 0 : 1);
  const Shape state_shape{num_layers_, batch, hidden_size_};
  OCTET_CHECK(state.h.defined() == state.c.defined(), "LSTM: the state needs both h and c, or neither");
  if (state.h.defined())
    OCTET_CHECK(state.h.shape() == state_shape && state.c.shape() == state_shape, "LSTM: state h and c must be ",
                state_shape, ", got ", state.h.shape(), " and ", state.c.shape());
  if (inference_) {
    std::vector<Tensor> inputs{x, state.h, state.c};
    for (const auto& [name, p] : named_parameters()) inputs.push_back(p);
    detail::check_inference_only("LSTM", inference_->spec(), is_training(), inputs);
    return inference_->forward(x, state);
  }
  Tensor seq = batch_first_ ? x.transpose(0, 1) : x;  // [T, B, I]
  std::vector<Tensor> hs, cs;
  for (int64_t l = 0; l < num_layers_; ++l) {
    LstmState init = state.h.defined() ? LstmState{state.h.select(0, l), state.c.select(0, l)} : LstmState{};
    auto [y, last] = lstm_layer(seq, init, weight_ih_[l], weight_hh_[l], bias_ih_[l], bias_hh_[l]);
    hs.push_back(last.h);
    cs.push_back(last.c);
    seq = l + 1 < num_layers_ ? dropout(y, dropout_, is_training(), nullptr, /*batch_dim=*/1) : y;
  }
  Tensor out = batch_first_ ? seq.transpose(0, 1).contiguous() : seq;
  return {out, LstmState{stack(hs, 0), stack(cs, 0)}};
}

std::string LSTM::extra_repr() const {
  std::string s = detail::str_cat(input_size_, ", ", hidden_size_);
  if (num_layers_ != 1) s += detail::str_cat(", num_layers=", num_layers_);
  if (!bias_ih_[0].defined()) s += ", bias=false";
  s += batch_first_ ? ", batch_first=true" : ", batch_first=false";
  if (dropout_ > 0) s += detail::str_cat(", dropout=", dropout_);
  if (inference_) s += ", " + inference_->spec().name();
  return s;
}

}  // namespace octet
