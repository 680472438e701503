// core/nccl/comm.h in a build without NCCL: CUDA tensors are then reduced through the host (MPI),
// and nothing calls these.
#ifndef OCTET_WITH_NCCL

#include "core/error.h"
#include "core/nccl/comm.h"

namespace octet::dist::nccl {

struct Request::Impl {};
Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() = default;

namespace {
[[noreturn]] void not_built(const char* what) {
  OCTET_FAIL(what, ": octet was built without NCCL (configure with CUDA and -DOCTET_NCCL=ON; NCCL comes with the "
                   "CUDA toolkit)");
}
}  // namespace

bool built() { return false; }
Request all_reduce(const Peers&, int, void*, int64_t, DType, bool) { not_built("all_reduce"); }
Request broadcast(const Peers&, int, void*, int64_t, DType, int) { not_built("broadcast"); }
Request all_gather(const Peers&, int, const void*, void*, int64_t, DType) { not_built("all_gather"); }
Request reduce_scatter(const Peers&, int, const void*, void*, int64_t, DType, bool) { not_built("reduce_scatter"); }
bool test(Request&) { return true; }
void wait(Request&, double, const char*) {}

}  // namespace octet::dist::nccl

#endif  // OCTET_WITH_NCCL
