// The collectives and DistributedDataParallel across real processes. Built as its own program
// (octet_dist_tests) and run by ctest under `mpirun -np 2` and `-np 3` (tests/CMakeLists.txt);
// every rank runs every test, and each compares with what one process computes on its own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/octet.h"
#include "layers/distributed.h"

namespace octet {
namespace {

dist::ProcessGroup& pg() {
  dist::ProcessGroup& g = dist::ProcessGroup::world();
  g.set_timeout_s(60);  // a broken test stops in a minute, not five
  return g;
}

// Rank r's values of a test tensor: the same on every process for the same (r, seed).
Tensor values_of(int rank, const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed * 1000 + static_cast<uint64_t>(rank));
  if (dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16)
    return (randn(shape, DType::f64, &g) * 50.0).to(dtype);
  // Small integers, so sums over three ranks stay in every integer dtype's range.
  const double low = dtype == DType::u8 ? 0.0 : -20.0;
  return (rand(shape, DType::f64, &g) * 40.0 + low).to(dtype);
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

// Every dtype and odd sizes (fewer elements than ranks, not a multiple of the rank count).
const DType kDtypes[] = {DType::f32, DType::f64, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64};
const Shape kShapes[] = {{1}, {7}, {3, 5}, {1000}, {0}};

TEST(Collectives, AllReduceEqualsTheReductionInRankOrder) {
  const int P = pg().size(), me = pg().rank();
  for (DType dt : kDtypes)
    for (const Shape& shape : kShapes) {
      const bool floating = dt == DType::f32 || dt == DType::f64 || dt == DType::bf16;
      for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::average}) {
        if (op == dist::ReduceOp::average && !floating) continue;
        // The reduction one process computes: rank 0's values + rank 1's + ..., in that order.
        Tensor want = values_of(0, shape, dt, 1).to(floating ? DType::f64 : DType::i64);
        Tensor acc32 = values_of(0, shape, dt, 1).to(DType::f32);
        for (int r = 1; r < P; ++r) {
          want = want + values_of(r, shape, dt, 1).to(want.dtype());
          acc32 = acc32 + values_of(r, shape, dt, 1).to(DType::f32);
        }
        Tensor x = values_of(me, shape, dt, 1);
        pg().all_reduce(x, op);
        SCOPED_TRACE(::testing::Message() << dt << " " << ::testing::PrintToString(shape) << " op " << int(op));
        if (dt == DType::f32 || dt == DType::bf16) {
          Tensor w = op == dist::ReduceOp::average ? acc32 / static_cast<double>(P) : acc32;
          EXPECT_TRUE(bits_equal(x, w.to(dt)));
        } else if (dt == DType::f64) {
          Tensor w = op == dist::ReduceOp::average ? want / static_cast<double>(P) : want;
          EXPECT_TRUE(bits_equal(x, w));
        } else {
          // Integer sums wrap to the dtype (i8: modulo 256), as PyTorch's do.
          EXPECT_TRUE(bits_equal(x, want.to(dt))) << x << " vs " << want;
        }
        // Every rank holds the same bits.
        const Tensor all = pg().all_gather(x);
        for (int r = 1; r < P; ++r) EXPECT_TRUE(bits_equal(all.select(0, r), all.select(0, 0)));
      }
    }
}

TEST(Collectives, BroadcastAllGatherReduceScatterBarrier) {
  const int P = pg().size(), me = pg().rank();
  for (DType dt : kDtypes) {
    SCOPED_TRACE(::testing::Message() << dt);
    for (int root = 0; root < P; ++root) {
      Tensor x = values_of(me, {5, 3}, dt, 2);
      pg().broadcast(x, root);
      EXPECT_TRUE(bits_equal(x, values_of(root, {5, 3}, dt, 2)));
    }
    const Tensor all = pg().all_gather(values_of(me, {4, 2}, dt, 3));
    ASSERT_EQ(all.shape(), Shape({P, 4, 2}));
    for (int r = 0; r < P; ++r) EXPECT_TRUE(bits_equal(all.select(0, r), values_of(r, {4, 2}, dt, 3)));
    // reduce_scatter: rank r gets rows [2r, 2r + 2) of the sum.
    Tensor sum = values_of(0, {2 * P, 3}, dt, 4).to(DType::f64);
    for (int r = 1; r < P; ++r) sum = sum + values_of(r, {2 * P, 3}, dt, 4).to(DType::f64);
    const Tensor part = pg().reduce_scatter(values_of(me, {2 * P, 3}, dt, 4));
    ASSERT_EQ(part.shape(), Shape({2, 3}));
    if (dt == DType::f64 || dt == DType::i32 || dt == DType::i64) {
      EXPECT_TRUE(bits_equal(part, sum.narrow(0, 2 * me, 2).to(dt)));
    } else if (dt == DType::f32) {
      EXPECT_LT(max(abs(part.to(DType::f64) - sum.narrow(0, 2 * me, 2))).item(), 1e-3);
    }
  }
  pg().barrier();
  EXPECT_THROW(pg().reduce_scatter(values_of(me, {2 * P + 1, 3}, DType::f32, 5)), Error);
  EXPECT_THROW(pg().broadcast(values_of(me, {2}, DType::f32, 5), P), Error);
  EXPECT_THROW(pg().all_reduce(values_of(me, {2}, DType::i32, 5), dist::ReduceOp::average), Error);
  EXPECT_THROW(pg().all_reduce(values_of(me, {4, 4}, DType::f32, 5).t()), Error);  // not contiguous
}

