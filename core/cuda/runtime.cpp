// The CUDA runtime behind core/cuda.h: devices, streams, events, the caching device allocator,
// pinned host memory and copies between devices.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "core/cuda/kernels.h"

namespace octet {

int cuda_device_count() {
  static const int n = [] {
    int count = 0;
    // No driver or no GPU is not an error for the caller: there are simply no CUDA devices.
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return n;
}

bool cuda_compiled() { return true; }

namespace cuda {

void fail_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  OCTET_FAIL("CUDA error '", cudaGetErrorString(e), "' (", cudaGetErrorName(e), ") in ", expr, " at ", file, ":",
             line);
}

void check_launch(const char* kernel, const char* file, int line) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    OCTET_FAIL("CUDA kernel ", kernel, " failed to launch: '", cudaGetErrorString(e), "' at ", file, ":", line);
}

bool is_available() { return cuda_device_count() > 0; }

void check_available(const char* what) {
  OCTET_CHECK(is_available(), what, ": no CUDA device is available (this build has the CUDA backend, but ",
              "cudaGetDeviceCount found no usable GPU or driver)");
}

void set_device(int index) {
  check_available("cuda::set_device");
  OCTET_CHECK(index >= 0 && index < cuda_device_count(), "cuda::set_device: device ", index, " does not exist (",
              cuda_device_count(), " CUDA devices)");
  OCTET_CUDA_CHECK(cudaSetDevice(index));
}

int current_device() {
  int d = 0;
  if (is_available()) OCTET_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  OCTET_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device_) OCTET_CUDA_CHECK(cudaSetDevice(device_));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ != device_) cudaSetDevice(previous_);  // a destructor must not throw
}

void synchronize() {
  if (is_available()) OCTET_CUDA_CHECK(cudaDeviceSynchronize());
}

std::string device_name(int index) {
  if (!is_available()) return "";
  cudaDeviceProp prop{};
  OCTET_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
    cudaGetLastError();
    return "";
  }
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string cudnn_version() {
  size_t v = cudnnGetVersion();  // major*10000 + minor*100 + patch in cuDNN 9
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

namespace {
std::atomic<bool> tf32{false};
}  // namespace

void set_allow_tf32(bool on) { tf32 = on; }
bool allow_tf32() { return tf32; }

// ---------------------------------------------------------------- streams and events

namespace {
thread_local Stream current;
}  // namespace

cudaStream_t stream() { return static_cast<cudaStream_t>(current.handle()); }

Stream Stream::create(int device) {
  check_available("cuda::Stream::create");
  Stream s;
  s.device_ = device < 0 ? current_device() : device;
  int previous = current_device();
  OCTET_CUDA_CHECK(cudaSetDevice(s.device_));
  cudaStream_t raw = nullptr;
  OCTET_CUDA_CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));
  OCTET_CUDA_CHECK(cudaSetDevice(previous));
  s.handle_ = std::shared_ptr<void>(raw, [](void* p) { cudaStreamDestroy(static_cast<cudaStream_t>(p)); });
  return s;
}

void Stream::synchronize() const {
  check_available("cuda::Stream::synchronize");
  OCTET_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle())));
}

bool Stream::query() const {
  check_available("cuda::Stream::query");
  cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(handle()));
  if (e == cudaErrorNotReady) return false;
  OCTET_CUDA_CHECK(e);
  return true;
}

Stream current_stream() { return current; }

StreamGuard::StreamGuard(const Stream& s) : previous_(current) { current = s; }
StreamGuard::~StreamGuard() { current = previous_; }

void Event::record(const Stream& s) {
  check_available("cuda::Event::record");
  if (!handle_) {
    cudaEvent_t e = nullptr;
    OCTET_CUDA_CHECK(cudaEventCreate(&e));
    handle_ = std::shared_ptr<void>(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  }
  OCTET_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_.get()), static_cast<cudaStream_t>(s.handle())));
}

