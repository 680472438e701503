#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace octet {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  OCTET_CHECK(device.is_cpu(), "allocate: device ", device,
              " is not available in this build (CUDA storage arrives with the CUDA backend)");
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  OCTET_CHECK(p != nullptr, "allocate: out of memory allocating ", nbytes, " bytes on ", device);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, device, [](void* q) { std::free(q); }));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(deleter)));
}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace octet
