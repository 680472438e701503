// The NCCL side of core/nccl/comm.h (built with OCTET_NCCL): a communicator per device with its own
// stream; collectives ordered after the caller's stream by an event. A watchdog thread
// (core/watchdog.h) watches every collective from its start against the time-out, as PyTorch's
// ProcessGroupNCCL does: it polls the collective's done event and the communicator's async error,
// and on an error or a missed deadline aborts the communicator (its kernels stop, so a thread
// blocked behind them on a stream is released). wait() sleeps until the watchdog reports the end
// (no host polling per bucket) and then raises the error, naming the ranks that do not answer.
#include "core/nccl/comm.h"

#include <nccl.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/cuda.h"
#include "core/cuda/kernels.h"
#include "core/error.h"
#include "core/mpi/comm.h"
#include "core/watchdog.h"

namespace octet::dist::nccl {

namespace {

// A communicator shared by its users and the watchdog: `mutex` orders its calls against the
// watchdog's abort; once aborted, `comm` is freed and never touched again.
struct CommState {
  std::mutex mutex;
  ncclComm_t comm = nullptr;
  bool aborted = false;
};

struct Communicator {
  std::shared_ptr<CommState> state;
  cuda::Stream stream;  // the collectives of this device run here
};

void check(ncclResult_t rc, ncclComm_t comm, const char* what) {
  if (rc == ncclSuccess) return;
  OCTET_FAIL(what, ": NCCL error: ", ncclGetErrorString(rc), " (", ncclGetLastError(comm), ")");
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i8:
      return ncclInt8;
    case DType::u8:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  OCTET_FAIL("nccl: unknown dtype ", static_cast<int>(dtype));
}

// The communicators by device index, made on first use (a collective call: every rank makes its
// communicator at the same point of the job). The watchdog's abort removes one from its thread.
std::mutex& communicators_mutex() {
  static std::mutex m;
  return m;
}
std::map<int, std::shared_ptr<Communicator>>& communicators() {
  static std::map<int, std::shared_ptr<Communicator>> comms;
  return comms;
}

// Aborts a communicator (its kernels stop; later collectives make a new one), so a failed rank
// leaves no collective running. Safe from any thread, and more than once.
void abort_communicator(CommState& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.aborted) return;
  s.aborted = true;
  {
    std::lock_guard<std::mutex> comms_lock(communicators_mutex());
    auto& comms = communicators();
    for (auto it = comms.begin(); it != comms.end(); ++it)
      if (it->second->state.get() == &s) {
        comms.erase(it);
        break;
      }
  }
  ncclCommAbort(s.comm);
}

// The communicator's asynchronous error as a message; empty while there is none.
std::string async_failure(CommState& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.aborted) return "the communicator was aborted (an earlier collective failed or timed out)";
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(s.comm, &state) != ncclSuccess) return "ncclCommGetAsyncError failed";
  if (state == ncclSuccess || state == ncclInProgress) return {};
  return std::string("NCCL error: ") + ncclGetErrorString(state) + " (" + ncclGetLastError(s.comm) + ")";
}

// The watchdog of every collective (made with the first one; stopped at exit, before the CUDA
// runtime's own teardown, which started earlier).
Watchdog& watchdog() {
  static Watchdog dog;
  return dog;
}

// Polls a non-blocking communicator's state until its last call is through (ncclSuccess), against
// the time-out: an error or the time-out aborts the communicator and throws, naming who does not
// answer (mpi::throw_timed_out's roll call).
void settle(CommState& s, double timeout_s, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    ncclResult_t state = ncclInProgress;
    std::string message;
    {
      std::lock_guard<std::mutex> lock(s.mutex);  // the watchdog may abort (free) it meanwhile
      OCTET_CHECK(!s.aborted, what, ": the communicator was aborted (an earlier collective failed or timed out)");
      ncclCommGetAsyncError(s.comm, &state);
      if (state != ncclSuccess && state != ncclInProgress)
        message = std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(s.comm) + ")";
    }
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      abort_communicator(s);
      OCTET_FAIL(what, ": NCCL error: ", message);
    }
    if (Clock::now() > deadline) {
      abort_communicator(s);
      mpi::throw_timed_out(what, timeout_s);
    }
    mpi::answer_roll_call();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A non-blocking communicator init (config.blocking = 0), settled against the time-out: a rank
// that dies between the id's broadcast and its init leaves the others in NCCL's bootstrap, where a
// blocking init would hang them.
std::shared_ptr<CommState> init_within(const Peers& p, const ncclUniqueId& id, const char* what) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto state = std::make_shared<CommState>();
  const ncclResult_t rc = ncclCommInitRankConfig(&state->comm, p.size, id, p.rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress) check(rc, state->comm, what);
  settle(*state, p.timeout_s, what);
  return state;
}

std::shared_ptr<Communicator> communicator(const Peers& p, const char* what) {
  const int device = cuda::current_device();
  {
    std::lock_guard<std::mutex> lock(communicators_mutex());
    auto& comms = communicators();
    if (auto it = comms.find(device); it != comms.end()) return it->second;
  }
  ncclUniqueId id{};
  if (p.rank == 0) check(ncclGetUniqueId(&id), nullptr, what);
  if (p.size > 1) {
    mpi::Request r = mpi::broadcast(&id, static_cast<int64_t>(sizeof id), 0);
    mpi::wait(r, p.timeout_s, what);
  }
  auto c = std::make_shared<Communicator>();
  c->state = init_within(p, id, what);
  c->stream = cuda::Stream::create(device);
  std::lock_guard<std::mutex> lock(communicators_mutex());
  return communicators().emplace(device, std::move(c)).first->second;
}

}  // namespace

