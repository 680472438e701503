// The trainer as a data-parallel job: run by ctest under `mpirun -np 2` (tests/CMakeLists.txt).
// Every rank first trains the same model alone on the global batch (TrainOptions::distributed
// false), then the job trains it over both ranks; on real data (Fashion-MNIST, installed by
// tools/scripts/setup.sh). The model has dropout (each rank draws its block of the global batch's
// mask, as one process would) and no BatchNorm, whose per-rank statistics would differ from one
// process's (as in PyTorch; SyncBatchNorm is tested in test_dist_mpi.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/octet.h"
#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/run.h"
#include "tools/train/task.h"

// GCC 12 at -O3 warns of overlapping memcpy inside std::string's operator+ (a false positive, GCC
// bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace octet::train {
namespace {

namespace fs = std::filesystem;

const std::string kRecipe = std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist.yaml";
const std::string kData = "/usr/share/datasets/fashion-mnist";

dist::ProcessGroup& pg() { return dist::ProcessGroup::world(); }

std::shared_ptr<Module> mlp() {
  manual_seed(5);
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Flatten>(), std::make_shared<Linear>(784, 32), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(0.3), std::make_shared<Linear>(32, 10)});
}

// A folder every rank names alike (rank 0 makes it; the job's id keeps parallel runs apart).
std::string job_dir() {
  static const std::string dir = [] {
    std::string d = (fs::temp_directory_path() / "octet_dist_train").string();
    Tensor id = full({1}, pg().rank() == 0 ? static_cast<double>(::getpid()) : 0.0, TensorOptions(DType::f64));
    pg().broadcast(id, 0);
    d += "_" + std::to_string(static_cast<int64_t>(id.item()));
    if (pg().rank() == 0) fs::create_directories(d);
    pg().barrier();
    return d;
  }();
  return dir;
}

std::vector<std::string> overrides(const std::string& runs, int64_t steps) {
  return {"data.root=" + kData,
          "data.workers=0",
          "train.batch_size=32",
          "train.threads=1",
          "train.max_steps=" + std::to_string(steps),
          "log.progress=false",
          "checkpoint.dir=" + runs};
}

NamedTensors params_of(const std::string& checkpoint) {
  Checkpoint c = load_checkpoint(checkpoint);
  return c.model;
}

// max over the tensors of max |a - b| / max |b|
double max_rel_diff(const NamedTensors& a, const NamedTensors& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.to(DType::f64), y = b[i].second.to(DType::f64);
    worst = std::max(worst, max(abs(x - y)).item() / max(abs(y)).item());
  }
  return worst;
}

bool bits_equal(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    if (x.shape() != y.shape() || std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * 4) != 0)
      return false;
  }
  return true;
}

