// Recipe parsing: defaults, values, overrides, round trip of the resolved recipe, and errors that
// name the file, the line and the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <vector>

#include "core/error.h"
#include "models/registry.h"
#include "tests/data/temp_dir.h"
#include "tools/train/recipe.h"

namespace octet::train {
namespace {

void expect_error(const std::string& yaml, const std::vector<std::string>& overrides, const std::string& fragment) {
  try {
    parse_recipe(yaml, "r.yaml", overrides);
    FAIL() << "accepted; expected an error containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Recipe, ValuesDefaultsAndOverrides) {
  Recipe r = parse_recipe(
      R"(
model:
  name: resnet20
  num_classes: 10
optimizer:
  name: adam
  lr: 0.05
  betas: [0.8, 0.99]
schedule:
  milestones: [30, 60]
train:
  epochs: 3
)",
      "r.yaml",
      {"optimizer.lr=0.2", "train.seed=7", "data.augment=false", "optimizer.keep_32bit=[\"*embed*\", \"fc.bias\"]"});
  EXPECT_EQ(r.text("model.name"), "resnet20");
  EXPECT_DOUBLE_EQ(r.real("optimizer.lr"), 0.2);  // the override wins
  EXPECT_EQ(r.real_list("optimizer.betas"), (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(r.real_list("schedule.milestones"), (std::vector<double>{30, 60}));
  EXPECT_EQ(r.integer("train.epochs"), 3);
  EXPECT_EQ(r.integer("train.seed"), 7);
  EXPECT_FALSE(r.boolean("data.augment"));
  EXPECT_EQ(r.text_list("optimizer.keep_32bit"), (std::vector<std::string>{"*embed*", "fc.bias"}));
  EXPECT_EQ(r.integer("train.batch_size"), 128);  // default
  EXPECT_TRUE(r.is_set("train.epochs"));
  EXPECT_FALSE(r.is_set("train.batch_size"));
  EXPECT_DOUBLE_EQ(r.real("model.width_mult"), 1.0);  // integers are accepted for reals
  EXPECT_THROW(r.integer("optimizer.lr"), Error);     // asking with the wrong type
  // The resolved recipe reads back to the same values.
  Recipe again = parse_recipe(r.resolved_yaml(), "resolved.yaml");
  EXPECT_EQ(again.resolved_yaml(), r.resolved_yaml());
  EXPECT_DOUBLE_EQ(again.real("optimizer.lr"), 0.2);
}

TEST(Recipe, EmptyRecipeIsAllDefaults) {
  Recipe r = parse_recipe("", "empty.yaml");
  EXPECT_EQ(r.text("optimizer.name"), "sgd");
  EXPECT_FALSE(schema_markdown().empty());
}

// A checkpoint's resolved recipe names every key its version knew: a key added later takes the
// value that reproduces how the run was trained (the 8-bit rule), not the new default.
// A default-constructed Recipe (train()'s argument when it resumes) holds no values: reading one is
// an octet::Error that says how to make a recipe, not std::out_of_range.
TEST(Recipe, DefaultConstructedIsEmptyAndSaysSo) {
  for (const auto& read : std::vector<std::function<void()>>{[] { (void)Recipe().resolved_yaml(); },
                                                             [] { (void)Recipe().integer("train.epochs"); }}) {
    try {
      read();
      ADD_FAILURE() << "expected an octet::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("make one with load_recipe"), std::string::npos) << e.what();
    }
  }
}

TEST(Recipe, DeviceAndTf32) {
  Recipe r = parse_recipe("", "empty.yaml");
  EXPECT_EQ(r.text("train.device"), "cpu");
  EXPECT_FALSE(r.boolean("train.allow_tf32"));  // FP32 stays FP32 unless a recipe asks
  r = parse_recipe("train:\n  device: cuda:1\n  allow_tf32: true\n", "gpu.yaml");
  EXPECT_EQ(r.text("train.device"), "cuda:1");
  EXPECT_TRUE(r.boolean("train.allow_tf32"));
  r = parse_recipe("", "o.yaml", {"train.device=cuda", "train.allow_tf32=false"});
  EXPECT_EQ(r.text("train.device"), "cuda");
  EXPECT_FALSE(r.boolean("train.allow_tf32"));
  EXPECT_NE(parse_recipe(r.resolved_yaml(), "resolved.yaml").resolved_yaml().find("allow_tf32: false"),
            std::string::npos);
  expect_error("train:\n  allow_tf32: sometimes\n", {}, "r.yaml:2: key 'train.allow_tf32' must be true or false");
  // Whether the device exists is the trainer's question (tests/train/test_trainer.cpp).
}

TEST(Recipe, HostileYamlIsAnError) {
  expect_error(std::string(2 << 20, '#'), {}, "bytes a recipe may have");
  expect_error(std::string(5000, '[') + std::string(5000, ']'), {}, "r.yaml:");  // yaml-cpp's depth limit
  expect_error("[a, b]: 1\n", {}, "expected a key name, got a list");
  expect_error("train:\n  {a: 1}: 2\n", {}, "r.yaml:2: expected a key name, got a mapping");
  // Aliases that would expand to 2^40 list items if printed: the error names only the kind.
  std::string list = "[&a0 [1, 1]";
  for (int i = 1; i <= 40; ++i)
    list += ", &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]";
  expect_error("model:\n  name: " + list + "]\n", {}, "must be a string, got a list");
}

TEST(Recipe, ErrorsNameFileLineAndKey) {
  expect_error("optimizer:\n  lr: 0.1\n  lrr: 0.2\n", {}, "r.yaml:3: unknown key 'optimizer.lrr'");
  expect_error("optimizer:\n  lrr: 0.2\n", {}, "known keys in optimizer: name, lr");
  expect_error("train:\n  epochs: ten\n", {}, "r.yaml:2: key 'train.epochs' must be an integer");
  expect_error("train:\n  epochs: 1.5\n", {}, "must be an integer");
  expect_error("data:\n  augment: maybe\n", {}, "must be true or false");
  expect_error("optimizer:\n  betas: 0.9\n", {}, "must be a list of numbers");
  expect_error("optimiser:\n  lr: 1\n", {}, "r.yaml:1: unknown section 'optimiser'");
  expect_error("model: 3\n", {}, "section 'model' must be a mapping");
  expect_error("- a\n- b\n", {}, "must be a mapping of sections");
  expect_error("model:\n  name: [unclosed\n", {}, "invalid YAML");
  expect_error("", {"optimizer.lrr=1"}, "override 'optimizer.lrr=1': unknown key");
  expect_error("", {"optimizer.lr"}, "expected section.key=value");
  expect_error("", {"train.epochs=abc"}, "override 'train.epochs=abc': key 'train.epochs' must be an integer");
  EXPECT_THROW(load_recipe("/nonexistent/recipe.yaml"), Error);
}

// A value the trainer would reject later (or misuse: .inf passes lr > 0) is rejected with the recipe,
// before a run folder exists: the key, the value and what is allowed, in one line.
TEST(Recipe, ValuesAreCheckedOnLoad) {
  expect_error("optimizer:\n  lr: .inf\n", {}, "r.yaml:2: key 'optimizer.lr' must be a finite number, got '.inf'");
  expect_error("", {"optimizer.lr=-.inf"}, "key 'optimizer.lr' must be a finite number, got '-.inf'");
  expect_error("", {"train.clip_grad_norm=.nan"}, "must be a finite number, got '.nan'");
  expect_error("", {"optimizer.betas=[0.9, .inf]"}, "key 'optimizer.betas' must be a finite number");
  expect_error("", {"optimizer.param_groups=[{params: \"*.bias\", lr: .inf}]"},
               "key 'optimizer.lr' must be a finite number, got '.inf'");
  expect_error("train:\n  on_nonfinite: ignore\n", {},
               "r.yaml:2: key 'train.on_nonfinite' must be one of stop, skip, got 'ignore'");
  expect_error("", {"checkpoint.on_save_error=retry"},
               "key 'checkpoint.on_save_error' must be one of stop, continue, got 'retry'");
  expect_error("", {"train.label_smoothing=2"}, "key 'train.label_smoothing' must be in [0, 1], got 2");
  expect_error("", {"train.label_smoothing=-0.1"}, "must be in [0, 1], got -0.1");
  EXPECT_EQ(parse_recipe("", "r.yaml", {"train.label_smoothing=1"}).real("train.label_smoothing"), 1.0);
  EXPECT_EQ(parse_recipe("", "r.yaml", {"train.on_nonfinite=skip"}).text("train.on_nonfinite"), "skip");
}

// YAML leaves a repeated key to the reader (yaml-cpp kept both, and the later one won): an error
// naming both lines.
TEST(Recipe, DuplicateKeysAreErrors) {
  expect_error("optimizer:\n  lr: 0.1\n  momentum: 0.9\n  lr: 0.2\n", {},
               "r.yaml:4: key 'optimizer.lr' appears twice (lines 2 and 4)");
  expect_error("optimizer:\n  lr: 0.1\ntrain:\n  epochs: 1\noptimizer:\n  momentum: 0.5\n", {},
               "r.yaml:5: section 'optimizer' appears twice (lines 1 and 5)");
  // An override replaces the recipe's value, as before.
  EXPECT_EQ(parse_recipe("optimizer:\n  lr: 0.1\n", "r.yaml", {"optimizer.lr=0.2"}).real("optimizer.lr"), 0.2);
}

// yaml-cpp says "illegal map value" (or worse) for a tab in the indentation.
TEST(Recipe, TabsInIndentationAreNamed) {
  expect_error("optimizer:\n\tlr: 0.1\n", {}, "r.yaml:2: tabs are not allowed in YAML indentation");
  expect_error("optimizer:\n  lr: 0.1\n \tmomentum: 0.5\n", {}, "r.yaml:3: tabs are not allowed in YAML indentation");
  // A tab after the indentation is YAML's business.
  EXPECT_EQ(parse_recipe("optimizer:\n  lr:\t0.1\n", "r.yaml").real("optimizer.lr"), 0.1);
}

// recipe.yaml and a checkpoint's recipe: the shortest decimal that reads back as the same double.
TEST(Recipe, ResolvedNumbersAreShortest) {
  const std::string y =
      parse_recipe("optimizer:\n  lr: 0.05\n  weight_decay: 5.0e-4\n", "r.yaml", {"optimizer.betas=[0.9, 0.999]"})
          .resolved_yaml();
  for (const char* want : {"  lr: 0.05\n", "  weight_decay: 0.0005\n", "  step_size: 30.0\n", "  dclr_alpha: 20.0\n",
                           "  dist_timeout_s: 300.0\n", "  betas: [0.9, 0.999]\n"})
    EXPECT_NE(y.find(want), std::string::npos) << want << " in\n" << y;
  EXPECT_EQ(y.find("0000000"), std::string::npos) << y;
  EXPECT_EQ(y.find("e+"), std::string::npos) << y;
  const std::string big = parse_recipe("", "r.yaml", {"optimizer.lr=1e4", "quant.dclr_alpha=1e300"}).resolved_yaml();
  EXPECT_NE(big.find("  lr: 10000.0\n"), std::string::npos) << big;
  EXPECT_NE(big.find("  dclr_alpha: 1e+300\n"), std::string::npos) << big;
  EXPECT_EQ(parse_recipe(big, "resolved.yaml").real("quant.dclr_alpha"), 1e300);
  const std::string adam = parse_recipe("", "r.yaml", {"optimizer.name=adam", "optimizer.lr=1e-4"}).resolved_yaml();
  EXPECT_NE(adam.find("  lr: 0.0001\n"), std::string::npos) << adam;
  EXPECT_NE(adam.find("  eps: 1e-08\n"), std::string::npos) << adam;
}

// model.in_channels and model.image_size follow data.dataset where the recipe says nothing, so an
// empty recipe (Fashion-MNIST) builds a model for 1-channel 28x28 images.
TEST(Recipe, ModelInputFollowsTheDataset) {
  auto input = [](const std::vector<std::string>& o) {
    Recipe r = parse_recipe("", "r.yaml", o);
    return std::pair{r.integer("model.in_channels"), r.integer("model.image_size")};
  };
  EXPECT_EQ(input({}), (std::pair<int64_t, int64_t>{1, 28}));
  EXPECT_EQ(input({"data.dataset=mnist"}), (std::pair<int64_t, int64_t>{1, 28}));
  EXPECT_EQ(input({"data.dataset=cifar10"}), (std::pair<int64_t, int64_t>{3, 32}));
  EXPECT_EQ(input({"data.dataset=image_folder", "data.image_size=160"}), (std::pair<int64_t, int64_t>{3, 160}));
  EXPECT_EQ(input({"data.dataset=toy_grammar"}), (std::pair<int64_t, int64_t>{3, 32}));  // no images: the schema's
  EXPECT_EQ(input({"model.in_channels=3", "model.image_size=32"}), (std::pair<int64_t, int64_t>{3, 32}));  // said
  // The resolved recipe names the values, so a checkpoint keeps them whatever the defaults become.
  const Recipe r = parse_recipe("data:\n  dataset: cifar10\n", "r.yaml");
  const Recipe stored = parse_stored_recipe(r.resolved_yaml(), "stored", {"data.dataset=mnist"});
  EXPECT_EQ(stored.integer("model.in_channels"), 3);
  EXPECT_NE(schema_markdown().find("| `fashion_mnist, mnist: 1; cifar10, image_folder: 3; else 3` |"),
            std::string::npos);
  EXPECT_NE(schema_markdown().find("`fashion_mnist, mnist: 28; cifar10: 32; image_folder: data.image_size; else 32`"),
            std::string::npos);
}

TEST(Recipe, QuantKeys) {
  Recipe r = parse_recipe("", "empty.yaml");
  EXPECT_FALSE(r.boolean("quant.int8_conv"));  // INT8 only when a recipe asks
  EXPECT_TRUE(r.boolean("quant.keep_first_last_float"));
  EXPECT_TRUE(r.boolean("quant.dsgc"));
  EXPECT_TRUE(r.boolean("quant.dclr"));
  EXPECT_TRUE(r.boolean("quant.stochastic_rounding"));
  EXPECT_EQ(r.integer("quant.clip_update_period"), 100);
  EXPECT_DOUBLE_EQ(r.real("quant.dclr_alpha"), 20.0);
  EXPECT_DOUBLE_EQ(r.real("quant.dclr_beta"), 0.1);
  EXPECT_DOUBLE_EQ(r.real("quant.cos_distance_warn"), 0.1);
  r = parse_recipe("quant:\n  int8_conv: true\n  clip_update_period: 1\n  dclr_beta: 1\n", "q.yaml",
                   {"quant.dsgc=false", "quant.cos_distance_warn=0"});
  EXPECT_TRUE(r.boolean("quant.int8_conv"));
  EXPECT_EQ(r.integer("quant.clip_update_period"), 1);
  EXPECT_DOUBLE_EQ(r.real("quant.dclr_beta"), 1.0);
  EXPECT_FALSE(r.boolean("quant.dsgc"));
  EXPECT_EQ(parse_recipe(r.resolved_yaml(), "resolved.yaml").resolved_yaml(), r.resolved_yaml());
  // Ranges, with file, line and key like the type errors.
  expect_error("quant:\n  int8_conv: true\n  clip_update_period: 0\n", {},
               "r.yaml:3: key 'quant.clip_update_period' must be >= 1, got 0");
  expect_error("quant:\n  dclr_beta: 0\n", {}, "r.yaml:2: key 'quant.dclr_beta' must be in (0, 1], got 0");
  expect_error("quant:\n  dclr_beta: 1.5\n", {}, "key 'quant.dclr_beta' must be in (0, 1]");
  expect_error("quant:\n  dclr_alpha: -1\n", {}, "r.yaml:2: key 'quant.dclr_alpha' must be >= 0");
  expect_error("quant:\n  cos_distance_warn: .nan\n", {}, "key 'quant.cos_distance_warn' must be a finite number");
  expect_error("", {"quant.clip_update_period=-5"},
               "override 'quant.clip_update_period=-5': key 'quant.clip_update_period' must be >= 1");
  expect_error("quant:\n  int8: true\n", {}, "r.yaml:2: unknown key 'quant.int8' (known keys in quant: int8_conv");
  expect_error("quant:\n  int8_conv: yes please\n", {}, "r.yaml:2: key 'quant.int8_conv' must be true or false");
}

// Values that used to reach a C++ function and be refused there (build_model:, SGD:,
// set_num_threads:, yaml-cpp's anchors) are refused by the recipe, in one line naming the key, the
// value and what is allowed.
TEST(Recipe, ValuesAreNamedByTheirKey) {
  expect_error("", {"model.name=resnet999"},
               "override 'model.name=resnet999': key 'model.name' must be one of gpt, lstm_lm, mlp, mobilenetv2");
  expect_error("model:\n  shortcut: C\n", {}, "r.yaml:2: key 'model.shortcut' must be one of A, B, got 'C'");
  expect_error("", {"model.embedding=fancy"}, "key 'model.embedding' must be one of plain, stable, got 'fancy'");
  expect_error("", {"optimizer.momentum=-1"}, "key 'optimizer.momentum' must be >= 0, got -1");
  expect_error("", {"train.threads=0"}, "key 'train.threads' must be in [1, 1024], got 0");
  // 100000 threads segfaulted in libgomp after the run folder was made; eval's --threads has this cap.
  expect_error("", {"train.threads=100000"}, "key 'train.threads' must be in [1, 1024], got 100000");
  // The DataLoader's own limit, named by the key (it said "DataLoader: expected workers in [0, 256]").
  expect_error("", {"data.workers=1000"}, "key 'data.workers' must be in [0, 256], got 1000");
  expect_error("", {"model.dropout=1"}, "key 'model.dropout' must be in [0, 1), got 1");
  // As torch.optim's: an lr of 0 is allowed (its options struct declares the range, once).
  expect_error("", {"optimizer.lr=-0.1"}, "key 'optimizer.lr' must be >= 0, got -0.1");
  expect_error("", {"schedule.name=linear"}, "key 'schedule.name' must be one of constant, step, multistep");
  expect_error("", {"data.dataset=imagenet"}, "text, text_chars, toy_grammar, got 'imagenet'");
  // Counts and periods: a negative limit or a log period of 0 has no meaning (they were accepted);
  // checkpoint.every_epochs 0 is Lightning's every_n_epochs=0 (the schema says what it does).
  expect_error("", {"data.limit_train=-5"}, "key 'data.limit_train' must be >= 0, got -5");
  expect_error("", {"data.limit_test=-1"}, "key 'data.limit_test' must be >= 0, got -1");
  expect_error("", {"log.every_steps=0"}, "key 'log.every_steps' must be >= 1, got 0");
  expect_error("", {"checkpoint.every_epochs=-2"}, "key 'checkpoint.every_epochs' must be >= 0, got -2");
  EXPECT_EQ(parse_recipe("", "r.yaml", {"checkpoint.every_epochs=0"}).integer("checkpoint.every_epochs"), 0);
  EXPECT_NE(schema_markdown().find("(0: never during training: only at the end of the run"), std::string::npos);
  EXPECT_NE(schema_markdown().find("(text: tokens) (0: all) (>= 0)"), std::string::npos);
  // A group's value is checked as the section's.
  expect_error("", {"optimizer.param_groups=[{params: \"*.bias\", momentum: -0.5}]"},
               "optimizer.param_groups[0]: key 'optimizer.momentum' must be >= 0, got -0.5");
  // A glob read as a YAML alias says how to quote it.
  expect_error("", {"optimizer.keep_32bit=*classifier*"},
               "override 'optimizer.keep_32bit=*classifier*': key 'optimizer.keep_32bit' must be a list of strings; "
               "the value is not valid YAML: the referenced anchor is not defined (a value that starts with '*' is a "
               "YAML alias; quote it: optimizer.keep_32bit='[\"*classifier*\"]')");
  expect_error("optimizer:\n  keep_32bit: [*emb*]\n", {}, "quote it: \"*embedding*\"");
  // One line each.
  try {
    parse_recipe("", "r.yaml", {"model.name=resnet999"});
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

// The schema documents every model the registry builds (it lacked resnet32, resnet44, resnet110),
// and the recipe accepts each.
TEST(Recipe, SchemaNamesEveryModel) {
  const auto& schema = recipe_schema();
  const auto entry = std::find_if(schema.begin(), schema.end(), [](const auto& e) { return e.key == "model.name"; });
  ASSERT_NE(entry, schema.end());
  EXPECT_EQ(entry->doc, model_catalog());  // generated from the registry: nothing to keep in step by hand
  EXPECT_NE(entry->doc.find("resnet50 (ImageNet ResNets), resnet20"), std::string::npos) << entry->doc;
  for (const std::string& name : model_names())
    EXPECT_EQ(parse_recipe("", "r.yaml", {"model.name=" + name}).text("model.name"), name);
}

// An unknown key, section, choice or group key names the nearest known one.
TEST(Recipe, UnknownNamesSuggestTheNearest) {
  expect_error("model:\n  nmu_classes: 3\n", {},
               "r.yaml:2: unknown key 'model.nmu_classes'; did you mean 'model.num_classes'? (known keys in model:");
  expect_error("", {"model.nmu_classes=3"},
               "override 'model.nmu_classes=3': unknown key 'model.nmu_classes'; did you mean 'model.num_classes'? "
               "(known keys in model: name, num_classes,");
  expect_error("", {"train.lr=0.1"}, "unknown key 'train.lr'; did you mean 'optimizer.lr'?");  // another section's
  expect_error("", {"optimiser.lr=0.1"}, "unknown key 'optimiser.lr'; did you mean 'optimizer.lr'? (known sections:");
  expect_error("optimiser:\n  lr: 1\n", {}, "unknown section 'optimiser'; did you mean 'optimizer'? (known: model");
  expect_error("", {"model.name=resnet2O"}, "got 'resnet2O'; did you mean 'resnet20'?");
  expect_error("", {"optimizer.name=adamm"}, "unknown optimizer 'adamm'; did you mean 'adam'?");
  expect_error("optimizer:\n  param_groups: [{params: \"*.bias\", wieght_decay: 0}]\n", {},
               "unknown key 'wieght_decay'; did you mean 'weight_decay'? (known keys in a group:");
  // Nothing close: no guess.
  expect_error("", {"model.colour=red"}, "unknown key 'model.colour' (known keys in model:");
}

// The keys a resumed run keeps from its checkpoint, and a value as YAML to compare them by.
TEST(Recipe, KeysFixedOnResume) {
  const std::vector<std::string>& keys = keys_fixed_on_resume();
  auto fixed = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  EXPECT_TRUE(fixed("model.name"));
  EXPECT_TRUE(fixed("model.hidden_size"));
  EXPECT_TRUE(fixed("optimizer.name"));
  EXPECT_TRUE(fixed("optimizer.state_bits"));
  EXPECT_FALSE(fixed("model.dropout"));
  EXPECT_FALSE(fixed("optimizer.lr"));
  EXPECT_FALSE(fixed("train.epochs"));
  const Recipe r =
      parse_recipe("", "r.yaml", {"optimizer.name=adam", "optimizer.lr=0.05", "optimizer.betas=[0.8, 0.9]"});
  EXPECT_EQ(r.value_yaml("model.name"), "\"small_cnn\"");
  EXPECT_EQ(r.value_yaml("optimizer.lr"), "0.05");
  EXPECT_EQ(r.value_yaml("optimizer.betas"), "[0.8, 0.9]");
}

// A run name is one folder under checkpoint.dir: `/etc` made /etc-2 and a /latest link at the root,
// `../../x` escaped checkpoint.dir, `a/b` nested.
TEST(Recipe, RunNameIsOneFolderName) {
  for (const char* bad : {"/etc", "../../x", "a/b", "..", ".", "a\\b"})
    expect_error("", {std::string("log.run_name=") + bad}, "key 'log.run_name' must be one folder name");
  expect_error("log:\n  run_name: /tmp/x\n", {}, "r.yaml:2: key 'log.run_name' must be one folder name");
  EXPECT_EQ(parse_recipe("", "r.yaml", {"log.run_name=my-run.2"}).text("log.run_name"), "my-run.2");
}

// Values each key allows alone, but not together with the others (they were accepted silently).
TEST(Recipe, CombinationsThatMeanNothingAreErrors) {
  // A key the chosen optimizer does not use; the file's line is named.
  expect_error("optimizer:\n  name: sgd\n  betas: [0.9]\n", {},
               "r.yaml:3: recipe optimizer.betas: optimizer sgd does not use it (its keys: dampening, lr, momentum");
  expect_error("", {"optimizer.momentum=0.9", "optimizer.name=adam"}, "optimizer adam does not use it");
  // The recipe's SGD keys under optimizer.name=adam on the command line: a switch, not an error.
  const Recipe switched =
      parse_recipe("optimizer:\n  momentum: 0.9\n  nesterov: true\n", "r.yaml", {"optimizer.name=adam"});
  EXPECT_EQ(switched.text("optimizer.name"), "adam");
  EXPECT_EQ(parse_recipe(switched.resolved_yaml(), "recipe.yaml").real("optimizer.momentum"), 0.0);  // reads again
  // A resolved recipe (a run folder's recipe.yaml) names the unused keys with their resolved values.
  const Recipe sgd = parse_recipe("", "r.yaml");
  EXPECT_EQ(parse_recipe(sgd.resolved_yaml(), "recipe.yaml").value_yaml("optimizer.betas"), "[0.9, 0.999]");
  expect_error("schedule:\n  name: multistep\n  milestones: [5, 2]\n", {},
               "r.yaml:3: recipe schedule.milestones: the epochs must increase, got 5 then 2");
  expect_error("", {"schedule.milestones=[-1]"}, "recipe schedule.milestones: epochs must be >= 0, got -1");
  expect_error("", {"schedule.name=cosine", "optimizer.lr=0.1", "schedule.eta_min=0.5"},
               "recipe schedule.eta_min: 0.5 is above optimizer.lr 0.1: the cosine schedule would raise the lr");
  // Errors in a recipe are usage errors: `octet` exits 2 for them.
  try {
    parse_recipe("", "r.yaml", {"schedule.milestones=[5, 2]"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError&) {
  }
}

// Nesting: yaml-cpp gave up near 500 levels with "bad file" (the README said 2000 were allowed);
// the recipe's own limit is 256, named with the line.
TEST(Recipe, DeepNestingIsNamed) {
  auto flow = [](int depth) { return "model:\n  name: " + std::string(depth, '[') + std::string(depth, ']') + "\n"; };
  expect_error(flow(250), {}, "r.yaml:2: key 'model.name' must be a string, got a list");
  expect_error(flow(300), {}, "r.yaml:2: the recipe nests deeper than 256 levels");
  expect_error(flow(600), {}, "r.yaml:2: the recipe nests deeper than 256 levels");
  std::string block = "model:\n";
  for (int i = 0; i < 300; ++i) block += std::string(static_cast<size_t>(2 + i), ' ') + "k" + std::to_string(i) + ":\n";
  expect_error(block, {}, "r.yaml:257: the recipe nests deeper than 256 levels");
  std::string dashes = "optimizer:\n  keep_32bit:\n  ";
  for (int i = 0; i < 300; ++i) dashes += "- ";
  expect_error(dashes + "x\n", {}, "r.yaml:3: the recipe nests deeper than 256 levels");
  // Brackets in quotes and comments are text.
  EXPECT_EQ(
      parse_recipe("log:  # [[[[\n  run_name: \"" + std::string(300, '[') + "\"\n", "r.yaml").text("log.run_name"),
      std::string(300, '['));
}

// A binary file given as a recipe, and an empty one (it trained 10 epochs of defaults without a word).
TEST(Recipe, BinaryAndEmptyFilesAreNamed) {
  expect_error(std::string("model:\n  name: x\x01\x02", 17), {}, "r.yaml: not a text file (byte 16 is 0x01)");
  octet::testing::TempDir dir;
  std::ofstream(dir.path() + "/empty.yaml") << "# nothing here\n\n";
  try {
    load_recipe(dir.path() + "/empty.yaml");
    ADD_FAILURE() << "an empty recipe loaded";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.yaml is empty (no section"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet::train