void Event::wait(const Stream& s) const {
  if (!handle_) return;  // never recorded: nothing to wait for
  OCTET_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()), static_cast<cudaEvent_t>(handle_.get()), 0));
}

void Event::synchronize() const {
  if (handle_) OCTET_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_.get())));
}

bool Event::query() const {
  if (!handle_) return true;
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle_.get()));
  if (e == cudaErrorNotReady) return false;
  OCTET_CUDA_CHECK(e);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  OCTET_CHECK(handle_ && end.handle_, "cuda::Event::elapsed_ms: both events must have been recorded");
  float ms = 0;
  OCTET_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_.get()),
                                        static_cast<cudaEvent_t>(end.handle_.get())));
  return ms;
}

// ---------------------------------------------------------------- the caching allocator

namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeGranule = size_t{2} << 20;

// Small requests round to 512 bytes, large ones to 2 MiB, so that nearby sizes share a bucket.
size_t bucket_size(size_t nbytes) {
  size_t g = nbytes < kLargeThreshold ? kSmallGranule : kLargeGranule;
  return std::max<size_t>(g, (nbytes + g - 1) / g * g);
}

struct Block {
  size_t size;
  cudaStream_t stream;
};

struct DeviceCache {
  std::mutex mutex;
  // Free blocks per stream, by size. A block goes back to the stream it was allocated on, so
  // work queued on that stream before the free is ordered before any reuse.
  std::map<cudaStream_t, std::multimap<size_t, void*>> free;
  std::unordered_map<void*, Block> live;
  MemoryStats stats;

  // Returns every free block to the driver. Caller holds the lock.
  void release() {
    for (auto& [s, blocks] : free)
      for (auto& [size, p] : blocks) {
        cudaFree(p);
        stats.cached -= size;
        stats.reserved -= size;
      }
    free.clear();
  }
};

std::vector<DeviceCache*>& caches() {
  // Never destroyed: tensors may outlive static destruction.
  static auto* all = [] {
    auto* v = new std::vector<DeviceCache*>();
    for (int i = 0; i < cuda_device_count(); ++i) v->push_back(new DeviceCache());
    return v;
  }();
  return *all;
}

DeviceCache& cache_of(int device, const char* what) {
  check_available(what);
  OCTET_CHECK(device >= 0 && device < static_cast<int>(caches().size()), what, ": device cuda:", device,
              " does not exist (", caches().size(), " CUDA devices)");
  return *caches()[device];
}

int resolve(int device) { return device < 0 ? current_device() : device; }

std::string mib(size_t bytes) { return std::to_string(bytes / (1024.0 * 1024.0)).substr(0, 10) + " MiB"; }

}  // namespace

void* device_alloc(size_t nbytes, int device) {
  DeviceCache& c = cache_of(device, "cuda allocate");
  const size_t size = bucket_size(nbytes);
  cudaStream_t s = stream();
  std::lock_guard<std::mutex> lock(c.mutex);
  void* p = nullptr;
  auto& free = c.free[s];
  // Best fit in this stream's list, but never a block more than twice the request (no splitting).
  auto it = free.lower_bound(size);
  if (it != free.end() && it->first <= 2 * size) {
    p = it->second;
    c.live[p] = {it->first, s};
    c.stats.cached -= it->first;
    c.stats.allocated += it->first;
    ++c.stats.cache_hits;
    free.erase(it);
  } else {
    int previous = 0;
    OCTET_CUDA_CHECK(cudaGetDevice(&previous));
    OCTET_CUDA_CHECK(cudaSetDevice(device));
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      cudaDeviceSynchronize();
      c.release();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaSetDevice(previous);
      OCTET_FAIL("CUDA out of memory on cuda:", device, ": tried to allocate ", mib(size), "; the device has ",
                 mib(free_bytes), " free of ", mib(total_bytes), "; octet holds ", mib(c.stats.allocated),
                 " in tensors (", cudaGetErrorString(e), ")");
    }
    OCTET_CUDA_CHECK(cudaSetDevice(previous));
    c.live[p] = {size, s};
    c.stats.allocated += size;
    c.stats.reserved += size;
    ++c.stats.device_allocs;
  }
  c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
  return p;
}

