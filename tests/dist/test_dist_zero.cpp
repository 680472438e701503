// Sharded optimizer state (ZeRO stage 1, Optimizer::shard_state) across real processes, in the
// octet_dist_tests program run under `mpirun -np 2` and `-np 3`: 20 steps of every optimizer (LAMB
// and LARS with their whole-parameter norms added over the shards), 32-bit and 8-bit state, with
// the gradients clipped by their global norm, give weights bit-identical to the unsharded
// optimizer's on parameters smaller than a block, not divisible by the rank count, and whose 8-bit
// decision (min_8bit_size) differs between the whole parameter and a shard; each rank holds about
// 1/N of the state bytes. 4-bit state likewise, with rank-1 second moments whose row and column
// maxima span the shards (max-reduced over the ranks), also where a rank's range is empty. Under
// DistributedDataParallel with reduce-scattered gradients (shard_gradients) the job equals
// unsharded DDP bit for bit, and a non-finite gradient on one rank is seen by all.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/octet.h"
#include "layers/distributed.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace octet {
namespace {

dist::ProcessGroup& group() {
  dist::ProcessGroup& g = dist::ProcessGroup::world();
  g.set_timeout_s(60);
  return g;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// Fewer elements than a block (3), not a multiple of any rank count or block (1000, 37 x 29), and
// 5000 elements: 8-bit with min_8bit_size 4096 as a whole, though each shard is smaller. "cube"
// (21 x 31 x 41, 26691 elements) has rank-1 4-bit second moments: its shards cut its rows.
NamedTensors make_params(uint64_t seed) {
  Generator g(seed);
  NamedTensors p;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"tiny", {3}}, {"vec", {1000}}, {"mat", {37, 29}}, {"big", {5000}}, {"cube", {21, 31, 41}}})
    p.emplace_back(name, randn(shape, {}, &g).requires_grad_(true));
  return p;
}

// Bytes of the state tensors every rank holds whole: 8-bit and 4-bit code tables, rank-1 maxima.
int64_t replicated_bytes(const Optimizer& opt) {
  int64_t bytes = 0;
  for (const auto& [key, t] : opt.state_dict())
    if (key.ends_with(".map") || key.find(".max") != std::string::npos)
      bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  return bytes;
}

using Make = std::function<std::unique_ptr<Optimizer>(NamedTensors, const StateOptions&)>;

struct Case {
  std::string name;
  Make make;
};

const std::vector<Case> kCases = {
    {"adam", [](NamedTensors p, const StateOptions& s) { return std::make_unique<Adam>(p, AdamOptions(1e-2), s); }},
    {"adamw",
     [](NamedTensors p, const StateOptions& s) {
       return std::make_unique<AdamW>(p, AdamWOptions(1e-2).weight_decay(0.1), s);
     }},
    {"sgd momentum",
     [](NamedTensors p, const StateOptions& s) {
       return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.9).weight_decay(1e-4), s);
     }},
    {"rmsprop",
     [](NamedTensors p, const StateOptions& s) { return std::make_unique<RMSprop>(p, RMSpropOptions(1e-3), s); }},
    {"lion", [](NamedTensors p, const StateOptions& s) { return std::make_unique<Lion>(p, LionOptions(1e-3), s); }},
    {"adagrad",
     [](NamedTensors p, const StateOptions& s) { return std::make_unique<Adagrad>(p, AdagradOptions(1e-2), s); }},
    {"lamb", [](NamedTensors p,
                const StateOptions& s) { return std::make_unique<Lamb>(p, LambOptions(1e-2).weight_decay(0.01), s); }},
    {"lars",
     [](NamedTensors p, const StateOptions& s) {
       return std::make_unique<Lars>(p, LarsOptions(0.1).momentum(0.9).weight_decay(1e-4), s);
     }},
};

// Every rank's gradient for step `step`: the same on every rank (as DDP's averaged gradients).
void set_grads(const NamedTensors& params, int step) {
  Generator g(100 + static_cast<uint64_t>(step));
  for (const auto& [name, p] : params) p.set_grad(randn(p.shape(), {}, &g));
}

