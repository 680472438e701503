// Checkpoints survive the ways a long run dies: a process killed (SIGKILL) at any point of a save
// leaves the previous checkpoint whole under its name and training resumes from it; a full disk
// and a read-only folder are octet::Errors that say so and leave the previous checkpoint intact.
// The writer runs in a forked child, so the kill, the file-size limit and the dropped privileges
// hit a real process; the last test kills `octet train` itself, again and again, and resumes it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <random>

#include "core/octet.h"
#include "tests/data/temp_dir.h"
#include "tests/train/octet_process.h"
#include "tests/train/run_util.h"
#include "tools/train/checkpoint.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// 256 KB of model weights: big enough that a kill often lands inside a write.
constexpr int64_t kWeights = 64 * 1024;
constexpr int kKills = 100;

// Every value of the checkpoint written at `step` is `step`, so a file mixing two saves shows.
void save_step(const std::string& path, int64_t step) {
  TrainState s;
  s.step = step;
  s.epoch = step / 10;
  save_checkpoint(path, {{"w", full({kWeights}, static_cast<double>(step))}},
                  {{"w.m", full({16}, static_cast<double>(step))}}, s, "train:\n  epochs: 1\n");
}

// The checkpoint's step, after checking that every tensor holds that step's values.
int64_t load_step(const std::string& path) {
  Checkpoint c = load_checkpoint(path);
  const float want = static_cast<float>(c.state.step);
  for (const NamedTensors* group : {&c.model, &c.optimizer})
    for (const auto& [name, t] : *group) {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        if (p[i] != want) ADD_FAILURE() << path << ": " << name << "[" << i << "] = " << p[i] << ", expected " << want;
    }
  return c.state.step;
}

// Runs `fn` in a forked child and returns its exit status (or 128 + the signal that ended it).
template <typename Fn>
int in_child(Fn&& fn) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// 0 when `fn` throws an octet::Error whose message holds `fragment`, 1 otherwise (a child's result).
template <typename Fn>
int fails_with(Fn&& fn, const std::string& fragment) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(e.what()).find(fragment) != std::string::npos ? 0 : 2;
  }
  return 1;
}

TEST(CheckpointCrash, KilledDuringSavesLeavesTheLastGoodCheckpoint) {
  TempDir dir;
  const std::string path = dir.path() + "/last.safetensors";
  save_step(path, 0);
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> delay_us(0, 20000);
  int64_t reported = 0;  // the last step a child said it had saved
  for (int kill = 0; kill < kKills; ++kill) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // resume from the checkpoint, then save step after step until killed
      ::close(fds[0]);
      try {
        for (int64_t step = load_step(path) + 1;; ++step) {
          save_step(path, step);
          if (::write(fds[1], &step, sizeof step) != sizeof step) ::_exit(3);
        }
      } catch (...) {
        ::_exit(2);
      }
    }
    ::close(fds[1]);
    // Wait for the child's first save (on a loaded machine its start alone can outlast any delay),
    // then kill it at a random point of the saves that follow.
    int64_t first = 0;
    ASSERT_EQ(::read(fds[0], &first, sizeof first), static_cast<ssize_t>(sizeof first)) << "the child saved nothing";
    reported = first;
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself with status " << status;
    for (int64_t step; ::read(fds[0], &step, sizeof step) == sizeof step;) reported = step;
    ::close(fds[0]);
    // The file under the final name is whole: the last save the child reported, or the one after
    // it when the kill fell between its rename and its report.
    const int64_t on_disk = load_step(path);
    ASSERT_TRUE(on_disk == reported || on_disk == reported + 1)
        << "after kill " << kill << ": checkpoint holds step " << on_disk << ", last reported " << reported;
    reported = on_disk;
  }
  EXPECT_GE(reported, kKills) << "every child saved at least once";
  // Killed writers leave temporary files; the next successful save removes them.
  save_step(path, reported + 1);
  int stray = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) stray += e.path().filename() != "last.safetensors";
  EXPECT_EQ(stray, 0) << "temporary files left in " << dir.path();
}

TEST(CheckpointCrash, DiskFullIsAnErrorAndKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.path() + "/last.safetensors";
  save_step(path, 7);
  // A file-size limit below the checkpoint's size: write() fails with EFBIG as on a full disk
  // (ENOSPC), once SIGXFSZ no longer kills the process.
  int rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
    return fails_with([&] { save_step(path, 8); }, "(the previous " + path + " is untouched)");
  });
  EXPECT_EQ(rc, 0) << "expected save to fail with an octet::Error naming the untouched checkpoint";
  EXPECT_EQ(load_step(path), 7);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(CheckpointCrash, ReadOnlyFolderIsAnErrorAndKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.path() + "/last.safetensors";
  save_step(path, 7);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  int rc = in_child([&] {
    // As root, drop the capabilities that bypass file permissions, so the folder is read-only.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::geteuid() == 0 && ::syscall(SYS_capset, &header, none) != 0) return 3;
    return fails_with([&] { save_step(path, 8); }, "Permission denied");
  });
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(rc, 0) << "expected save to fail with an octet::Error saying permission was denied";
  EXPECT_EQ(load_step(path), 7);
}

