// StopSignals (core/stop_signals.h): SIGINT and SIGTERM become a stop flag, taken on a thread of
// their own, so that none is handled on a thread inside a oneDNN GEMM, whose kernels point the
// stack pointer into the heap (a signal frame written there corrupts it: a run stopped by SIGTERM
// under load aborted in malloc, or failed with a tensor's strides overwritten).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/octet.h"
#include "core/stop_signals.h"

namespace octet {
namespace {

bool blocked_here(int sig) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, sig) == 1;
}

// Whether `flag` is set within a generous bound (the signal thread only has to be scheduled once).
bool becomes_true(const std::atomic<bool>& flag) {
  for (int i = 0; i < 30000 && !flag.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag.load();
}

TEST(StopSignals, NoComputeThreadTakesTheSignals) {
  parallel_for(0, 64, 1, [](int64_t, int64_t) {});  // OpenMP's threads exist before it
  StopSignals stop;
  EXPECT_TRUE(blocked_here(SIGINT) && blocked_here(SIGTERM));
  // OpenMP's threads, which run the kernels and oneDNN.
  std::mutex m;
  int unblocked = 0;
  parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(m);
    unblocked += !blocked_here(SIGINT) || !blocked_here(SIGTERM);
  });
  EXPECT_EQ(unblocked, 0);
  // A thread started afterwards (a DataLoader worker) inherits the mask.
  bool later = false;
  std::thread([&] { later = blocked_here(SIGINT) && blocked_here(SIGTERM); }).join();
  EXPECT_TRUE(later);
}

TEST(StopSignals, TheFirstSignalAsksForAStop) {
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    StopSignals stop;  // each one starts afresh
    EXPECT_FALSE(stop.requested());
    EXPECT_EQ(stop.signal_number(), 0);
    ASSERT_EQ(::kill(::getpid(), sig), 0);
    ASSERT_TRUE(becomes_true(stop.requested()));
    EXPECT_EQ(stop.signal_number(), sig);
  }
}

TEST(StopSignals, OneAtATime) {
  StopSignals stop;
  EXPECT_THROW(StopSignals(), Error);
}

bool default_action(int sig) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return (now.sa_flags & SA_SIGINFO) == 0 && now.sa_handler == SIG_DFL;
}

// Whether SIGINT and SIGTERM get their default action back within a generous bound.
bool defaults_come_back() {
  for (int i = 0; i < 30000 && !(default_action(SIGINT) && default_action(SIGTERM)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return default_action(SIGINT) && default_action(SIGTERM);
}

// One stop may bring two signals (`timeout` signals its command, then the command's process group).
TEST(StopSignals, ASecondSignalGivesBackTheDefaultAction) {
  {
    StopSignals stop;
    ::kill(::getpid(), SIGTERM);
    ASSERT_TRUE(becomes_true(stop.requested()));
    ::kill(::getpid(), SIGTERM);
    EXPECT_TRUE(defaults_come_back());
    EXPECT_EQ(stop.signal_number(), SIGTERM);
  }
  // The destructor put back what was there before (gtest's: the default).
  EXPECT_TRUE(default_action(SIGINT) && default_action(SIGTERM));
}

TEST(StopSignalsDeathTest, AThirdSignalEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no OpenMP threads forked away
  EXPECT_EXIT(
      {
        StopSignals stop;
        ::kill(::getpid(), SIGINT);
        if (!becomes_true(stop.requested())) ::_exit(1);
        ::kill(::getpid(), SIGINT);
        if (!defaults_come_back()) ::_exit(2);
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(60));
        ::_exit(3);
      },
      ::testing::KilledBySignal(SIGINT), "");
}

std::atomic<int64_t> handled{0};
void count_signal(int) { handled.fetch_add(1); }

// The first linear layer of SmallCnn (64 * 7 * 7 = 3136 inputs: K > 2048, where oneDNN's kernel
// takes its buffer from the heap) at a rank's batch of 16, on one thread, while another thread
// sends the process SIGTERM every 50 us, each counted by a handler put in place of the stop
// handler. Exits 0 when it comes through. With the signals handled on the computing thread it
// crashed in 8 tries of 8 (a segfault, or malloc's abort), within 0.3 to 1.3 s.
[[noreturn]] void gemms_under_signals() {
  set_num_threads(1);
  struct sigaction sa {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  std::atomic<bool> done{false};
  std::thread sender([&] {
    while (!done) {
      ::kill(::getpid(), SIGTERM);
      ::usleep(50);
    }
  });
  const Tensor x = randn({16, 3136}), w = randn({128, 3136});
  for (int i = 0; i < 500; ++i) {
    std::vector<Tensor> small;  // heap blocks next to the GEMM's buffer, for a misplaced frame to hit
    for (int j = 0; j < 8; ++j) small.push_back(empty({100 + 37 * j + (i % 97) * 13}));
    const Tensor y = linear(x, w);
  }
  done = true;
  sender.join();
  ::_exit(handled.load() > 0 ? 0 : 3);
}

TEST(StopSignalsDeathTest, SignalsDuringGemmsLeaveTheHeapIntact) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignals stop;
        gemms_under_signals();
      },
      ::testing::ExitedWithCode(0), "");
}

// The upstream bug itself (oneDNN issue #4845): the same signals handled on the threads that run
// the GEMMs. Disabled (it crashes); run it with --gtest_also_run_disabled_tests to check a new
// oneDNN: once it passes there, StopSignals is no longer needed for this.
TEST(StopSignalsDeathTest, DISABLED_SignalsOnTheGemmThreadsCorruptTheHeap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      gemms_under_signals(), [](int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }, "");
}

}  // namespace
}  // namespace octet
