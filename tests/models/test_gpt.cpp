// Gpt (models/gpt.h) against a nanoGPT-style PyTorch model in float64
// (tests/models/data/make_gpt_golden.py): its state_dict loads by name, and the logits, the loss and
// every parameter's gradient match to ~1e-12. Also: the registry's "gpt", the layers' errors, the
// causal structure (a later token cannot change an earlier logit), and dropout only in training.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "core/octet.h"
#include "models/gpt.h"
#include "models/registry.h"

namespace octet {
namespace {

const std::string kGolden = std::string(OCTET_TESTS_DIR) + "/models/data/gpt_tiny.safetensors";

GptOptions tiny() { return GptOptions().vocab_size(37).context_length(16).num_layers(2).num_heads(2).width(12); }

// The largest |a - b| over max(1e-30, max |b|).
double rel_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  return max(abs(a - b)).item<double>() / std::max(1e-30, max(abs(b)).item<double>());
}

TEST(Gpt, MatchesPyTorchInF64) {
  const SafetensorsFile file = load_safetensors(kGolden);
  std::map<std::string, Tensor> golden(file.tensors.begin(), file.tensors.end());
  Gpt gpt(tiny());
  gpt.to(DType::f64);
  NamedTensors weights;
  for (const auto& [name, t] : file.tensors)
    if (name.rfind("transformer.", 0) == 0) weights.emplace_back(name, t);
  gpt.load_state_dict(weights, /*strict=*/false);
  // Every parameter came from the file (lm_head.weight is transformer.wte.weight).
  for (const auto& [name, p] : gpt.named_parameters()) ASSERT_TRUE(golden.count(name)) << name;

  Tensor logits = gpt(golden.at("ids"));
  EXPECT_LE(rel_diff(logits, golden.at("logits")), 1e-12);
  Tensor loss = cross_entropy(logits.reshape({-1, 37}), golden.at("targets").reshape({-1}));
  EXPECT_NEAR(loss.item<double>(), golden.at("loss").item<double>(), 1e-12);
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : gpt.named_parameters()) {
    ASSERT_TRUE(golden.count("grad." + name)) << name;
    EXPECT_LE(rel_diff(p.grad(), golden.at("grad." + name)), 1e-10) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 28);  // wte, wpe, 2 blocks x 12 tensors, ln_f weight and bias (lm_head is wte)
}

TEST(Gpt, RegistryNamesAndTying) {
  auto net = build_model(
      ModelOptions().name("gpt").vocab_size(50).embed_dim(16).num_heads(4).num_layers(3).context_length(8).tie_weights(
          true));
  auto* gpt = dynamic_cast<Gpt*>(net.get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_TRUE(gpt->lm_head_->weight_.same(gpt->transformer_->wte_->weight_));
  const NamedTensors p = net->named_parameters();
  EXPECT_EQ(p.front().first, "transformer.wte.weight");
  EXPECT_EQ(p.back().first, "transformer.ln_f.bias");  // lm_head.weight is wte's: listed once
  int64_t n = 0;
  for (const auto& [name, t] : p) n += t.numel();
  // wte 50*16 + wpe 8*16 + 3 blocks * (ln 2*32 + c_attn 16*48+48 + c_proj 16*16+16 + c_fc 16*64+64 +
  // c_proj 64*16+16) + ln_f 32
  EXPECT_EQ(n, 800 + 128 + 3 * (64 + 816 + 272 + 1088 + 1040) + 32);
  EXPECT_EQ(net->num_parameters(), n);
}

TEST(Gpt, CausalAndDropoutOnlyInTraining) {
  manual_seed(1);
  Gpt gpt(tiny().dropout(0.2));
  gpt.eval();
  Generator g(2);
  Tensor ids = (rand({2, 10}, {}, &g) * 37.0).to(DType::i64);
  NoGradGuard ng;
  Tensor a = gpt(ids);
  Tensor changed = ids.clone();
  changed.narrow(1, 9, 1).fill_(5.0);  // the last token only
  Tensor b = gpt(changed);
  EXPECT_EQ(rel_diff(a.narrow(1, 0, 9), b.narrow(1, 0, 9)), 0.0);  // earlier positions cannot see it
  EXPECT_EQ(rel_diff(gpt(ids), a), 0.0);                           // evaluation: deterministic
  gpt.train();
  EXPECT_GT(rel_diff(gpt(ids), a), 0.0);  // training: dropout
}

// Decoding with the key/value cache: the prompt read whole, then one token at a time, gives the
// logits of a full pass over the sequence so far, at every position up to context_length. In f64
// the two differ only in how the products are blocked (~1e-15); f32 to ~1e-6.
TEST(Gpt, CachedDecodingGivesTheFullPassLogits) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(::testing::Message() << dt);
    manual_seed(3);
    Gpt gpt(tiny().dropout(0.1));  // dropout is training's: decoding must not draw it
    gpt.to(dt);
    gpt.eval();
    Generator g(4);
    const Tensor ids = (rand({2, 16}, {}, &g) * 37.0).to(DType::i64);
    NoGradGuard ng;
    GptCache cache;
    const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
    Tensor prompt = gpt.forward_cached(ids.narrow(1, 0, 5), cache);  // 5 tokens on an empty cache
    EXPECT_LE(rel_diff(prompt, gpt(ids.narrow(1, 0, 5))), tol);
    EXPECT_EQ(cache.length(), 5);
    ASSERT_EQ(cache.layers.size(), 2u);
    EXPECT_EQ(cache.layers[0].k.shape(), Shape({2, 2, 5, 6}));  // [B, H, T, C/H]
    for (int64_t t = 5; t < 16; ++t) {
      const Tensor step = gpt.forward_cached(ids.narrow(1, t, 1), cache);  // [2, 1, 37]
      const Tensor full = gpt(ids.narrow(1, 0, t + 1)).narrow(1, t, 1);
      EXPECT_LE(rel_diff(step, full), tol) << "position " << t;
    }
    EXPECT_EQ(cache.length(), 16);
    // Past context_length, and several new tokens on a cache, are errors naming the problem.
    EXPECT_THROW(gpt.forward_cached(ids.narrow(1, 0, 1), cache), Error);
    GptCache two;
    gpt.forward_cached(ids.narrow(1, 0, 3), two);
    EXPECT_THROW(gpt.forward_cached(ids.narrow(1, 3, 2), two), Error);
    GptCache other;
    gpt.forward_cached(ids.narrow(0, 0, 1).narrow(1, 0, 3), other);
    EXPECT_THROW(gpt.forward_cached(ids.narrow(1, 3, 1), other), Error);  // a batch of 2 on a cache of 1
  }
}

TEST(Gpt, ErrorsNameTheProblem) {
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([] { Gpt(tiny().num_heads(5)); }, "width must be a positive multiple of num_heads");
  expect_error([] { Gpt(tiny().vocab_size(0)); }, "vocab_size must be positive");
  expect_error(
      [] {
        Gpt gpt(tiny());
        gpt(zeros({1, 17}, DType::i64));
      },
      "longer than context_length 16");
  expect_error(
      [] {
        Gpt gpt(tiny());
        gpt(zeros({1, 4}));
      },
      "expected ids i64 [B, T]");
}

}  // namespace
}  // namespace octet
