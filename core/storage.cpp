#include "core/storage.h"

#include "core/allocator.h"
#include "core/cuda.h"
#include "core/error.h"

namespace octet {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (device.is_cuda()) {
    OCTET_CHECK(cuda_compiled(), "allocate: device ", device,
                " requested, but the CUDA backend is not built (configure with -DOCTET_CUDA=ON)");
    const int index = device.index;
    void* p = cuda::device_alloc(nbytes, index);
    return std::shared_ptr<Storage>(new Storage(p, nbytes, device, [index](void* q) { cuda::device_free(q, index); }));
  }
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