TEST(DistTrain, TwoRanksFollowOneProcessAndResumeWithOneOrTwo) {
  if (!fs::exists(kData)) GTEST_SKIP() << kData << " is missing (tools/scripts/setup.sh installs it)";
  const std::string dir = job_dir();
  const int me = pg().rank();
  // One process on the global batch of 32, 20 steps (each rank its own folder).
  auto alone_model = mlp();
  TrainResult alone = Run::from_recipe(kRecipe, overrides(dir + "/alone" + std::to_string(me), 20))
                          .model(alone_model)
                          .distributed(false)
                          .fit();
  ASSERT_EQ(alone.steps, 20);
  // The job: 16 examples per rank, 20 steps; rank 0 writes the run folder, the other nothing.
  auto model = mlp();
  TrainResult both = Run::from_recipe(kRecipe, overrides(dir + "/both", 20)).model(model).fit();
  EXPECT_EQ(both.steps, 20);
  EXPECT_EQ(both.run_dir.empty(), me != 0);
  const NamedTensors mine = model->named_parameters();
  EXPECT_LT(max_rel_diff(mine, alone_model->named_parameters()), 1e-6);
  for (const auto& [name, p] : mine) {
    const Tensor all = pg().all_gather(p.detach());
    EXPECT_EQ(max(abs(all.select(0, 1) - all.select(0, 0))).item(), 0.0) << name << ": ranks differ";
  }
  // Stopped at step 8 and resumed by both ranks to step 20: the same bits as without the stop.
  EXPECT_EQ(Run::from_recipe(kRecipe, overrides(dir + "/stopped", 8)).model(mlp()).fit().steps, 8);
  const std::string stopped_dir = dir + "/stopped/fashion_mnist";
  pg().barrier();
  if (me == 0) fs::copy(stopped_dir, dir + "/stopped_copy", fs::copy_options::recursive);
  pg().barrier();
  auto resumed = mlp();
  Run::resume(stopped_dir, {"train.max_steps=20"}).model(resumed).fit();
  if (me == 0) {
    EXPECT_TRUE(
        bits_equal(params_of(stopped_dir + "/last.safetensors"), params_of(both.run_dir + "/last.safetensors")));
  }
  // ... and by one process alone, from the same checkpoint: the one-process trajectory.
  if (me == 0) {
    auto single = mlp();
    Run::resume(dir + "/stopped_copy", {"train.max_steps=20"}).model(single).distributed(false).fit();
    EXPECT_LT(max_rel_diff(single->named_parameters(), alone_model->named_parameters()), 1e-6);
  }
  pg().barrier();
  if (me == 0) fs::remove_all(dir);
}

// The LSTM language model: each rank takes its block of the train.batch_size streams (and of the
// evaluation's, which do not divide evenly here: 3 streams on 2 ranks), carries its own streams'
// state, and a checkpoint taken mid-epoch holds the state of all of them, so the run resumes with
// 2 ranks or 1. Dropout on, between the LSTM's layers (time-major) too.
TEST(DistTrain, LanguageModelFollowsOneProcessAndResumesWithOneOrTwo) {
  const std::string recipe = std::string(OCTET_TESTS_DIR) + "/../recipes/lstm_lm_tiny.yaml";
  const std::string dir = job_dir() + "/lm";
  const int me = pg().rank();
  auto lm_overrides = [&](const std::string& runs, int64_t steps) {
    // 1200 training tokens in 4 streams: 9 segments of 35 an epoch, 2 epochs (each ends with an
    // evaluation); a stop at step 5 falls mid-epoch. At the end, the test split with the weights of
    // the best epoch, which rank 0 reads and hands to rank 1.
    return std::vector<std::string>{"model.dropout=0.2",     "model.num_layers=2",
                                    "data.limit_train=1200", "data.limit_test=600",
                                    "train.batch_size=4",    "train.eval_batch_size=3",
                                    "train.threads=1",       "train.epochs=2",
                                    "log.progress=false",    "train.max_steps=" + std::to_string(steps),
                                    "checkpoint.dir=" + runs};
  };
  {  // Each rank's batch is its block: 2 of the 4 streams, different tokens on each rank.
    std::unique_ptr<Task> task =
        make_task(load_recipe(recipe, lm_overrides(dir, 0)), Device::cpu(), true, nullptr, "", &pg());
    auto model = build_model(ModelOptions().name("lstm_lm").vocab_size(task->vocab_size()).embed_dim(8).hidden_size(8));
    task->start_epoch(*model, 0, 0);
    const Tensor labels = task->step(*model, 0).labels;
    ASSERT_EQ(labels.numel(), 2 * 35);
    const Tensor all = pg().all_gather(labels);
    EXPECT_GT(max(abs(all.select(0, 1) - all.select(0, 0))).item(), 0);
  }
  TrainResult alone =
      Run::from_recipe(recipe, lm_overrides(dir + "/alone" + std::to_string(me), 0)).distributed(false).fit();
  TrainResult both = Run::from_recipe(recipe, lm_overrides(dir + "/both", 0)).fit();
  ASSERT_EQ(both.steps, 18);
  // Metrics over both ranks' streams: every token counted once, as alone.
  for (const auto& [b, a] :
       {std::pair{both.last_eval, alone.last_eval}, std::pair{both.final_test, alone.final_test}}) {
    EXPECT_GT(a.examples, 0);
    EXPECT_EQ(b.examples, a.examples);
    EXPECT_NEAR(b.loss, a.loss, 1e-5 * a.loss);
  }
  std::string alone_last = dir + "/alone" + std::to_string(me) + "/lstm_lm_tiny/last.safetensors";
  if (me == 0) {  // sums of the ranks' halves against one sum over both, 18 steps at lr 20: float rounding
    EXPECT_LT(max_rel_diff(params_of(both.run_dir + "/last.safetensors"), params_of(alone_last)), 3e-5);
  }
  // Stopped mid-epoch at step 5, resumed by both ranks: the same bits as without the stop.
  EXPECT_EQ(Run::from_recipe(recipe, lm_overrides(dir + "/stopped", 5)).fit().steps, 5);
  const std::string stopped_dir = dir + "/stopped/lstm_lm_tiny";
  pg().barrier();
  if (me == 0) fs::copy(stopped_dir, dir + "/stopped_copy", fs::copy_options::recursive);
  pg().barrier();
  Run::resume(stopped_dir, {"train.max_steps=0"}).fit();
  if (me == 0) {
    EXPECT_TRUE(
        bits_equal(params_of(stopped_dir + "/last.safetensors"), params_of(both.run_dir + "/last.safetensors")));
    // ... and by one process from the same checkpoint: the one-process trajectory.
    Run::resume(dir + "/stopped_copy", {"train.max_steps=0"}).distributed(false).fit();
    EXPECT_LT(max_rel_diff(params_of(dir + "/stopped_copy/last.safetensors"), params_of(alone_last)), 1e-5);
  }
  pg().barrier();
}

