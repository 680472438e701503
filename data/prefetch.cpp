#include "data/prefetch.h"

#include <utility>

#include "core/error.h"

namespace octet {

namespace {

// `like`'s shape and dtype over the front of the flat pinned buffer `flat`, which is replaced by a
// larger one when it is too small (the caller has made sure no copy still reads it).
Tensor pinned_like(Tensor& flat, const Tensor& like) {
  if (!flat.defined() || flat.dtype() != like.dtype() || flat.numel() < like.numel())
    flat = cuda::pinned_empty({like.numel()}, like.dtype());
  return flat.narrow(0, 0, like.numel()).view(like.shape());
}

}  // namespace

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, Device device, int64_t depth)
    : loader_(loader), device_(device), depth_(depth) {
  OCTET_CHECK(depth_ >= 1, "DevicePrefetcher: expected depth >= 1, got ", depth_);
  if (device_.is_cpu()) return;
  cuda::check_available(("DevicePrefetcher: device " + device_.str()).c_str());
  OCTET_CHECK(device_.index >= 0 && device_.index < cuda_device_count(), "DevicePrefetcher: device ", device_,
              " does not exist (", cuda_device_count(), " CUDA devices)");
  copy_stream_ = cuda::Stream::create(device_.index);
  // One more buffer than batches in flight, so staging the next batch rarely waits for a copy.
  staging_.resize(static_cast<size_t>(depth_) + 1);
}

DevicePrefetcher::~DevicePrefetcher() {
  try {
    drain();
    for (Staging& s : staging_) s.copied.synchronize();  // before the pinned buffers are freed
  } catch (...) {  // a CUDA error while tearing down: nothing better to do than to go on
  }
}

void DevicePrefetcher::start_epoch(int64_t epoch, int64_t first_batch) {
  drain();
  loader_.start_epoch(epoch, first_batch);
  started_ = true;
  ended_ = false;
}

std::optional<Batch> DevicePrefetcher::next() {
  if (device_.is_cpu()) return loader_.next();
  OCTET_CHECK(started_, "DevicePrefetcher::next: call start_epoch(epoch) first");
  fill();
  if (in_flight_.empty()) return std::nullopt;
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  fill();  // the copy of the following batch is queued now and runs while this batch's step computes
  if (f.error) std::rethrow_exception(f.error);
  f.ready.wait(cuda::current_stream());
  return std::move(f.batch);
}

void DevicePrefetcher::fill() {
  while (!ended_ && static_cast<int64_t>(in_flight_.size()) < depth_) {
    InFlight f;
    try {
      std::optional<Batch> cpu = loader_.next();
      if (!cpu) {
        ended_ = true;
        break;
      }
      f = stage(*cpu);
    } catch (...) {
      f = InFlight();
      f.error = std::current_exception();
    }
    in_flight_.push_back(std::move(f));
  }
}

DevicePrefetcher::InFlight DevicePrefetcher::stage(const Batch& cpu) {
  Staging& s = staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % staging_.size();
  s.copied.synchronize();  // the host rewrites pinned memory only once its last copy has finished
  Tensor host_inputs = pinned_like(s.inputs, cpu.inputs);
  Tensor host_labels = pinned_like(s.labels, cpu.labels);
  host_inputs.copy_(cpu.inputs);
  host_labels.copy_(cpu.labels);

  // The device tensors come from the compute stream's cache, where kernels queued before a block
  // was freed may still be using it: the copy stream first waits for the compute stream's work so
  // far. That work is the steps before the current one, so the copy still overlaps with it.
  Batch dev;
  dev.inputs = empty(cpu.inputs.shape(), TensorOptions(cpu.inputs.dtype()).device(device_));
  dev.labels = empty(cpu.labels.shape(), TensorOptions(cpu.labels.dtype()).device(device_));
  cuda::Event fence;
  fence.record(cuda::current_stream());
  fence.wait(copy_stream_);
  InFlight f;
  {
    cuda::StreamGuard on(copy_stream_);
    cuda::copy_between_devices(dev.inputs, host_inputs, /*non_blocking=*/true);
    cuda::copy_between_devices(dev.labels, host_labels, /*non_blocking=*/true);
    f.ready.record(copy_stream_);
  }
  s.copied = f.ready;  // the same CUDA event: the batch is ready exactly when its buffers are free
  f.batch = std::move(dev);
  return f;
}

void DevicePrefetcher::drain() {
  for (InFlight& f : in_flight_) f.ready.synchronize();  // no copy may still write a freed block
  in_flight_.clear();
  ended_ = true;
}

}  // namespace octet