TEST(ShardedState, TwentyStepsEqualTheUnshardedOptimizerBitForBit) {
  for (const Case& c : kCases)
    for (int bits : {32, 8, 4}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(bits) + "-bit");
      const StateOptions so = StateOptions().state_bits(bits).block_size(64).min_8bit_size(4096);
      NamedTensors a = make_params(1), b = make_params(1);
      auto plain = c.make(a, so), sharded = c.make(b, so);
      sharded->shard_state(group());
      for (int step = 0; step < 20; ++step) {
        set_grads(a, step);
        set_grads(b, step);
        // The global norm: this rank's ranges' squares, added over the ranks (clips every step).
        const double norm = clip_grad_norm(*plain, 20.0), sharded_norm = clip_grad_norm(*sharded, 20.0);
        EXPECT_EQ(norm, sharded_norm) << "step " << step;
        plain->step();
        sharded->step();
      }
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
      // Low-bit where the whole parameter qualifies ("big", 5000 >= 4096), though its shards do not.
      EXPECT_EQ(sharded->num_8bit_params(), plain->num_8bit_params());
      EXPECT_EQ(sharded->num_4bit_params(), plain->num_4bit_params());
      EXPECT_EQ(plain->num_8bit_params() + plain->num_4bit_params(), bits == 32 ? 0 : 2);
      // The state: about 1/N per rank, the ranks' shares adding up to the unsharded state. Each
      // rank's ranges are whole blocks, so the absmax count is the same in total; what each rank
      // adds is its own copy of what every rank holds whole: the low-bit code tables and the rank-1
      // maxima.
      const int64_t whole = plain->state_bytes(), n = group().size(), replicated = replicated_bytes(*plain);
      Tensor sum = scalar_tensor(static_cast<double>(sharded->state_bytes()), DType::i64);
      group().all_reduce(sum);
      EXPECT_GE(sum.item<int64_t>(), whole);
      EXPECT_LE(sum.item<int64_t>(), whole + (n - 1) * replicated);
      // This rank's share: its ranges of each parameter (at most one shard unit of each of two
      // 32-bit buffers over 1/N of it), and what every rank holds whole.
      const int64_t unit = bits == 4 ? 128 : 64;
      EXPECT_LE(sharded->state_bytes(), whole / n + static_cast<int64_t>(a.size()) * unit * 4 * 2 + replicated);
    }
}

// Parameters large enough that the step's all-gather runs in several buckets (8 MiB each).
TEST(ShardedState, LargeParametersGatherInBucketsExactly) {
  auto params = [] {
    Generator g(9);
    NamedTensors p;
    for (const char* name : {"a", "b", "c"}) p.emplace_back(name, randn({3000001}, {}, &g).requires_grad_(true));
    p.emplace_back("d", randn({5}, {}, &g).requires_grad_(true));
    return p;
  };
  NamedTensors a = params(), b = params();
  Adam plain(a, AdamOptions(1e-2)), sharded(b, AdamOptions(1e-2));
  sharded.shard_state(group());
  for (int step = 0; step < 3; ++step) {
    set_grads(a, step), set_grads(b, step);
    plain.step(), sharded.step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
}

TEST(ShardedState, RangesFallOnBlocksAndCoverEachParameterOnce) {
  NamedTensors p = make_params(2);
  Adam opt(p, AdamOptions(1e-3), StateOptions().state_bits(8).block_size(64));
  opt.shard_state(group());
  for (const auto& [name, t] : p) {
    const auto [first, last] = opt.shard_range(name);
    EXPECT_TRUE(first % 64 == 0 || first == t.numel()) << name;  // a block bound, or empty at the end
    EXPECT_TRUE(last == t.numel() || last % 64 == 0) << name;
    Tensor n = scalar_tensor(static_cast<double>(last - first), DType::i64);
    group().all_reduce(n);
    EXPECT_EQ(n.item<int64_t>(), t.numel()) << name;
  }
}

TEST(ShardedState, RefusedWhereItCannotHold) {
  NamedTensors p = make_params(3);
  Adam late(p, AdamOptions(1e-3));
  late.state_bytes();  // the state exists now
  EXPECT_THROW(late.shard_state(group()), Error);
}

// A sharded optimizer's state_dict is the unsharded one's, bit for bit; either loads into the
// other (at this job's rank count, and so at any), and training goes on as if nothing happened.
TEST(ShardedState, CheckpointsLoadSharedOrNotAtAnyCount) {
  for (const Case& c : {kCases[0], kCases[2]})
    for (int bits : {32, 8, 0, 4}) {  // 0: 8-bit for every parameter, one smaller than a block
      SCOPED_TRACE(c.name + ", " + std::to_string(bits) + "-bit");
      const StateOptions so =
          StateOptions().state_bits(bits == 0 ? 8 : bits).block_size(64).min_8bit_size(bits == 0 ? 0 : 1000);
      NamedTensors a = make_params(4), b = make_params(4);
      auto plain = c.make(a, so), sharded = c.make(b, so);
      sharded->shard_state(group());
      for (int step = 0; step < 5; ++step) {
        set_grads(a, step), set_grads(b, step);
        plain->step(), sharded->step();
      }
      const NamedTensors want = plain->state_dict(), got = sharded->state_dict();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].first, want[i].first);
        EXPECT_TRUE(same_bits(got[i].second, want[i].second)) << want[i].first;
      }
      // The unsharded state into a fresh sharded optimizer, the sharded one's into an unsharded.
      NamedTensors a2 = make_params(4), b2 = make_params(4);
      for (size_t i = 0; i < a.size(); ++i) {
        NoGradGuard ng;
        a2[i].second.copy_(b[i].second);
        b2[i].second.copy_(a[i].second);
      }
      auto plain2 = c.make(a2, so), sharded2 = c.make(b2, so);
      sharded2->shard_state(group());
      sharded2->load_state_dict(want);
      plain2->load_state_dict(got);
      for (int step = 5; step < 10; ++step) {
        set_grads(a, step), set_grads(a2, step), set_grads(b2, step);
        plain->step(), plain2->step(), sharded2->step();
      }
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(same_bits(a2[i].second, a[i].second)) << "unsharded from sharded: " << a[i].first;
        EXPECT_TRUE(same_bits(b2[i].second, a[i].second)) << "sharded from unsharded: " << a[i].first;
      }
      // A state_dict of another shape is refused, naming the key, and changes nothing.
      NamedTensors bad = want;
      for (auto& [k, t] : bad)
        if (k == "vec.step") t = scalar_tensor(-1.0, DType::i64);
      EXPECT_THROW(sharded2->load_state_dict(bad), Error);
    }
}

