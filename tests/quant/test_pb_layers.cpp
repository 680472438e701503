// Quantized inference layers (layers/quantized.h) and the model converter (quant/precision.h):
// PbLinear / ZeroPointLinear are pb_linear / qlinear on their preprocessed weights, the quantized LSTM
// with 8-bit weights and 32-bit activations tracks the float LSTM, a whole sequence equals token by
// token, the in-place hooks of Linear and LSTM, inference-only errors, plan selection and errors,
// and the preprocessed state's round trip with its validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/octet.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/quantized.h"
#include "layers/sequential.h"
#include "models/lstm_lm.h"
#include "quant/precision.h"
#include "quant/qgemm.h"
#include "tests/train/run_util.h"

namespace octet::quant {
namespace {

using train::expect_error;

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  EXPECT_EQ(va.size(), vb.size());
  float m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

TEST(PbLayers, PBLinearIsPbLinearOnItsWeights) {
  Generator g(1);
  Linear lin(37, 19);
  Tensor x = randn({2, 3, 37}, {}, &g);
  NoGradGuard ng;
  for (PbConfig c : {PbConfig{4, 16, true}, PbConfig{1, 8, true}, PbConfig{8, 32, false}}) {
    PbLinear pb(lin, c);
    EXPECT_EQ(pb.spec().name(), pb_config_name(c));
    Tensor want =
        pb_linear(pb_preprocess(lin.weight_, c.w_bits, c.clip_search), x.reshape({6, 37}), c.a_bits, lin.bias_);
    Tensor y = pb(x);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 19}));
    EXPECT_EQ(y.reshape({6, 19}).to_vector<float>(), want.to_vector<float>()) << pb_config_name(c);
  }
  ZeroPointLinear q(lin);
  EXPECT_EQ(q(x).reshape({6, 19}).to_vector<float>(),
            qlinear(qlinear_prepare(lin.weight_), x.reshape({6, 37}), lin.bias_).to_vector<float>());
}

TEST(PbLayers, LinearHookAndInferenceOnlyErrors) {
  Generator g(2);
  auto lin = std::make_shared<Linear>(20, 7);
  Tensor x = randn({4, 20}, {}, &g);
  auto pb = std::make_shared<PbLinear>(*lin, PbConfig{4, 16});
  lin->set_inference(pb);
  EXPECT_EQ(lin->extra_repr(), "in_features=20, out_features=7, bias=true, w4a16");
  expect_error([&] { (*lin)(x); }, "training mode");  // a new layer trains
  lin->eval();
  expect_error([&] { (*lin)(x); }, "NoGradGuard");  // its parameters require grad
  {
    NoGradGuard ng;
    EXPECT_EQ((*lin)(x).to_vector<float>(), (*pb)(x).to_vector<float>());
  }
  Tensor xg = x.clone();
  xg.requires_grad_(true);
  expect_error([&] { (*pb)(xg); }, "no backward");
  lin->set_inference(nullptr);
  lin->train();
  EXPECT_EQ((*lin)(x).shape(), (Shape{4, 7}));  // float again, trainable
}

// 8-bit weights (steps of max|W| / 128) and 32-bit activations: the LSTM stays close to float.
TEST(PbLayers, QuantLstmW8A32TracksFloat) {
  manual_seed(3);  // the LSTM's init
  Generator g(3);
  LSTM lstm(16, 24, /*num_layers=*/2);
  lstm.eval();
  Tensor x = randn({3, 9, 16}, {}, &g);
  LstmState s0{0.5 * randn({2, 3, 24}, {}, &g), 0.5 * randn({2, 3, 24}, {}, &g)};
  NoGradGuard ng;
  auto [y_ref, st_ref] = lstm.forward(x, s0);
  PbLstm pb(lstm, PbConfig{8, 32});
  auto [y, st] = pb.forward(x, s0);
  ASSERT_EQ(y.shape(), y_ref.shape());
  // Measured 7e-4 (the weights' rounding: steps of about 0.2 / 128 over 16-24 inputs per gate);
  // a bound with margin. 1-bit weights: 0.08.
  constexpr float kW8Tolerance = 5e-3f;
  EXPECT_LT(max_abs_diff(y, y_ref), kW8Tolerance);
  EXPECT_LT(max_abs_diff(st.h, st_ref.h), kW8Tolerance);
  EXPECT_LT(max_abs_diff(st.c, st_ref.c), kW8Tolerance);
  // 1-bit weights are far off: the comparison means something.
  EXPECT_GT(max_abs_diff(PbLstm(lstm, PbConfig{1, 32}).forward(x, s0).first, y_ref), 4 * kW8Tolerance);
}

