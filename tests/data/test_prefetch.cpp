// DevicePrefetcher: on the CPU it is the DataLoader itself; on a GPU it delivers the same batches,
// bit for bit, whatever the depth, the batch an epoch starts at, or the work the consumer queues
// and frees between batches (the copy stream must never write into memory still in use).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "data/prefetch.h"

namespace octet {
namespace {

// Example i: input [2,3,3] filled from the augmentation generator with element 0 = i; label
// i % 7; throws for `bad_index`.
class NumberedDataset : public Dataset {
 public:
  explicit NumberedDataset(int64_t n, int64_t bad_index = -1) : n_(n), bad_index_(bad_index) {}
  int64_t size() const override { return n_; }
  Shape input_shape() const override { return {2, 3, 3}; }
  int64_t num_classes() const override { return 7; }
  Example get(int64_t index, Generator& rng) const override {
    OCTET_CHECK(index != bad_index_, "numbered: example ", index, " is corrupt");
    Tensor x = rand({2, 3, 3}, {}, &rng);
    x.data<float>()[0] = static_cast<float>(index);
    return {x, index % 7};
  }

 private:
  int64_t n_, bad_index_;
};

struct Seen {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<int64_t>> labels;
  std::vector<std::string> errors;  // "" for a good batch
};

// Every batch of one epoch; `between` runs after each batch (on the consumer's stream).
template <class Source>
Seen collect(
    Source& source, int64_t epoch, int64_t first_batch, Device want, const std::function<void()>& between = [] {}) {
  Seen out;
  source.start_epoch(epoch, first_batch);
  for (;;) {
    std::optional<Batch> b;
    try {
      b = source.next();
    } catch (const Error& e) {
      out.errors.push_back(e.what());
      out.inputs.emplace_back();
      out.labels.emplace_back();
      continue;
    }
    if (!b) break;
    EXPECT_EQ(b->inputs.device(), want);
    EXPECT_EQ(b->labels.device(), want);
    between();
    out.errors.emplace_back();
    out.inputs.push_back(b->inputs.to_vector<float>());
    out.labels.push_back(b->labels.to_vector<int64_t>());
  }
  return out;
}

void expect_same(const Seen& a, const Seen& b, const std::string& what) {
  ASSERT_EQ(a.inputs.size(), b.inputs.size()) << what;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i], b.inputs[i]) << what << ": batch " << i;  // exact: copies only
    EXPECT_EQ(a.labels[i], b.labels[i]) << what << ": batch " << i;
    EXPECT_EQ(a.errors[i], b.errors[i]) << what << ": batch " << i;
  }
}

DataLoaderOptions options(int64_t workers) {
  // 23 examples in batches of 4: the last batch is smaller (the pinned buffers are reused for it).
  return DataLoaderOptions().batch_size(4).shuffle(true).drop_last(false).workers(workers).seed(3);
}

TEST(DevicePrefetcher, OnTheCpuItIsTheLoader) {
  auto ds = std::make_shared<NumberedDataset>(23, /*bad_index=*/9);
  for (int64_t workers : {0, 2}) {
    DataLoader plain(ds, options(workers)), fed(ds, options(workers));
    DevicePrefetcher batches(fed, Device::cpu());
    for (auto [epoch, first] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {1, 3}}) {
      std::string what = "workers " + std::to_string(workers) + ", epoch " + std::to_string(epoch) + " from batch " +
                         std::to_string(first);
      expect_same(collect(batches, epoch, first, Device::cpu()), collect(plain, epoch, first, Device::cpu()), what);
    }
  }
}

TEST(DevicePrefetcher, CudaWithoutAGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  auto ds = std::make_shared<NumberedDataset>(8);
  DataLoader loader(ds, options(0));
  try {
    DevicePrefetcher batches(loader, Device::cuda());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("DevicePrefetcher"), std::string::npos) << m;
    EXPECT_TRUE(m.find("no CUDA device") != std::string::npos || m.find("not built") != std::string::npos) << m;
  }
  EXPECT_THROW(DevicePrefetcher(loader, Device::cpu(), 0), Error);
}

TEST(DevicePrefetcherCuda, SameBatchesAsTheLoaderBitForBit) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto ds = std::make_shared<NumberedDataset>(23, /*bad_index=*/9);
  DataLoader plain(ds, options(2));
  Seen want = collect(plain, 1, 0, Device::cpu());
  Seen want_from_3 = collect(plain, 1, 3, Device::cpu());
  // Between batches the consumer allocates, computes and frees on its stream, so freed blocks are
  // handed out again while its kernels may still run: the copies must wait for them.
  auto busy = [] {
    Tensor junk = randn({1 << 20}, TensorOptions().device(Device::cuda()));
    for (int i = 0; i < 4; ++i) junk = junk * 1.5 + 1.0;
  };
  for (int64_t depth : {1, 2, 3}) {
    DataLoader fed(ds, options(2));
    DevicePrefetcher batches(fed, Device::cuda(), depth);
    std::string what = "depth " + std::to_string(depth);
    expect_same(collect(batches, 1, 0, Device::cuda(), busy), want, what);
    expect_same(collect(batches, 1, 3, Device::cuda()), want_from_3, what + ", from batch 3");
    // An epoch abandoned with copies in flight, then a full one. Its first batch may hold the
    // corrupt example: an error is a batch taken too.
    batches.start_epoch(0);
    try {
      ASSERT_TRUE(batches.next().has_value());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("example 9 is corrupt"), std::string::npos) << e.what();
    }
    expect_same(collect(batches, 1, 0, Device::cuda(), busy), want, what + ", after an abandoned epoch");
  }
  cuda::synchronize();
}

}  // namespace
}  // namespace octet
