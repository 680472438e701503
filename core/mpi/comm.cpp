// The MPI side of core/mpi/comm.h (built with OCTET_MPI): Open MPI's non-blocking collectives,
// finished by polling MPI_Test against a deadline.
#include "core/mpi/comm.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
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

// ---- the roll call: which ranks answer, after a collective timed out
// A communicator of its own (so its messages never meet a collective's), each rank's host name,
// and a standing receive for pings: every rank answers pings while it waits in a collective (and
// while it calls the roll itself), so a live rank stuck in the same collective answers, while a
// dead rank, or one behind a cut link, does not.
constexpr int kPing = 1, kAck = 2;

struct RollCall {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<std::string> hosts;
  MPI_Request ping = MPI_REQUEST_NULL;
  int ping_seq = 0;  // the received ping's number, echoed by the answer
  int seq = 0;       // this rank's roll calls so far
  // Sends in flight (pings and answers) with the buffers they read until they finish; a send to a
  // dead rank may never finish, and its buffer stays with it.
  std::deque<std::pair<std::unique_ptr<int>, MPI_Request>> sends;

  void send(int value, int to, int tag) {
    for (auto it = sends.begin(); it != sends.end();) {  // drop the finished ones
      int done = 0;
      MPI_Test(&it->second, &done, MPI_STATUS_IGNORE);
      it = done ? sends.erase(it) : std::next(it);
    }
    auto buffer = std::make_unique<int>(value);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Isend(buffer.get(), 1, MPI_INT, to, tag, comm, &r);
    sends.emplace_back(std::move(buffer), r);
  }
};

RollCall& roll_call_state() {
  static RollCall state;
  return state;
}

void post_ping_receive(RollCall& rc) { MPI_Irecv(&rc.ping_seq, 1, MPI_INT, MPI_ANY_SOURCE, kPing, rc.comm, &rc.ping); }

void start_roll_call_service() {
  RollCall& rc = roll_call_state();
  if (MPI_Comm_dup(MPI_COMM_WORLD, &rc.comm) != MPI_SUCCESS) return;
  MPI_Comm_set_errhandler(rc.comm, MPI_ERRORS_RETURN);
  int n = 1, len = 0;
  MPI_Comm_size(rc.comm, &n);
  std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
  MPI_Get_processor_name(name.data(), &len);
  std::vector<char> all(static_cast<size_t>(n) * name.size());
  MPI_Allgather(name.data(), static_cast<int>(name.size()), MPI_CHAR, all.data(), static_cast<int>(name.size()),
                MPI_CHAR, rc.comm);
  for (int r = 0; r < n; ++r) rc.hosts.emplace_back(all.data() + static_cast<size_t>(r) * name.size());
  post_ping_receive(rc);
}

}  // namespace

// Answers every ping that has arrived.
void answer_roll_call() {
  RollCall& rc = roll_call_state();
  if (rc.comm == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Test(&rc.ping, &arrived, &status) != MPI_SUCCESS || !arrived) return;
    rc.send(rc.ping_seq, status.MPI_SOURCE, kAck);
    post_ping_receive(rc);
  }
}

namespace {

// "rank 2 (host3), rank 5 (host4)": the ranks that do not answer a ping within window_s.
std::string silent_ranks(double window_s) {
  RollCall& rc = roll_call_state();
  if (rc.comm == MPI_COMM_NULL) return "";
  int n = 1, me = 0;
  MPI_Comm_size(rc.comm, &n);
  MPI_Comm_rank(rc.comm, &me);
  const int seq = ++rc.seq;
  std::vector<MPI_Request> acks(static_cast<size_t>(n), MPI_REQUEST_NULL);
  std::vector<int> got(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    rc.send(seq, r, kPing);
    MPI_Irecv(&got[static_cast<size_t>(r)], 1, MPI_INT, r, kAck, rc.comm, &acks[static_cast<size_t>(r)]);
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(window_s);
  std::vector<bool> answered(static_cast<size_t>(n), false);
  answered[static_cast<size_t>(me)] = true;
  while (Clock::now() < deadline && std::count(answered.begin(), answered.end(), false) > 0) {
    answer_roll_call();
    for (int r = 0; r < n; ++r) {
      auto& a = acks[static_cast<size_t>(r)];
      if (answered[static_cast<size_t>(r)] || a == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&a, &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      if (got[static_cast<size_t>(r)] == seq)
        answered[static_cast<size_t>(r)] = true;
      else  // the late answer to an earlier roll call: wait for this one's
        MPI_Irecv(&got[static_cast<size_t>(r)], 1, MPI_INT, r, kAck, rc.comm, &a);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string out;
  for (int r = 0; r < n; ++r) {
    auto& a = acks[static_cast<size_t>(r)];
    if (a != MPI_REQUEST_NULL && !answered[static_cast<size_t>(r)]) {  // withdrawn, so a late answer finds none
      MPI_Cancel(&a);
      MPI_Request_free(&a);
    }
    if (answered[static_cast<size_t>(r)]) continue;
    out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " (" +
           rc.hosts[static_cast<size_t>(r)] + ")";
  }
  return out;
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
  start_roll_call_service();
  // MPI_Finalize at exit, so a clean exit is not mistaken for a dead rank.
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    RollCall& rc = roll_call_state();
    if (rc.ping != MPI_REQUEST_NULL) {  // no receive may be pending at MPI_Finalize
      MPI_Cancel(&rc.ping);
      MPI_Wait(&rc.ping, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
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
    if (Clock::now() > deadline) throw_timed_out(what, timeout_s);
    // Spin briefly (most collectives finish in microseconds), then yield the core.
    if (++spins > 1000) {
      answer_roll_call();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

std::vector<std::string> host_names() { return roll_call_state().hosts; }

void throw_timed_out(const char* what, double timeout_s) {
  // The roll call: a quarter of the time-out, 0.5 to 5 s, for the others to answer.
  const double window = std::clamp(timeout_s / 4, 0.5, 5.0);
  const std::string silent = silent_ranks(window);
  const RollCall& rc = roll_call_state();
  const int me = rank();
  const std::string where =
      static_cast<size_t>(me) < rc.hosts.size() ? " (" + rc.hosts[static_cast<size_t>(me)] + ")" : "";
  if (!silent.empty())
    OCTET_FAIL(what, ": rank ", me, where, " of ", size(), " got no answer from every rank within ", timeout_s,
               " s (train.dist_timeout_s); no answer within ", window, " s from ", silent,
               ": dead, its host or link down, or stuck outside a collective");
  OCTET_FAIL(what, ": rank ", me, where, " of ", size(), " got no answer from every rank within ", timeout_s,
             " s (train.dist_timeout_s), though every rank answers a roll call: one is slow, or raised an error");
}

void abort(int code, const char* message) {
  std::fprintf(stderr, "%s\n", message);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace octet::dist::mpi
