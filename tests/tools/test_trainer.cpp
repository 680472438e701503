// End-to-end training on small generated data in the real formats: the shipped CIFAR-10 and
// ImageNet recipes start training, a run resumes exactly, and bad recipes, data and
// checkpoints give clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/octet.h"
#include "data/cifar10.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "tests/data/temp_dir.h"
#include "tools/checkpoint.h"
#include "tools/trainer.h"

namespace octet::tools {
namespace {

namespace fs = std::filesystem;
using octet::testing::TempDir;

const std::string kRecipes = std::string(OCTET_TESTS_DIR) + "/../recipes/";

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v = rand({static_cast<int64_t>(n)}, DType::f32, &g).to_vector<float>();
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(v[i] * 255.0f);
  return out;
}

// MNIST-format data whose label is visible in the image (so a model can learn it).
void write_mnist(const std::string& root, int64_t n_train, int64_t n_test) {
  fs::create_directories(root);
  for (auto [name, n] : {std::pair{"train", n_train}, std::pair{"t10k", n_test}}) {
    std::vector<uint8_t> images = random_bytes(static_cast<size_t>(n) * 784, n), labels(n);
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int64_t p = 0; p < 28; ++p) images[i * 784 + p * 28 + labels[i]] = 255;  // a bright column
    }
    write_idx(root + "/" + name + "-images-idx3-ubyte.gz", images, {n, 28, 28});
    write_idx(root + "/" + name + "-labels-idx1-ubyte", labels, {n});
  }
}

std::vector<std::pair<int64_t, double>> train_losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::pair<int64_t, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] == "train") out.emplace_back(j["step"].get<int64_t>(), j["loss"].get<double>());
  }
  return out;
}

Recipe mnist_recipe(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"data.dataset=mnist",       "data.root=" + dir.path() + "/mnist",
                                "train.epochs=2",           "train.batch_size=16",
                                "train.eval_batch_size=16", "log.every_steps=1",
                                "log.progress=false",       "checkpoint.dir=" + dir.path() + "/runs",
                                "data.workers=2",           "schedule.name=cosine"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_recipe(kRecipes + "fashion_mnist.yaml", o);
}

// With 32-bit SGD state, and with 8-bit Adam state (codes and absmax restored exactly).
class TrainerResume : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(TrainerResume, ContinuesExactly) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 96, 32);
  auto recipe = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), GetParam().begin(), GetParam().end());
    return mnist_recipe(dir, extra);
  };
  TrainResult full = train(recipe({"log.run_name=full"}), {});
  auto want = train_losses(full.run_dir);
  ASSERT_EQ(want.size(), 12u);  // 2 epochs x 6 batches

  for (int64_t stop_at : {7, 6}) {  // mid-epoch, and exactly at an epoch boundary
    std::string name = "part" + std::to_string(stop_at);
    TrainResult part = train(recipe({"log.run_name=" + name, "train.max_steps=" + std::to_string(stop_at)}), {});
    ASSERT_TRUE(part.stopped);
    ASSERT_TRUE(fs::exists(part.run_dir + "/last.safetensors"));
    TrainOptions resume;
    resume.resume = part.run_dir;
    resume.overrides = {"train.max_steps=0"};
    TrainResult rest = train(Recipe(), resume);
    EXPECT_EQ(rest.run_dir, part.run_dir);
    auto got = train_losses(part.run_dir);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_EQ(got[i].second, want[i].second) << name << ": step " << want[i].first;  // bit for bit
    }
    EXPECT_EQ(rest.last_eval.loss, full.last_eval.loss);
  }
  // The checkpoint evaluates to the same numbers as the run's final evaluation.
  EvalResult ev = evaluate_checkpoint(full.run_dir + "/last.safetensors", "", 2);
  EXPECT_EQ(ev.examples, 32);
  EXPECT_DOUBLE_EQ(ev.top1, full.last_eval.top1);
  EXPECT_NEAR(ev.loss, full.last_eval.loss, 1e-9);
  // Run folder contents.
  for (const char* f : {"recipe.yaml", "train.log", "metrics.jsonl", "curves.html", "best.safetensors"})
    EXPECT_TRUE(fs::exists(full.run_dir + "/" + f)) << f;
}

INSTANTIATE_TEST_SUITE_P(Trainer, TrainerResume,
                         ::testing::Values(std::vector<std::string>{},
                                           std::vector<std::string>{
                                               "optimizer.name=adam", "optimizer.lr=0.001", "optimizer.state_bits=8",
                                               "optimizer.min_8bit_size=0", "optimizer.block_size=256"}));

TEST(Trainer, StopFlagSavesAndReturns) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 48, 16);
  std::atomic<bool> stop{true};  // as if Ctrl-C arrived during the first step
  TrainOptions opts;
  opts.stop = &stop;
  TrainResult r = train(mnist_recipe(dir, {"optimizer.name=adamw", "optimizer.lr=0.001"}), opts);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps, 1);
  Checkpoint c = load_checkpoint(r.run_dir + "/last.safetensors");
  EXPECT_EQ(c.state.step, 1);
  EXPECT_EQ(c.state.batch, 1);
  bool has_adam_state = false;
  for (const auto& [k, t] : c.optimizer) has_adam_state |= k.find("exp_avg_sq") != std::string::npos;
  EXPECT_TRUE(has_adam_state);
}