struct Request::Impl {
  std::shared_ptr<CommState> state;
  cuda::Event done;  // recorded on the communication stream after the collective
  Watchdog::Id watched = 0;
  double timeout_s = 0;
};

Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() {
  if (!impl_) return;
  watchdog().detach(impl_->watched);  // still watched, and aborted if it fails or runs late
  try {
    impl_->done.wait(cuda::current_stream());  // later work on the caller's stream comes after it
  } catch (...) {                              // a destructor must not throw
  }
}

namespace {

// Runs `call(comm, stream)` on `device`'s communication stream, after the work queued
// so far on the caller's stream.
template <typename Call>
Request enqueue(const Peers& p, int device, const char* what, Call call) {
  cuda::DeviceGuard on(device);
  const std::shared_ptr<Communicator> c = communicator(p, what);
  cuda::Event ready;
  ready.record(cuda::current_stream());
  ready.wait(c->stream);
  ncclResult_t rc = ncclSuccess;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(c->state->mutex);
    OCTET_CHECK(!c->state->aborted, what, ": the communicator was aborted (an earlier collective failed or timed out)");
    rc = call(c->state->comm, static_cast<cudaStream_t>(c->stream.handle()));
    if (rc != ncclSuccess && rc != ncclInProgress)
      error = std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(c->state->comm) + ")";
  }
  // A call refused at once leaves a non-blocking communicator in error: aborted, so that the next
  // collective makes a new one instead of failing the same way.
  if (!error.empty()) {
    abort_communicator(*c->state);
    OCTET_FAIL(what, ": NCCL error: ", error);
  }
  // A non-blocking communicator may answer ncclInProgress: the call is through once it settles.
  if (rc == ncclInProgress) settle(*c->state, p.timeout_s, what);
  Request r;
  r.impl_ = std::make_unique<Request::Impl>();
  r.impl_->state = c->state;
  r.impl_->timeout_s = p.timeout_s;
  r.impl_->done.record(c->stream);
  // The watchdog's callbacks hold what they use (an Event shares its handle): the request may be
  // gone when they run. Done means done on a communicator still whole: an abort (another
  // collective's failure or time-out) stops its kernels, so the done events of the others behind it
  // complete too, over buffers the collectives never finished; those read as failed.
  const cuda::Event done = r.impl_->done;
  const std::shared_ptr<CommState> state = c->state;
  const auto finished = [done, state] {
    if (!done.query()) return false;
    std::lock_guard<std::mutex> lock(state->mutex);
    return !state->aborted;
  };
  r.impl_->watched =
      watchdog().watch({what,
                        Watchdog::Clock::now() + std::chrono::duration_cast<Watchdog::Clock::duration>(
                                                     std::chrono::duration<double>(p.timeout_s)),
                        finished, [state] { return async_failure(*state); }, [state] { abort_communicator(*state); }});
  return r;
}

ncclRedOp_t red_op(bool average) { return average ? ncclAvg : ncclSum; }

}  // namespace

bool built() { return true; }

Request all_reduce(const Peers& p, int device, void* buf, int64_t count, DType dtype, bool average) {
  return enqueue(p, device, "all_reduce", [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(dtype), red_op(average), comm, s);
  });
}

Request broadcast(const Peers& p, int device, void* buf, int64_t count, DType dtype, int root) {
  return enqueue(p, device, "broadcast", [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(dtype), root, comm, s);
  });
}

Request all_gather(const Peers& p, int device, const void* send, void* recv, int64_t count, DType dtype) {
  return enqueue(p, device, "all_gather", [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(dtype), comm, s);
  });
}

Request reduce_scatter(const Peers& p, int device, const void* send, void* recv, int64_t count, DType dtype,
                       bool average) {
  return enqueue(p, device, "reduce_scatter", [&](ncclComm_t comm, cudaStream_t s) {
    return ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), red_op(average), comm, s);
  });
}

namespace {

// Raises the end of a failed or late collective: its message, or the time-out's roll call.
[[noreturn]] void raise(Watchdog::Outcome outcome, const std::string& message, double timeout_s, const char* what) {
  if (outcome == Watchdog::Outcome::timed_out) mpi::throw_timed_out(what, timeout_s);
  OCTET_FAIL(what, ": a collective failed: ", message);
}

}  // namespace

bool test(Request& r) {
  if (!r.impl_) return true;
  std::string message;
  const Watchdog::Outcome outcome = watchdog().poll(r.impl_->watched, &message);
  if (outcome == Watchdog::Outcome::pending) return false;
  const double timeout_s = r.impl_->timeout_s;
  if (outcome != Watchdog::Outcome::finished) {
    r.impl_.reset();
    raise(outcome, message, timeout_s, "nccl");
  }
  r.impl_->watched = 0;  // reported: nothing left to detach
  return true;
}

void wait(Request& r, double timeout_s, const char* what) {
  if (!r.impl_) return;
  std::string message;
  const Watchdog::Outcome outcome = watchdog().wait(r.impl_->watched, &message, [] { mpi::answer_roll_call(); });
  if (outcome != Watchdog::Outcome::finished) {
    r.impl_.reset();
    raise(outcome, message, timeout_s, what);
  }
  r.impl_->done.wait(cuda::current_stream());
  r.impl_.reset();
}

}  // namespace octet::dist::nccl
