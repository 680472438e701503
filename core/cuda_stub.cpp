// core/cuda.h in a build without the CUDA backend: no devices; queries answer "nothing", and
// anything that needs a GPU throws an octet::Error saying the backend is not built.
#ifndef OCTET_WITH_CUDA

#include "core/cuda.h"
#include "core/error.h"

namespace octet {

int cuda_device_count() { return 0; }
bool cuda_compiled() { return false; }

namespace cuda {

[[noreturn]] static void not_built(const char* what) {
  OCTET_FAIL(what, ": the CUDA backend is not built (configure with -DOCTET_CUDA=ON)");
}

bool is_available() { return false; }
void check_available(const char* what) { not_built(what); }
void set_device(int) { not_built("cuda::set_device"); }
int current_device() { return 0; }
void synchronize() {}
std::string device_name(int) { return ""; }
std::string driver_version() { return ""; }
std::string cudnn_version() { return ""; }

void set_allow_tf32(bool) {}
bool allow_tf32() { return false; }

Stream Stream::create(int) { not_built("cuda::Stream::create"); }
void Stream::synchronize() const {}
bool Stream::query() const { return true; }
Stream current_stream() { return {}; }
StreamGuard::StreamGuard(const Stream&) {}
StreamGuard::~StreamGuard() = default;

void Event::record(const Stream&) { not_built("cuda::Event::record"); }
void Event::wait(const Stream&) const {}
void Event::synchronize() const {}
bool Event::query() const { return true; }
float Event::elapsed_ms(const Event&) const { not_built("cuda::Event::elapsed_ms"); }

MemoryStats memory_stats(int) { return {}; }
void reset_peak(int) {}
void release_cache() {}
void* device_alloc(size_t, int) { not_built("cuda allocate"); }
void device_free(void*, int) {}

Tensor pin_memory(const Tensor&) { not_built("pin_memory"); }
bool is_pinned(const Tensor&) { return false; }
Tensor pinned_empty(const Shape&, DType) { not_built("pinned_empty"); }
void copy_between_devices(const Tensor&, const Tensor&, bool) { not_built("copy between devices"); }

}  // namespace cuda
}  // namespace octet

#endif  // OCTET_WITH_CUDA