// 4-bit state in shards of 4096 elements: a rank-1 parameter of 13824 elements (24^3) is 4 shard
// units, so under 3 ranks the last holds none of it, yet takes part in the max-reduction of its
// maxima every step; LAMB's read pass decodes the rank-1 scales at its shard's offsets. The
// weights and the gathered state equal the unsharded optimizer's, bit for bit.
TEST(ShardedState, FourBitRankOneMaximaSpanTheShardsAndEmptyRanges) {
  for (const Case& c : {kCases[1], kCases[6]}) {
    SCOPED_TRACE(c.name);
    const StateOptions so = StateOptions().state_bits(4).block_size(4096).min_8bit_size(0);
    auto params = [] {
      Generator g(11);
      NamedTensors p;
      p.emplace_back("cube", randn({24, 24, 24}, {}, &g).requires_grad_(true));
      p.emplace_back("mat", randn({300, 301}, {}, &g).requires_grad_(true));
      return p;
    };
    NamedTensors a = params(), b = params();
    auto plain = c.make(a, so), sharded = c.make(b, so);
    sharded->shard_state(group());
    if (group().size() == 3) {
      const auto [first, last] = sharded->shard_range("cube");
      EXPECT_EQ(last - first, std::vector<int64_t>({2 * 4096, 13824 - 2 * 4096, 0})[group().rank()]);
    }
    for (int step = 0; step < 8; ++step) {
      set_grads(a, step), set_grads(b, step);
      plain->step(), sharded->step();
    }
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
    const NamedTensors want = plain->state_dict(), got = sharded->state_dict();
    ASSERT_EQ(got.size(), want.size());
    bool rank1 = false;
    for (size_t i = 0; i < want.size(); ++i) {
      rank1 = rank1 || want[i].first == "cube.exp_avg_sq.max2";
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_TRUE(same_bits(got[i].second, want[i].second)) << want[i].first;
    }
    EXPECT_TRUE(rank1) << "the cube's second moment should be rank-1";
  }
}

// ---- under DistributedDataParallel, whose buckets are reduce-scattered

constexpr int64_t kBatch = 12;  // divides among 2 and 3 ranks

// Parameters of 3 to 1300 elements; the bias of `unused` never gets a gradient.
struct Net : Module {
  Net() {
    manual_seed(5);
    a = register_module("a", std::make_shared<Linear>(13, 100));
    b = register_module("b", std::make_shared<Linear>(100, 3));
    unused = register_module("unused", std::make_shared<Linear>(2, 2));
  }
  Tensor forward(const Tensor& x) override { return (*b)(relu((*a)(x))); }
  std::string type_name() const override { return "Net"; }
  std::shared_ptr<Linear> a, b, unused;
};