// train.shard_optimizer (ZeRO stage 1) with 8-bit Adam: the same bits as the unsharded job, every
// rank; stopped and resumed by both ranks, and by one process alone from the same (whole-state)
// checkpoint: the unsharded trajectory bit for bit.
TEST(DistTrain, ShardedOptimizerStateFollowsTheUnshardedJobAndResumesAtAnyCount) {
  if (!fs::exists(kData)) GTEST_SKIP() << kData << " is missing (tools/scripts/setup.sh installs it)";
  const std::string dir = job_dir() + "/zero";
  const int me = pg().rank();
  auto o = [&](const std::string& runs, int64_t steps, bool shard) {
    std::vector<std::string> v = overrides(runs, steps);
    v.insert(v.end(),
             {"optimizer.name=adam", "optimizer.lr=0.001", "optimizer.state_bits=8", "optimizer.min_8bit_size=0",
              std::string("train.shard_optimizer=") + (shard ? "true" : "false")});
    return v;
  };
  auto plain = mlp(), sharded = mlp();
  TrainResult p = Run::from_recipe(kRecipe, o(dir + "/plain", 12, false)).model(plain).fit();
  TrainResult s = Run::from_recipe(kRecipe, o(dir + "/sharded", 12, true)).model(sharded).fit();
  EXPECT_EQ(s.steps, 12);
  EXPECT_TRUE(bits_equal(sharded->named_parameters(), plain->named_parameters()));
  if (me == 0) {
    // The checkpoint holds the whole state: the unsharded job's, bit for bit.
    const Checkpoint a = load_checkpoint(p.run_dir + "/last.safetensors"),
                     b = load_checkpoint(s.run_dir + "/last.safetensors");
    EXPECT_TRUE(bits_equal(a.model, b.model));
    ASSERT_EQ(a.optimizer.size(), b.optimizer.size());
    for (size_t i = 0; i < a.optimizer.size(); ++i) {
      const Tensor x = a.optimizer[i].second.contiguous(), y = b.optimizer[i].second.contiguous();
      EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())), 0)
          << a.optimizer[i].first;
    }
  }
  // Stopped at step 5, resumed sharded by both ranks to step 12, and by one process alone.
  EXPECT_EQ(Run::from_recipe(kRecipe, o(dir + "/stopped", 5, true)).model(mlp()).fit().steps, 5);
  const std::string stopped_dir = dir + "/stopped/fashion_mnist";
  pg().barrier();
  if (me == 0) fs::copy(stopped_dir, dir + "/stopped_copy", fs::copy_options::recursive);
  pg().barrier();
  auto resumed = mlp();
  Run::resume(stopped_dir, {"train.max_steps=12"}).model(resumed).fit();
  EXPECT_TRUE(bits_equal(resumed->named_parameters(), plain->named_parameters()));
  if (me == 0) {
    auto single = mlp();
    Run::resume(dir + "/stopped_copy", {"train.max_steps=12"}).model(single).distributed(false).fit();
    // One process on the global batch: the unsharded job's trajectory up to the order of its sums.
    EXPECT_LT(max_rel_diff(single->named_parameters(), plain->named_parameters()), 1e-5);
  }
  pg().barrier();
}

