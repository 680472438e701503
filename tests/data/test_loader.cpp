// DataLoader: every batch is a pure function of (seed, epoch, batch index), whatever the worker
// count or the batch an epoch starts at; errors in workers reach the consumer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "core/octet.h"
#include "data/loader.h"

namespace octet {
namespace {

// Example i: input [1,2,2] = {i, three uniform draws from the augmentation generator}, label
// i % 5; throws for `bad_index`.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n, int64_t bad_index = -1) : n_(n), bad_index_(bad_index) {}
  int64_t size() const override { return n_; }
  Shape input_shape() const override { return {1, 2, 2}; }
  int64_t num_classes() const override { return 5; }
  Example get(int64_t index, Generator& rng) const override {
    OCTET_CHECK(index != bad_index_, "counting: example ", index, " is corrupt");
    Tensor x = rand({1, 2, 2}, {}, &rng);
    x.data<float>()[0] = static_cast<float>(index);
    return {x, index % 5};
  }

 private:
  int64_t n_, bad_index_;
};

struct Epoch {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<int64_t>> labels;
};

Epoch run_epoch(DataLoader& loader, int64_t epoch, int64_t first_batch = 0) {
  Epoch out;
  loader.start_epoch(epoch, first_batch);
  while (std::optional<Batch> b = loader.next()) {
    EXPECT_EQ(b->inputs.dim(), 4);
    EXPECT_EQ(b->labels.dtype(), DType::i64);
    EXPECT_EQ(b->inputs.size(0), b->labels.size(0));
    out.inputs.push_back(b->inputs.to_vector<float>());
    out.labels.push_back(b->labels.to_vector<int64_t>());
  }
  return out;
}

// Dataset indices visited by an epoch, in order (input element 0 of every example).
std::vector<int64_t> visited(const Epoch& e) {
  std::vector<int64_t> idx;
  for (const auto& in : e.inputs)
    for (size_t k = 0; k < in.size(); k += 4) idx.push_back(static_cast<int64_t>(in[k]));
  return idx;
}

TEST(DataLoader, SameBatchesForAnyWorkerCount) {
  auto ds = std::make_shared<CountingDataset>(37);
  auto opts = DataLoaderOptions().batch_size(5).seed(9);
  DataLoader serial(ds, DataLoaderOptions(opts).workers(0));
  EXPECT_EQ(serial.num_batches(), 8);
  Epoch want = run_epoch(serial, 3);
  ASSERT_EQ(want.inputs.size(), 8u);
  EXPECT_EQ(want.labels.back().size(), 2u);
  for (int64_t workers : {1, 3}) {
    for (int64_t prefetch : {1, 4}) {
      DataLoader loader(ds, DataLoaderOptions(opts).workers(workers).prefetch(prefetch));
      Epoch got = run_epoch(loader, 3);
      EXPECT_EQ(got.inputs, want.inputs) << workers << " workers";
      EXPECT_EQ(got.labels, want.labels) << workers << " workers";
    }
  }
}

TEST(DataLoader, ResumeMidEpoch) {
  auto ds = std::make_shared<CountingDataset>(37);
  for (int64_t workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).seed(1).workers(workers));
    Epoch full = run_epoch(loader, 2);
    for (int64_t k : {1, 5, 9, 10}) {
      Epoch part = run_epoch(loader, 2, k);
      ASSERT_EQ(part.inputs.size(), full.inputs.size() - static_cast<size_t>(k));
      for (size_t i = 0; i < part.inputs.size(); ++i) {
        EXPECT_EQ(part.inputs[i], full.inputs[static_cast<size_t>(k) + i]);
        EXPECT_EQ(part.labels[i], full.labels[static_cast<size_t>(k) + i]);
      }
    }
    // Abandoning an epoch half way (batches still prefetched) and restarting is clean.
    loader.start_epoch(2);
    loader.next();
    EXPECT_EQ(run_epoch(loader, 2).inputs, full.inputs);
    EXPECT_THROW(loader.start_epoch(2, 11), Error);
  }
}

TEST(DataLoader, ShuffleAndEpochs) {
  auto ds = std::make_shared<CountingDataset>(37);
  DataLoader ordered(ds, DataLoaderOptions().batch_size(8).shuffle(false).workers(2));
  std::vector<int64_t> in_order(37);
  for (int64_t i = 0; i < 37; ++i) in_order[static_cast<size_t>(i)] = i;
  Epoch e = run_epoch(ordered, 0);
  EXPECT_EQ(visited(e), in_order);
  EXPECT_EQ(e.labels[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2}));

  DataLoader shuffled(ds, DataLoaderOptions().batch_size(8).workers(2).seed(4));
  std::vector<int64_t> e0 = visited(run_epoch(shuffled, 0)), e1 = visited(run_epoch(shuffled, 1));
  EXPECT_NE(e0, in_order);
  EXPECT_NE(e0, e1);
  for (auto order : {e0, e1}) {  // each epoch visits every example once
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, in_order);
  }
  // The same example gets different augmentation in different epochs, the same in the same epoch.
  EXPECT_NE(sample_seed(4, 0, 5), sample_seed(4, 1, 5));
  EXPECT_EQ(visited(run_epoch(shuffled, 1)), e1);
  DataLoader other_seed(ds, DataLoaderOptions().batch_size(8).workers(0).seed(5));
  EXPECT_NE(visited(run_epoch(other_seed, 0)), e0);
}

TEST(DataLoader, DropLast) {
  auto ds = std::make_shared<CountingDataset>(37);
  DataLoader loader(ds, DataLoaderOptions().batch_size(5).drop_last(true).workers(2));
  EXPECT_EQ(loader.num_batches(), 7);
  Epoch e = run_epoch(loader, 0);
  ASSERT_EQ(e.labels.size(), 7u);
  for (const auto& l : e.labels) EXPECT_EQ(l.size(), 5u);
  DataLoader exact(std::make_shared<CountingDataset>(10), DataLoaderOptions().batch_size(5).drop_last(true));
  EXPECT_EQ(exact.num_batches(), 2);
  DataLoader tiny(std::make_shared<CountingDataset>(3), DataLoaderOptions().batch_size(5).drop_last(true));
  EXPECT_EQ(run_epoch(tiny, 0).labels.size(), 0u);
}

TEST(DataLoader, WorkerErrorsReachTheConsumer) {
  auto ds = std::make_shared<CountingDataset>(20, /*bad_index=*/13);
  for (int64_t workers : {0, 1, 3}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).shuffle(false).workers(workers));
    loader.start_epoch(0);
    int64_t good = 0;
    bool failed = false;
    for (;;) {
      try {
        if (!loader.next()) break;
        ++good;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("example 13 is corrupt"), std::string::npos) << e.what();
        failed = true;
      }
    }
    EXPECT_TRUE(failed);
    EXPECT_EQ(good, 4);  // batches 0, 1, 2 and 4; batch 3 holds example 13
  }
}

TEST(DataLoader, BadUse) {
  auto ds = std::make_shared<CountingDataset>(5);
  EXPECT_THROW(DataLoader(nullptr), Error);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions().batch_size(0)), Error);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions().workers(-1)), Error);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions().prefetch(0)), Error);
  DataLoader loader(ds);
  EXPECT_THROW(loader.next(), Error);  // before start_epoch
}

}  // namespace
}  // namespace octet
