// What a new user runs, as the README writes it, through the `octet` binary (a separate process):
// `octet train --resume RUN` in each of its forms, the run name, thread counts, a file-size limit,
// a checkpoint in the current folder, mismatched checkpoints, eval overrides, the exit-status
// scheme (0 done, 1 failed, 2 usage, 128 + N a signal) and the data commands' spellings.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "core/parallel.h"
#include "tests/train/octet_process.h"
#include "tools/train/checkpoint.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;
using octet::testing::TempDir;

// Starts `args`, waits until the run has started, sends `sig`: the exit status and the output.
OctetRun stop_by_signal(const std::vector<std::string>& args, const std::string& log, int sig) {
  const pid_t pid = start_octet(args, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto started = [&] {
    const std::string text = file_text(log);
    return text.find("starting run") != std::string::npos || text.find("resuming run") != std::string::npos;
  };
  while (!started() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, sig);
  OctetRun r;
  r.status = wait_for(pid);
  r.output = file_text(log);
  return r;
}

// Files whose names hold ".tmp." (a save's temporary files) under `dir`.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// The README's own command, `octet train --resume RUN` with nothing after it, failed with "give a
// recipe or --resume ..., not both ('')". It works with the run folder, runs/latest and the
// checkpoint file, and continues a stopped run from its step.
TEST(UserPaths, ResumeWithoutOverrides) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 64, 16);
  const std::string run = dir.path() + "/runs/r";
  OctetRun r =
      stop_by_signal(train_args(dir, {"train.epochs=100000", "log.run_name=r"}), dir.path() + "/a.log", SIGTERM);
  ASSERT_EQ(r.status, 128 + SIGTERM) << r.output;
  expect_output(r, "by SIGTERM; checkpoint " + run + "/last.safetensors; continue with `octet train --resume " + run);
  const int64_t step = load_checkpoint(run + "/last.safetensors").state.step;
  for (const std::string& resume : {run, dir.path() + "/runs/latest", run + "/last.safetensors"}) {
    SCOPED_TRACE(resume);
    r = stop_by_signal({"train", "--resume", resume}, dir.path() + "/b.log", SIGINT);
    EXPECT_EQ(r.status, 128 + SIGINT) << r.output;
    expect_output(r, "resuming run " + run + " from ");
    EXPECT_EQ(r.output.find("not both"), std::string::npos) << r.output;
    EXPECT_GE(load_checkpoint(run + "/last.safetensors").state.step, step);
    fs::remove(dir.path() + "/b.log");
  }
  // runs/latest still names the run (resuming through it did not make it point at itself).
  EXPECT_EQ(fs::read_symlink(dir.path() + "/runs/latest"), fs::path("r"));
  EXPECT_EQ(run_octet({"eval", dir.path() + "/runs/latest"}).status, 0);
}

// A checkpoint given by a bare file name (it failed: "cannot create directories: Invalid argument
// []"), or in a folder that is not a run folder, continues in a new run folder; `.` is not made one.
TEST(UserPaths, ResumeFromACheckpointOutsideARunFolder) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "train.epochs=2", "log.run_name=r"})).status, 0);
  const std::string loose = dir.path() + "/loose";
  fs::create_directories(loose);
  fs::copy_file(dir.path() + "/runs/r/last.safetensors", loose + "/good.safetensors");
  const std::string cwd = loose;
  const OctetRun r = run_octet({"train", "--resume", "good.safetensors", "train.max_steps=2"},
                               [&] { return ::chdir(cwd.c_str()) == 0; });
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "good.safetensors is not in a run folder: the run continues in " + dir.path() + "/runs/r-2");
  expect_output(r, "stopped at step 2");
  EXPECT_FALSE(fs::exists(loose + "/latest"));
  EXPECT_FALSE(fs::exists(loose + "/train.log"));
  EXPECT_TRUE(fs::exists(dir.path() + "/runs/r-2/last.safetensors"));
  EXPECT_EQ(fs::read_symlink(dir.path() + "/runs/latest"), fs::path("r-2"));
}

// log.run_name is one folder name: `/etc` made /etc-2 and a /latest link at the root.
TEST(UserPaths, RunNameAndThreadsAreChecked) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  for (const char* name : {"/etc", "../../x", "a/b"}) {
    const OctetRun r = run_octet(train_args(dir, {"train.max_steps=1", std::string("log.run_name=") + name}));
    EXPECT_EQ(r.status, 2) << r.output;
    expect_output(r, "key 'log.run_name' must be one folder name");
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/runs"));
  EXPECT_FALSE(fs::exists("/etc-2"));
  // 100000 threads segfaulted in libgomp after the run folder existed.
  OctetRun r = run_octet(train_args(dir, {"train.max_steps=1", "train.threads=100000"}));
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "key 'train.threads' must be in [1, 1024], got 100000");
  EXPECT_FALSE(fs::exists(dir.path() + "/runs"));
  // More threads than this process may use: a warning that says so.
  const int more = usable_cores() + 1;
  r = run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=t", "train.threads=" + std::to_string(more)}));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "train.threads is " + std::to_string(more) + ", more than the " + std::to_string(more - 1) +
                       " cores this process may use");
}

