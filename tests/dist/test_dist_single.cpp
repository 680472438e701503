// Data-parallel pieces in one process (no mpirun): a group of one, DistributedDataParallel as a
// no-op wrapper, and the DataLoader's shards (which need no communication to check).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "core/octet.h"
#include "layers/distributed.h"

namespace octet {
namespace {

TEST(DistSingle, AGroupOfOneNeedsNoCommunication) {
  dist::ProcessGroup& g = dist::ProcessGroup::world();
  ASSERT_EQ(g.size(), 1) << "run this suite without mpirun";
  EXPECT_EQ(g.rank(), 0);
  Generator gen(1);
  Tensor x = randn({5}, DType::f32, &gen), before = x.clone();
  g.all_reduce(x, dist::ReduceOp::average);
  EXPECT_EQ(max(abs(x - before)).item(), 0.0);
  g.broadcast(x);
  EXPECT_EQ(g.all_gather(x).shape(), Shape({1, 5}));
  EXPECT_EQ(g.reduce_scatter(x).shape(), Shape({5}));
  g.barrier();
  EXPECT_THROW(g.broadcast(x, 1), Error);
  EXPECT_THROW(g.set_timeout_s(0), Error);
}

TEST(DistSingle, DdpOfOneProcessGivesThePlainGradients) {
  manual_seed(4);
  auto m = std::make_shared<Linear>(3, 2);
  manual_seed(4);
  auto ref = std::make_shared<Linear>(3, 2);
  auto ddp = std::make_shared<DistributedDataParallel>(m);
  Generator gen(2);
  Tensor x = randn({4, 3}, DType::f32, &gen);
  sum((*ddp)(x)).backward();
  ddp->check_synchronized();
  sum((*ref)(x)).backward();
  EXPECT_EQ(max(abs(m->weight_.grad() - ref->weight_.grad())).item(), 0.0);
  EXPECT_EQ(ddp->named_parameters().front().first, "module.weight");  // PyTorch's names
  // A prepared backward that never ran is named before the optimizer step.
  sum((*ddp)(x));
  EXPECT_TRUE(ddp->sync_pending());
  EXPECT_THROW(ddp->check_synchronized(), Error);
}

// A dataset whose example i is the scalar i, labelled i % 3.
struct Indices : Dataset {
  int64_t n;
  explicit Indices(int64_t n) : n(n) {}
  int64_t size() const override { return n; }
  int64_t num_classes() const override { return 3; }
  Shape input_shape() const override { return {1}; }
  Example get(int64_t i, Generator&) const override { return {full({1}, static_cast<double>(i)), i % 3}; }
};

TEST(DistSingle, ShardsOfABatchAreDisjointAndMakeTheBatch) {
  auto data = std::make_shared<Indices>(23);  // 23 = 3 batches of 8, the last of 7
  for (int64_t shards : {1, 2, 4}) {
    DataLoader whole(data, DataLoaderOptions().batch_size(8).workers(0).seed(5));
    std::vector<std::unique_ptr<DataLoader>> parts;
    for (int64_t r = 0; r < shards; ++r)
      parts.push_back(std::make_unique<DataLoader>(
          data, DataLoaderOptions().batch_size(8).workers(r % 2).seed(5).shard(r, shards)));
    whole.start_epoch(1);
    for (auto& p : parts) p->start_epoch(1);
    for (int64_t b = 0; b < whole.num_batches(); ++b) {
      const std::vector<float> want = whole.next()->inputs.to_vector<float>();
      std::vector<float> got;
      for (auto& p : parts) {
        EXPECT_EQ(p->num_batches(), whole.num_batches());
        const std::vector<float> v = p->next()->inputs.to_vector<float>();
        got.insert(got.end(), v.begin(), v.end());
      }
      EXPECT_EQ(got, want) << shards << " shards, batch " << b;  // in order: disjoint and complete
    }
  }
  // A last batch smaller than the shard count: some shards get an empty batch of the right shape.
  auto tiny = std::make_shared<Indices>(9);
  DataLoader last(tiny, DataLoaderOptions().batch_size(8).workers(0).shard(0, 4));  // of 1: shard 3 gets it
  last.start_epoch(0);
  last.next();
  const Batch b = *last.next();
  EXPECT_EQ(b.inputs.shape(), Shape({0, 1}));
  EXPECT_EQ(b.labels.numel(), 0);
  EXPECT_THROW(DataLoader(tiny, DataLoaderOptions().batch_size(6).shard(0, 4)), Error);  // 6 / 4
  EXPECT_THROW(DataLoader(tiny, DataLoaderOptions().batch_size(8).shard(4, 4)), Error);
}

// Under a DropoutShard each rank's mask is its block of the mask one process draws for the global
// batch, along the batch dimension (0, or 1 for time-major sequences); the generator advances alike.
TEST(DistSingle, DropoutShardsAreBlocksOfTheGlobalMask) {
  for (int64_t batch_dim : {0, 1}) {
    Shape local{3, 4, 5};
    Shape global = local;
    global[static_cast<size_t>(batch_dim)] *= 3;
    Generator g(11);
    const Tensor whole = dropout(ones(global), 0.5, true, &g);
    const uint64_t offset_after = g.offset();
    std::vector<Tensor> blocks;
    for (int r = 0; r < 3; ++r) {
      DropoutShardGuard on({r, 3});
      Generator gr(11);
      blocks.push_back(dropout(ones(local), 0.5, true, &gr, batch_dim));
      EXPECT_EQ(gr.offset(), offset_after);
    }
    EXPECT_EQ(dropout_shard().count, 1);  // the guard restores
    EXPECT_EQ(max(abs(cat(blocks, batch_dim) - whole)).item(), 0.0) << "batch_dim " << batch_dim;
    EXPECT_GT(max(abs(blocks[0] - blocks[1])).item(), 0.0);
  }
  EXPECT_THROW(DropoutShardGuard({2, 2}), Error);
}

}  // namespace
}  // namespace octet