// Activations are quantized per row, so the whole sequence (every step's input projection in one
// call) equals feeding it token by token with the state carried; for both kinds.
TEST(PbLayers, QuantLstmSequenceEqualsTokenByToken) {
  Generator g(4);
  LSTM lstm(10, 12, /*num_layers=*/2, /*batch_first=*/true);
  Tensor x = randn({2, 5, 10}, {}, &g);
  NoGradGuard ng;
  for (const QuantSpec& spec : {QuantSpec::pbatch({4, 16}), QuantSpec::int8()}) {
    QuantLstm q(lstm, spec);
    auto [y, last] = q.forward(x, LstmState{});
    LstmState s;
    for (int64_t t = 0; t < 5; ++t) {
      auto [yt, next] = q.forward(x.narrow(1, t, 1), s);
      s = next;
      EXPECT_EQ(yt.reshape({2, 12}).to_vector<float>(),
                y.narrow(1, t, 1).contiguous().reshape({2, 12}).to_vector<float>())
          << spec.name() << " step " << t;
    }
    EXPECT_EQ(s.h.to_vector<float>(), last.h.to_vector<float>());
    EXPECT_EQ(s.c.to_vector<float>(), last.c.to_vector<float>());
  }
}

TEST(PbLayers, LstmHook) {
  Generator g(5);
  LSTM lstm(6, 8);
  Tensor x = randn({2, 3, 6}, {}, &g);
  auto q = std::make_shared<ZeroPointLstm>(lstm);
  lstm.set_inference(q);
  EXPECT_NE(lstm.extra_repr().find("int8"), std::string::npos);
  lstm.eval();
  expect_error([&] { lstm.forward(x); }, "NoGradGuard");
  NoGradGuard ng;
  EXPECT_EQ(lstm.forward(x).to_vector<float>(), q->forward(x).to_vector<float>());
  lstm.train();
  expect_error([&] { lstm.forward(x); }, "training mode");
}

std::shared_ptr<LstmLm> small_lm() {
  return std::make_shared<LstmLm>(LstmLmOptions().vocab_size(30).embed_dim(8).hidden_size(12).num_layers(2));
}

// A twin of the converted `lm` (its float weights) loads `tensors` and `assignment` (saved from
// lm) as the layers `described` and computes exactly lm's logits.
void expect_state_round_trips(LstmLm& lm, const NamedTensors& tensors, const std::string& assignment,
                              const std::string& described) {
  auto twin = small_lm();
  twin->eval();
  twin->load_state_dict(lm.state_dict());
  EXPECT_EQ(describe_layers(load_quant_state(*twin, tensors, assignment, "f")), described);
  Tensor ids = from_vector<int64_t>({1, 5, 7, 2, 29, 0}, {2, 3});
  NoGradGuard ng;
  EXPECT_EQ(lm.forward(ids).to_vector<float>(), twin->forward(ids).to_vector<float>());
}

TEST(PbLayers, ConverterSelection) {
  auto lm = small_lm();
  auto layers = convert_model(*lm, uniform_plan(QuantSpec::pbatch({4, 16})));
  EXPECT_EQ(describe_layers(layers), "lstm: w4a16, decoder: float");
  EXPECT_NE(lm->lstm_->inference(), nullptr);
  EXPECT_EQ(lm->decoder_->inference(), nullptr);
  // A per-layer plan may convert the final layer; unnamed layers follow the default (none: float).
  PrecisionPlan p;
  p.layers["decoder"] = QuantSpec::pbatch({8, 8});
  EXPECT_EQ(describe_layers(convert_model(*lm, p)), "lstm: float, decoder: w8a8");
  EXPECT_EQ(lm->lstm_->inference(), nullptr);
  reset_to_float(*lm);
  EXPECT_EQ(lm->decoder_->inference(), nullptr);
  // An MLP: every Linear but the last.
  Sequential mlp;
  mlp.push_back(std::make_shared<Linear>(4, 8));
  mlp.push_back(std::make_shared<ReLU>());
  mlp.push_back(std::make_shared<Linear>(8, 8));
  mlp.push_back(std::make_shared<Linear>(8, 2));
  EXPECT_EQ(describe_layers(convert_model(mlp, uniform_plan(QuantSpec::int8()))), "0: int8, 2: int8, 3: float");
}

