// Quantized inference layers over quant::QuantMatmul (quant/qmatmul.h): PrecisionBatching
// (PbLinear, PbLstm: n-bit weights, k-bit activations) and the zero-point int8 inference baseline
// (ZeroPointLinear, ZeroPointLstm: quant/qgemm.h's int8 weights, uint8 activations with a zero
// point per row; not INT8 training, quant/int8.h), made from trained float layers. Inference only: forward throws an
// octet::Error while the layer trains or when a gradient would be needed (run under NoGradGuard).
// The weights are preprocessed once, in the constructor; biases, gates and the cell update stay
// float. QuantLstm quantizes each layer's input and hidden matrices: the input projection of every
// step at once (activations are quantized per row, so this equals step by step), then per step
// h W_hh^T and the fused pointwise kernel of the float LSTM (kernels::lstm_gates_forward) — one
// recurrence for both kinds. Conversion in place: Linear::set_inference / LSTM::set_inference
// make the float layer run through one of these (quant/precision.h converts whole models).
//   auto pb = std::make_shared<PbLinear>(*fc, quant::PbConfig{/*w_bits=*/4, /*a_bits=*/16});
//   NoGradGuard ng;  Tensor y = (*pb)(x);                  // x [..., in] -> [..., out]
//   lm->lstm_->set_inference(std::make_shared<PbLstm>(*lm->lstm_, quant::PbConfig{8, 16}));
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/ops/rnn.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "quant/qmatmul.h"

namespace octet {

class QuantLinear : public Module {
 public:
  // Preprocesses linear.weight_ for `spec`; the bias is linear's (shared, float).
  QuantLinear(const Linear& linear, const quant::QuantSpec& spec);
  // From preprocessed weights (an export) and a bias [out] (or undefined).
  QuantLinear(std::shared_ptr<quant::QuantMatmul> weight, Tensor bias);
  // x f32 [..., in] -> [..., out]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "QuantLinear"; }
  std::string extra_repr() const override;
  const quant::QuantSpec& spec() const { return weight_->spec(); }

  std::shared_ptr<quant::QuantMatmul> weight_;
  Tensor bias_;
};

// QuantLinear with PrecisionBatching weights.
class PbLinear : public QuantLinear {
 public:
  PbLinear(const Linear& linear, const quant::PbConfig& config)
      : QuantLinear(linear, quant::QuantSpec::pbatch(config)) {}
  std::string type_name() const override { return "PbLinear"; }
};

// QuantLinear with the zero-point int8 baseline (quant::qlinear).
class ZeroPointLinear : public QuantLinear {
 public:
  explicit ZeroPointLinear(const Linear& linear) : QuantLinear(linear, quant::QuantSpec::int8()) {}
  std::string type_name() const override { return "ZeroPointLinear"; }
};

class QuantLstm : public Module {
 public:
  // Preprocesses every layer's weight_ih and weight_hh for `spec`; the biases are summed (float).
  QuantLstm(const LSTM& lstm, const quant::QuantSpec& spec);
  // From preprocessed matrices per layer (ih [4H, in], hh [4H, H]) and summed biases [4H] (or
  // undefined), as an export holds them; the sizes are checked against `like`.
  QuantLstm(const LSTM& like, std::vector<std::shared_ptr<quant::QuantMatmul>> ih,
            std::vector<std::shared_ptr<quant::QuantMatmul>> hh);
  // As LSTM::forward: x [B, T, in] (batch_first) or [T, B, in], state h, c [L, B, H] (undefined:
  // zeros) -> y of the last layer and the state after the last step.
  std::pair<Tensor, LstmState> forward(const Tensor& x, const LstmState& state);
  Tensor forward(const Tensor& x) override { return forward(x, LstmState{}).first; }
  std::string type_name() const override { return "QuantLstm"; }
  std::string extra_repr() const override;
  const quant::QuantSpec& spec() const { return ih_[0]->spec(); }

  int64_t input_size_, hidden_size_, num_layers_;
  bool batch_first_;
  std::vector<std::shared_ptr<quant::QuantMatmul>> ih_, hh_;  // per layer
  std::vector<Tensor> bias_;                                  // per layer b_ih + b_hh, or undefined
};

class PbLstm : public QuantLstm {
 public:
  PbLstm(const LSTM& lstm, const quant::PbConfig& config) : QuantLstm(lstm, quant::QuantSpec::pbatch(config)) {}
  std::string type_name() const override { return "PbLstm"; }
};

// QuantLstm with the zero-point int8 baseline.
class ZeroPointLstm : public QuantLstm {
 public:
  explicit ZeroPointLstm(const LSTM& lstm) : QuantLstm(lstm, quant::QuantSpec::int8()) {}
  std::string type_name() const override { return "ZeroPointLstm"; }
};

namespace detail {
// The Error of a quantized layer run for training: `layer` is its type, `training` its mode.
void check_inference_only(const std::string& layer, const quant::QuantSpec& spec, bool training,
                          const std::vector<Tensor>& inputs);
}  // namespace detail

// The spellings before octet's naming rule (README, "Names"); kept so existing code builds.
using PBLinear = PbLinear;
using QuantLSTM = QuantLstm;
using PBLSTM = PbLstm;

}  // namespace octet
