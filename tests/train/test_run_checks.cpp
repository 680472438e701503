// What a user of `octet train` trips over, end to end on small generated data: a bad recipe leaves
// no run folder behind, skipped steps log no accuracy, a stop names only the checkpoints that exist
// and lands in train.log, a run at train.max_steps does not train on, and the resume line names the
// checkpoint; --resume refuses, in a line, overrides and files that do not fit the checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "models/registry.h"
#include "tests/data/temp_dir.h"
#include "tests/train/run_util.h"
#include "tools/train/checkpoint.h"
#include "tools/train/run.h"
#include "tools/train/run_support.h"
#include "tools/train/trainer.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;
using octet::testing::TempDir;

// An empty recipe but for where the data and the runs are and how long it trains: every other key,
// model.in_channels and model.image_size included, takes its default (they follow the dataset).
Recipe tiny_recipe(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"data.dataset=mnist",       "data.root=" + dir.path() + "/mnist",
                                "train.epochs=2",           "train.batch_size=16",
                                "train.eval_batch_size=16", "train.threads=1",
                                "data.workers=0",           "log.every_steps=1",
                                "log.progress=false",       "checkpoint.dir=" + dir.path() + "/runs"};
  o.insert(o.end(), extra.begin(), extra.end());
  return parse_recipe("", "tiny.yaml", o);
}

// An lr so large that the weights overflow after the first step.
const std::vector<std::string> kDiverge = {"optimizer.lr=1e36", "optimizer.momentum=0", "schedule.name=constant"};

TEST(RunChecks, BadRecipesLeaveNoRunFolder) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  // Rejected by the recipe itself, or by the model and data not fitting (small_cnn is built for one size).
  expect_error([&] { train(tiny_recipe(dir, {"train.on_nonfinite=ignore"}), {}); }, "must be one of stop, skip");
  expect_error([&] { train(tiny_recipe(dir, {"checkpoint.on_save_error=retry"}), {}); },
               "must be one of stop, continue");
  expect_error([&] { train(tiny_recipe(dir, {"train.label_smoothing=2"}), {}); }, "must be in [0, 1], got 2");
  expect_error([&] { train(tiny_recipe(dir, {"model.image_size=32"}), {}); },
               "recipe model.image_size is 32 but data.dataset mnist has 28x28 images");
  expect_error([&] { train(tiny_recipe(dir, {"model.in_channels=3"}), {}); },
               "recipe model.in_channels is 3 but data.dataset mnist has 1-channel images");
  EXPECT_FALSE(fs::exists(dir.path() + "/runs")) << "a run folder (or runs/latest) was written";
  // The empty recipe itself trains.
  EXPECT_EQ(train(tiny_recipe(dir, {"train.max_steps=1"}), {}).steps, 1);
}

// train.on_nonfinite: skip: a skipped step's NaN logits used to count as right (79% "accuracy" for a
// model at chance); now an interval of skipped steps has no loss or accuracy (null) and counts them.
TEST(RunChecks, SkippedStepsLogNoAccuracy) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 64, 16);
  std::vector<std::string> o = kDiverge;
  o.push_back("train.on_nonfinite=skip");
  TrainResult res = train(tiny_recipe(dir, o), {});
  ASSERT_EQ(res.steps, 8);
  int64_t skipped = 0, records_with_skips = 0;
  for (const auto& j : records_of(res.run_dir, "train")) {
    EXPECT_TRUE(j["step"].is_number_integer()) << j;  // "step":3, not 3.0
    const int64_t now = j.value("skipped_steps", int64_t{0});
    if (now > skipped) {  // this record's one step (log.every_steps 1) was skipped
      ++records_with_skips;
      EXPECT_TRUE(j["loss"].is_null()) << j;
      EXPECT_TRUE(j["top1"].is_null()) << j;
      EXPECT_GT(j["samples_per_s"].get<double>(), 0) << j;  // its examples were processed all the same
    } else {
      EXPECT_TRUE(j["top1"].is_number()) << j;
    }
    skipped = now;
  }
  EXPECT_GE(records_with_skips, 1);
  const std::string log = file_text(res.run_dir + "/train.log");
  EXPECT_NE(log.find("train no loss (every step skipped)"), std::string::npos) << log;
}

// A NaN stop before any checkpoint says there is none (it said last.safetensors "is as it was"), and
// the error is the last line of train.log too.
TEST(RunChecks, NonFiniteStopNamesOnlyCheckpointsThatExist) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 64, 16);
  std::string message;
  try {
    train(tiny_recipe(dir, kDiverge), {});
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("stopped before updating the weights (train.on_nonfinite: stop); no last.safetensors was "
                         "written yet"),
            std::string::npos)
      << message;
  const std::string run_dir = dir.path() + "/runs/tiny";
  EXPECT_FALSE(fs::exists(run_dir + "/last.safetensors"));
  const std::string log = file_text(run_dir + "/train.log");
  EXPECT_NE(log.find("[error] " + message + "\n"), std::string::npos) << log;

  // After a resume the checkpoint exists, and the message names its step.
  TrainResult part = train(tiny_recipe(dir, {"log.run_name=part", "train.max_steps=2"}), {});
  try {
    Run::resume(part.run_dir, {"train.max_steps=0", "optimizer.lr=1e36"}).fit();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(part.run_dir + "/last.safetensors (step 2) is intact"), std::string::npos) << message;
}