TEST(Collectives, AsyncAllReducesFinishInAnyOrder) {
  const int P = pg().size(), me = pg().rank();
  std::vector<Tensor> xs;
  std::vector<dist::Work> works;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(values_of(me, {100 + i}, DType::f64, 10 + i));
    works.push_back(pg().all_reduce_async(xs.back(), dist::ReduceOp::sum));
  }
  for (int i = 5; i >= 0; --i) works[static_cast<size_t>(i)].wait();
  for (int i = 0; i < 6; ++i) {
    Tensor want = values_of(0, {100 + i}, DType::f64, 10 + i);
    for (int r = 1; r < P; ++r) want = want + values_of(r, {100 + i}, DType::f64, 10 + i);
    EXPECT_TRUE(bits_equal(xs[static_cast<size_t>(i)], want));
  }
}

// A reduce-scatter in place gives each rank the bits of the all-reduce in its part, and leaves the
// other parts as they were; several in flight finish in any order.
TEST(Collectives, ReduceScatterAsyncIsTheAllReducesPart) {
  const int P = pg().size(), me = pg().rank();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
    SCOPED_TRACE(::testing::Message() << dt);
    const dist::ReduceOp op = dt == DType::i32 ? dist::ReduceOp::sum : dist::ReduceOp::average;
    std::vector<Tensor> xs, whole;
    std::vector<dist::Work> works;
    for (int i = 0; i < 3; ++i) {
      const int64_t n = P * (7 + 50 * i);
      xs.push_back(values_of(me, {n}, dt, 30 + i));
      whole.push_back(values_of(me, {n}, dt, 30 + i));
      works.push_back(pg().reduce_scatter_async(xs.back(), op));
    }
    for (int i = 2; i >= 0; --i) works[static_cast<size_t>(i)].wait();
    for (int i = 0; i < 3; ++i) {
      const Tensor& x = xs[static_cast<size_t>(i)];
      const Tensor own = values_of(me, x.shape(), dt, 30 + i);
      pg().all_reduce(whole[static_cast<size_t>(i)], op);
      const int64_t part = x.numel() / P;
      for (int r = 0; r < P; ++r) {
        const Tensor want = (r == me ? whole[static_cast<size_t>(i)] : own).narrow(0, r * part, part);
        EXPECT_TRUE(bits_equal(x.narrow(0, r * part, part).contiguous(), want.contiguous())) << "part " << r;
      }
    }
  }
  EXPECT_THROW(pg().reduce_scatter_async(values_of(me, {P + 1}, DType::f32, 5)), Error);
}

