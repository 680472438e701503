#include "core/watchdog.h"

#include <exception>
#include <utility>
#include <vector>

namespace octet {

Watchdog::Watchdog(std::chrono::microseconds poll) : poll_(poll), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Watchdog::Id Watchdog::watch(Work work) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Id id = next_++;
  Item item;
  item.work = std::move(work);
  items_.emplace(id, std::move(item));
  wake_.notify_one();
  return id;
}

Watchdog::Outcome Watchdog::check(Work& work, std::string* message) {
  // A callback that throws (an event's query meeting a sticky CUDA error) fails its item: on this
  // thread the exception would end the process.
  try {
    if (work.finished && work.finished()) return Outcome::finished;
    if (work.failure) {
      std::string why = work.failure();
      if (!why.empty()) {
        *message = std::move(why);
        return Outcome::failed;
      }
    }
  } catch (const std::exception& e) {
    *message = work.what + ": " + e.what();
    return Outcome::failed;
  }
  if (Clock::now() > work.deadline) {
    *message = work.what + ": not finished by its deadline";
    return Outcome::timed_out;
  }
  return Outcome::pending;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    // Pending items are erased only by this thread (once ended), so their nodes stay valid while
    // they are polled outside the lock.
    std::vector<std::pair<Id, Item*>> pending;
    for (auto& [id, item] : items_)
      if (item.outcome == Outcome::pending) pending.emplace_back(id, &item);
    lock.unlock();
    bool ended = false;
    for (auto& [id, item] : pending) {
      std::string message;
      const Outcome outcome = check(item->work, &message);
      if (outcome == Outcome::pending) continue;
      if (outcome != Outcome::finished && item->work.abort) {
        try {
          item->work.abort();
        } catch (const std::exception& e) {
          message += std::string("; its abort failed: ") + e.what();
        }
      }
      std::lock_guard<std::mutex> relock(mutex_);
      if (item->detached) {
        items_.erase(id);
      } else {
        item->outcome = outcome;
        item->message = std::move(message);
      }
      ended = true;
    }
    if (ended) changed_.notify_all();
    lock.lock();
    // Idle (nothing pending) until watch() or the destructor wakes it, else one poll period.
    if (pending.empty())
      wake_.wait(lock, [this] {
        if (stop_) return true;
        for (const auto& [id, item] : items_)
          if (item.outcome == Outcome::pending) return true;
        return false;
      });
    else
      wake_.wait_for(lock, poll_, [this] { return stop_; });
  }
}

Watchdog::Outcome Watchdog::poll(Id id, std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = items_.find(id);
  if (it == items_.end()) return Outcome::finished;
  const Outcome outcome = it->second.outcome;
  if (outcome == Outcome::pending) return outcome;
  if (message) *message = std::move(it->second.message);
  items_.erase(it);
  return outcome;
}

Watchdog::Outcome Watchdog::wait(Id id, std::string* message, const std::function<void()>& between,
                                 std::chrono::milliseconds tick) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = items_.find(id);
    if (it == items_.end()) return Outcome::finished;
    if (it->second.outcome != Outcome::pending) {
      const Outcome outcome = it->second.outcome;
      if (message) *message = std::move(it->second.message);
      items_.erase(it);
      return outcome;
    }
    if (changed_.wait_for(lock, tick) == std::cv_status::timeout && between) {
      lock.unlock();
      between();
      lock.lock();
    }
  }
}

void Watchdog::detach(Id id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = items_.find(id);
  if (it == items_.end()) return;
  if (it->second.outcome == Outcome::pending)
    it->second.detached = true;
  else
    items_.erase(it);
}

size_t Watchdog::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

}  // namespace octet
