// The LSTM language model (models/lstm_lm.h): shapes, parameter names and counts against
// torch.nn.LSTM's layout, weight tying, option and input validation, state carried across calls
// (truncated BPTT), state_dict round trips, the registry entry, and one training step.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/octet.h"
#include "models/lstm_lm.h"
#include "models/registry.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tools/train/builders.h"
#include "tools/train/recipe.h"

namespace octet {
namespace {

Tensor ids_input(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  Tensor u = empty({b, t}, DType::f64);
  u.uniform_(0.0, static_cast<double>(vocab), &g);
  return u.to(DType::i64);
}

std::vector<std::string> names_of(const NamedTensors& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.first);
  return out;
}

TEST(LstmLm, ShapesNamesAndState) {
  manual_seed(0);
  LstmLm lm(LstmLmOptions().vocab_size(50).embed_dim(12).hidden_size(16).num_layers(2).dropout(0.0));
  EXPECT_EQ(names_of(lm.named_parameters()),
            (std::vector<std::string>{"embedding.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
                                      "lstm.bias_hh_l0", "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1",
                                      "lstm.bias_hh_l1", "decoder.weight", "decoder.bias"}));
  // 50*12 + 4*16*(12+16+2) + 4*16*(16+16+2) + 50*16 + 50
  EXPECT_EQ(lm.num_parameters(), 600 + 1920 + 2176 + 800 + 50);
  Tensor ids = ids_input(3, 5, 50, 1);
  auto [logits, next] = lm.forward(ids, LstmState{});
  EXPECT_EQ(logits.shape(), (Shape{3, 5, 50}));
  EXPECT_EQ(next.h.shape(), (Shape{2, 3, 16}));
  EXPECT_EQ(next.c.shape(), (Shape{2, 3, 16}));
  // initial_state() is the zero state; forward(ids) uses it.
  LstmState zero = lm.initial_state(3);
  EXPECT_EQ(zero.h.shape(), (Shape{2, 3, 16}));
  EXPECT_EQ(lm.forward(ids, zero).first.to_vector<float>(), logits.to_vector<float>());
  EXPECT_EQ(lm.forward(ids).to_vector<float>(), logits.to_vector<float>());
  // Carrying the state: two halves of a sequence give the whole sequence's logits.
  Tensor first = ids.narrow(1, 0, 2).contiguous(), second = ids.narrow(1, 2, 3).contiguous();
  auto [l1, s1] = lm.forward(first, LstmState{});
  LstmState carried = detach(s1);
  EXPECT_FALSE(carried.h.requires_grad());
  auto [l2, s2] = lm.forward(second, carried);
  std::vector<float> whole = logits.narrow(1, 2, 3).contiguous().to_vector<float>(), parts = l2.to_vector<float>();
  ASSERT_EQ(whole.size(), parts.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(whole[i], parts[i], 1e-5);
  EXPECT_FALSE(detach(LstmState{}).h.defined());
}

TEST(LstmLm, TiedWeightsAppearOnce) {
  manual_seed(0);
  LstmLm lm(LstmLmOptions().vocab_size(30).hidden_size(8).tie_weights(true).dropout(0.2));
  EXPECT_TRUE(lm.decoder_->weight_.same(lm.embedding_->weight_));
  NamedTensors params = lm.named_parameters();
  EXPECT_EQ(names_of(params), (std::vector<std::string>{"embedding.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0",
                                                        "lstm.bias_ih_l0", "lstm.bias_hh_l0", "decoder.bias"}));
  // The state_dict keeps both names, as PyTorch's does.
  std::vector<std::string> keys = names_of(lm.state_dict());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "decoder.weight"), keys.end());
  // Gradients from both uses land in the one tensor, and an optimizer accepts the parameters.
  Tensor loss = cross_entropy(lm(ids_input(2, 4, 30, 3)).reshape({-1, 30}), ids_input(8, 1, 30, 4).reshape({-1}));
  loss.backward();
  ASSERT_TRUE(lm.embedding_->weight_.grad().defined());
  SGD opt(params, SGDOptions(0.1));
  std::vector<float> before = lm.decoder_->weight_.to_vector<float>();
  opt.step();
  EXPECT_NE(lm.decoder_->weight_.to_vector<float>(), before);
  EXPECT_EQ(lm.decoder_->weight_.to_vector<float>(), lm.embedding_->weight_.to_vector<float>());
}

