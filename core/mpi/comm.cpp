// The MPI side of core/mpi/comm.h (built with OCTET_MPI): Open MPI's non-blocking collectives,
// finished by polling MPI_Test against a deadline.
#include "core/mpi/comm.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/error.h"

namespace octet::dist::mpi {

struct Request::Impl {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Datatype type = MPI_DATATYPE_NULL;  // a derived type to free, or null
  std::vector<int> counts;                // the v-forms' arrays, alive until the request ends
};

Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() {
  if (impl_ && impl_->request != MPI_REQUEST_NULL) MPI_Wait(&impl_->request, MPI_STATUS_IGNORE);
  if (impl_ && impl_->type != MPI_DATATYPE_NULL) MPI_Type_free(&impl_->type);
}

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  OCTET_FAIL(what, ": MPI error: ", std::string(text, static_cast<size_t>(len)));
}

// `bytes` as (count, datatype): MPI counts are int, so a large buffer goes in 1 KiB units.
std::pair<int, MPI_Datatype> counted(int64_t bytes, Request::Impl& r, const char* what) {
  OCTET_CHECK(bytes >= 0, what, ": negative size ", bytes);
  if (bytes <= INT_MAX) return {static_cast<int>(bytes), MPI_BYTE};
  OCTET_CHECK(bytes % 1024 == 0 && bytes / 1024 <= INT_MAX, what, ": ", bytes,
              " bytes per rank (above 2 GiB, expected a multiple of 1 KiB)");
  check(MPI_Type_contiguous(1024, MPI_BYTE, &r.type), what);
  check(MPI_Type_commit(&r.type), what);
  return {static_cast<int>(bytes / 1024), r.type};
}

// A request with its state allocated, for one of the calls below to start.
Request fresh_request() {
  Request r;
  r.impl_ = std::make_unique<Request::Impl>();
  return r;
}

int local_rank_of_world() {
  MPI_Comm local;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "local_rank");
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

}  // namespace

bool built() { return true; }

bool initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

void init() {
  if (initialized()) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (turned into octet::Error) instead of ending the job at once.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // MPI_Finalize at exit, so a clean exit is not mistaken for a dead rank.
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

int local_rank() {
  static const int r = local_rank_of_world();
  return r;
}

Request alltoall(const void* send, void* recv, int64_t chunk) {
  Request r = fresh_request();
  auto [count, type] = counted(chunk, *r.impl_, "alltoall");
  check(MPI_Ialltoall(send, count, type, recv, count, type, MPI_COMM_WORLD, &r.impl_->request), "alltoall");
  return r;
}

Request allgather(const void* send, void* recv, int64_t bytes) {
  Request r = fresh_request();
  auto [count, type] = counted(bytes, *r.impl_, "allgather");
  check(MPI_Iallgather(send, count, type, recv, count, type, MPI_COMM_WORLD, &r.impl_->request), "allgather");
  return r;
}

Request broadcast(void* buf, int64_t bytes, int root) {
  Request r = fresh_request();
  auto [count, type] = counted(bytes, *r.impl_, "broadcast");
  check(MPI_Ibcast(buf, count, type, root, MPI_COMM_WORLD, &r.impl_->request), "broadcast");
  return r;
}

namespace {
// A request whose elements are `esize` bytes (a committed derived type it frees).
Request element_request(int esize, const char* what) {
  Request r = fresh_request();
  check(MPI_Type_contiguous(esize, MPI_BYTE, &r.impl_->type), what);
  check(MPI_Type_commit(&r.impl_->type), what);
  return r;
}
}  // namespace

Request alltoallv(const void* send, const int* counts, const int* displs, void* recv, int esize) {
  Request r = element_request(esize, "alltoallv");
  const int n = size(), me = rank();
  // counts | displs | recv counts | recv displs, kept with the request.
  std::vector<int>& a = r.impl_->counts;
  a.assign(static_cast<size_t>(4 * n), 0);
  for (int i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = counts[i];
    a[static_cast<size_t>(n + i)] = displs[i];
    a[static_cast<size_t>(2 * n + i)] = counts[me];
    a[static_cast<size_t>(3 * n + i)] = i * counts[me];
  }
  check(MPI_Ialltoallv(send, a.data(), a.data() + n, r.impl_->type, recv, a.data() + 2 * n, a.data() + 3 * n,
                       r.impl_->type, MPI_COMM_WORLD, &r.impl_->request),
        "alltoallv");
  return r;
}

Request allgatherv_in_place(void* buf, const int* counts, const int* displs, int esize) {
  Request r = element_request(esize, "allgatherv");
  const int n = size();
  std::vector<int>& a = r.impl_->counts;
  a.assign(counts, counts + n);
  a.insert(a.end(), displs, displs + n);
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, a.data(), a.data() + n, r.impl_->type, MPI_COMM_WORLD,
                        &r.impl_->request),
        "allgatherv");
  return r;
}

Request barrier() {
  Request r = fresh_request();
  check(MPI_Ibarrier(MPI_COMM_WORLD, &r.impl_->request), "barrier");
  return r;
}

bool test(Request& r) {
  if (!r.impl_ || r.impl_->request == MPI_REQUEST_NULL) return true;
  int done = 0;
  check(MPI_Test(&r.impl_->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void wait(Request& r, double timeout_s, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int spins = 0;
  while (!test(r)) {
    if (Clock::now() > deadline)
      OCTET_FAIL(what, ": rank ", rank(), " of ", size(), " got no answer from every rank within ", timeout_s,
                 " s (train.dist_timeout_s): another rank died, raised an error or is stuck");
    // Spin briefly (most collectives finish in microseconds), then yield the core.
    if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void abort(int code, const char* message) {
  std::fprintf(stderr, "%s\n", message);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace octet::dist::mpi
