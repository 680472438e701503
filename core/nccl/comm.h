// The NCCL calls octet makes for collectives on CUDA tensors (core/nccl/comm.cpp, built with
// OCTET_NCCL; core/nccl_stub.cpp answers without it). One communicator per device joins every rank
// of the job; it is made on the first collective on that device: rank 0 creates NCCL's unique id and
// MPI broadcasts it (core/mpi/comm.h). A collective waits for the work queued so far on the
// calling thread's current stream, runs on the communicator's own stream (so it overlaps later
// kernels), and is watched from its start by a watchdog thread (core/watchdog.h) against the
// time-out: a dead or stuck rank gets the communicator aborted there (releasing any thread blocked
// behind its kernels) and an octet::Error at the next test() or wait(), never a hang. Pure C++:
// no nccl.h here.
//   nccl::Request r = nccl::all_reduce(group, /*device=*/0, grad.raw_data(), grad.numel(), grad.dtype(), /*average=*/true);
//   nccl::wait(r, group.timeout_s, "all_reduce");
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace octet::dist::nccl {

// True in a build with NCCL.
bool built();

// The job as the collectives see it: this process's rank among `size`, and the time-out.
struct Peers {
  int rank = 0, size = 1;
  double timeout_s = 300;
};

// A collective in flight on the communication stream; wait() or test() finishes it. Destroying an
// unfinished one makes the current stream wait for it (nothing reuses its buffers too early).
class Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Each call runs on the communicator of `device` (where its buffers live).
// In place on `count` elements of `dtype` at buf: the sum
// (or average) over the ranks. Every rank receives the same bits; NCCL picks its algorithm (ring,
// tree, NVLS) from the size and the topology, so the same job gives the same bits on every run.
Request all_reduce(const Peers& p, int device, void* buf, int64_t count, DType dtype, bool average);
// buf's `count` elements from rank `root` to every rank.
Request broadcast(const Peers& p, int device, void* buf, int64_t count, DType dtype, int root);
// recv + r * count gets rank r's `count` elements of send.
Request all_gather(const Peers& p, int device, const void* send, void* recv, int64_t count, DType dtype);
// recv (count elements) = this rank's count elements of the reduction of every rank's send
// (size * count elements).
Request reduce_scatter(const Peers& p, int device, const void* send, void* recv, int64_t count, DType dtype, bool average);

// True when r has finished (an octet::Error when NCCL reported a failure).
bool test(Request& r);
// Sleeps until the watchdog reports r finished, then orders the current stream after it. When it
// failed, or missed its deadline (Peers::timeout_s from its start; the watchdog has aborted the
// communicator), throws an octet::Error naming `what` (a time-out names the ranks that do not
// answer, mpi::throw_timed_out's roll call, with `timeout_s`).
void wait(Request& r, double timeout_s, const char* what);

}  // namespace octet::dist::nccl