TEST(PbLayers, ConverterErrors) {
  auto lm = small_lm();
  PrecisionPlan p;
  p.source = "plan.yaml";
  p.layers["encoder"] = QuantSpec::int8();
  expect_error([&] { convert_model(*lm, p); },
               "plan.yaml: 'encoder' is not a quantizable layer of the model; its "
               "Linear and LSTM layers are: lstm (LSTM), decoder (Linear)");
  PrecisionPlan none;
  none.source = "plan.yaml";
  none.layers["lstm"] = std::nullopt;
  expect_error([&] { convert_model(*lm, none); }, "plan.yaml: nothing to quantize");
  Sequential one;
  one.push_back(std::make_shared<Linear>(3, 2));
  expect_error([&] { convert_model(one, uniform_plan(QuantSpec::int8())); }, "nothing to quantize");
}

TEST(PbLayers, ParsePbConfig) {
  PbConfig c = parse_pb_config("w=2, a=8", "--pbatch");
  EXPECT_EQ(c.w_bits, 2);
  EXPECT_EQ(c.a_bits, 8);
  EXPECT_TRUE(c.clip_search);
  EXPECT_FALSE(parse_pb_config("a=16,w=4,clip=0", "--pbatch").clip_search);
  expect_error([] { parse_pb_config("w=4", "--pbatch"); }, "--pbatch 'w=4': a is missing");
  expect_error([] { parse_pb_config("w=9,a=16", "--pbatch"); }, "w (weight bits) must be in 1..8, got 9");
  expect_error([] { parse_pb_config("w=4,a=1", "--pbatch"); }, "a (activation bits) must be in 2..32, got 1");
  expect_error([] { parse_pb_config("w=four,a=16", "--pbatch"); }, "w must be an integer, got 'four'");
  expect_error([] { parse_pb_config("w=4,a=16,b=2", "--pbatch"); }, "unknown key 'b'");
  expect_error([] { parse_pb_config("w4a16", "--pbatch"); }, "is not key=value");
  expect_error([] { parse_pb_config("w=4,w=4,a=8", "--pbatch"); }, "w given twice");
  const PbConfig p = parse_pb_config("w=4,a=8,scheme=paper,row_step=1,a_shift=4", "--pbatch");
  EXPECT_EQ(p.scheme, PbScheme::paper);
  EXPECT_TRUE(p.row_step);
  EXPECT_EQ(p.a_shift, 4);
  EXPECT_EQ(parse_pb_config("w=4,a=8", "--pbatch").scheme, PbScheme::octet);
  expect_error([] { parse_pb_config("w=4,a=8,scheme=fast", "--pbatch"); }, "scheme must be paper or octet, got 'fast'");
  expect_error([] { parse_pb_config("w=4,a=8,a_shift=31", "--pbatch"); }, "a_shift must be in 0..30, got 31");
  expect_error([] { parse_pb_config("w=4,a=8,row_step=2", "--pbatch"); }, "row_step must be 0 or 1");
  // Every name pb_config_name makes parses back to the same spec.
  for (const char* text : {"w=4,a=16", "w=4,a=8,scheme=paper", "w=1,a=32,scheme=paper,a_shift=12,row_step=1",
                           "w=8,a=8,row_step=1", "w=2,a=16,scheme=paper,a_shift=6"}) {
    const QuantSpec s = QuantSpec::pbatch(parse_pb_config(text, "t"));
    EXPECT_EQ(parse_quant_spec_name(s.name(), "t"), s) << text << " -> " << s.name();
  }
  EXPECT_EQ(QuantSpec::pbatch(p).name(), "w4a8-paper-s4-row");
  expect_error([] { parse_quant_spec_name("w4a8-s4", "meta"); }, "expected a precision like");
  expect_error([] { parse_quant_spec_name("w4a8-paper-s99", "meta"); }, "must be in [0, 30]");
  EXPECT_EQ(parse_quant_spec_name("w3a12", "x").pb.a_bits, 12);
  expect_error([] { parse_quant_spec_name("w9a12", "meta"); }, "meta");
  expect_error([] { parse_quant_spec_name("wxa12", "meta"); }, "expected a precision like");
}

