// DataLoader: shuffles, augments and batches a Dataset on worker threads ahead of the consumer.
// Every batch is a pure function of (seed, epoch, batch index): the permutation comes from
// (seed, epoch) and example i's augmentation Generator from sample_seed(seed, epoch, i), so the
// batches are the same for any worker count and when an epoch resumes at a later batch.
//   DataLoader loader(train, DataLoaderOptions().batch_size(128).workers(2).seed(1));
//   loader.start_epoch(epoch);
//   while (std::optional<Batch> b = loader.next()) step(b->inputs, b->labels);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace octet {

struct Batch {
  Tensor inputs;  // f32 [B,C,H,W]
  Tensor labels;  // i64 [B]
};

struct DataLoaderOptions {
  int64_t batch_size_ = 64;
  bool shuffle_ = true;
  bool drop_last_ = false;  // drop the last batch when it would be smaller than batch_size
  int64_t workers_ = 2;     // 0: everything on the calling thread, inside next()
  int64_t prefetch_ = 4;    // batches prepared ahead of the consumer
  uint64_t seed_ = 0;
  // Data-parallel training: this process is shard `shard_rank_` of `shard_count_`. batch_size_ is
  // then the global batch: every process sees the same batches of the same permutation and takes
  // its own contiguous part of each (batch_size / shard_count examples; of a smaller last batch
  // of m, examples [m * rank / count, m * (rank + 1) / count)), so the shards of a batch are
  // disjoint and together are the batch one process would get.
  int64_t shard_rank_ = 0;
  int64_t shard_count_ = 1;
  DataLoaderOptions& batch_size(int64_t v) {
    batch_size_ = v;
    return *this;
  }
  DataLoaderOptions& shuffle(bool v) {
    shuffle_ = v;
    return *this;
  }
  DataLoaderOptions& drop_last(bool v) {
    drop_last_ = v;
    return *this;
  }
  DataLoaderOptions& workers(int64_t v) {
    workers_ = v;
    return *this;
  }
  DataLoaderOptions& prefetch(int64_t v) {
    prefetch_ = v;
    return *this;
  }
  DataLoaderOptions& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }
  DataLoaderOptions& shard(int64_t rank, int64_t count) {
    shard_rank_ = rank;
    shard_count_ = count;
    return *this;
  }
};

// The seed of the augmentation Generator of dataset example `index` in `epoch`.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);
// The order in which an epoch visits the dataset: a permutation of [0, n) drawn from (seed, epoch).
std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t n);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  ~DataLoader();  // stops and joins the workers
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t num_batches() const;
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }

  // Begins `epoch` at batch `first_batch` (to resume mid-epoch), abandoning any epoch in progress.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch, or nullopt at its end. An error while building a batch (a corrupt
  // image, ...) is rethrown here as it was thrown; the epoch then goes on with the following batch.
  std::optional<Batch> next();

 private:
  // A prepared batch, or the exception its preparation threw.
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  Batch make_batch(int64_t b) const;
  void worker_loop();
  void stop_workers();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  bool started_ = false;
  std::vector<int64_t> order_;  // dataset index of each position in the epoch

  // Batches [next_, end_) remain; workers claim batch claim_ while claim_ < next_ + prefetch.
  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers wait for room in the prefetch window
  std::condition_variable ready_cv_;  // the consumer waits for batch next_
  bool stop_ = false;
  int64_t next_ = 0, end_ = 0, claim_ = 0;
  std::map<int64_t, Slot> ready_;
  std::vector<std::thread> workers_;
};

}  // namespace octet
