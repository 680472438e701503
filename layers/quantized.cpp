#include "layers/quantized.h"

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/concat.h"
#include "core/ops/elementwise.h"

namespace octet {

namespace detail {
void check_inference_only(const std::string& layer, const quant::QuantSpec& spec, bool training,
                          const std::vector<Tensor>& inputs) {
  OCTET_CHECK(!training, layer, ": quantized (", spec.name(),
              ") layers run inference only, and this one is in training mode; call eval() on the model first");
  OCTET_CHECK(!autograd::needs_grad(inputs), layer, ": quantized (", spec.name(),
              ") layers have no backward, and this forward would need one; run it under NoGradGuard");
}
}  // namespace detail

namespace {

// t on device d, replacing the handle (the layer's own copies: a model moved after conversion).
const Tensor& on_device(Tensor& t, Device d) {
  if (t.defined() && !(t.device() == d)) t = t.to(d);
  return t;
}

}  // namespace

QuantLinear::QuantLinear(const Linear& linear, const quant::QuantSpec& spec)
    : QuantLinear(quant::make_quant_matmul(linear.weight_, spec), linear.bias_) {}

QuantLinear::QuantLinear(std::shared_ptr<quant::QuantMatmul> weight, Tensor bias)
    : weight_(std::move(weight)), bias_(bias.defined() ? bias.detach() : Tensor()) {
  OCTET_CHECK(weight_ != nullptr, "QuantLinear: no weights");
  OCTET_CHECK(!bias_.defined() || bias_.shape() == Shape{weight_->rows()}, "QuantLinear: bias must be [",
              weight_->rows(), "], got ", bias_.shape());
  eval();  // inference only
}

Tensor QuantLinear::forward(const Tensor& x) {
  const int64_t in = weight_->cols();
  OCTET_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in, type_name(), ": expected input [..., ", in, "], got ",
              x.defined() ? x.shape() : Shape{});
  detail::check_inference_only(type_name(), spec(), is_training(), {x});
  Shape out_shape = x.shape();
  out_shape.back() = weight_->rows();
  return weight_->forward(x.reshape({-1, in}), on_device(bias_, x.device())).reshape(out_shape);
}

std::string QuantLinear::extra_repr() const {
  return detail::str_cat("in_features=", weight_->cols(), ", out_features=", weight_->rows(), ", ", spec().name());
}

namespace {

std::vector<std::shared_ptr<quant::QuantMatmul>> prepare(const std::vector<Tensor>& ws, const quant::QuantSpec& spec) {
  std::vector<std::shared_ptr<quant::QuantMatmul>> out;
  for (const Tensor& w : ws) out.push_back(quant::make_quant_matmul(w, spec));
  return out;
}

}  // namespace

QuantLstm::QuantLstm(const LSTM& lstm, const quant::QuantSpec& spec)
    : QuantLstm(lstm, prepare(lstm.weight_ih_, spec), prepare(lstm.weight_hh_, spec)) {}

QuantLstm::QuantLstm(const LSTM& like, std::vector<std::shared_ptr<quant::QuantMatmul>> ih,
                     std::vector<std::shared_ptr<quant::QuantMatmul>> hh)
    : input_size_(like.input_size_),
      hidden_size_(like.hidden_size_),
      num_layers_(like.num_layers_),
      batch_first_(like.batch_first_),
      ih_(std::move(ih)),
      hh_(std::move(hh)) {
  const int64_t g4 = 4 * hidden_size_;
  OCTET_CHECK(static_cast<int64_t>(ih_.size()) == num_layers_ && static_cast<int64_t>(hh_.size()) == num_layers_,
              "QuantLstm: expected ", num_layers_, " input and hidden matrices, got ", ih_.size(), " and ", hh_.size());
  for (int64_t l = 0; l < num_layers_; ++l) {
    const int64_t in = l == 0 ? input_size_ : hidden_size_;
    OCTET_CHECK(ih_[l] && ih_[l]->rows() == g4 && ih_[l]->cols() == in, "QuantLstm: layer ", l,
                ": the input matrix must be [", g4, ", ", in, "]");
    OCTET_CHECK(hh_[l] && hh_[l]->rows() == g4 && hh_[l]->cols() == hidden_size_, "QuantLstm: layer ", l,
                ": the hidden matrix must be [", g4, ", ", hidden_size_, "]");
    OCTET_CHECK(ih_[l]->spec() == ih_[0]->spec() && hh_[l]->spec() == ih_[0]->spec(),
                "QuantLstm: every matrix needs the same precision");
    NoGradGuard ng;
    bias_.push_back(like.bias_ih_[l].defined() ? (like.bias_ih_[l].detach() + like.bias_hh_[l].detach()).contiguous()
                                               : Tensor());
  }
  eval();  // inference only
}

