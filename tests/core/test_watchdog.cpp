// The watchdog of asynchronous work (core/watchdog.h), the mechanism behind the NCCL collectives'
// time-out (core/nccl/comm.cpp), with stand-in work: finished work ends without an abort; failed
// and late work is aborted exactly once on the watchdog's thread; an abort releases a caller stuck
// on something else (the way aborting a communicator releases a stream synchronize); waiting runs
// the caller's between-hook; detached work is still watched; a callback that throws fails its item.
#include "core/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace octet {
namespace {

using namespace std::chrono_literals;

// Work whose state the test sets; counts its aborts and the thread they ran on.
struct FakeWork {
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::string error;
  std::atomic<int> aborts{0};
  std::thread::id abort_thread;

  Watchdog::Work work(const char* what, Watchdog::Clock::duration timeout) {
    return {what, Watchdog::Clock::now() + timeout, [this] { return done.load(); },
            [this] {
              std::lock_guard<std::mutex> lock(mutex);
              return error;
            },
            [this] {
              abort_thread = std::this_thread::get_id();
              ++aborts;
            }};
  }
};

TEST(Watchdog, FinishedWorkEndsWithoutAnAbort) {
  Watchdog dog;
  FakeWork w;
  const Watchdog::Id id = dog.watch(w.work("all_reduce", 60s));
  EXPECT_EQ(dog.poll(id), Watchdog::Outcome::pending);
  std::thread later([&] {
    std::this_thread::sleep_for(20ms);
    w.done = true;
  });
  std::string why = "untouched";
  EXPECT_EQ(dog.wait(id, &why), Watchdog::Outcome::finished);
  later.join();
  EXPECT_EQ(w.aborts, 0);
  EXPECT_EQ(dog.size(), 0u);
  EXPECT_EQ(dog.wait(id), Watchdog::Outcome::finished);  // forgotten: nothing to wait for
}

TEST(Watchdog, FailedWorkIsAbortedOnceOnTheWatchdogThread) {
  Watchdog dog;
  FakeWork w;
  const Watchdog::Id id = dog.watch(w.work("broadcast", 60s));
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.error = "NCCL error: remote process exited";
  }
  std::string why;
  EXPECT_EQ(dog.wait(id, &why), Watchdog::Outcome::failed);
  EXPECT_EQ(why, "NCCL error: remote process exited");
  std::this_thread::sleep_for(5ms);  // the watchdog keeps running: no second abort
  EXPECT_EQ(w.aborts, 1);
  EXPECT_NE(w.abort_thread, std::this_thread::get_id());
}

TEST(Watchdog, LateWorkIsAbortedAtItsDeadlineAndReleasesAStuckCaller) {
  Watchdog dog;
  // The abort releases whoever is blocked behind the work, as aborting a communicator ends its
  // kernels and so a stream synchronize on another thread.
  std::mutex m;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> aborts{0};
  const auto start = Watchdog::Clock::now();
  const Watchdog::Id id = dog.watch({"all_reduce", start + 50ms, [] { return false; }, [] { return std::string(); },
                                     [&] {
                                       ++aborts;
                                       std::lock_guard<std::mutex> lock(m);
                                       released = true;
                                       cv.notify_all();
                                     }});
  {
    std::unique_lock<std::mutex> lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return released; })) << "the watchdog never aborted the late work";
  }
  const double waited = std::chrono::duration<double>(Watchdog::Clock::now() - start).count();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);
  std::string why;
  EXPECT_EQ(dog.wait(id, &why), Watchdog::Outcome::timed_out);
  EXPECT_NE(why.find("all_reduce"), std::string::npos) << why;
  EXPECT_EQ(aborts, 1);
}

TEST(Watchdog, WaitingRunsTheBetweenHookAndSeesEachItemsOwnOutcome) {
  Watchdog dog;
  FakeWork ok, bad, late;
  const Watchdog::Id a = dog.watch(ok.work("a", 60s)), b = dog.watch(bad.work("b", 60s));
  const Watchdog::Id c = dog.watch(late.work("c", 100ms));
  std::atomic<int> ticks{0};
  std::thread later([&] {
    std::this_thread::sleep_for(30ms);
    ok.done = true;
    std::lock_guard<std::mutex> lock(bad.mutex);
    bad.error = "b failed";
  });
  EXPECT_EQ(dog.wait(
                c, nullptr, [&] { ++ticks; }, 5ms),
            Watchdog::Outcome::timed_out);
  later.join();
  EXPECT_GT(ticks, 0);
  EXPECT_EQ(dog.wait(a), Watchdog::Outcome::finished);
  EXPECT_EQ(dog.wait(b), Watchdog::Outcome::failed);
  EXPECT_EQ(ok.aborts + bad.aborts + late.aborts, 2);
  EXPECT_EQ(late.aborts, 1);
}

TEST(Watchdog, DetachedWorkIsStillAbortedAndThenForgotten) {
  Watchdog dog(50us);
  FakeWork w;
  dog.detach(dog.watch(w.work("reduce_scatter", 20ms)));
  for (int i = 0; i < 1000 && w.aborts == 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(w.aborts, 1);
  for (int i = 0; i < 1000 && dog.size() > 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(dog.size(), 0u);
}

// A callback that throws on the watchdog's thread (a CUDA event's query meeting a sticky error)
// fails its item with the exception's message; an abort that throws adds its message. The process
// goes on (an exception escaping that thread would end it) and so does the watchdog.
TEST(Watchdog, ACallbackThatThrowsFailsItsItem) {
  Watchdog dog;
  std::atomic<int> aborts{0};
  const Watchdog::Id id = dog.watch({"all_reduce", Watchdog::Clock::now() + 60s,
                                     []() -> bool { throw std::runtime_error("cudaEventQuery: an illegal address"); },
                                     [] { return std::string(); },
                                     [&] {
                                       ++aborts;
                                       throw std::runtime_error("abort refused");
                                     }});
  std::string why;
  EXPECT_EQ(dog.wait(id, &why), Watchdog::Outcome::failed);
  EXPECT_EQ(why, "all_reduce: cudaEventQuery: an illegal address; its abort failed: abort refused");
  EXPECT_EQ(aborts, 1);
  FakeWork later;
  const Watchdog::Id next = dog.watch(later.work("broadcast", 60s));
  later.done = true;
  EXPECT_EQ(dog.wait(next), Watchdog::Outcome::finished);
}

TEST(Watchdog, StopsWithWorkPending) {
  FakeWork w;
  {
    Watchdog dog;
    dog.watch(w.work("all_gather", 60s));
  }
  EXPECT_EQ(w.aborts, 0);
}

}  // namespace
}  // namespace octet
