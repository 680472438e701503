// optimizer.param_groups: parsing (errors name the line, the group's index and the key), the
// optimizer a recipe with groups builds (first match wins, the rest in group 0 with the section's
// values, per-group state precision), the schedule on every group, and the round trip through a
// resolved (stored) recipe. The resume of a run with groups is in test_trainer.cpp (TrainerResume).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/octet.h"
#include "optim/schedule.h"
#include "tests/train/run_util.h"
#include "tools/train/builders.h"
#include "tools/train/recipe.h"

namespace octet::train {
namespace {

void expect_parse_error(const std::string& yaml, const std::vector<std::string>& overrides,
                        const std::string& fragment) {
  expect_error([&] { parse_recipe(yaml, "r.yaml", overrides); }, fragment);
}

// Parameter names in the order of the group.
std::vector<std::string> names(const NamedTensors& params) {
  std::vector<std::string> out;
  for (const auto& [name, t] : params) out.push_back(name);
  return out;
}

// The names of a small CNN (small_cnn): features.{0,4}.weight (convolutions without bias),
// features.{1,5}.{weight,bias} (BatchNorm), classifier.{1,4}.{weight,bias} (Linear).
NamedTensors cnn_params() {
  static std::shared_ptr<Module> model = build_model_from(
      parse_recipe("model: {name: small_cnn, in_channels: 1, image_size: 28, num_classes: 10}\n", "cnn.yaml"));
  return model->named_parameters();
}

const char* kGroups = R"(
model: {name: small_cnn, in_channels: 1, image_size: 28, num_classes: 10}
optimizer:
  name: adamw
  lr: 0.01
  weight_decay: 0.05
  betas: [0.9, 0.95]
  param_groups:
    - params: "*.bias"          # biases: no weight decay
      weight_decay: 0
    - params: ["features.1.*", "features.5.*"]   # BatchNorm weights (their biases went above)
      weight_decay: 0.0
      lr: 0.002
    - {params: classifier.*, betas: [0.8, 0.9], eps: 1.0e-6, amsgrad: true}
)";

TEST(ParamGroups, Parse) {
  const Recipe r = parse_recipe(kGroups, "r.yaml");
  const auto& g = r.group_list("optimizer.param_groups");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].params, (std::vector<std::string>{"*.bias"}));
  EXPECT_EQ(g[0].values, (std::map<std::string, RecipeValue>{{"weight_decay", 0.0}}));  // an integer, as a number
  EXPECT_EQ(g[1].params, (std::vector<std::string>{"features.1.*", "features.5.*"}));
  EXPECT_EQ(g[1].values.at("lr"), RecipeValue(0.002));
  EXPECT_EQ(g[2].values.at("betas"), RecipeValue(std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(g[2].values.at("amsgrad"), RecipeValue(true));
  EXPECT_TRUE(r.is_set("optimizer.param_groups"));
  // None by default.
  const Recipe none = parse_recipe("", "empty.yaml");
  EXPECT_TRUE(none.group_list("optimizer.param_groups").empty());
  EXPECT_FALSE(none.is_set("optimizer.param_groups"));
  EXPECT_NE(none.resolved_yaml().find("  param_groups: []\n"), std::string::npos);
  // The resolved recipe (what checkpoints store) reads back to the same groups.
  const std::string resolved = r.resolved_yaml();
  EXPECT_NE(resolved.find("param_groups: [{params: [\"*.bias\"], weight_decay: 0.0}, "), std::string::npos) << resolved;
  const Recipe stored = parse_stored_recipe(resolved, "stored.yaml");
  EXPECT_EQ(stored.group_list("optimizer.param_groups"), g);
  EXPECT_EQ(stored.resolved_yaml(), resolved);
}

TEST(ParamGroups, CommandLineReplacesTheWholeList) {
  const Recipe r = parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"*.weight\", lr: 0.5}]"});
  const auto& g = r.group_list("optimizer.param_groups");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].params, (std::vector<std::string>{"*.weight"}));
  EXPECT_EQ(g[0].values.at("lr"), RecipeValue(0.5));
  EXPECT_TRUE(
      parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[]"}).group_list("optimizer.param_groups").empty());
  expect_parse_error("", {"optimizer.param_groups.0.lr=0.1"},
                     "override 'optimizer.param_groups.0.lr=0.1': a group's keys cannot be overridden one by one");
  expect_parse_error("", {"optimizer.param_groups=[{params: a, lrr: 1}]"},
                     "override 'optimizer.param_groups=[{params: a, lrr: 1}]': optimizer.param_groups[0]: unknown "
                     "key 'lrr'");
}

