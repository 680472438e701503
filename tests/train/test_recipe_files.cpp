// The shipped recipes: every file in recipes/ loads and builds (model, INT8 layers, optimizer,
// schedule; language models with a stand-in vocabulary), each *_int8.yaml differs from its FP32
// twin only in the quant section, and recipes/README.md's key table is the schema's.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "core/octet.h"
#include "tests/train/run_util.h"
#include "tools/train/builders.h"
#include "tools/train/task.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;

const std::string kRecipes = std::string(OCTET_TESTS_DIR) + "/../recipes/";

std::vector<std::string> recipe_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kRecipes))
    if (e.path().extension() == ".yaml") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The resolved recipe without its quant section.
std::string without_quant(const Recipe& r) {
  std::istringstream in(r.resolved_yaml());
  std::string line, out;
  bool in_quant = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') in_quant = line == "quant:";
    if (!in_quant) out += line + "\n";
  }
  return out;
}

TEST(RecipeFiles, EveryRecipeLoads) {
  std::vector<std::string> files = recipe_files();
  for (const char* f : {"fashion_mnist.yaml", "fashion_mnist_int8.yaml", "mobilenetv2_cifar10.yaml",
                        "mobilenetv2_cifar10_int8.yaml", "resnet50_imagenet.yaml", "resnet50_imagenet_int8.yaml",
                        "lstm_lm_wikitext2.yaml", "lstm_lm_wikitext2_medium_8bit.yaml", "lstm_lm_tiny.yaml",
                        "fashion_mnist_resnet20.yaml", "fashion_mnist_resnet20_int8.yaml", "fashion_mnist_mlp.yaml"})
    EXPECT_NE(std::find(files.begin(), files.end(), f), files.end()) << f;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Recipe r = load_recipe(kRecipes + f);
    build_schedule(r);
    const std::string twin =
        f.size() > 10 && f.substr(f.size() - 10) == "_int8.yaml" ? f.substr(0, f.size() - 10) + ".yaml" : "";
    EXPECT_EQ(r.boolean("quant.int8_conv"), !twin.empty());
    if (twin.empty()) continue;
    Recipe fp32 = load_recipe(kRecipes + twin);
    EXPECT_EQ(without_quant(r), without_quant(fp32)) << "the INT8 recipe and " << twin << " differ outside quant";
  }
}

// Building the models is the slow part: the small and CIFAR ones here, ResNet-50 with 10 classes
// (its convolutions are those of the 1000-class model).
TEST(RecipeFiles, Int8RecipesBuild) {
  for (const auto& [f, int8_convs] :
       {std::pair{"fashion_mnist_int8.yaml", 1}, std::pair{"fashion_mnist_resnet20_int8.yaml", 18},
        std::pair{"mobilenetv2_cifar10_int8.yaml", 51}, std::pair{"resnet50_imagenet_int8.yaml", 52}}) {
    SCOPED_TRACE(f);
    Recipe r = load_recipe(kRecipes + f, {"model.num_classes=10"});
    auto model = build_model_from(r);
    auto layers = build_int8(r, *model);
    EXPECT_EQ(static_cast<int>(layers.size()), int8_convs);
    auto opt = build_optimizer(r, model->named_parameters());
    for (const auto& l : layers)
      for (const auto& p : l.params) EXPECT_EQ(opt->lr_scale(p), 1.0);  // the names are the optimizer's
  }
}

