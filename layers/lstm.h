// LSTM: a multi-layer LSTM with PyTorch's parameter names, layout and initialization
// (weight_ih_l{k} [4H, in], weight_hh_l{k} [4H, H], bias_ih_l{k}, bias_hh_l{k} [4H], gate order
// i, f, g, o, everything from U(-1/sqrt(H), 1/sqrt(H))), so state_dicts map to torch.nn.LSTM's.
// Each layer runs the fused lstm_layer op (core/ops/rnn.h); dropout between layers while training.
//   auto lstm = std::make_shared<LSTM>(256, 512, /*num_layers=*/2);      // batch_first
//   auto [y, last] = lstm->forward(x, LstmState{});                      // x [B,T,256] -> y [B,T,512]
//   auto [y2, next] = lstm->forward(x2, last);                           // state carried in
// set_inference runs a quantized inference LSTM in its place (layers/quantized.h: PrecisionBatching
// or int8 input and hidden matrices), as Conv2d::set_int8 does for INT8 training:
//   lstm->set_inference(std::make_shared<PbLstm>(*lstm, quant::PbConfig{4, 16}));   // inference only now
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/ops/rnn.h"
#include "layers/module.h"

namespace octet {

class QuantLstm;

class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool batch_first = true, double dropout = 0.0,
       bool bias = true);
  // x [B, T, input_size] (batch_first) or [T, B, input_size]; state h, c [num_layers, B, H] each,
  // undefined (LstmState{}) for zeros -> y [B, T, H] (or [T, B, H]) of the last layer, and the
  // state after the last step, [num_layers, B, H] each.
  std::pair<Tensor, LstmState> forward(const Tensor& x, const LstmState& state);
  // Module interface: zero initial state, output only.
  Tensor forward(const Tensor& x) override { return forward(x, LstmState{}).first; }
  std::string type_name() const override { return "LSTM"; }
  std::string extra_repr() const override;
  void reset_parameters();

  // Quantized inference: forward runs `q` (made from this layer's weights; an Error while training or
  // when a gradient is needed); nullptr returns to float. The parameters stay, for saving and training.
  void set_inference(std::shared_ptr<QuantLstm> q) { inference_ = std::move(q); }
  const std::shared_ptr<QuantLstm>& inference() const { return inference_; }

  int64_t input_size_, hidden_size_, num_layers_;
  bool batch_first_;
  double dropout_;
  // Per layer; the biases are undefined without bias.
  std::vector<Tensor> weight_ih_, weight_hh_, bias_ih_, bias_hh_;

 private:
  std::shared_ptr<QuantLstm> inference_;  // null: float
};

}  // namespace octet
