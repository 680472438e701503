#include "core/stop_signals.h"

#include <omp.h>
#include <pthread.h>

#include "core/error.h"

namespace octet {

namespace {

// Process-wide, as signal dispositions are: a handler has no other way to them.
std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};
std::atomic<bool> instance_exists{false};
std::atomic<bool> closing{false};  // the destructor's wake-up is the next signal the thread takes

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void restore_default(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

// The default action of `sig`, taken on this thread: for SIGINT and SIGTERM the process ends,
// killed by it.
void take_default_action(int sig) {
  restore_default(sig);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
}

// The first signal asks for the stop; a second one gives SIGINT and SIGTERM their default action
// back, so that a third ends the process (one stop may bring two: `timeout` signals its command and
// then the command's process group). Async-signal-safe: a thread that unblocked the signals itself
// may still run it. The signal's number is stored before the flag, so whoever sees the flag also
// sees the number.
void on_stop_signal(int sig) {
  int none = 0;
  if (stop_signal.compare_exchange_strong(none, sig)) {
    stop_requested.store(true);
    return;
  }
  restore_default(SIGINT);
  restore_default(SIGTERM);
}

// What delivering the signal of `info` to this thread would do, by the disposition it has now
// (`octet train` sets SIG_DFL while it downloads data, so that Ctrl-C ends it at once).
void act_on(const siginfo_t& info) {
  const int sig = info.si_signo;
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) != 0) {
    siginfo_t copy = info;
    now.sa_sigaction(sig, &copy, nullptr);
  } else if (now.sa_handler == SIG_DFL) {
    take_default_action(sig);
  } else if (now.sa_handler != SIG_IGN) {
    now.sa_handler(sig);
  }
}

void take_signals() {
  const sigset_t set = stop_set();
  for (;;) {
    siginfo_t info{};
    if (sigwaitinfo(&set, &info) < 0) continue;  // EINTR: some other signal's handler ran here
    if (closing.load()) return;
    act_on(info);
  }
}

// OpenMP's threads that exist already (a test process's, or a C++ program's that ran ops first);
// those started later inherit the mask of the thread that starts them.
void block_in_openmp_threads(const sigset_t& set) {
#pragma omp parallel num_threads(omp_get_max_threads())
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace

StopSignals::StopSignals() {
  OCTET_CHECK(!instance_exists.exchange(true),
              "StopSignals: one exists already (one at a time handles SIGINT and SIGTERM)");
  stop_requested.store(false);
  stop_signal.store(0);
  closing.store(false);
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  block_in_openmp_threads(set);
  try {
    waiter_ = std::thread(take_signals);  // with the signals blocked, as sigwaitinfo needs them
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    instance_exists.store(false);
    throw;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &previous_int_);
  sigaction(SIGTERM, &sa, &previous_term_);
}

StopSignals::~StopSignals() {
  closing.store(true);
  pthread_kill(waiter_.native_handle(), SIGTERM);
  waiter_.join();
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  // A signal that came meanwhile is delivered here, as the restored handlers say.
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  instance_exists.store(false);
}

const std::atomic<bool>& StopSignals::requested() const { return stop_requested; }

const std::atomic<int>& StopSignals::signal_number() const { return stop_signal; }

}  // namespace octet
