// The CUDA runtime as octet exposes it: devices, streams, events, the caching device allocator's
// statistics and pinned host memory. This header never includes CUDA headers, and every function
// exists in a build without OCTET_CUDA (is_available() is then false; the rest throw a clear error
// or do nothing where nothing is the right answer, e.g. release_cache()).
//   if (cuda::is_available()) { Tensor g = x.to(Device::cuda()); ... cuda::synchronize(); }
//   cuda::Stream copy = cuda::Stream::create();
//   { cuda::StreamGuard on(copy); y = pinned.to(Device::cuda(), /*non_blocking=*/true); }
//   cuda::Event done; done.record(copy); done.wait(cuda::current_stream());
//   cuda::MemoryStats m = cuda::memory_stats();   // allocated / peak / cached bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/tensor.h"

namespace octet::cuda {

// True when this build has the CUDA backend and the machine has at least one usable GPU.
bool is_available();
// Throws an octet::Error naming `what` when no GPU can be used (not built, no driver, no device).
void check_available(const char* what);
// Selects the device new work and allocations go to on this thread (cudaSetDevice).
void set_device(int index);
int current_device();
// Waits for all work on the current device.
void synchronize();
// "NVIDIA H100 80GB HBM3", "13.0" (driver's CUDA version), "9.1.0" (cuDNN), or "" without CUDA.
std::string device_name(int index);
std::string driver_version();
std::string cudnn_version();

// FP32 GEMMs and convolutions on the GPU may use TF32 tensor cores (inputs rounded to a 10-bit
// mantissa) only when this is on; off by default (recipes: train.allow_tf32).
void set_allow_tf32(bool on);
bool allow_tf32();

// ---- streams and events

// A CUDA stream. The default-constructed one is the legacy default stream of the device
// current at the time of use; create() makes a new stream that does not synchronize with it.
class Stream {
 public:
  Stream() = default;
  static Stream create(int device = -1);  // -1: the current device
  void* handle() const { return handle_.get(); }
  int device() const { return device_; }
  void synchronize() const;
  // True when all work queued on the stream has finished.
  bool query() const;
  bool operator==(const Stream& o) const { return handle() == o.handle(); }

 private:
  std::shared_ptr<void> handle_;  // cudaStream_t; null for the default stream
  int device_ = -1;
};

// The stream kernels and copies of this thread go to (the default stream unless a StreamGuard
// is active).
Stream current_stream();

// Makes `s` the current stream of this thread for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A CUDA event (with timing), created on first record.
class Event {
 public:
  Event() = default;
  void record(const Stream& s = current_stream());
  // Makes `s` wait (on the device, not the host) until the recorded work is done.
  void wait(const Stream& s = current_stream()) const;
  void synchronize() const;
  bool query() const;
  // Milliseconds between this event and `end` (both recorded and finished).
  float elapsed_ms(const Event& end) const;

 private:
  std::shared_ptr<void> handle_;  // cudaEvent_t
};

// ---- memory

// The caching device allocator keeps freed blocks in size-bucketed free lists per stream and
// hands them out again to the same stream; cudaMalloc is called only on a miss. When cudaMalloc
// fails, the cache of that device is released and the allocation retried once; a second
// failure is an octet::Error saying how much was asked for and how much is free.
struct MemoryStats {
  size_t allocated = 0;       // bytes in live tensors (rounded block sizes)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since start or reset_peak()
  size_t cached = 0;          // bytes in free lists
  size_t reserved = 0;        // bytes obtained from cudaMalloc and not yet returned
  int64_t device_allocs = 0;  // cudaMalloc calls
  int64_t cache_hits = 0;     // allocations served from a free list
};
MemoryStats memory_stats(int device = -1);
void reset_peak(int device = -1);
// Returns every cached block of every device to the driver (waits for the device first).
void release_cache();
// Raw blocks from the caching allocator (device memory of `device` for the current stream).
// Used by Storage; kernels needing scratch memory use a tensor instead.
void* device_alloc(size_t nbytes, int device);
void device_free(void* p, int device);

// A host tensor in page-locked (pinned) memory, so host->device copies of it can run
// asynchronously and at full bus speed. A copy of `t` (which must be on the CPU).
Tensor pin_memory(const Tensor& t);
// True when t's storage is pinned host memory from pin_memory() or pinned_empty().
bool is_pinned(const Tensor& t);
Tensor pinned_empty(const Shape& shape, DType dtype);

// Copies between devices (or CPU<->CPU) of the same dtype and numel, both contiguous, on the
// current stream. With non_blocking false the host waits until the copy is done; with true the
// call may return before (only when the host side is pinned; otherwise it behaves as blocking).
void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking);

}  // namespace octet::cuda
