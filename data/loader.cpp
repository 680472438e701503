#include "data/loader.h"

#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/generator.h"

namespace octet {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

// Distinct streams for the permutation and the samples, so neither repeats the other's numbers.
constexpr uint64_t kPermutationStream = 0x7065726d75746531ull;
constexpr uint64_t kSampleStream = 0x73616d706c657331ull;

}  // namespace

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return mix(mix(mix(seed, kSampleStream), static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index));
}

std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t n) {
  OCTET_CHECK(n >= 0 && n < (int64_t{1} << 32), "epoch_permutation: expected 0 <= n < 2^32, got ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  uint64_t key = mix(mix(seed, kPermutationStream), static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates; philox_at makes step i independent of the rest
    uint32_t w = philox_at(key, 0, static_cast<uint64_t>(i))[0];
    auto j = static_cast<int64_t>((static_cast<uint64_t>(w) * static_cast<uint64_t>(i + 1)) >> 32);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  OCTET_CHECK(dataset_ != nullptr, "DataLoader: expected a dataset, got null");
  OCTET_CHECK(options_.batch_size_ > 0, "DataLoader: expected batch_size > 0, got ", options_.batch_size_);
  OCTET_CHECK(options_.workers_ >= 0 && options_.workers_ <= 256, "DataLoader: expected workers in [0, 256], got ",
              options_.workers_);
  OCTET_CHECK(options_.prefetch_ >= 1, "DataLoader: expected prefetch >= 1, got ", options_.prefetch_);
  OCTET_CHECK(options_.shard_count_ >= 1 && options_.shard_rank_ >= 0 && options_.shard_rank_ < options_.shard_count_,
              "DataLoader: expected shard rank in [0, count) and count >= 1, got rank ", options_.shard_rank_, " of ",
              options_.shard_count_);
  OCTET_CHECK(options_.batch_size_ % options_.shard_count_ == 0, "DataLoader: the global batch size ",
              options_.batch_size_, " does not divide among ", options_.shard_count_,
              " processes; choose a batch size that is a multiple of the process count");
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::num_batches() const {
  int64_t n = dataset_->size(), b = options_.batch_size_;
  return options_.drop_last_ ? n / b : (n + b - 1) / b;
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  ready_.clear();
  stop_ = false;
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  stop_workers();
  int64_t batches = num_batches();
  OCTET_CHECK(first_batch >= 0 && first_batch <= batches, "DataLoader::start_epoch: expected first_batch in [0, ",
              batches, "], got ", first_batch);
  int64_t n = dataset_->size();
  if (options_.shuffle_) {
    order_ = epoch_permutation(options_.seed_, epoch, n);
  } else {
    order_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
  }
  epoch_ = epoch;
  started_ = true;
  next_ = claim_ = first_batch;
  end_ = batches;
  int64_t threads = std::min(options_.workers_, end_ - next_);
  for (int64_t t = 0; t < threads; ++t) workers_.emplace_back([this] { worker_loop(); });
}

std::optional<Batch> DataLoader::next() {
  OCTET_CHECK(started_, "DataLoader::next: call start_epoch(epoch) first");
  if (workers_.empty()) {
    if (next_ >= end_) return std::nullopt;
    return make_batch(next_++);
  }
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (next_ >= end_) return std::nullopt;
    ready_cv_.wait(lock, [&] { return ready_.count(next_) != 0; });
    auto it = ready_.find(next_);
    slot = std::move(it->second);
    ready_.erase(it);
    ++next_;
  }
  work_cv_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

void DataLoader::worker_loop() {
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || claim_ >= end_ || claim_ < next_ + options_.prefetch_; });
      if (stop_ || claim_ >= end_) return;
      b = claim_++;
    }
    Slot slot;
    try {
      slot.batch = make_batch(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      ready_.emplace(b, std::move(slot));
    }
    ready_cv_.notify_one();
  }
}

Batch DataLoader::make_batch(int64_t b) const {
  int64_t n = dataset_->size(), bs = options_.batch_size_;
  const int64_t global_begin = b * bs, global_count = std::min(bs, n - global_begin);
  // This shard's contiguous part of the global batch (all of it with one shard).
  const int64_t rank = options_.shard_rank_, shards = options_.shard_count_;
  int64_t begin = global_begin + global_count * rank / shards;
  int64_t count = global_begin + global_count * (rank + 1) / shards - begin;
  Batch batch;
  batch.labels = empty({count}, DType::i64);
  int64_t* labels = batch.labels.data<int64_t>();
  int64_t classes = dataset_->num_classes();
  for (int64_t k = 0; k < count; ++k) {
    int64_t index = order_[static_cast<size_t>(begin + k)];
    Generator rng(sample_seed(options_.seed_, epoch_, index));
    Example e = dataset_->get(index, rng);
    OCTET_CHECK(e.input.defined() && e.input.dtype() == DType::f32 && e.input.device().is_cpu(),
                "DataLoader: dataset example ", index, " is not an f32 CPU tensor");
    OCTET_CHECK(e.label >= 0 && e.label < classes, "DataLoader: dataset example ", index, " has label ", e.label,
                ", expected [0, ", classes, ")");
    if (k == 0) {
      Shape shape = e.input.shape();
      shape.insert(shape.begin(), count);
      batch.inputs = empty(shape);
    }
    const Shape& want = batch.inputs.shape();
    OCTET_CHECK(e.input.shape() == Shape(want.begin() + 1, want.end()), "DataLoader: dataset example ", index,
                " has input shape ", e.input.shape(), " but the batch's first example has ",
                Shape(want.begin() + 1, want.end()), "; add a crop or resize transform to give all one size");
    Tensor x = e.input.contiguous();
    int64_t per = x.numel();
    std::memcpy(batch.inputs.data<float>() + k * per, x.data<float>(), static_cast<size_t>(per) * sizeof(float));
    labels[k] = e.label;
  }
  if (count == 0) {  // a shard of a last batch smaller than the shard count: an empty batch of the right shape
    Shape shape = dataset_->input_shape();
    shape.insert(shape.begin(), 0);
    batch.inputs = empty(shape);
  }
  return batch;
}

}  // namespace octet
