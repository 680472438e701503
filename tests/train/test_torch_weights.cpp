// Weights to and from PyTorch (tools/train/torch_weights.h) against goldens written by torchvision
// (tests/train/data/torch/make_torch_golden.py): torchvision's MobileNetV2 state_dict loads into
// octet's model, which then gives torchvision's eval output; `export --torch` of that model writes
// the same tensors torch wrote (names, shapes, dtypes and bytes: what torch's strict
// load_state_dict needs); what does not fit is an error that names it and the keys that relax it;
// and the recipe's model.init_from starts a fine-tuning run with a new stem and classifier.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/octet.h"
#include "core/serialization.h"
#include "models/registry.h"
#include "tests/data/temp_dir.h"
#include "tests/train/run_util.h"
#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/torch_weights.h"
#include "tools/train/trainer.h"

namespace octet::train {
namespace {

using octet::testing::TempDir;

const std::string kData = std::string(OCTET_TESTS_DIR) + "/train/data/torch/";
const std::string kWeights = kData + "mobilenet_v2_w025.safetensors";
const std::string kRecipe = std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist.yaml";
// torchvision's eval output against octet's: the same f32 model, convolutions summed in another
// order; the outputs are ~1e-2, so 1e-6 is ~1e-4 relative.
constexpr double kOutputTol = 1e-6;

std::shared_ptr<Module> mobilenet(int64_t classes) {
  auto m = build_model(ModelOptions().name("mobilenetv2").width_mult(0.25).num_classes(classes).in_channels(3));
  return m;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.numel() * dtype_size(a.dtype())) == 0;
}

TEST(TorchWeights, TorchvisionWeightsGiveTorchvisionsOutput) {
  auto m = mobilenet(10);
  const InitFromReport r = init_from_file(*m, kWeights, {});
  EXPECT_EQ(r.loaded, 314u);  // len(torchvision mobilenet_v2().state_dict())
  EXPECT_TRUE(r.ignored.empty());
  m->eval();
  const SafetensorsFile io = load_safetensors(kData + "mobilenet_v2_w025_io.safetensors");
  NoGradGuard ng;
  const std::vector<float> got = (*m)(io.at("input")).to_vector<float>(), want = io.at("output").to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], kOutputTol) << i;
}

// The export holds exactly what torch wrote: so torch loads it strictly (the script's --check ran it).
TEST(TorchWeights, ExportWritesTheStateDictTorchWrote) {
  TempDir dir;
  auto m = mobilenet(10);
  init_from_file(*m, kWeights, {});
  const std::string ckpt = dir.path() + "/last.safetensors", out = dir.path() + "/torch.safetensors";
  save_checkpoint(ckpt, m->state_dict(), {}, TrainState{}, load_recipe(kRecipe).resolved_yaml());
  EXPECT_EQ(export_torch_weights(ckpt, out), 314u);
  const SafetensorsFile torch = load_safetensors(kWeights), mine = load_safetensors(out);
  ASSERT_EQ(mine.tensors.size(), torch.tensors.size());
  std::map<std::string, Tensor> want(torch.tensors.begin(), torch.tensors.end());
  for (const auto& [name, t] : mine.tensors) {
    ASSERT_TRUE(want.count(name)) << name;  // no "model." prefix, nothing but the model
    EXPECT_TRUE(same_bytes(t, want.at(name))) << name;
  }
  // An octet checkpoint is also a model.init_from source (its model tensors).
  auto again = mobilenet(10);
  EXPECT_EQ(init_from_file(*again, ckpt, {}).loaded, 314u);
  for (const auto& [name, t] : again->state_dict()) EXPECT_TRUE(same_bytes(t, want.at(name))) << name;
}

// --dtype bf16: every floating tensor as torch's model.to(torch.bfloat16) holds it (round to
// nearest even: the f32 golden's bf16 rounding), the batch norms' step counts (i64) as they are.
// make_torch_golden.py --check-bf16 loads it into torchvision strictly.
TEST(TorchWeights, ExportInBf16) {
  TempDir dir;
  auto m = mobilenet(10);
  init_from_file(*m, kWeights, {});
  const std::string ckpt = dir.path() + "/last.safetensors", out = dir.path() + "/torch_bf16.safetensors";
  save_checkpoint(ckpt, m->state_dict(), {}, TrainState{}, load_recipe(kRecipe).resolved_yaml());
  EXPECT_EQ(export_torch_weights(ckpt, out, DType::bf16), 314u);
  const SafetensorsFile torch = load_safetensors(kWeights), mine = load_safetensors(out);
  std::map<std::string, Tensor> want(torch.tensors.begin(), torch.tensors.end());
  size_t bf16 = 0;
  for (const auto& [name, t] : mine.tensors) {
    const Tensor& w = want.at(name);
    const Tensor expected = w.dtype() == DType::f32 ? w.to(DType::bf16) : w;
    EXPECT_TRUE(same_bytes(t, expected)) << name;
    bf16 += t.dtype() == DType::bf16;
  }
  EXPECT_EQ(bf16, 314u - 52u);  // all but the 52 batch norms' num_batches_tracked
  EXPECT_THROW(export_torch_weights(ckpt, out, DType::i8), Error);
  // OCTET_KEEP_EXPORT=PATH keeps a copy for make_torch_golden.py --check-bf16 (torch is not a test
  // dependency).
  if (const char* keep = std::getenv("OCTET_KEEP_EXPORT")) std::filesystem::copy_file(out, keep);
}

