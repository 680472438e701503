// Checkpoints survive the ways a long run dies: a process killed (SIGKILL) at any point of a save
// leaves the previous checkpoint whole under its name and training resumes from it; a full disk
// and a read-only folder are octet::Errors that say so and leave the previous checkpoint intact.
// The writer runs in a forked child, so the kill, the file-size limit and the dropped privileges
// hit a real process.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <random>

#include "core/octet.h"
#include "tests/data/temp_dir.h"
#include "tools/checkpoint.h"

namespace octet::tools {
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

}  // namespace
}  // namespace octet::tools