// The language-model recipes with a stand-in vocabulary of 100 words (the real one comes from the
// corpus): the model, its optimizer (8-bit state where asked, the StableEmbedding's 32-bit) and the
// plateau schedule of PyTorch's word_language_model example.
TEST(RecipeFiles, LanguageModelRecipesBuild) {
  for (const auto& [f, state_bits] : {std::pair{"lstm_lm_wikitext2.yaml", 32}, std::pair{"lstm_lm_tiny.yaml", 32},
                                      std::pair{"lstm_lm_wikitext2_medium_8bit.yaml", 8}}) {
    SCOPED_TRACE(f);
    Recipe r = load_recipe(kRecipes + f);
    EXPECT_TRUE(is_language_model(r));
    EXPECT_EQ(r.real("train.clip_grad_norm"), 0.25);
    EXPECT_EQ(r.integer("data.bptt"), 35);
    EXPECT_EQ(r.integer("optimizer.state_bits"), state_bits);
    auto model = build_model_from(r, 100);
    EXPECT_EQ(model->type_name(), "LstmLm");
    auto opt = build_optimizer(r, model->named_parameters());
    EXPECT_EQ(opt->num_8bit_params() > 0, state_bits == 8);
    std::shared_ptr<PlateauSchedule> plateau;
    build_schedule(r, &plateau);
    ASSERT_NE(plateau, nullptr);
  }
  // 8-bit state for the four LSTM matrices; the tied embedding/decoder weight keeps 32-bit state as a
  // StableEmbedding's (the decoder bias and LayerNorm are under optimizer.min_8bit_size).
  for (const auto& [embedding, eight_bit] : {std::pair{"stable", 4}, std::pair{"plain", 5}}) {
    Recipe r =
        load_recipe(kRecipes + "lstm_lm_wikitext2_medium_8bit.yaml", {std::string("model.embedding=") + embedding});
    auto model = build_model_from(r, 100);
    EXPECT_EQ(build_optimizer(r, model->named_parameters())->num_8bit_params(), eight_bit) << embedding;
  }
  // The paper's model: 1 x 2048 LSTM, dropout 0.5, SGD at lr 20, 40 epochs, batch 20.
  Recipe pb = load_recipe(kRecipes + "lstm_lm_wikitext2.yaml");
  EXPECT_EQ(pb.integer("model.hidden_size"), 2048);
  EXPECT_EQ(pb.integer("model.num_layers"), 1);
  EXPECT_EQ(pb.real("model.dropout"), 0.5);
  EXPECT_EQ(pb.real("optimizer.lr"), 20.0);
  EXPECT_EQ(pb.integer("train.epochs"), 40);
  EXPECT_EQ(pb.integer("train.batch_size"), 20);
  EXPECT_EQ(pb.integer("train.eval_batch_size"), 10);
}

// The PrecisionBatching paper's MNIST network on Fashion-MNIST: 784 -> 4096 -> 4096 -> 10, Adam at 1e-4,
// batch 100, 20 epochs, pixels in [0, 1] (the reference's training script); hidden_sizes is checked on
// load and overridable as a list.
TEST(RecipeFiles, MlpRecipe) {
  Recipe r = load_recipe(kRecipes + "fashion_mnist_mlp.yaml");
  EXPECT_EQ(r.int_list("model.hidden_sizes"), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(r.text("optimizer.name"), "adam");
  EXPECT_EQ(r.real("optimizer.lr"), 1e-4);
  EXPECT_EQ(r.integer("train.batch_size"), 100);
  EXPECT_EQ(r.integer("train.epochs"), 20);
  EXPECT_EQ(r.real_list("data.mean"), std::vector<double>{0.0});
  EXPECT_EQ(r.real_list("data.std"), std::vector<double>{1.0});
  auto model = build_model_from(r);
  EXPECT_EQ(model->type_name(), "Mlp");
  EXPECT_EQ(model->num_parameters(), 784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10);
  auto small = build_model_from(load_recipe(kRecipes + "fashion_mnist_mlp.yaml", {"model.hidden_sizes=[32]"}));
  EXPECT_EQ(small->num_parameters(), 784 * 32 + 32 + 32 * 10 + 10);
  expect_error([] { load_recipe(kRecipes + "fashion_mnist_mlp.yaml", {"model.hidden_sizes=[64, 0]"}); },
               "key 'model.hidden_sizes' must be a list of integers >= 1, got 0 in it");
  expect_error([] { load_recipe(kRecipes + "fashion_mnist_mlp.yaml", {"model.hidden_sizes=64"}); },
               "model.hidden_sizes");
}

TEST(RecipeFiles, Int8ErrorsNameTheKey) {
  // A model without convolutions (a C++ API model; the registry's all have some).
  Recipe r = load_recipe(kRecipes + "fashion_mnist_int8.yaml");
  auto mlp = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{std::make_shared<Linear>(4, 2)});
  try {
    build_int8(r, *mlp);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recipe quant.int8_conv: cannot train model 'small_cnn' in INT8"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has no Conv2d layers"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(build_int8(load_recipe(kRecipes + "fashion_mnist.yaml"), *mlp).empty());  // INT8 off: nothing to do
  quant::Int8Config c = int8_config_from(load_recipe(kRecipes + "fashion_mnist_int8.yaml", {"quant.dclr_beta=0.5"}));
  EXPECT_EQ(c.dclr_beta_, 0.5);
  EXPECT_EQ(c.clip_update_period_, 100);
}

TEST(RecipeFiles, ReadmeKeyTableIsTheSchema) {
  const std::string readme = file_text(kRecipes + "README.md");
  const size_t at = readme.find("\n### `model`");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(readme.substr(at), schema_markdown()) << "regenerate the table with `octet schema`";
}

}  // namespace
}  // namespace octet::train