// A run stopped at train.max_steps trained one step more on every --resume (31, then 32, ...).
TEST(RunChecks, ResumeAtMaxStepsTrainsNothing) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 64, 16);
  TrainResult part = train(tiny_recipe(dir, {"train.max_steps=3"}), {});
  ASSERT_TRUE(part.stopped);
  const std::string metrics = file_text(part.run_dir + "/metrics.jsonl");
  const std::string log = file_text(part.run_dir + "/train.log");
  expect_error([&] { Run::resume(part.run_dir).fit(); },
               "/last.safetensors is at step 3, and train.max_steps is 3: nothing to train. Raise train.max_steps");
  EXPECT_EQ(load_checkpoint(part.run_dir + "/last.safetensors").state.step, 3);
  EXPECT_EQ(file_text(part.run_dir + "/metrics.jsonl"), metrics);
  EXPECT_EQ(file_text(part.run_dir + "/train.log"), log);
  // Raised, it trains to the new limit; the log names the checkpoint it resumed from once.
  EXPECT_EQ(Run::resume(part.run_dir, {"train.max_steps=5"}).fit().steps, 5);
  const std::string resumed = file_text(part.run_dir + "/train.log");
  EXPECT_NE(resumed.find("resuming run " + part.run_dir + " from " + part.run_dir + "/last.safetensors at step 3: "),
            std::string::npos)
      << resumed;
  EXPECT_EQ(resumed.find("(recipe))"), std::string::npos) << resumed;
  // A run whose limit came with its last epoch is complete: resuming it is no error, as before.
  TrainResult whole = train(tiny_recipe(dir, {"log.run_name=whole", "train.max_steps=8"}), {});
  ASSERT_FALSE(whole.stopped);
  EXPECT_EQ(Run::resume(whole.run_dir).fit().steps, 8);
}

// --resume with an override of a key that shapes the weights or the optimizer's state dumped the
// state_dict's ~150 names (or SGD.load_state_dict's); an export said "missing key(s)". Each is one
// line naming the key or the file, and leaves the run as it was.
TEST(RunChecks, ResumeKeepsWhatShapesTheCheckpoint) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  TrainResult part = train(tiny_recipe(dir, {"train.max_steps=1"}), {});
  const std::string last = part.run_dir + "/last.safetensors";
  const std::string metrics = file_text(part.run_dir + "/metrics.jsonl");
  expect_error([&] { Run::resume(part.run_dir, {"model.name=resnet20"}).fit(); },
               "train --resume " + part.run_dir +
                   ": model.name cannot change on resume (the checkpoint's weights and optimizer state are for "
                   "model.name: \"small_cnn\", the override asks for \"resnet20\"); start a new run");
  expect_error([&] { Run::resume(last, {"optimizer.state_bits=8"}).fit(); },
               ": optimizer.state_bits cannot change on resume");
  expect_error([&] { Run::resume(part.run_dir, {"optimizer.name=adam"}).fit(); },
               ": optimizer.name cannot change on resume");
  // An export (octet export: no optimizer state, its layers' quantized weights).
  const Checkpoint c = load_checkpoint(last);
  const std::string exported = dir.path() + "/export.safetensors";
  save_checkpoint(exported, c.model, {}, c.state, c.recipe_yaml, {}, {}, {}, {}, "classifier.1: int8");
  expect_error([&] { Run::resume(exported).fit(); }, "train --resume: " + exported + " is an export (octet export)");
  // A model of one's own that does not fit: the file, the model, and the loader's problems with
  // their first names (not all of the hundreds).
  try {
    Run::resume(part.run_dir, {"train.max_steps=2"})
        .model(build_model(ModelOptions().name("resnet20").in_channels(1)))
        .fit();
    ADD_FAILURE() << "a resnet20 loaded small_cnn's weights";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(last + ": does not fit the model given to train() (CifarResNet) (2 problems):\n"
                            "  missing keys: conv1.weight, bn1.weight,"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("\n  unexpected keys: features.0.weight,"), std::string::npos) << m;
    EXPECT_NE(m.find(" in all)"), std::string::npos) << m;
    EXPECT_EQ(m.find("load_state_dict"), std::string::npos) << m;
    EXPECT_LT(m.size(), 1000u) << m;
  }
  EXPECT_EQ(load_checkpoint(last).state.step, 1);
  EXPECT_EQ(file_text(part.run_dir + "/metrics.jsonl"), metrics);
  // The keys that do not shape the checkpoint can change.
  EXPECT_EQ(Run::resume(part.run_dir, {"train.max_steps=2", "model.dropout=0.1", "optimizer.lr=0.01"}).fit().steps, 2);
}

// train.log holds each line as soon as it is logged (it was buffered until the run ended, so
// `tail -f` showed nothing and a killed run lost its log).
TEST(RunChecks, TrainLogIsWrittenAsItGoes) {
  TempDir dir;
  const std::string path = dir.path() + "/train.log";
  add_file_log(path);
  spdlog::info("a line to find");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  drop_file_logs();
  EXPECT_NE(text.str().find("a line to find"), std::string::npos) << text.str();
}

// Runs started at the same moment (two `octet train` side by side) each get a folder of their own:
// a name is claimed by creating it, not by looking first. A file in the way counts as taken.
TEST(RunChecks, RunsStartedAtOnceGetFoldersOfTheirOwn) {
  TempDir dir;
  const Recipe r = tiny_recipe(dir, {"log.run_name=same"});
  fs::create_directories(dir.path() + "/runs");
  std::ofstream(dir.path() + "/runs/same-3") << "a file, not a run";
  constexpr int kRuns = 8;
  std::vector<std::string> got(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) threads.emplace_back([&, i] { got[i] = new_run_dir(r); });
  for (std::thread& t : threads) t.join();
  std::set<std::string> distinct(got.begin(), got.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kRuns));
  for (const std::string& d : got) {
    EXPECT_TRUE(fs::is_directory(d)) << d;
    EXPECT_NE(d, dir.path() + "/runs/same-3");
  }
  EXPECT_TRUE(distinct.count(dir.path() + "/runs/same"));
}

}  // namespace
}  // namespace octet::train
