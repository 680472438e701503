// What `octet` says when its command line is not what it expects, run as a user runs it (a separate
// process): a mistyped subcommand names the nearest, `octet`, `octet help` and `--version` answer,
// `octet train` tells a run folder or checkpoint from a recipe, inspect takes a run folder, eval's
// --data must exist, and a stop by a signal exits 128 + the signal.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/device.h"
#include "tests/train/octet_process.h"

namespace octet::train {
namespace {

using octet::testing::TempDir;

TEST(CommandLine, UnknownSubcommandsNameTheNearest) {
  OctetRun r = run_octet({"trian", kRecipe});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "octet: unknown subcommand 'trian'; did you mean 'train'? (known: train, eval, export, sweep");
  EXPECT_EQ(r.output.find("A subcommand is required"), std::string::npos) << r.output;
  r = run_octet({"bench", "pbach"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "bench: unknown subcommand 'pbach'; did you mean 'pbatch'? (known: pbatch)");
  r = run_octet({"bench"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "bench: give a subcommand (pbatch)");
  r = run_octet({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "octet: unknown subcommand 'frobnicate' (known: train,");
}

TEST(CommandLine, HelpAndVersion) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{}, {"help"}, {"--help"}}) {
    const OctetRun r = run_octet(args);
    EXPECT_EQ(r.status, args.empty() ? 2 : 0) << r.output;  // `octet` alone: a usage error that shows the help
    expect_output(r, "Usage: octet [OPTIONS] SUBCOMMAND");
    expect_output(r, "octet help SUBCOMMAND");
  }
  OctetRun r = run_octet({"help", "train"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "--resume");
  expect_output(r, "Usage: octet train [OPTIONS]");
  r = run_octet({"help", "bench", "pbatch"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "--w-bits");
  expect_output(r, "Usage: octet bench pbatch [OPTIONS]");
  r = run_octet({"help", "data", "get"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "Usage: octet data get [OPTIONS] name");
  r = run_octet({"help", "eval"});
  expect_output(r, "scheme=paper");
  r = run_octet({"help", "trian"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "did you mean 'train'?");
  r = run_octet({"--version"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("octet ", 0), 0u) << r.output;
}

TEST(CommandLine, TrainTellsRunsAndCheckpointsFromRecipes) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=r"})).status, 0);
  const std::string run = dir.path() + "/runs/r", last = run + "/last.safetensors";
  const std::string log = file_text(run + "/train.log");
  // The trainer ran the fusion pass (layers/fusion.h): small_cnn's two batch norm + ReLU pairs.
  EXPECT_NE(log.find("fused: batch_norm+relu x2, channels_last x1"), std::string::npos) << log;
  OctetRun r = run_octet({"train", run});
  EXPECT_EQ(r.status, 2);
  expect_output(r,
                "train: " + run + " is a run folder, not a recipe; to continue its run: octet train --resume " + run);
  r = run_octet({"train", last, "train.max_steps=2"});
  EXPECT_EQ(r.status, 2);
  expect_output(r,
                "train: " + last + " is a checkpoint, not a recipe; to continue its run: octet train --resume " + last);
  // A recipe given with --resume is not an override.
  r = run_octet({"train", kRecipe, "--resume", run});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "train: give a recipe or --resume " + run + ", not both ('" + kRecipe + "')");
  EXPECT_EQ(r.output.find("expected section.key=value"), std::string::npos) << r.output;
  r = run_octet({"train", "train.epochs=3", kRecipe});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "train: 'train.epochs=3' is an override; give the recipe file first");
  r = run_octet({"train", kRecipe, "model.nmu_classes=3"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "unknown key 'model.nmu_classes'; did you mean 'model.num_classes'?");
  EXPECT_EQ(file_text(run + "/train.log"), log) << "a refused command wrote to the run";
  // And --resume with overrides still resumes.
  r = run_octet({"train", "--resume", run, "train.max_steps=2"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "stopped at step 2");
}

// train.precision=bf16 through the binary: the run trains, says how bf16 runs on this CPU, and
// resumes; a precision it does not know is an error naming the key.
TEST(CommandLine, TrainsInBf16) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=b", "train.precision=bf16"})).status, 0);
  const std::string run = dir.path() + "/runs/b";
  const std::string log = file_text(run + "/train.log");
  EXPECT_NE(log.find("precision: bf16 ("), std::string::npos) << log;
  EXPECT_EQ(run_octet({"train", "--resume", run, "train.max_steps=2"}).status, 0);
  // The checkpoint keeps f32 weights; export writes them in bf16 for PyTorch on request.
  const std::string out = dir.path() + "/bf16.safetensors";
  OctetRun r = run_octet({"export", run, "--torch", "--dtype", "bf16", "-o", out});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bf16"), std::string::npos) << r.output;
  EXPECT_NE(run_octet({"export", run, "--torch", "--dtype", "fp16", "-o", out}).status, 0);
  EXPECT_NE(run_octet({"export", run, "--int8", "--dtype", "bf16", "-o", out}).status, 0);
  r = run_octet(train_args(dir, {"train.max_steps=1", "train.precision=fp16"}));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("train.precision"), std::string::npos) << r.output;
}

// optimizer.state_bits=4 through the binary: the run trains with 4-bit state, says so, and
// resumes; a state precision it does not have is an error naming the key.
TEST(CommandLine, TrainsWith4BitState) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  const std::vector<std::string> four = {"optimizer.name=adam", "optimizer.lr=0.001", "optimizer.state_bits=4",
                                         "optimizer.min_8bit_size=0"};
  std::vector<std::string> args = {"train.max_steps=1", "log.run_name=q"};
  args.insert(args.end(), four.begin(), four.end());
  OctetRun r = run_octet(train_args(dir, args));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string run = dir.path() + "/runs/q";
  const std::string log = file_text(run + "/train.log");
  EXPECT_NE(log.find("with 4-bit"), std::string::npos) << log;
  r = run_octet({"train", "--resume", run, "train.max_steps=2"});
  EXPECT_EQ(r.status, 0) << r.output;
  args = {"train.max_steps=1", "optimizer.name=adam", "optimizer.state_bits=5"};
  r = run_octet(train_args(dir, args));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("state_bits"), std::string::npos) << r.output;
}

// A recipe value that only the optimizer, the schedule, the model or the data can judge is still
// the recipe's error: exit status 2 (the README's usage error), the key named, nothing written.
TEST(CommandLine, RecipeValuesFoundWrongWhileBuildingAreUsageErrors) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"optimizer.state_bits=5"}, "recipe optimizer.state_bits: expected 32, 8 or 4, got 5"},
      {{"optimizer.name=adam", "optimizer.betas=[0.9]"}, "recipe optimizer.betas: expected two values, got 1"},
      {{"optimizer.block_size=3"}, "recipe optimizer.block_size: expected a block size that is a power of two"},
      {{"schedule.warmup_epochs=5", "train.epochs=2"}, "recipe schedule.warmup_epochs: expected 0 <= value <"},
      {{"optimizer.param_groups=[{params: \"nothing*\", lr: 1}]"}, "recipe optimizer.param_groups[0]"},
      {{"model.in_channels=3"}, "recipe model.in_channels is 3 but data.dataset mnist has 1-channel images"},
      {{"data.mean=[0.1, 0.2]", "data.std=[0.1, 0.2]"},
       "recipe data.mean and data.std have 2 values for data.dataset mnist's 1-channel images"},
      {{"model.name=mlp", "quant.int8_conv=true"}, "recipe quant.int8_conv: cannot train model 'mlp' in INT8"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = extra;
    args.push_back("train.max_steps=1");
    const OctetRun r = run_octet(train_args(dir, args));
    EXPECT_EQ(r.status, 2) << extra.front() << ": " << r.output;
    expect_output(r, message);
  }
  // A model its own values cannot make, named with the recipe's model.
  const OctetRun r = run_octet({"train", std::string(OCTET_TESTS_DIR) + "/../recipes/gpt_tiny.yaml",
                                "model.num_heads=5", "checkpoint.dir=" + dir.path() + "/runs"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r,
                "recipe model: cannot build model 'gpt' from its keys: build_model: embed_dim 64 is not a multiple of "
                "num_heads 5");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs")) << "a refused command wrote a run folder";
}

