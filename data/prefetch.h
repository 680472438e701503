// DevicePrefetcher: a DataLoader's batches, delivered on the training device. On the CPU it is
// the loader itself (same batches, same order, nothing copied). On a GPU it keeps `depth` batches
// in flight: each CPU batch is copied into a reused pinned host buffer, then to the device with a
// non-blocking copy on a separate copy stream, so the copy of batch b+1 runs while step b
// computes; next() makes the current (compute) stream wait on the batch's copy event instead of
// making the host wait.
//   DataLoader loader(train, DataLoaderOptions().batch_size(128));
//   DevicePrefetcher batches(loader, Device::cuda(0));
//   batches.start_epoch(epoch);  while (auto b = batches.next()) step(b->inputs, b->labels);
#pragma once

#include <deque>
#include <exception>
#include <optional>
#include <vector>

#include "core/cuda.h"
#include "data/loader.h"

namespace octet {

class DevicePrefetcher {
 public:
  // `loader` must outlive the prefetcher. A CUDA `device` needs a usable GPU (an octet::Error
  // otherwise); the caller makes it the current device (cuda::set_device) before training.
  DevicePrefetcher(DataLoader& loader, Device device, int64_t depth = 2);
  ~DevicePrefetcher();  // waits for copies still in flight
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // As DataLoader::start_epoch; batches of an abandoned epoch still in flight are dropped.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch on the device, or nullopt at the end of the epoch. Work queued on the current
  // stream after this call sees the batch's data; the host does not wait for the copy. A loader
  // error is rethrown at the batch it belongs to, as DataLoader::next() does.
  std::optional<Batch> next();

  Device device() const { return device_; }
  int64_t depth() const { return depth_; }

 private:
  // Pinned host buffers that one batch at a time passes through; flat, grown when a batch needs more.
  struct Staging {
    Tensor inputs, labels;
    cuda::Event copied;  // the last copy out of these buffers; they are rewritten only after it
  };
  struct InFlight {
    std::optional<Batch> batch;  // device tensors, being written by the copy stream
    std::exception_ptr error;
    cuda::Event ready;
  };
  void fill();
  InFlight stage(const Batch& cpu);
  void drain();

  DataLoader& loader_;
  Device device_;
  int64_t depth_;
  bool started_ = false, ended_ = true;
  cuda::Stream copy_stream_;
  std::vector<Staging> staging_;
  size_t next_staging_ = 0;
  std::deque<InFlight> in_flight_;
};

}  // namespace octet