TEST(Trainer, Cifar10RecipeStartsOnGeneratedData) {
  TempDir dir;
  std::string root = dir.path() + "/cifar";
  fs::create_directories(root);
  for (int b = 1; b <= 5; ++b) {
    std::vector<uint8_t> labels(8);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>((i + b) % 10);
    write_cifar10_batch(root + "/data_batch_" + std::to_string(b) + ".bin", random_bytes(8 * 3072, b), labels);
  }
  write_cifar10_batch(root + "/test_batch.bin", random_bytes(8 * 3072, 9), std::vector<uint8_t>(8, 3));
  Recipe r = load_recipe(kRecipes + "mobilenetv2_cifar10.yaml",
                         {"data.root=" + root, "model.width_mult=0.25", "train.epochs=1", "train.batch_size=8",
                          "checkpoint.dir=" + dir.path() + "/runs", "log.progress=false", "log.every_steps=1"});
  TrainResult res = train(r, {});
  EXPECT_EQ(res.steps, 5);  // 40 images, batch 8
  EXPECT_EQ(res.last_eval.examples, 8);
  EXPECT_TRUE(fs::exists(res.run_dir + "/last.safetensors"));
  EXPECT_FALSE(fs::is_empty(res.run_dir + "/tensorboard"));  // the recipe asks for TensorBoard
}

TEST(Trainer, ImageNetRecipeStartsOnGeneratedData) {
  TempDir dir;
  std::string root = dir.path() + "/imagenet";
  for (const char* split : {"train", "val"})
    for (const char* cls : {"n01440764", "n01443537"})
      for (int i = 0; i < 2; ++i) {
        fs::create_directories(root + "/" + split + "/" + cls);
        write_image(root + "/" + split + "/" + cls + "/img" + std::to_string(i) + (i ? ".png" : ".jpg"),
                    random_bytes(48 * 40 * 3, i + 10), 48, 40, 3);
      }
  Recipe r = load_recipe(kRecipes + "resnet50_imagenet.yaml",
                         {"data.root=" + root, "data.image_size=32", "data.resize=36", "train.epochs=1",
                          "train.batch_size=2", "train.threads=2", "data.workers=1", "log.tensorboard=false",
                          "checkpoint.dir=" + dir.path() + "/runs", "log.progress=false"});
  TrainResult res = train(r, {});
  EXPECT_EQ(res.steps, 2);
  EXPECT_EQ(res.last_eval.examples, 4);
}

void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Trainer, BadRecipesDataAndCheckpoints) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  expect_error([&] { train(mnist_recipe(dir, {"optimizer.name=adagrad"}), {}); }, "optimizer.name");
  expect_error([&] { train(mnist_recipe(dir, {"optimizer.lr=-1"}), {}); }, "optimizer.lr");
  expect_error([&] { train(mnist_recipe(dir, {"model.name=resnet9000"}), {}); }, "resnet9000");
  expect_error([&] { train(mnist_recipe(dir, {"model.in_channels=3"}), {}); }, "model.in_channels");
  expect_error([&] { train(mnist_recipe(dir, {"data.root=" + dir.path() + "/nowhere"}), {}); }, "/nowhere");
  expect_error([&] { train(mnist_recipe(dir, {"train.device=cuda"}), {}); }, "train.device");
  // Cifar and ImageNet data missing: the error says where to put what.
  expect_error(
      [&] { train(load_recipe(kRecipes + "mobilenetv2_cifar10.yaml", {"data.root=" + dir.path() + "/c"}), {}); },
      dir.path() + "/c");
  expect_error([&] { train(load_recipe(kRecipes + "resnet50_imagenet.yaml", {"data.root=" + dir.path() + "/i"}), {}); },
               "/train/<class>");
  // Checkpoints: garbage, truncated, and a valid safetensors file that is not an octet checkpoint.
  std::string garbage = dir.path() + "/garbage.safetensors";
  std::ofstream(garbage) << "this is not a checkpoint at all";
  expect_error([&] { evaluate_checkpoint(garbage, "", 1); }, "garbage.safetensors");
  std::string foreign = dir.path() + "/foreign.safetensors";
  save_safetensors(foreign, {{"w", zeros({2})}}, {{"format", "pt"}});
  expect_error([&] { evaluate_checkpoint(foreign, "", 1); }, "not an octet checkpoint");
  TrainResult ok = train(mnist_recipe(dir, {"train.epochs=1"}), {});
  std::string ckpt = ok.run_dir + "/last.safetensors";
  std::string bytes;
  {
    std::ifstream in(ckpt, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string cut = dir.path() + "/cut.safetensors";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  expect_error([&] { evaluate_checkpoint(cut, "", 1); }, "cut.safetensors");
  expect_error([&] { train(Recipe(), TrainOptions{cut, {}, nullptr}); }, "cut.safetensors");
  expect_error([&] { evaluate_checkpoint(dir.path() + "/missing.safetensors", "", 1); }, "missing.safetensors");
}

}  // namespace
}  // namespace octet::tools