// save_quant_state -> load_quant_state on a fresh copy of the model gives the same outputs, for both
// kinds; corrupt or mismatched data is an Error and leaves the model float.
TEST(PbLayers, QuantStateRoundTripAndValidation) {
  Generator g(6);
  auto lm = small_lm();
  lm->eval();
  PrecisionPlan p;
  p.default_spec = QuantSpec::pbatch({3, 12});
  p.layers["decoder"] = QuantSpec::int8();
  convert_model(*lm, p);
  NamedTensors tensors;
  std::string assignment;
  save_quant_state(*lm, tensors, assignment);
  EXPECT_EQ(assignment, "lstm LSTM w3a12\ndecoder Linear int8\n");
  expect_state_round_trips(*lm, tensors, assignment, "lstm: w3a12, decoder: int8");

  auto fresh = [&] {
    auto m = small_lm();
    m->load_state_dict(lm->state_dict());
    return m;
  };
  auto with = [&](const std::string& name, const Tensor& t) {
    NamedTensors out = tensors;
    for (auto& [k, v] : out)
      if (k == name) v = t;
    return out;
  };
  auto find = [&](const std::string& name) {
    for (auto& [k, v] : tensors)
      if (k == name) return v;
    return Tensor();
  };
  auto bad = [&](const NamedTensors& ts, const std::string& a, const std::string& fragment) {
    auto m = fresh();
    expect_error([&] { load_quant_state(*m, ts, a, "out.safetensors"); }, fragment);
    EXPECT_EQ(m->lstm_->inference(), nullptr);
    EXPECT_EQ(m->decoder_->inference(), nullptr);
  };
  Tensor planes = find("lstm.weight_hh_l1.planes").clone();
  ASSERT_TRUE(planes.defined());
  ASSERT_EQ(planes.shape(), (Shape{48, 4, pb_words(12)}));
  planes.data<int64_t>()[pb_words(12) - 1] = 1;  // a bit past the 12 columns
  bad(with("lstm.weight_hh_l1.planes", planes), assignment, "has bits set past the 12 columns");
  bad(with("lstm.weight_hh_l1.planes", planes.narrow(0, 0, 47).contiguous()), assignment,
      "'lstm.weight_hh_l1.planes' must be i64 [48, 4, 8]");
  bad(with("lstm.weight_ih_l0.step", from_vector<double>({-1.0}, {1})), assignment, "step' must be a finite positive");
  Tensor sums = find("decoder.weight.row_sums").clone();
  sums.data<int32_t>()[3] += 1;
  bad(with("decoder.weight.row_sums", sums), assignment, "row_sums' does not match the codes (row 3");
  NamedTensors extra = tensors;
  extra.emplace_back("lstm.weight_ih_l2.planes", planes);
  bad(extra, assignment, "unexpected quantized layer data 'lstm.weight_ih_l2.planes'");
  NamedTensors missing(tensors.begin() + 1, tensors.end());
  bad(missing, assignment, "is missing");
  bad(tensors, "lstm LSTM w4a12\ndecoder Linear int8\n", "'lstm.weight_ih_l0.planes' must be i64 [48, 5, 8]");
  bad(tensors, "lstm Linear w3a12\ndecoder Linear int8\n", "stored as Linear but the model's is a LSTM");
  bad(tensors, "encoder LSTM w3a12\n", "'encoder' is not in the model");
  bad(tensors, "lstm LSTM w3a12 x\n", "line 1 is not '<layer> <type> <precision>'");
}