void device_free(void* p, int device) {
  if (p == nullptr) return;
  DeviceCache& c = *caches()[device];
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.live.find(p);
  if (it == c.live.end()) return;  // not ours: cannot happen through Storage
  c.stats.allocated -= it->second.size;
  c.stats.cached += it->second.size;
  c.free[it->second.stream].emplace(it->second.size, p);
  c.live.erase(it);
}

MemoryStats memory_stats(int device) {
  if (!is_available()) return {};
  DeviceCache& c = cache_of(resolve(device), "cuda::memory_stats");
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void reset_peak(int device) {
  if (!is_available()) return;
  DeviceCache& c = cache_of(resolve(device), "cuda::reset_peak");
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.peak_allocated = c.stats.allocated;
}

void release_cache() {
  if (!is_available()) return;
  for (int d = 0; d < static_cast<int>(caches().size()); ++d) {
    DeviceCache& c = *caches()[d];
    std::lock_guard<std::mutex> lock(c.mutex);
    int previous = current_device();
    OCTET_CUDA_CHECK(cudaSetDevice(d));
    OCTET_CUDA_CHECK(cudaDeviceSynchronize());
    c.release();
    OCTET_CUDA_CHECK(cudaSetDevice(previous));
  }
}

// ---------------------------------------------------------------- pinned memory and copies

namespace {
std::mutex pinned_mutex;
std::unordered_map<const void*, size_t>& pinned_blocks() {
  static auto* m = new std::unordered_map<const void*, size_t>();
  return *m;
}
}  // namespace

Tensor pinned_empty(const Shape& shape, DType dtype) {
  check_available("cuda::pinned_empty");
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = nullptr;
  OCTET_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(nbytes, 1), cudaHostAllocPortable));
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned_blocks()[p] = nbytes;
  }
  auto storage = Storage::wrap(p, nbytes, Device::cpu(), [](void* q) {
    {
      std::lock_guard<std::mutex> lock(pinned_mutex);
      pinned_blocks().erase(q);
    }
    cudaFreeHost(q);
  });
  return from_storage(std::move(storage), shape, dtype);
}

Tensor pin_memory(const Tensor& t) {
  OCTET_CHECK(t.defined() && t.device().is_cpu(), "pin_memory: expected a defined CPU tensor");
  Tensor out = pinned_empty(t.shape(), t.dtype());
  out.copy_(t.detach());
  return out;
}

bool is_pinned(const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu()) return false;
  std::lock_guard<std::mutex> lock(pinned_mutex);
  return pinned_blocks().count(t.storage()->data()) != 0;
}

void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  OCTET_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel() && dst.is_contiguous() &&
                  src.is_contiguous(),
              "copy_between_devices: expected contiguous tensors of the same dtype and size, got ", dst.dtype(),
              " ", dst.shape(), " and ", src.dtype(), " ", src.shape());
  const size_t nbytes = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype());
  if (nbytes == 0) return;
  const bool to_host = dst.device().is_cpu(), from_host = src.device().is_cpu();
  cudaMemcpyKind kind = from_host ? (to_host ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                                  : (to_host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  OCTET_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes, kind, stream()));
  if (kind == cudaMemcpyDeviceToDevice) return;  // ordered on the stream like any kernel
  // The host may touch host memory only once the copy is done. With non_blocking and a pinned
  // host side the caller orders that itself (an Event or a stream synchronize).
  const bool host_pinned = is_pinned(to_host ? dst : src);
  if (!(non_blocking && host_pinned)) OCTET_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace cuda
}  // namespace octet