TEST(ParamGroups, ErrorsNameTheLineTheGroupAndTheKey) {
  const std::string head = "optimizer:\n  param_groups:\n";
  // An unknown key, with the keys a group may set.
  expect_parse_error(
      head + "    - params: a\n    - params: b\n      lrr: 0.1\n", {},
      "r.yaml:5: optimizer.param_groups[1]: unknown key 'lrr'; did you mean 'lr'? (known keys in a group: "
      "params, lr, momentum");
  // Keys of the whole optimizer.
  for (const char* key : {"name: adam", "keep_32bit: [a]", "param_groups: []"})
    expect_parse_error(head + "    - params: a\n      " + key + "\n", {},
                       "r.yaml:4: optimizer.param_groups[0]: key '" +
                           std::string(key).substr(0, std::string(key).find(':')) +
                           "' cannot be set per group: it is the whole optimizer's");
  // A value of the wrong type, or out of range.
  expect_parse_error(head + "    - params: a\n      lr: fast\n", {},
                     "r.yaml:4: optimizer.param_groups[0]: key 'optimizer.lr' must be a number, got 'fast'");
  expect_parse_error(head + "    - params: a\n      betas: 0.9\n", {}, "must be a list of numbers");
  // `params` missing, empty or not names.
  expect_parse_error(head + "    - lr: 0.1\n", {}, "r.yaml:3: optimizer.param_groups[0]: 'params' is missing");
  expect_parse_error(head + "    - {params: [], lr: 0.1}\n", {}, "'params' must be a name glob or a non-empty list");
  expect_parse_error(head + "    - {params: [[a]], lr: 0.1}\n", {}, "'params' must be a name glob");
  expect_parse_error(head + "    - {params: \"\", lr: 0.1}\n", {}, "'params' has an empty pattern");
  // Not a list, or a group that is not a mapping.
  expect_parse_error(head + "    params: a\n    lr: 0.1\n", {},
                     "r.yaml:3: key 'optimizer.param_groups' must be a list of groups ([{params: GLOB, key: value, "
                     "...}, ...]), got a mapping");
  expect_parse_error("optimizer:\n  param_groups: \"*.bias\"\n", {}, "got '*.bias'");
  expect_parse_error(head + "    - a\n", {}, "r.yaml:3: optimizer.param_groups[0] must be a mapping");
  expect_parse_error(head + "    - {params: a, lr: 1, lr: 2}\n", {}, "key 'lr' appears twice");
}

// The options of group g of an AdamW.
const AdamWOptions& adamw(const Optimizer& opt, size_t g) { return dynamic_cast<const AdamW&>(opt).options(g); }

