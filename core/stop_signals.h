// StopSignals: SIGINT (Ctrl-C) and SIGTERM as a request to stop, a flag that a long computation (a
// training run) reads between steps, so that it can save its work and end. A second signal gives
// both their default action back: a third ends the process.
//   StopSignals stop;                              // first, before any thread starts
//   while (!stop.requested() && ...) step();       // then save, and exit 128 + stop.signal_number()
//
// The signals are taken on a thread of their own, never on a thread that computes: the constructor
// blocks them in the calling thread (which every thread started after it inherits) and in OpenMP's
// threads, and one thread waits for them (sigwaitinfo) and acts on their disposition there. The
// reason is oneDNN (Debian's 2.6): its JIT f32 GEMM kernels point the stack pointer at a heap
// buffer while they run, so a signal handled on that thread has its frame (registers and the
// AVX-512 state, about 3 KB) written into the heap below the buffer: malloc aborts later ("corrupted
// size vs. prev_size"), a tensor's shape is overwritten, or the process faults (oneDNN issue #4845,
// fixed upstream by PR #4855). Every octet matmul and linear layer runs those kernels.
// Whatever disposition a signal has when it arrives is what happens, on that thread: a handler set
// with sigaction or std::signal (which may log or allocate freely there), SIG_IGN, or SIG_DFL, which
// ends the process. Only one StopSignals may exist at a time.
#pragma once

#include <atomic>
#include <csignal>
#include <thread>

namespace octet {

class StopSignals {
 public:
  StopSignals();  // installs the stop handler and starts the signal thread
  // Stops the thread; restores the previous handlers and the signal mask of the thread that
  // constructed it (destroy it there).
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Set by the first SIGINT or SIGTERM (for TrainOptions::stop).
  const std::atomic<bool>& requested() const;
  // The signal that set requested() (0 before): an exit status of 128 + it, as a shell reports a
  // process the signal ended. Set before requested() is.
  const std::atomic<int>& signal_number() const;

 private:
  using Disposition = struct sigaction;
  Disposition previous_int_{}, previous_term_{};
  sigset_t previous_mask_{};
  std::thread waiter_;
};

}  // namespace octet
