// Storage: one reference-counted block of memory on a device, shared by all views of it.
// CPU memory is 64-byte aligned (a cache line, and the widest AVX-512 load).
//   auto s = Storage::allocate(1024, Device::cpu());  float* p = static_cast<float*>(s->data());
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace octet {

class Storage {
 public:
  static constexpr size_t kAlignment = 64;

  // Allocates `nbytes` on `device`. Zero bytes is allowed (data() is then a valid, unusable pointer).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere; `deleter` (may be empty) runs when the last view goes away.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Counts in-place writes through any view (copy_, fill_, ...), so autograd can tell that a
  // tensor it saved for backward has changed since.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}
  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace octet