TEST(CommandLine, InspectAndEvalTakeRunFolders) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=r"})).status, 0);
  const std::string run = dir.path() + "/runs/r";
  OctetRun r = run_octet({"inspect", run});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, run + "/last.safetensors: ");
  expect_output(r, "model.features.0.weight");
  // --data that is no folder is an error, not ignored.
  r = run_octet({"eval", run, "--data", dir.path() + "/no/such/dir"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "--data: Directory does not exist: " + dir.path() + "/no/such/dir");
  r = run_octet({"eval", run, "--data", dir.path() + "/mnist"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "16 examples");
  expect_output(r, "fused: batch_norm+relu x2, channels_last x1");
  // A generated corpus reads no folder: --data is an error, not ignored.
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=lm", "model.name=lstm_lm",
                                       "data.dataset=toy_grammar", "model.hidden_size=8", "train.batch_size=4",
                                       "train.eval_batch_size=4", "data.limit_test=200"}))
                .status,
            0);
  r = run_octet({"eval", dir.path() + "/runs/lm", "--data", dir.path() + "/mnist"});
  EXPECT_EQ(r.status, 2);
  expect_output(r, "--data " + dir.path() + "/mnist: data.dataset toy_grammar is generated, not read from a folder");
}

// Values of eval's, export's and sweep's options that octet cannot use exit 2 (a usage error), as
// CLI11's own checks do, with the option named; a GPU the machine lacks stays a failed command (1).
TEST(CommandLine, OptionValuesOctetCannotUseAreUsageErrors) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=r"})).status, 0);
  const std::string run = dir.path() + "/runs/r", out = dir.path() + "/x.safetensors";
  const std::string plan = dir.path() + "/plan.yaml";  // a layer the model lacks
  std::ofstream(plan) << "nosuch: {w: 4, a: 8}\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"eval", run, "--pbatch", "w=3,a=99"}, "--pbatch 'w=3,a=99': a (activation bits) must be in 2..32, got 99"},
      {{"eval", run, "--pbatch", "w4a16"}, "'w4a16' is not key=value"},
      {{"eval", run, "--pbatch", dir.path() + "/no_plan.yaml"}, "--pbatch: cannot read the plan file"},
      {{"eval", run, "--pbatch", "w=4,a=8", "--int8"}, "give --pbatch or --int8, not both"},
      {{"eval", run, "--pbatch", plan}, "'nosuch' is not a quantizable layer of the model"},
      {{"eval", run, "--device", "tpu"}, "eval --device: 'tpu' is not a device (expected cpu, cuda or cuda:N)"},
      {{"export", run, "--pbatch", "w=9,a=8", "-o", out}, "w (weight bits) must be in 1..8, got 9"},
      {{"sweep", run, "--w-bits", "0", "-o", dir.path() + "/sw"}, "sweep --w-bits/--a-bits"},
      {{"sweep", run, "--search", "--budget", "-1", "-o", dir.path() + "/sw"},
       "sweep --budget: expected a number >= 0"},
  };
  for (const auto& [args, message] : cases) {
    const OctetRun r = run_octet(args);
    EXPECT_EQ(r.status, 2) << args[2] << " " << args[3] << ": " << r.output;
    expect_output(r, message);
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/sw"));
  if (cuda_device_count() == 0) {
    const OctetRun r = run_octet({"eval", run, "--device", "cuda"});
    EXPECT_EQ(r.status, 1) << r.output;
    expect_output(r, "needs");
  }
}

// Ctrl-C (SIGINT) and SIGTERM save the run and exit 128 + the signal, as a shell reports a process
// the signal ended (SIGTERM exited 130, SIGINT's status).
TEST(CommandLine, SignalsExitWith128PlusTheSignal) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 64, 16);
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const std::string name = sig == SIGINT ? "sigint" : "sigterm", log = dir.path() + "/" + name + ".log";
    const pid_t pid = start_octet(train_args(dir, {"train.epochs=100000", "log.run_name=" + name}), log);
    // The handler is in place once the run has started (before that, the signal's default also exits 128 + it).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (file_text(log).find("starting run") == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_NE(file_text(log).find("starting run"), std::string::npos) << file_text(log);
    ::kill(pid, sig);
    EXPECT_EQ(wait_for(pid), 128 + sig) << file_text(log);
    EXPECT_NE(file_text(log).find("stopped at step"), std::string::npos) << file_text(log);
  }
}

}  // namespace
}  // namespace octet::train
