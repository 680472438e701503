// The NCCL side of core/nccl/comm.h (built with OCTET_NCCL): a communicator per device with its own
// stream; collectives ordered after the caller's stream by an event, finished by polling another
// event against a deadline.
#include "core/nccl/comm.h"

#include <nccl.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "core/cuda.h"
#include "core/cuda/kernels.h"
#include "core/error.h"
#include "core/mpi/comm.h"

namespace octet::dist::nccl {

namespace {

struct Communicator {
  ncclComm_t comm = nullptr;
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
// communicator at the same point of the job).
std::map<int, Communicator>& communicators() {
  static std::map<int, Communicator> comms;
  return comms;
}

// Aborts the communicator of the current device (its kernels stop; later collectives make a new
// one), so a failed rank leaves no collective running.
void abort_communicator(ncclComm_t comm) {
  auto& comms = communicators();
  for (auto it = comms.begin(); it != comms.end(); ++it)
    if (it->second.comm == comm) {
      comms.erase(it);
      break;
    }
  ncclCommAbort(comm);  // also one not in the map yet (a failed init)
}

// Polls a non-blocking communicator's state until its last call is through (ncclSuccess), against
// the time-out: an error or the time-out aborts the communicator and throws, naming who does not
// answer (mpi::throw_timed_out's roll call).
void settle(ncclComm_t comm, double timeout_s, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string message = std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comm) + ")";
      abort_communicator(comm);
      OCTET_FAIL(what, ": NCCL error: ", message);
    }
    if (Clock::now() > deadline) {
      abort_communicator(comm);
      mpi::throw_timed_out(what, timeout_s);
    }
    mpi::answer_roll_call();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A non-blocking communicator init (config.blocking = 0), settled against the time-out: a rank
// that dies between the id's broadcast and its init leaves the others in NCCL's bootstrap, where a
// blocking init would hang them.
ncclComm_t init_within(const Peers& p, const ncclUniqueId& id, const char* what) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, p.size, id, p.rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress) check(rc, comm, what);
  settle(comm, p.timeout_s, what);
  return comm;
}

Communicator& communicator(const Peers& p, const char* what) {
  const int device = cuda::current_device();
  auto& comms = communicators();
  if (auto it = comms.find(device); it != comms.end()) return it->second;
  ncclUniqueId id{};
  if (p.rank == 0) check(ncclGetUniqueId(&id), nullptr, what);
  if (p.size > 1) {
    mpi::Request r = mpi::broadcast(&id, static_cast<int64_t>(sizeof id), 0);
    mpi::wait(r, p.timeout_s, what);
  }
  Communicator c;
  c.comm = init_within(p, id, what);
  c.stream = cuda::Stream::create(device);
  return comms.emplace(device, std::move(c)).first->second;
}

}  // namespace

struct Request::Impl {
  ncclComm_t comm = nullptr;
  cuda::Event done;  // recorded on the communication stream after the collective
};

Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() {
  if (!impl_) return;
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
  Communicator& c = communicator(p, what);
  cuda::Event ready;
  ready.record(cuda::current_stream());
  ready.wait(c.stream);
  // A non-blocking communicator may answer ncclInProgress: the call is through once it settles.
  if (const ncclResult_t rc = call(c.comm, static_cast<cudaStream_t>(c.stream.handle())); rc == ncclInProgress)
    settle(c.comm, p.timeout_s, what);
  else
    check(rc, c.comm, what);
  Request r;
  r.impl_ = std::make_unique<Request::Impl>();
  r.impl_->comm = c.comm;
  r.impl_->done.record(c.stream);
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

bool test(Request& r) {
  if (!r.impl_) return true;
  ncclResult_t async = ncclSuccess;
  check(ncclCommGetAsyncError(r.impl_->comm, &async), r.impl_->comm, "ncclCommGetAsyncError");
  if (async != ncclSuccess && async != ncclInProgress) {
    const std::string message = std::string(ncclGetErrorString(async)) + " (" + ncclGetLastError(r.impl_->comm) + ")";
    abort_communicator(r.impl_->comm);
    r.impl_.reset();
    OCTET_FAIL("nccl: a collective failed: ", message);
  }
  return r.impl_->done.query();
}

void wait(Request& r, double timeout_s, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int spins = 0;
  while (!test(r)) {
    if (Clock::now() > deadline) {
      abort_communicator(r.impl_->comm);
      r.impl_.reset();
      mpi::throw_timed_out(what, timeout_s);  // the error names the ranks that do not answer
    }
    if (++spins > 1000) {
      mpi::answer_roll_call();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (r.impl_) r.impl_->done.wait(cuda::current_stream());
  r.impl_.reset();
}

}  // namespace octet::dist::nccl
