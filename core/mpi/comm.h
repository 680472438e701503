// The MPI calls octet makes (core/mpi/comm.cpp, built with OCTET_MPI; core/mpi_stub.cpp answers
// without it): start-up, the world's rank and size, and non-blocking collectives on raw bytes that
// finish by polling against a deadline, so a dead or stuck rank gives an octet::Error, never a
// hang. Pure C++: no mpi.h here. core/distributed.cpp builds the tensor collectives on these.
//   mpi::init();
//   mpi::Request r = mpi::alltoall(send, recv, chunk_bytes);
//   mpi::wait(r, /*timeout_s=*/300, "all_reduce");
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace octet::dist::mpi {

// True in a build with MPI.
bool built();
// Starts MPI once per process (MPI_Init_thread, funneled: one thread calls MPI). Idempotent.
void init();
bool initialized();
int rank();
int size();
// This process's rank among the processes of its host (MPI_COMM_TYPE_SHARED).
int local_rank();
// Every rank's host name (MPI_Get_processor_name), by rank; empty before init().
std::vector<std::string> host_names();

// A collective in flight; wait() or test() finishes it. Destroying an unfinished one waits.
class Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Each rank sends `chunk` bytes at send + r * chunk to rank r and receives rank r's into
// recv + r * chunk.
Request alltoall(const void* send, void* recv, int64_t chunk);
// recv + r * bytes gets rank r's `bytes` bytes of send.
Request allgather(const void* send, void* recv, int64_t bytes);
// buf's bytes from rank `root` to every rank.
Request broadcast(void* buf, int64_t bytes, int root);
// The v-forms, on elements of `esize` bytes, for a tensor cut into one part per rank: part r is
// elements [displs[r], displs[r] + counts[r]) (counts and displs have size() entries).
// alltoallv: part r of send goes to rank r; rank r's part rank() arrives at recv + r * counts[rank()].
Request alltoallv(const void* send, const int* counts, const int* displs, void* recv, int esize);
// allgatherv_in_place: this rank's part of buf (in place) to every rank, and theirs into buf.
Request allgatherv_in_place(void* buf, const int* counts, const int* displs, int esize);
Request barrier();

// True when r has finished (drives MPI's progress).
bool test(Request& r);
// Polls r until it finishes; an octet::Error naming `what` when timeout_s passes first. The error
// names the ranks (and their hosts) that then fail to answer a roll call within a quarter of the
// time-out (0.5 to 5 s): every rank answers it while it waits in a collective, so these are the
// dead ones, the ones behind a cut link, or the ones stuck elsewhere.
void wait(Request& r, double timeout_s, const char* what);
// That error, for a collective of `what` that timed out (the NCCL waits use it too).
[[noreturn]] void throw_timed_out(const char* what, double timeout_s);
// Answers the roll calls of other ranks that have arrived: whoever waits for a collective by
// other means than wait() (the NCCL waits) calls it while polling.
void answer_roll_call();

// Ends the whole job (every rank) with `code`, after printing `message` on this rank's stderr.
[[noreturn]] void abort(int code, const char* message);

}  // namespace octet::dist::mpi