TEST(ParamGroups, BuildsTheGroupsFirstMatchWins) {
  const Recipe r = parse_recipe(kGroups, "r.yaml");
  const auto opt = build_optimizer(r, cnn_params());
  ASSERT_EQ(opt->num_groups(), 4u);
  // Group 0: the parameters no entry matches, with the section's values.
  EXPECT_EQ(names(opt->params(0)), (std::vector<std::string>{"features.0.weight", "features.4.weight"}));
  EXPECT_EQ(adamw(*opt, 0).lr_, 0.01);
  EXPECT_EQ(adamw(*opt, 0).weight_decay_, 0.05);
  EXPECT_EQ(adamw(*opt, 0).betas_, (std::pair<double, double>{0.9, 0.95}));
  // Every bias, the classifier's too: the first match wins.
  EXPECT_EQ(names(opt->params(1)),
            (std::vector<std::string>{"features.1.bias", "features.5.bias", "classifier.1.bias", "classifier.4.bias"}));
  EXPECT_EQ(adamw(*opt, 1).weight_decay_, 0.0);
  EXPECT_EQ(adamw(*opt, 1).lr_, 0.01);  // unset in the group: the section's
  EXPECT_EQ(adamw(*opt, 1).betas_, (std::pair<double, double>{0.9, 0.95}));
  EXPECT_EQ(names(opt->params(2)), (std::vector<std::string>{"features.1.weight", "features.5.weight"}));
  EXPECT_EQ(adamw(*opt, 2).lr_, 0.002);
  EXPECT_EQ(adamw(*opt, 2).weight_decay_, 0.0);
  EXPECT_EQ(names(opt->params(3)), (std::vector<std::string>{"classifier.1.weight", "classifier.4.weight"}));
  EXPECT_EQ(adamw(*opt, 3).betas_, (std::pair<double, double>{0.8, 0.9}));
  EXPECT_EQ(adamw(*opt, 3).eps_, 1e-6);
  EXPECT_TRUE(adamw(*opt, 3).amsgrad_);
  EXPECT_FALSE(adamw(*opt, 0).amsgrad_);
  EXPECT_EQ(adamw(*opt, 3).weight_decay_, 0.05);

  // The schedule scales every group's lr by the same factor (as PyTorch's schedulers do).
  const Recipe cosine = parse_recipe(kGroups, "r.yaml", {"schedule.name=cosine", "train.epochs=10"});
  auto sched = build_schedule(cosine);
  apply_schedule(*opt, *sched, 3.0);
  const double f = sched->factor(3.0);
  ASSERT_LT(f, 0.9);
  for (size_t g = 0; g < opt->num_groups(); ++g) EXPECT_DOUBLE_EQ(opt->lr(g), opt->initial_lr(g) * f) << g;
  EXPECT_DOUBLE_EQ(opt->lr(2), 0.002 * f);
}

// @embedding: the weights of the model's embeddings, a tied decoder's (listed once, under the
// embedding's name) included; without the model it is an error.
TEST(ParamGroups, EmbeddingSelector) {
  const Recipe r = parse_recipe(
      "model:\n  name: gpt\n  embed_dim: 16\n  num_heads: 2\n  num_layers: 1\n  context_length: 8\n"
      "  tie_weights: true\noptimizer:\n  name: adamw\n  param_groups:\n    - params: \"@embedding\"\n"
      "      weight_decay: 0\n",
      "r.yaml");
  auto model = build_model_from(r, 50);
  auto opt = build_optimizer(r, model->named_parameters(), model.get());
  ASSERT_EQ(opt->num_groups(), 2u);
  EXPECT_EQ(names(opt->params(1)), (std::vector<std::string>{"transformer.wte.weight", "transformer.wpe.weight"}));
  expect_error([&] { build_optimizer(r, model->named_parameters()); }, "@embedding needs the model");
}

TEST(ParamGroups, BuildErrorsNameThePattern) {
  const Recipe r = parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: [\"*.bias\", \"*.bais\"]}]"});
  expect_error([&] { build_optimizer(r, cnn_params()); },
               "recipe optimizer.param_groups[0]: params pattern '*.bais' matches no parameter of the model");
  expect_error([&] { build_optimizer(r, cnn_params()); }, "the parameters: features.0.weight, features.1.weight");
  // A selector octet does not know.
  const Recipe unknown = parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"@2d\"}]"});
  expect_error([&] { build_optimizer(unknown, cnn_params()); },
               "recipe optimizer.param_groups[0]: unknown selector '@2d' (known: @1d");
  // A group every parameter of which an earlier group took.
  const Recipe shadowed =
      parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"*\"}, {params: \"*.bias\", lr: 1}]"});
  expect_error([&] { build_optimizer(shadowed, cnn_params()); },
               "recipe optimizer.param_groups[1]: every parameter its params match is in an earlier group");
  // Values the optimizer cannot use name the group's key: out of its range when the recipe is read,
  // or (what depends on the optimizer) when it is built.
  expect_error([&] { parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"*.bias\", lr: -1}]"}); },
               "optimizer.param_groups[0]: key 'optimizer.lr' must be >= 0, got -1");
  const Recipe bad_bits =
      parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"*.bias\", state_bits: 6}]"});
  expect_error([&] { build_optimizer(bad_bits, cnn_params()); },
               "recipe optimizer.param_groups[0].state_bits: expected 32, 8 or 4, got 6");
  const Recipe bad_block = parse_recipe(
      kGroups, "r.yaml", {"optimizer.param_groups=[{params: \"*.bias\", state_bits: 8, block_size: 100}]"});
  expect_error([&] { build_optimizer(bad_block, cnn_params()); },
               "recipe optimizer.param_groups[0].block_size: expected a block size that is a power of two");
  const Recipe bad_betas = parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: a*, betas: [0.9]}]"});
  expect_error(
      [&] {
        build_optimizer(bad_betas, {{"a", zeros({2})}});
      },
      "recipe optimizer.param_groups[0].betas: expected two values, got 1");
  // Betas of 1 (a moment that never moves) are Lion's alone.
  const Recipe beta_of_one =
      parse_recipe(kGroups, "r.yaml", {"optimizer.param_groups=[{params: a*, betas: [0.9, 1]}]"});
  expect_error(
      [&] {
        build_optimizer(beta_of_one, {{"a", zeros({2})}});
      },
      "recipe optimizer.param_groups[0].betas: expected in [0, 1), got 1 for adamw");
  // The section's own keys, checked when the optimizer is built, name the recipe file and line.
  expect_error([&] { build_optimizer(parse_recipe("optimizer:\n  state_bits: 6\n", "r.yaml"), cnn_params()); },
               "r.yaml:2: recipe optimizer.state_bits: expected 32, 8 or 4, got 6");
  expect_error([&] { build_optimizer(parse_recipe("optimizer:\n  nesterov: true\n", "r.yaml"), cnn_params()); },
               "r.yaml:2: recipe optimizer.nesterov: true needs momentum > 0 and dampening 0, got momentum 0");
  // A block size is checked with 32-bit state too (3 was accepted until 8-bit state was asked for).
  expect_error([&] { build_optimizer(parse_recipe("", "r.yaml", {"optimizer.block_size=3"}), cnn_params()); },
               "recipe optimizer.block_size: expected a block size that is a power of two");
}

