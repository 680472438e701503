#include "core/storage.h"

#include "core/allocator.h"
#include "core/error.h"

namespace octet {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  OCTET_CHECK(device.is_cpu(), "allocate: device ", device,
              " is not available in this build (CUDA storage arrives with the CUDA backend)");
  void* p = cpu_alloc(nbytes);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, device, [nbytes](void* q) { cpu_free(q, nbytes); }));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(deleter)));
}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace octet
