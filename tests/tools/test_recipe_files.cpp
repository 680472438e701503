// The shipped recipes: every file in recipes/ loads and builds (model, INT8 layers, optimizer,
// schedule), each *_int8.yaml differs from its FP32 twin only in the quant section, and
// recipes/README.md's key table is the schema's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/octet.h"
#include "tools/builders.h"

namespace octet::tools {
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
                        "mobilenetv2_cifar10_int8.yaml", "resnet50_imagenet.yaml", "resnet50_imagenet_int8.yaml"})
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
       {std::pair{"fashion_mnist_int8.yaml", 1}, std::pair{"mobilenetv2_cifar10_int8.yaml", 51},
        std::pair{"resnet50_imagenet_int8.yaml", 52}}) {
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
  EXPECT_EQ(c.dclr_beta, 0.5);
  EXPECT_EQ(c.clip_update_period, 100);
}

TEST(RecipeFiles, ReadmeKeyTableIsTheSchema) {
  std::ifstream in(kRecipes + "README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const size_t at = readme.find("\n### `model`");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(readme.substr(at), schema_markdown()) << "regenerate the table with `octet schema`";
}

}  // namespace
}  // namespace octet::tools
