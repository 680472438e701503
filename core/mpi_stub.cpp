// core/mpi/comm.h in a build without MPI: one process, and collectives that need another rank
// throw an octet::Error saying what is missing.
#ifndef OCTET_WITH_MPI

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/mpi/comm.h"

namespace octet::dist::mpi {

struct Request::Impl {};
Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() = default;

namespace {
[[noreturn]] void not_built(const char* what) {
  OCTET_FAIL(what,
             ": octet was built without MPI (install libopenmpi-dev and openmpi-bin, e.g. with "
             "tools/scripts/setup.sh, and configure again with -DOCTET_MPI=ON)");
}
}  // namespace

bool built() { return false; }
void init() {}
bool initialized() { return false; }
int rank() { return 0; }
int size() { return 1; }
int local_rank() { return 0; }
std::vector<std::string> host_names() { return {}; }
Request alltoall(const void*, void*, int64_t) { not_built("alltoall"); }
Request allgather(const void*, void*, int64_t) { not_built("allgather"); }
Request broadcast(void*, int64_t, int) { not_built("broadcast"); }
Request alltoallv(const void*, const int*, const int*, void*, int) { not_built("alltoallv"); }
Request allgatherv_in_place(void*, const int*, const int*, int) { not_built("allgatherv"); }
Request barrier() { not_built("barrier"); }
bool test(Request&) { return true; }
void wait(Request&, double, const char*) {}
void throw_timed_out(const char* what, double timeout_s) {
  OCTET_FAIL(what, ": got no answer from every rank within ", timeout_s, " s (train.dist_timeout_s)");
}
void answer_roll_call() {}

void abort(int code, const char* message) {
  std::fprintf(stderr, "%s\n", message);
  std::_Exit(code);
}

}  // namespace octet::dist::mpi

#endif  // OCTET_WITH_MPI