// int8 everywhere with the clip search on (the default): weights beyond the chosen clip saturate,
// the negative ones to -128, and the state still loads back to the same outputs (the loader once
// refused -128, so `octet export --int8` wrote exports that `octet eval` could not read).
TEST(PbLayers, Int8StateWithClippedWeightsRoundTrips) {
  auto lm = small_lm();
  lm->eval();
  {
    // The decoder's weights: Gaussian, the sign flipped so that the one of largest magnitude is
    // negative, from the first generator seed whose weights the clip search clips (most do: it cuts
    // a lone extreme), so that extreme saturates to -128 whatever the global generator holds.
    Tensor w;
    for (uint64_t seed = 1;; ++seed) {
      ASSERT_LT(seed, 100u) << "no Gaussian weights the clip search clips";
      Generator g(seed);
      w = randn(lm->decoder_->weight_.shape(), {}, &g);
      const std::vector<float> v = w.to_vector<float>();
      if (*std::max_element(v.begin(), v.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }) > 0) w = -w;
      const std::vector<int8_t> codes = qlinear_prepare(w).codes.to_vector<int8_t>();
      if (std::find(codes.begin(), codes.end(), int8_t{-128}) != codes.end()) break;
    }
    NoGradGuard ng;
    lm->decoder_->weight_.copy_(w);
  }
  PrecisionPlan p;
  p.default_spec = QuantSpec::int8();
  p.layers["decoder"] = QuantSpec::int8();
  convert_model(*lm, p);
  NamedTensors tensors;
  std::string assignment;
  save_quant_state(*lm, tensors, assignment);
  int64_t saturated = 0;
  for (const auto& [name, t] : tensors)
    if (name.ends_with(".codes"))
      for (int8_t c : t.to_vector<int8_t>()) saturated += c == -128;
  EXPECT_GT(saturated, 0) << "no weight beyond its clip: the case this test is for did not occur";
  expect_state_round_trips(*lm, tensors, assignment, "lstm: int8, decoder: int8");
}

// The 1-bit kernels skip plane 0 (all ones for codes +-1): a stored plane 0 that is not all ones
// would be silently wrong, so it is refused.
TEST(PbLayers, OneBitStateNeedsAllOnesPlaneZero) {
  auto lm = small_lm();
  lm->eval();
  convert_model(*lm, uniform_plan(QuantSpec::pbatch({1, 8})));
  NamedTensors tensors;
  std::string assignment;
  save_quant_state(*lm, tensors, assignment);
  for (auto& [name, t] : tensors)
    if (name == "lstm.weight_hh_l0.planes") {
      t = t.clone();
      t.data<int64_t>()[0] ^= 4;  // row 0, plane 0, column 2
    }
  auto m = small_lm();
  m->load_state_dict(lm->state_dict());
  expect_error([&] { load_quant_state(*m, tensors, assignment, "out.safetensors"); },
               "plane 0 of row 0 must be all ones");
}

// The paper scheme and the per-row step round-trip through the saved state too (the scheme and the
// activation shift in the assignment's names, the row steps as a tensor), 1-bit paper weights with
// zero codes included (their plane 0 is read, not assumed all ones).
TEST(PbLayers, PaperAndRowStepStatesRoundTrip) {
  auto lm = small_lm();
  lm->eval();
  PrecisionPlan p;
  p.default_spec = QuantSpec::pbatch(parse_pb_config("w=1,a=16,scheme=paper,row_step=1", "t"));
  p.layers["decoder"] = QuantSpec::pbatch(parse_pb_config("w=4,a=8,row_step=1", "t"));
  {
    NoGradGuard ng;
    for (auto& [name, t] : lm->named_parameters())
      if (name == "lstm.weight_hh_l0") t.data<float>()[3] = 0.0f;  // a zero code in a 1-bit paper layer
  }
  convert_model(*lm, p);
  NamedTensors tensors;
  std::string assignment;
  save_quant_state(*lm, tensors, assignment);
  EXPECT_EQ(assignment, "lstm LSTM w1a16-paper-row\ndecoder Linear w4a8-row\n");
  bool has_row_steps = false;
  for (const auto& [name, t] : tensors) has_row_steps = has_row_steps || name == "decoder.weight.row_steps";
  EXPECT_TRUE(has_row_steps);
  expect_state_round_trips(*lm, tensors, assignment, "lstm: w1a16-paper-row, decoder: w4a8-row");
  // A bad row step is refused.
  for (auto& [name, t] : tensors)
    if (name == "decoder.weight.row_steps") {
      t = t.clone();
      t.data<double>()[1] = -1.0;
    }
  auto m = small_lm();
  m->load_state_dict(lm->state_dict());
  expect_error([&] { load_quant_state(*m, tensors, assignment, "out.safetensors"); },
               "'decoder.weight.row_steps' (row 1) must be a finite positive number");
}

}  // namespace
}  // namespace octet::quant