TEST(TorchWeights, WhatDoesNotFitIsNamed) {
  auto five = mobilenet(5);
  expect_error([&] { init_from_file(*five, kWeights, {}); },
               "'classifier.1.weight' is [10, 1280] in the file, [5, 1280]");
  expect_error([&] { init_from_file(*five, kWeights, {}); }, "model.init_ignore");
  // Ignoring the classifier loads the rest and leaves it as initialized.
  const Tensor before = five->state_dict().back().second.clone();
  const InitFromReport r = init_from_file(*five, kWeights, {true, {"classifier.*"}});
  EXPECT_EQ(r.loaded, 312u);
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"classifier.1.weight", "classifier.1.bias"}));
  EXPECT_TRUE(same_bytes(five->state_dict().back().second, before));
  // A glob that matches nothing is a mistake (it was ignored silently), as in optimizer.param_groups.
  expect_error(
      [&] {
        init_from_file(*five, kWeights, {true, {"classifer.*"}});
      },
      "recipe model.init_ignore: 'classifer.*' matches no tensor of ");
  // Another architecture: the missing and unexpected names, counted and listed.
  auto resnet = build_model(ModelOptions().name("resnet20").num_classes(10).in_channels(3));
  expect_error([&] { init_from_file(*resnet, kWeights, {}); }, "tensor(s) not in the file: conv1.weight");
  expect_error([&] { init_from_file(*resnet, kWeights, {}); }, "314 file tensor(s) the model does not have");
  // Not strict: only the names both have (none here), and a shape mismatch is still an error.
  const InitFromReport loose = init_from_file(*resnet, kWeights, {false, {}});
  EXPECT_EQ(loose.loaded, 0u);
  EXPECT_EQ(loose.unused.size(), 314u);
  expect_error([&] { init_from_file(*five, kWeights, {false, {}}); }, "'classifier.1.weight' is [10, 1280]");
  expect_error([&] { init_from_file(*five, kData + "no_such.safetensors", {}); }, "no_such.safetensors");
}

// Fine-tuning from torchvision's weights on Fashion-MNIST-format data: a grey stem and a new
// classifier are left as initialized; the run starts from the file's other weights.
TEST(TorchWeights, RecipeInitFromStartsTheRun) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 16, 16);
  const Recipe r =
      load_recipe(kRecipe, {"data.dataset=mnist", "data.root=" + dir.path() + "/mnist", "model.name=mobilenetv2",
                            "model.width_mult=0.25", "model.num_classes=10", "model.init_from=" + kWeights,
                            "model.init_ignore=[features.0.0.*, classifier.*]", "train.epochs=1", "train.batch_size=16",
                            "train.max_steps=1", "optimizer.lr=1e-9", "log.progress=false",
                            "checkpoint.dir=" + dir.path() + "/runs"});
  const TrainResult run = train(r, {});
  EXPECT_NE(file_text(run.run_dir + "/train.log").find("model.init_from: 311 tensors from " + kWeights),
            std::string::npos);
  // One SGD step at a negligible learning rate: the first block's depthwise weights are the file's.
  const Checkpoint c = load_checkpoint(run.run_dir + "/last.safetensors");
  const SafetensorsFile torch = load_safetensors(kWeights);
  bool seen = false;
  for (const auto& [name, t] : c.model) {
    if (name != "features.1.conv.0.0.weight") continue;
    seen = true;
    EXPECT_LT(max(abs(t - torch.at(name))).item(), 1e-6);
  }
  EXPECT_TRUE(seen);
  // Without the ignore list the grey stem does not fit, before any run folder is made.
  const Recipe strict =
      load_recipe(kRecipe, {"data.dataset=mnist", "data.root=" + dir.path() + "/mnist", "model.name=mobilenetv2",
                            "model.width_mult=0.25", "model.init_from=" + kWeights, "train.batch_size=16",
                            "log.progress=false", "checkpoint.dir=" + dir.path() + "/runs2"});
  expect_error([&] { train(strict, {}); }, "'features.0.0.weight' is [8, 3, 3, 3] in the file, [8, 1, 3, 3]");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs2"));
}

}  // namespace
}  // namespace octet::train