TEST(LstmLm, RejectsBadOptionsAndIds) {
  EXPECT_THROW(LstmLm{LstmLmOptions()}, Error);  // vocab_size required
  EXPECT_THROW(LstmLm(LstmLmOptions().vocab_size(10).hidden_size(0)), Error);
  EXPECT_THROW(LstmLm(LstmLmOptions().vocab_size(10).num_layers(0)), Error);
  EXPECT_THROW(LstmLm(LstmLmOptions().vocab_size(10).dropout(1.0)), Error);
  EXPECT_THROW(LstmLm(LstmLmOptions().vocab_size(10).hidden_size(8).embed_dim(4).tie_weights(true)), Error);
  LstmLm lm(LstmLmOptions().vocab_size(10).hidden_size(8));
  EXPECT_THROW(lm(from_vector<int64_t>({1, 2, 10}, {1, 3})), Error);  // id out of range
  EXPECT_THROW(lm(from_vector<int64_t>({1, -1}, {1, 2})), Error);
  EXPECT_THROW(lm(from_vector<int64_t>({1, 2}, {2})), Error);                                  // not [B, T]
  EXPECT_THROW(lm(zeros({1, 3})), Error);                                                      // not i64
  EXPECT_THROW(lm.forward(from_vector<int64_t>({1, 2}, {1, 2}), lm.initial_state(2)), Error);  // batch mismatch
  EXPECT_THROW(lm.initial_state(0), Error);
}

TEST(LstmLm, StateDictRoundTripAndRegistry) {
  manual_seed(5);
  auto a = build_model(ModelOptions().name("lstm_lm").vocab_size(40).hidden_size(8).num_layers(2).embedding("stable"));
  auto lm = std::dynamic_pointer_cast<LstmLm>(a);
  ASSERT_NE(lm, nullptr);
  EXPECT_TRUE(lm->opts_.stable_embedding_);
  EXPECT_EQ(lm->opts_.num_layers_, 2);
  EXPECT_DOUBLE_EQ(lm->opts_.dropout_, 0.2);
  EXPECT_EQ(lm->embedding_->type_name(), "StableEmbedding");
  manual_seed(6);
  auto b = build_model(ModelOptions().name("lstm_lm").vocab_size(40).hidden_size(8).num_layers(2).embedding("stable"));
  a->eval();
  b->eval();
  Tensor ids = ids_input(2, 3, 40, 7);
  EXPECT_NE((*a)(ids).to_vector<float>(), (*b)(ids).to_vector<float>());
  b->load_state_dict(a->state_dict());
  EXPECT_EQ((*a)(ids).to_vector<float>(), (*b)(ids).to_vector<float>());
  EXPECT_THROW(build_model(ModelOptions().name("lstm_lm").vocab_size(40).embedding("fancy")), Error);
  EXPECT_THROW(build_model(ModelOptions().name("lstm_lm")), Error);  // no vocab_size
  auto tied = std::dynamic_pointer_cast<LstmLm>(
      build_model(ModelOptions().name("lstm_lm").vocab_size(20).hidden_size(6).tie_weights(true).dropout(0.5)));
  EXPECT_TRUE(tied->decoder_->weight_.same(tied->embedding_->weight_));
  EXPECT_DOUBLE_EQ(tied->lstm_->dropout_, 0.5);
  EXPECT_NE(tied->summary().find("LstmLm("), std::string::npos);
  EXPECT_NE(tied->summary().find("tie_weights=true"), std::string::npos) << tied->summary();
}