// Whether parameter `name`'s state is 8-bit, from the optimizer's state_dict keys.
bool eight_bit(const Optimizer& opt, const std::string& name) {
  const NamedTensors state = opt.state_dict();
  return std::any_of(state.begin(), state.end(), [&](const auto& kv) { return kv.first == name + ".exp_avg.codes"; });
}

TEST(ParamGroups, StateBitsPerGroup) {
  // A small LSTM language model: embedding.weight [100, 16], lstm.*, decoder.{weight,bias}.
  const std::string lm = "model: {name: lstm_lm, embed_dim: 16, hidden_size: 16}\noptimizer:\n  name: adam\n";
  auto model = build_model_from(parse_recipe(lm, "lm.yaml"), 100);
  const NamedTensors params = model->named_parameters();
  ASSERT_EQ(params[0].first, "embedding.weight");
  // 8-bit state, the embedding's kept 32-bit.
  const Recipe keep = parse_recipe(
      lm + "  state_bits: 8\n  min_8bit_size: 0\n  param_groups: [{params: embedding.*, state_bits: 32}]\n", "lm.yaml");
  auto opt = build_optimizer(keep, params);
  EXPECT_FALSE(eight_bit(*opt, "embedding.weight"));
  EXPECT_EQ(opt->num_8bit_params(), static_cast<int64_t>(params.size()) - 1);
  for (const auto& [name, p] : params) {
    if (name != "embedding.weight") {
      EXPECT_TRUE(eight_bit(*opt, name)) << name;
    }
  }
  EXPECT_EQ(opt->state_options("embedding.weight").state_bits_, 32);
  EXPECT_EQ(opt->state_options().state_bits_, 8);
  // The reverse: 32-bit state, the decoder's weight 8-bit in blocks of 64 (a quarter of the default).
  const Recipe only = parse_recipe(
      lm + "  param_groups: [{params: decoder.weight, state_bits: 8, block_size: 64, min_8bit_size: 0}]\n", "lm.yaml");
  auto opt8 = build_optimizer(only, params);
  EXPECT_EQ(opt8->num_8bit_params(), 1);
  EXPECT_TRUE(eight_bit(*opt8, "decoder.weight"));
  EXPECT_EQ(opt8->state_options("decoder.weight").block_size_, 64);
  const auto decoder =
      std::find_if(params.begin(), params.end(), [](const auto& p) { return p.first == "decoder.weight"; });
  ASSERT_NE(decoder, params.end());
  int64_t absmax = 0;
  for (const auto& [key, t] : opt8->state_dict())
    if (key == "decoder.weight.exp_avg.absmax") absmax = t.numel();
  EXPECT_EQ(absmax, (decoder->second.numel() + 63) / 64);
  // optimizer.keep_32bit holds for every group.
  const Recipe kept = parse_recipe(lm + "  keep_32bit: [decoder.weight]\n  param_groups: [{params: decoder.weight, "
                                        "state_bits: 8, min_8bit_size: 0}]\n",
                                   "lm.yaml");
  EXPECT_EQ(build_optimizer(kept, params)->num_8bit_params(), 0);
}