// Steps of one rank's share of the global batch with the gradients clipped; `poison` puts a NaN
// into the last rank's input at that step (-1: never). Returns the weights and each step's norm.
std::pair<NamedTensors, std::vector<double>> train_ddp(const Case& c, bool sharded, int poison = -1) {
  auto net = std::make_shared<Net>();
  auto ddp = std::make_shared<DistributedDataParallel>(net, group(), DdpOptions().bucket_mb(0.002));
  auto opt = c.make(net->named_parameters(), StateOptions().state_bits(8).block_size(64).min_8bit_size(1000));
  if (sharded) {
    opt->shard_state(group());
    ddp->shard_gradients([&](const std::string& name) { return opt->shard_size(name); });
    EXPECT_EQ(ddp->gradients_sharded(), group().size() > 1);  // one process: nothing to scatter
  }
  std::vector<double> norms;
  const int64_t per = kBatch / group().size();
  for (int step = 0; step < 8; ++step) {
    Generator g(300 + static_cast<uint64_t>(step));
    Tensor x = randn({kBatch, 13}, {}, &g).narrow(0, per * group().rank(), per).contiguous();
    const Tensor y = randn({kBatch, 3}, {}, &g).narrow(0, per * group().rank(), per);
    if (step == poison && group().rank() == group().size() - 1)
      x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    opt->zero_grad();
    mse_loss((*ddp)(x), y).backward();
    norms.push_back(clip_grad_norm(*opt, 0.5));
    if (std::isfinite(norms.back())) opt->step();
  }
  return {net->named_parameters(), norms};
}

TEST(ShardedGradients, ReduceScatteredDdpEqualsUnshardedDdpBitForBit) {
  for (const Case& c : {kCases[0], kCases[6], kCases[7]}) {  // Adam, LAMB, LARS
    SCOPED_TRACE(c.name);
    const auto [want, want_norms] = train_ddp(c, false);
    const auto [got, got_norms] = train_ddp(c, true);
    EXPECT_EQ(got_norms, want_norms);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i].second, want[i].second)) << want[i].first;
    // Every rank ends with the same weights.
    for (const auto& [name, p] : got) {
      const Tensor all = group().all_gather(p.detach().contiguous());
      for (int r = 1; r < group().size(); ++r) EXPECT_TRUE(same_bits(all.select(0, r), all.select(0, 0))) << name;
    }
  }
}

TEST(ShardedGradients, ANonFiniteGradientOnOneRankIsSeenByAll) {
  const auto [weights, norms] = train_ddp(kCases[0], true, /*poison=*/3);
  for (size_t s = 0; s < norms.size(); ++s) EXPECT_EQ(std::isfinite(norms[s]), s != 3) << "step " << s;
  const auto [clean, clean_norms] = train_ddp(kCases[0], true);
  EXPECT_EQ(norms[2], clean_norms[2]);
}

// The same over NCCL: CUDA parameters, one GPU per rank of this host (skips where there are fewer,
// e.g. on CI, and on a one-GPU machine: NCCL takes one rank per GPU). Elementwise updates move
// bytes alone, so sharded Adam equals unsharded Adam bit for bit; NCCL's reduce-scatter may add
// in another order than its all-reduce, and LAMB's sharded norms are its ranks' device sums added
// on the host, so those compare with a tolerance.
TEST(ShardedGradients, OverNcclMatchUnshardedOnTheGpu) {
  Tensor usable = full({1}, cuda::is_available() && group().local_rank() < cuda_device_count() ? 1.0 : 0.0,
                       TensorOptions(DType::i32));
  group().all_reduce(usable);
  if (usable.item() < group().size()) GTEST_SKIP() << "needs one GPU per rank of this host";
  const Device gpu = Device::cuda(group().local_rank());
  for (const Case& c : {kCases[0], kCases[6]})  // Adam, LAMB
    for (int bits : {8, 4}) {                   // 4: the cube's rank-1 maxima max-reduced over NCCL
      // LAMB's norms differ in their last bits here, which can move a 4-bit code (16 levels) and
      // then the weights by far more than the tolerance: Adam, bit for bit, covers 4 bits.
      if (bits == 4 && c.name != "adam") continue;
      SCOPED_TRACE(c.name + ", " + std::to_string(bits) + "-bit");
      NamedTensors a = make_params(6), b = make_params(6);
      for (NamedTensors* ps : {&a, &b})
        for (auto& [name, p] : *ps) p = p.detach().to(gpu).requires_grad_(true);
      const StateOptions so = StateOptions().state_bits(bits).block_size(64).min_8bit_size(1000);
      auto plain = c.make(a, so), sharded = c.make(b, so);
      sharded->shard_state(group());
      for (int step = 0; step < 10; ++step) {
        for (NamedTensors* ps : {&a, &b}) {
          set_grads(*ps, step);
          for (auto& [name, p] : *ps) p.set_grad(p.grad().to(gpu));
        }
        plain->step();
        sharded->step();
      }
      for (size_t i = 0; i < a.size(); ++i) {
        const Tensor want = a[i].second.detach().to(Device::cpu()), got = b[i].second.detach().to(Device::cpu());
        if (c.name == "adam")
          EXPECT_TRUE(same_bits(got, want)) << a[i].first;
        else
          EXPECT_LT(max(abs(got - want)).item(), 1e-5) << a[i].first;
      }
    }
}

}  // namespace
}  // namespace octet
