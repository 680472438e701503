// The `octet` CLI as a separate process, for tests of what a user sees: its exit status (a signal
// included) and its output.
//   const pid_t pid = start_octet({"train", recipe}, log);   kill(pid, SIGTERM);   wait_for(pid);
//   OctetRun r = run_octet({"trian"});   // r.status 2, r.output "...did you mean 'train'?..."
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/data/temp_dir.h"
#include "tests/train/run_util.h"

namespace octet::train {

// Starts the octet CLI with `args`, its output (stdout and stderr) appended to `log`. `in_child`,
// if given, runs in the child before the exec (a working folder, a resource limit: async-signal-safe
// calls only); it returns false to give up (exit 125).
inline pid_t start_octet(const std::vector<std::string>& args, const std::string& log,
                         const std::function<bool()>& in_child = {}) {
  std::vector<char*> argv{const_cast<char*>(OCTET_CLI)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0) ::_exit(126);
    if (in_child && !in_child()) ::_exit(125);
    ::execv(OCTET_CLI, argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status of `pid`, or 128 + the signal that ended it.
inline int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct OctetRun {
  int status = 0;
  std::string output;  // stdout and stderr, interleaved
};

// Runs the octet CLI with `args` to its end (`in_child` as start_octet's).
inline OctetRun run_octet(const std::vector<std::string>& args, const std::function<bool()>& in_child = {}) {
  octet::testing::TempDir dir;
  const std::string log = dir.path() + "/octet.log";
  OctetRun r;
  r.status = wait_for(start_octet(args, log, in_child));
  r.output = file_text(log);
  return r;
}

// The default recipe's file.
inline const std::string kRecipe = std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist.yaml";

// `octet train` of the default recipe on small generated MNIST data under `dir` (write_mnist(dir +
// "/mnist", ...)), runs under dir/runs, one thread, no progress bar, with `extra` keys.
inline std::vector<std::string> train_args(const octet::testing::TempDir& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"train",
                                kRecipe,
                                "data.dataset=mnist",
                                "data.root=" + dir.path() + "/mnist",
                                "data.workers=0",
                                "train.batch_size=16",
                                "train.eval_batch_size=16",
                                "train.threads=1",
                                "log.progress=false",
                                "checkpoint.dir=" + dir.path() + "/runs"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline void expect_output(const OctetRun& r, const std::string& fragment) {
  EXPECT_NE(r.output.find(fragment), std::string::npos) << r.output;
}

}  // namespace octet::train