TEST(ParamGroups, ChangingAParametersStatePrecisionAtAResumeIsAnError) {
  const std::string yaml = "optimizer:\n  name: adam\n  param_groups: [{params: \"features.4.*\", state_bits: 8}]\n";
  auto eight = build_optimizer(parse_recipe(yaml, "r.yaml"), cnn_params());
  ASSERT_EQ(eight->num_8bit_params(), 1);
  auto thirty_two = build_optimizer(parse_recipe(yaml, "r.yaml", {"optimizer.param_groups=[]"}), cnn_params());
  expect_error([&] { thirty_two->load_state_dict(eight->state_dict()); }, "features.4.weight.exp_avg");
  // The same groups load: the state is keyed by parameter name.
  auto again = build_optimizer(parse_recipe(yaml, "r.yaml"), cnn_params());
  again->load_state_dict(eight->state_dict());
}

// The examples of recipes/README.md's "Parameter groups" build on their models and do what the
// text says.
TEST(ParamGroups, ReadmeExamples) {
  const std::string readme = file_text(std::string(OCTET_TESTS_DIR) + "/../recipes/README.md");
  const size_t begin = readme.find("\n## Parameter groups"), end = readme.find("\n### `model`");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_LT(begin, end);
  std::vector<std::string> examples;
  for (size_t at = readme.find("```yaml\n", begin); at < end; at = readme.find("```yaml\n", at)) {
    at += 8;
    examples.push_back(readme.substr(at, readme.find("```", at) - at));
  }
  ASSERT_EQ(examples.size(), 3u);
  // Biases and BatchNorm weights: exactly ResNet-50's one-dimensional parameters.
  const Recipe resnet = parse_recipe(examples[0], "README.md");
  ASSERT_EQ(resnet.text("model.name"), "resnet50");
  auto model = build_model_from(resnet);
  auto opt = build_optimizer(resnet, model->named_parameters());
  ASSERT_EQ(opt->num_groups(), 2u);
  std::vector<std::string> one_dim;
  for (const auto& [name, p] : model->named_parameters())
    if (p.dim() == 1) one_dim.push_back(name);
  EXPECT_EQ(names(opt->params(1)), one_dim);
  EXPECT_EQ(dynamic_cast<const SGD&>(*opt).options(1).weight_decay_, 0.0);
  EXPECT_EQ(dynamic_cast<const SGD&>(*opt).options(0).weight_decay_, 1e-4);
  // @1d: exactly MobileNetV2's one-dimensional parameters, which no glob of its names could pick.
  const Recipe mnv2 = parse_recipe(examples[1], "README.md");
  ASSERT_EQ(mnv2.text("model.name"), "mobilenetv2_cifar");
  model = build_model_from(mnv2);
  opt = build_optimizer(mnv2, model->named_parameters());
  ASSERT_EQ(opt->num_groups(), 2u);
  one_dim.clear();
  for (const auto& [name, p] : model->named_parameters())
    if (p.dim() == 1) one_dim.push_back(name);
  EXPECT_GT(one_dim.size(), 50u);
  EXPECT_EQ(names(opt->params(1)), one_dim);
  EXPECT_EQ(dynamic_cast<const SGD&>(*opt).options(1).weight_decay_, 0.0);
  // The embedding's state 32-bit, the rest 8-bit where large enough.
  const Recipe lm = parse_recipe(examples[2], "README.md", {"model.hidden_size=16"});
  ASSERT_EQ(lm.text("model.name"), "lstm_lm");
  model = build_model_from(lm, 5000);  // embedding [5000, 16]: 80,000 elements
  opt = build_optimizer(lm, model->named_parameters());
  EXPECT_FALSE(eight_bit(*opt, "embedding.weight"));
  EXPECT_TRUE(eight_bit(*opt, "decoder.weight"));
}

}  // namespace
}  // namespace octet::train