// A file-size limit (ulimit -f) killed octet with SIGXFSZ (exit 153), silently, leaving
// .last.safetensors.tmp.* behind. The save's error is reported and nothing is left.
TEST(UserPaths, FileSizeLimitIsAnErrorThatLeavesNoTemporaries) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 16);
  // In the child: SIGXFSZ as a shell leaves it (tests may ignore it, and an exec keeps that), and
  // a limit below the checkpoint's 1.7 MB but above the logs'.
  const OctetRun r = run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=f"}), [] {
    std::signal(SIGXFSZ, SIG_DFL);
    const rlimit limit{256 * 1024, 256 * 1024};
    return ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  });
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, "cannot write the checkpoint at step 1: save: writing " + dir.path() +
                       "/runs/f/last.safetensors failed after");
  expect_output(r, "File too large");
  EXPECT_EQ(temporaries(dir.path() + "/runs"), std::vector<std::string>{});
  // A failed run before its first checkpoint does not take over runs/latest.
  EXPECT_FALSE(fs::exists(dir.path() + "/runs/latest"));
}

// A checkpoint that does not fit: the file is named, not the C++ class; eval takes overrides of the
// keys that do not shape the weights.
TEST(UserPaths, EvalOverridesAndMismatchedCheckpoints) {
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 32, 40);
  ASSERT_EQ(run_octet(train_args(dir, {"train.max_steps=1", "log.run_name=r", "data.limit_test=8"})).status, 0);
  const std::string run = dir.path() + "/runs/r";
  OctetRun r = run_octet({"eval", run});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "8 examples");
  r = run_octet({"eval", run, "data.limit_test=0"});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "40 examples");
  r = run_octet({"eval", run, "model.num_classes=3"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "model.num_classes cannot be overridden (the checkpoint's weights are for model.num_classes: 10");
  r = run_octet({"eval", run, "data.limt_test=0"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "did you mean 'data.limit_test'?");
  // A weight of another shape.
  Checkpoint c = load_checkpoint(run + "/last.safetensors");
  for (auto& [name, t] : c.model)
    if (name == "classifier.4.weight") t = zeros({3, t.shape()[1]});
  const std::string bad = dir.path() + "/bad.safetensors";
  save_checkpoint(bad, c.model, c.optimizer, c.state, c.recipe_yaml, c.int8, {}, {});
  r = run_octet({"eval", bad});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, bad +
                       ": does not fit the model its recipe builds (model.name small_cnn) (1 problem):\n"
                       "  shape mismatch for 'classifier.4.weight': expected [10, ");
  EXPECT_EQ(r.output.find("load_state_dict"), std::string::npos) << r.output;
}

// One scheme of exit statuses: 0 done, 1 a command that failed, 2 a usage error.
TEST(UserPaths, ExitStatuses) {
  TempDir dir;
  EXPECT_EQ(run_octet({}).status, 2);
  EXPECT_EQ(run_octet({"eval"}).status, 2);                       // a missing argument (CLI11 said 106)
  EXPECT_EQ(run_octet({"train", kRecipe, "--bogus"}).status, 2);  // an unknown option (109)
  EXPECT_EQ(run_octet({"train", kRecipe, "optimizer.lr=-1"}).status, 2);
  // Data that is not there, and how to get it.
  OctetRun r = run_octet(train_args(dir, {"data.root=" + dir.path() + "/none"}));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, "data: mnist is not in " + dir.path() + "/none");
  expect_output(r, "`octet data get mnist --root " + dir.path() + "/none`, or add data.download=true");
  r = run_octet({"eval", dir.path() + "/none.safetensors"});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, dir.path() + "/none.safetensors: no such file");
  EXPECT_EQ(r.output.find("load: "), std::string::npos) << r.output;
}

// `data get` takes the folder names (fashion-mnist, wikitext-2), a mirror given as a folder, and a
// failed download leaves no lock file behind.
TEST(UserPaths, DataGetSpellingsAndMirrors) {
  TempDir www, data;
  write_mnist(www.path(), 3, 3);  // generated files under the real names: not the published ones
  OctetRun r = run_octet({"data", "get", "fashion-mnist", "--root", data.path() + "/f", "--mirror", www.path()});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, "data: fetching fashion_mnist into " + data.path() + "/f");
  expect_output(r, "file://" + www.path() + "/train-images-idx3-ubyte.gz: checksum mismatch");
  EXPECT_FALSE(fs::exists(data.path() + "/f/.download.lock"));
  r = run_octet({"data", "get", "cifar-100"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "no download for dataset 'cifar-100'");
  r = run_octet({"data", "get", "cifra10"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "did you mean 'cifar10'?");
}

}  // namespace
}  // namespace octet::train