// INT8 convolutions (DSGC clips from each rank's own gradients, DCLR from the averaged d_c) with
// 8-bit Adam state, BatchNorm and dropout: every rank holds the same bits after the run, and the
// job stopped between two DSGC searches resumes with every rank's own clips, to the same bits.
TEST(DistTrain, Int8And8BitStateKeepRanksBitIdenticalAndResume) {
  if (!fs::exists(kData)) GTEST_SKIP() << kData << " is missing (tools/scripts/setup.sh installs it)";
  const auto small_cnn = [] {
    manual_seed(3);
    return std::make_shared<SmallCnn>(10, 1, 28, 0.25);
  };
  auto model = small_cnn();
  const auto int8_overrides = [](const std::string& runs, int64_t steps) {
    std::vector<std::string> o = overrides(runs, steps);
    o.insert(o.end(), {"optimizer.name=adam", "optimizer.lr=0.001", "optimizer.state_bits=8",
                       "optimizer.min_8bit_size=0", "quant.clip_update_period=4"});
    return o;
  };
  const std::string recipe = std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist_int8.yaml";
  EXPECT_EQ(Run::from_recipe(recipe, int8_overrides(job_dir() + "/int8", 12)).model(model).fit().steps, 12);
  NamedTensors all = model->named_parameters();
  for (const auto& b : model->named_buffers()) all.push_back(b);
  for (const auto& [name, t] : all) {
    const Tensor g = pg().all_gather(t.detach().contiguous());
    const Tensor a = g.select(0, 0).contiguous(), b = g.select(0, 1).contiguous();
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())), 0)
        << name << " differs between the ranks";
  }
  // Stopped at step 6: the search of backward pass 4 set each rank's clip from its own shard, kept
  // until pass 8. Resumed to step 12 by both ranks: the uninterrupted job's bits.
  const std::string stopped = job_dir() + "/int8_stopped";
  EXPECT_EQ(Run::from_recipe(recipe, int8_overrides(stopped, 6)).model(small_cnn()).fit().steps, 6);
  pg().barrier();  // rank 0 has written the checkpoint
  const Checkpoint at6 = load_checkpoint(stopped + "/fashion_mnist_int8/last.safetensors");
  for (const auto& [k, t] : at6.int8)
    if (k.ends_with(".grad_clip")) {
      EXPECT_EQ(t.shape(), Shape{2}) << k << ": one clip per rank";
      EXPECT_NE(t.select(0, 0).item(), t.select(0, 1).item())
          << k << ": both ranks' shards gave the same clip (this test needs them to differ)";
    }
  auto resumed = small_cnn();
  Run::resume(stopped + "/fashion_mnist_int8", {"train.max_steps=12"}).model(resumed).fit();
  EXPECT_TRUE(bits_equal(resumed->named_parameters(), model->named_parameters()));
  pg().barrier();
}

}  // namespace
}  // namespace octet::train