std::pair<Tensor, LstmState> QuantLstm::forward(const Tensor& x, const LstmState& state) {
  OCTET_CHECK(x.defined() && x.dim() == 3 && x.size(2) == input_size_ && x.dtype() == DType::f32, type_name(),
              ": expected input f32 ", batch_first_ ? "[B, T, " : "[T, B, ", input_size_, "], got ",
              x.defined() ? detail::str_cat(x.dtype(), " ", x.shape()) : std::string("an undefined tensor"));
  const int64_t steps = x.size(batch_first_ ? 1 : 0), batch = x.size(batch_first_ ? 0 : 1), hs = hidden_size_;
  const Shape state_shape{num_layers_, batch, hs};
  OCTET_CHECK(state.h.defined() == state.c.defined(), type_name(), ": the state needs both h and c, or neither");
  if (state.h.defined())
    OCTET_CHECK(state.h.shape() == state_shape && state.c.shape() == state_shape, type_name(),
                ": state h and c must be ", state_shape, ", got ", state.h.shape(), " and ", state.c.shape());
  OCTET_CHECK(steps >= 1, type_name(), ": expected at least one time step, got input shape ", x.shape());
  detail::check_inference_only(type_name(), spec(), is_training(), {x, state.h, state.c});
  const Device dev = x.device();
  const TensorOptions like = TensorOptions(DType::f32).device(dev);
  Tensor seq = (batch_first_ ? x.transpose(0, 1) : x).contiguous();  // [T, B, in]
  std::vector<Tensor> hs_last, cs_last;
  for (int64_t l = 0; l < num_layers_; ++l) {
    // Every step's input projection at once: activation scales are per row, so this is step by step.
    Tensor gx = ih_[l]->forward(seq.reshape({steps * batch, seq.size(2)})).reshape({steps, batch, 4 * hs});
    const Tensor& bias = on_device(bias_[l], dev);
    Tensor h = state.h.defined() ? state.h.select(0, l).contiguous() : Tensor();  // undefined: zeros
    Tensor c = state.c.defined() ? state.c.select(0, l).contiguous() : zeros({batch, hs}, like);
    Tensor y = empty({steps, batch, hs}, like);
    for (int64_t t = 0; t < steps; ++t) {
      Tensor g = h.defined() ? (hh_[l]->forward(h) + gx.select(0, t)).contiguous() : gx.select(0, t).clone();
      Tensor c_next = empty({batch, hs}, like);
      h = y.select(0, t);
      kernels::lstm_gates_forward(g, bias, c, c_next, h);  // the float LSTM's gates and cell update
      c = c_next;
    }
    hs_last.push_back(h);
    cs_last.push_back(c);
    seq = y;
  }
  Tensor out = batch_first_ ? seq.transpose(0, 1).contiguous() : seq;
  return {out, LstmState{stack(hs_last, 0), stack(cs_last, 0)}};
}

std::string QuantLstm::extra_repr() const {
  std::string s = detail::str_cat(input_size_, ", ", hidden_size_);
  if (num_layers_ != 1) s += detail::str_cat(", num_layers=", num_layers_);
  return s + ", " + spec().name();
}

}  // namespace octet