TEST(LstmLm, TrainingLowersTheLoss) {
  // A tiny corpus with a fixed successor for every token: a few steps of Adam must learn some of it.
  manual_seed(11);
  LstmLm lm(LstmLmOptions().vocab_size(8).hidden_size(16).dropout(0.0));
  std::vector<int64_t> seq;
  for (int i = 0; i < 4 * 9; ++i) seq.push_back((i * 3) % 8);
  Tensor all = from_vector(seq, {4, 9});
  Tensor in = all.narrow(1, 0, 8).contiguous(), target = all.narrow(1, 1, 8).contiguous().reshape({-1});
  Adam opt(lm.named_parameters(), AdamOptions(0.05));
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    Tensor loss = cross_entropy(lm(in).reshape({-1, 8}), target);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

// Which parameters have 8-bit state: those with "<name>.exp_avg.codes" in the optimizer's state.
std::vector<std::string> eight_bit_params(const Optimizer& opt) {
  std::vector<std::string> out;
  const std::string suffix = ".exp_avg.codes";
  for (const auto& [key, t] : opt.state_dict())
    if (key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(key.substr(0, key.size() - suffix.size()));
  return out;
}

TEST(LstmLm, StableEmbeddingKeeps32BitOptimizerState) {
  // Every weight matrix here has >= 4096 elements, so 8-bit state unless kept 32-bit.
  const LstmLmOptions base = LstmLmOptions().vocab_size(1000).hidden_size(64).dropout(0.0);
  const std::vector<std::string> big = {"lstm.weight_ih_l0", "lstm.weight_hh_l0", "decoder.weight"};
  manual_seed(0);
  LstmLm stable(LstmLmOptions(base).stable_embedding(true));
  EXPECT_EQ(stable.keep_32bit_state_names(), (std::vector<std::string>{"embedding.weight"}));
  // Through the C++ API: nothing to configure.
  Adam adam(stable.named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));
  EXPECT_EQ(eight_bit_params(adam), big);
  bool dense = false;
  for (const auto& [key, t] : adam.state_dict()) dense = dense || key == "embedding.weight.exp_avg";
  EXPECT_TRUE(dense) << "the stable embedding's state should be a dense 32-bit tensor";
  // A plain embedding's weight gets 8-bit state like the others.
  LstmLm plain(base);
  Adam adam_plain(plain.named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));
  std::vector<std::string> all = big;
  all.insert(all.begin(), "embedding.weight");
  EXPECT_EQ(eight_bit_params(adam_plain), all);
  // Tied to the decoder, the one shared tensor keeps 32-bit state.
  LstmLm tied(LstmLmOptions(base).stable_embedding(true).tie_weights(true));
  Adam adam_tied(tied.named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));
  EXPECT_EQ(eight_bit_params(adam_tied), (std::vector<std::string>{"lstm.weight_ih_l0", "lstm.weight_hh_l0"}));
  // The CLI builds its optimizer from the recipe and the model's parameters: same result.
  train::Recipe r = train::parse_recipe("optimizer:\n  name: adam\n  state_bits: 8\n", "lm.yaml");
  std::unique_ptr<Optimizer> from_recipe = train::build_optimizer(r, stable.named_parameters());
  EXPECT_EQ(eight_bit_params(*from_recipe), big);
  // A step works with the mixed state.
  Tensor loss =
      cross_entropy(stable(ids_input(2, 3, 1000, 9)).reshape({-1, 1000}), ids_input(6, 1, 1000, 10).reshape({-1}));
  loss.backward();
  std::vector<float> before = stable.embedding_->weight_.to_vector<float>();
  adam.step();
  EXPECT_NE(stable.embedding_->weight_.to_vector<float>(), before);
}

}  // namespace
}  // namespace octet
