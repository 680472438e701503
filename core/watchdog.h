// A thread that watches asynchronous work against deadlines, as PyTorch's ProcessGroupNCCL watchdog
// watches its collectives (core/nccl/comm.cpp is the user): the caller queues work (a collective on
// a communication stream) and goes on; the watchdog polls every item and, when one fails or misses
// its deadline, calls that item's abort on its own thread and records why. For NCCL the abort stops
// the communicator's kernels, so a caller stuck anywhere behind them (a stream synchronize, a copy
// to the host) is released; the caller learns the outcome at its next wait(), which blocks on a
// condition variable instead of polling the device per bucket.
//   Watchdog dog;
//   Watchdog::Id id = dog.watch({"all_reduce", Watchdog::Clock::now() + 10s,
//                                [&] { return done.query(); }, [&] { return error_text(comm); },
//                                [&] { abort(comm); }});
//   std::string why;
//   if (dog.wait(id, &why) == Watchdog::Outcome::timed_out) ...
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace octet {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Work {
    std::string what;
    Clock::time_point deadline;
    std::function<bool()> finished;        // polled on the watchdog thread: true once the work is done
    std::function<std::string()> failure;  // polled: a non-empty message once the work has failed
    std::function<void()> abort;           // called once, on the watchdog thread, on failure or time-out
  };
  enum class Outcome { pending, finished, failed, timed_out };
  using Id = uint64_t;

  // `poll`: the watchdog thread's period while something is pending (it sleeps when nothing is).
  explicit Watchdog(std::chrono::microseconds poll = std::chrono::microseconds(100));
  // Stops the thread; work still pending is neither waited for nor aborted.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  Id watch(Work work);
  // Blocks until item `id` ends and returns how (its message in *message for failed and timed_out),
  // forgetting it. `between`, when set, runs on the calling thread every `tick` while it waits (an
  // MPI roll call to answer). An id not watched (or forgotten) answers finished.
  Outcome wait(Id id, std::string* message = nullptr, const std::function<void()>& between = {},
               std::chrono::milliseconds tick = std::chrono::milliseconds(20));
  // The item's outcome so far, without blocking; an ended item is forgotten once reported.
  Outcome poll(Id id, std::string* message = nullptr);
  // Nobody will wait for `id`: it is still watched (and aborted on failure or time-out), and
  // forgotten once it ends.
  void detach(Id id);
  // Items being watched (pending) and ended but not yet reported.
  size_t size() const;

 private:
  struct Item {
    Work work;
    Outcome outcome = Outcome::pending;
    std::string message;
    bool detached = false;
  };
  void run();
  // Polls one pending item (outside the lock); returns its new outcome and message.
  static Outcome check(Work& work, std::string* message);

  std::chrono::microseconds poll_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // an item ended (for wait())
  std::condition_variable wake_;     // work to watch, or stop (for the thread)
  std::map<Id, Item> items_;
  Id next_ = 1;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace octet