// `octet train` on MNIST-format data, one batch an epoch, so a checkpoint is written after every
// step: killed (SIGKILL) kKilledRuns times in a row, each time at a random point of the steps after
// its first save, and resumed with `octet train --resume`. After every kill last.safetensors loads
// and its step never goes back; the run that finishes holds exactly the weights of a run that was
// never killed (resuming is exact on the CPU), so no kill lost or repeated a step. The kills that
// land inside a checkpoint write leave the killed writer's temporary file behind; the test counts
// them.
TEST(CheckpointCrash, KilledTrainingRunsResumeToTheSameWeights) {
  constexpr int kEpochs = 100, kKilledRuns = 25;
  TempDir dir;
  write_mnist(dir.path() + "/mnist", 16, 16);
  const std::string log = dir.path() + "/octet.log", runs = dir.path() + "/runs";
  auto first_epoch = [&](const std::string& name) {
    return std::vector<std::string>{"train",
                                    std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist.yaml",
                                    "data.dataset=mnist",
                                    "data.root=" + dir.path() + "/mnist",
                                    "data.workers=0",
                                    "train.threads=1",
                                    "train.batch_size=16",
                                    "train.eval_batch_size=16",
                                    "train.epochs=1",
                                    "log.progress=false",
                                    "checkpoint.dir=" + runs,
                                    "log.run_name=" + name};
  };
  auto resume = [&](const std::string& name) {
    return std::vector<std::string>{"train", "--resume", runs + "/" + name, "train.epochs=" + std::to_string(kEpochs)};
  };
  // The reference: one epoch, then the rest in one go (timed: a step's time, save included).
  ASSERT_EQ(wait_for(start_octet(first_epoch("ref"), log)), 0) << file_text(log);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_for(start_octet(resume("ref"), log)), 0) << file_text(log);
  const double step_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kEpochs;

  ASSERT_EQ(wait_for(start_octet(first_epoch("crash"), log)), 0) << file_text(log);
  const std::string run = runs + "/crash", last = run + "/last.safetensors";
  int64_t step = load_checkpoint(last).state.step;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> delay_us(0, static_cast<int>(2 * step_us));
  int killed = 0, in_a_write = 0;
  for (; killed < kKilledRuns; ++killed) {
    const auto saved_before = fs::last_write_time(last);
    const pid_t pid = start_octet(resume("crash"), log);
    // Past its start (loading the data, building the model): its first save replaced the file.
    int status = 0;
    pid_t ended = 0;
    while (fs::last_write_time(last) == saved_before && (ended = ::waitpid(pid, &status, WNOHANG)) == 0) ::usleep(200);
    ASSERT_EQ(ended, 0) << "run " << killed << " ended before its first save: " << file_text(log);
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_for(pid), 128 + SIGKILL) << "run " << killed << " ended before the kill: " << file_text(log);
    for (const char* name : {"last", "best"})
      in_a_write += fs::exists(run + "/." + name + ".safetensors.tmp." + std::to_string(pid));
    const int64_t on_disk = load_checkpoint(last).state.step;
    ASSERT_GT(on_disk, step) << "after kill " << killed;
    step = on_disk;
  }
  ASSERT_EQ(wait_for(start_octet(resume("crash"), log)), 0) << file_text(log);
  std::printf("%d runs killed, %d of them inside a checkpoint write; the killed runs reached step %lld of %d\n", killed,
              in_a_write, static_cast<long long>(step), kEpochs);
  ASSERT_LT(step, kEpochs) << "the killed runs did all the steps: kill sooner";

  const Checkpoint ref = load_checkpoint(runs + "/ref/last.safetensors"),
                   got = load_checkpoint(run + "/last.safetensors");
  EXPECT_EQ(got.state.step, kEpochs);
  ASSERT_EQ(got.model.size(), ref.model.size());
  for (size_t i = 0; i < ref.model.size(); ++i) {
    EXPECT_EQ(got.model[i].first, ref.model[i].first);
    EXPECT_EQ(got.model[i].second.to_vector<float>(), ref.model[i].second.to_vector<float>()) << ref.model[i].first;
  }
}

}  // namespace
}  // namespace octet::train