// CUDA tensors go through NCCL: one GPU per rank of this host (skips where there are fewer GPUs
// than ranks, e.g. on CI). NCCL adds in its own order, so sums are compared with a tolerance and
// across ranks bit for bit; moves (broadcast, gather) and integer sums are exact.
TEST(CudaCollectives, MatchTheCpuAndAgreeAcrossRanks) {
  const int P = pg().size(), me = pg().rank();
  // Every rank decides together, so no rank waits in a collective the others skip.
  Tensor usable =
      full({1}, cuda::is_available() && pg().local_rank() < cuda_device_count() ? 1.0 : 0.0, TensorOptions(DType::i32));
  pg().all_reduce(usable);
  if (usable.item() < P) GTEST_SKIP() << "needs one GPU per rank of this host";
  const Device gpu = Device::cuda(pg().local_rank());
  for (DType dt : kDtypes) {
    SCOPED_TRACE(::testing::Message() << dt);
    const bool floating = dt == DType::f32 || dt == DType::f64 || dt == DType::bf16;
    Tensor want = values_of(0, {1000}, dt, 20).to(DType::f64);
    for (int r = 1; r < P; ++r) want = want + values_of(r, {1000}, dt, 20).to(DType::f64);
    Tensor x = values_of(me, {1000}, dt, 20).to(gpu);
    pg().all_reduce(x);
    const Tensor got = x.to(Device::cpu());
    if (floating) {
      const double tol = dt == DType::bf16 ? 2.0 : dt == DType::f32 ? 1e-3 : 1e-9;
      EXPECT_LT(max(abs(got.to(DType::f64) - want)).item(), tol);
    } else {
      EXPECT_TRUE(bits_equal(got, want.to(dt)));
    }
    const Tensor all = pg().all_gather(got);
    for (int r = 1; r < P; ++r) EXPECT_TRUE(bits_equal(all.select(0, r), all.select(0, 0)));
    Tensor b = values_of(me, {5, 3}, dt, 21).to(gpu);
    pg().broadcast(b, P - 1);
    EXPECT_TRUE(bits_equal(b.to(Device::cpu()), values_of(P - 1, {5, 3}, dt, 21)));
    const Tensor gathered = pg().all_gather(values_of(me, {4, 2}, dt, 22).to(gpu)).to(Device::cpu());
    for (int r = 0; r < P; ++r) EXPECT_TRUE(bits_equal(gathered.select(0, r), values_of(r, {4, 2}, dt, 22)));
    const Tensor part = pg().reduce_scatter(values_of(me, {2 * P, 3}, dt, 23).to(gpu)).to(Device::cpu());
    ASSERT_EQ(part.shape(), Shape({2, 3}));
  }
}

// ---------------------------------------------------------------- DistributedDataParallel

constexpr int64_t kBatch = 12;  // the global batch: divides among 2 and 3 ranks
constexpr int kSteps = 20;

std::shared_ptr<Sequential> mlp(DType dt) {
  manual_seed(7);
  auto m = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(5, 16), std::make_shared<ReLU>(), std::make_shared<Linear>(16, 3)});
  m->to(dt);
  return m;
}

struct Data {
  Tensor x, y;
};
Data batch_of(int step, DType dt) {
  Generator g(100 + static_cast<uint64_t>(step));
  return {randn({kBatch, 5}, dt, &g), randn({kBatch, 3}, dt, &g)};
}

// This rank's rows of the global batch.
Tensor local(const Tensor& t) {
  const int64_t per = kBatch / pg().size();
  return t.narrow(0, per * pg().rank(), per);
}

NamedTensors train_alone(DType dt) {
  auto m = mlp(dt);
  SGD opt(m->named_parameters(), SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < kSteps; ++s) {
    const Data d = batch_of(s, dt);
    opt.zero_grad();
    mse_loss((*m)(d.x), d.y).backward();
    opt.step();
  }
  return m->named_parameters();
}

// DDP over the ranks; checks after every step that every rank holds rank 0's bits.
NamedTensors train_ddp(DType dt, double bucket_mb) {
  auto m = mlp(dt);
  auto ddp = std::make_shared<DistributedDataParallel>(m, pg(), DdpOptions().bucket_mb(bucket_mb));
  SGD opt(m->named_parameters(), SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < kSteps; ++s) {
    const Data d = batch_of(s, dt);
    opt.zero_grad();
    mse_loss((*ddp)(local(d.x)), local(d.y)).backward();
    ddp->check_synchronized();
    opt.step();
    for (const auto& [name, p] : m->named_parameters()) {
      const Tensor all = pg().all_gather(p.detach());
      for (int r = 1; r < pg().size(); ++r)
        EXPECT_TRUE(bits_equal(all.select(0, r), all.select(0, 0)))
            << name << " differs on rank " << r << " at step " << s;
    }
  }
  return m->named_parameters();
}

// max over the parameters of max |a - b| / max |b|.
double max_rel_diff(const NamedTensors& a, const NamedTensors& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.detach().to(DType::f64), y = b[i].second.detach().to(DType::f64);
    worst = std::max(worst, max(abs(x - y)).item() / max(abs(y)).item());
  }
  return worst;
}

TEST(Ddp, TwentyStepsEqualOneProcessOnTheGlobalBatch) {
  // f64: the sums differ from one process's only in the order of additions.
  EXPECT_LT(max_rel_diff(train_ddp(DType::f64, 25), train_alone(DType::f64)), 1e-12);
  EXPECT_LT(max_rel_diff(train_ddp(DType::f32, 25), train_alone(DType::f32)), 1e-6);
}

TEST(Ddp, BucketedEqualsUnbucketed) {
  const NamedTensors one = train_ddp(DType::f32, 25), per_param = train_ddp(DType::f32, 0);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bits_equal(one[i].second, per_param[i].second)) << one[i].first;
}

TEST(Ddp, NoSyncAccumulatesThenAveragesOnce) {
  // Two micro-batches (halves of each rank's share), the first under no_sync, equal one step on
  // the whole global batch (loss halves so the sum of the two is the mean).
  auto m = mlp(DType::f64);
  auto ddp = std::make_shared<DistributedDataParallel>(m);
  auto ref = mlp(DType::f64);
  const Data d = batch_of(0, DType::f64);
  const Tensor xl = local(d.x), yl = local(d.y);
  const int64_t half = xl.size(0) / 2;
  {
    auto guard = ddp->no_sync();
    (mse_loss((*ddp)(xl.narrow(0, 0, half)), yl.narrow(0, 0, half)) * 0.5).backward();
  }
  (mse_loss((*ddp)(xl.narrow(0, half, xl.size(0) - half)), yl.narrow(0, half, xl.size(0) - half)) * 0.5).backward();
  ddp->check_synchronized();
  mse_loss((*ref)(d.x), d.y).backward();
  const NamedTensors a = m->named_parameters(), b = ref->named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LT(max(abs(a[i].second.grad() - b[i].second.grad())).item(), 1e-12) << a[i].first;
}

// A head only rank 0 uses, and one no rank uses: no hang; the first gets rank 0's gradient / P,
// the second none.
struct TwoHeads : Module {
  std::shared_ptr<Linear> body, head0, unused;
  TwoHeads() {
    manual_seed(3);
    body = register_module("body", std::make_shared<Linear>(4, 4));
    head0 = register_module("head0", std::make_shared<Linear>(4, 2));
    unused = register_module("unused", std::make_shared<Linear>(4, 2));
    to(DType::f64);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = body->forward(x);
    return dist::ProcessGroup::world().rank() == 0 ? sum(h) + sum(head0->forward(h)) : sum(h);
  }
};

TEST(Ddp, ParametersWithoutAGradientDoNotHang) {
  auto m = std::make_shared<TwoHeads>();
  auto ddp = std::make_shared<DistributedDataParallel>(m, pg(), DdpOptions().bucket_mb(0));
  for (int step = 0; step < 3; ++step) {
    m->zero_grad();
    Generator g(5);
    (*ddp)(randn({3, 4}, DType::f64, &g)).backward();
    ddp->check_synchronized();
  }
  EXPECT_TRUE(m->head0->weight_.grad().defined());
  EXPECT_FALSE(m->unused->weight_.grad().defined());
  const Tensor all = pg().all_gather(m->head0->weight_.grad());
  for (int r = 1; r < pg().size(); ++r) EXPECT_TRUE(bits_equal(all.select(0, r), all.select(0, 0)));
}

// Conv -> BatchNorm -> Linear, trained 5 steps on 2 or 3 ranks with SyncBatchNorm: the same
// weights and running statistics as one process with plain BatchNorm on the global batch.
TEST(Ddp, SyncBatchNormEqualsOneProcessOnTheGlobalBatch) {
  auto net = [] {
    manual_seed(9);
    auto m = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<Conv2d>(2, 3, 1), std::make_shared<BatchNorm2d>(3), std::make_shared<ReLU>(),
        std::make_shared<Flatten>(), std::make_shared<Linear>(3 * 4 * 4, 2)});
    m->to(DType::f64);
    return m;
  };
  auto alone = net(), synced = net();
  EXPECT_EQ(convert_sync_batchnorm(*synced, pg()), 1);
  auto ddp = std::make_shared<DistributedDataParallel>(synced, pg());
  SGD a(alone->named_parameters(), SGDOptions(0.1).momentum(0.9)),
      b(synced->named_parameters(), SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < 5; ++s) {
    Generator g(300 + static_cast<uint64_t>(s));
    const Tensor x = randn({kBatch, 2, 4, 4}, DType::f64, &g), y = randn({kBatch, 2}, DType::f64, &g);
    a.zero_grad();
    mse_loss((*alone)(x), y).backward();
    a.step();
    b.zero_grad();
    mse_loss((*ddp)(local(x)), local(y)).backward();
    ddp->check_synchronized();
    b.step();
  }
  const NamedTensors sa = alone->state_dict(), sb = synced->state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    if (sa[i].second.dtype() != DType::f64) continue;  // num_batches_tracked
    EXPECT_LT(max(abs(sa[i].second - sb[i].second)).item(), 1e-12) << sa[i].first;
  }
}

TEST(Ddp, DifferentModelsAreNamedAtStartUp) {
  manual_seed(1);
  auto m = std::make_shared<Linear>(3, pg().rank() == 0 ? 2 : 4);
  EXPECT_THROW(DistributedDataParallel ddp(m), Error);
}

}  // namespace
}  // namespace octet
