// DistributedDataParallel (layers/distributed.h): the buckets, the gradient hooks that start
// their all-reduce, and the write-back of the averaged gradients.
#include "layers/distributed.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "core/error.h"
#include "layers/batch_norm.h"

namespace octet {

using autograd::Edge;
using autograd::Node;

namespace {

// The parameters' names, shapes and dtypes: equal on every rank that built the same model.
std::string layout_of(const NamedTensors& params) {
  std::string out;
  for (const auto& [name, t] : params) out += detail::str_cat(name, ' ', t.shape(), ' ', t.dtype(), '\n');
  return out;
}

}  // namespace

struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<size_t> members;   // parameter indices
    std::vector<int64_t> offsets;  // of each member in flat (reduce-scattered: in each rank's section)
    int64_t section = 0;           // reduce-scattered: elements per rank's section of flat
    Tensor flat;
    int pending = 0;  // members without their gradient yet this step
    dist::Work work;
  };

  dist::ProcessGroup* group = nullptr;
  DdpOptions options;
  std::vector<std::string> names;
  std::vector<Tensor> params;
  std::vector<Tensor> buffers;
  std::vector<std::shared_ptr<Node>> accumulators;  // kept alive: they hold the hooks
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;
  std::vector<int64_t> shard_sizes;  // reduce-scattered gradients: each parameter's elements per rank
  std::vector<uint8_t> ready;
  Tensor used;  // i32 [params]: 1 where this rank has a gradient this step; summed over ranks
  dist::Work used_work;
  bool prepared = false;
  size_t next_launch = 0;
  double wait_s = 0;

  bool alone() const { return group->size() == 1; }
  bool scattered() const { return !shard_sizes.empty(); }

  // Rank r's range [first, last) of parameter k's flattened gradient when reduce-scattered.
  std::pair<int64_t, int64_t> range_of(size_t k, int64_t r) const {
    return dist::part_of(params[k].numel(), shard_sizes[k], r);
  }

  // Each bucket's flat buffer: the members end to end, or (reduce-scattered) one section per rank,
  // each holding that rank's range of every member, padded to the longest.
  void lay_out_buckets() {
    for (Bucket& bk : buckets) {
      int64_t n = 0;
      bk.offsets.clear();
      for (size_t k : bk.members) {
        bk.offsets.push_back(n);
        n += scattered() ? shard_sizes[k] : params[k].numel();
      }
      bk.section = n;
      bk.flat = Tensor();  // allocated by its first backward, in the layout of then
    }
  }

  // The bucket's flat buffer, made on first use. Zeros: a section's padding is reduced too, and
  // must stay finite.
  Tensor& flat_of(Bucket& bk) {
    if (!bk.flat.defined()) {
      const Tensor& first = params[bk.members.front()];
      const int64_t n = scattered() ? bk.section * group->size() : bk.section;
      bk.flat = zeros({n}, TensorOptions(first.dtype()).device(first.device()));
    }
    return bk.flat;
  }

  // A member's gradient (zeros where this rank has none) into its slots of the bucket.
  void pack(Bucket& bk, size_t j) {
    const Tensor& p = params[bk.members[j]];
    const Tensor g = p.grad();
    const Tensor& flat = flat_of(bk);
    if (!scattered()) {
      Tensor slot = flat.narrow(0, bk.offsets[j], p.numel());
      if (g.defined())
        slot.copy_(g.reshape({-1}));
      else
        slot.fill_(0.0);
      return;
    }
    const Tensor flat_g = g.defined() ? g.reshape({-1}) : Tensor();
    for (int64_t r = 0; r < group->size(); ++r) {
      const auto [lo, hi] = range_of(bk.members[j], r);
      Tensor slot = flat.narrow(0, r * bk.section + bk.offsets[j], hi - lo);
      if (flat_g.defined())
        slot.copy_(flat_g.narrow(0, lo, hi - lo));
      else
        slot.fill_(0.0);
    }
  }

  // The averaged gradient of member j back into its parameter's grad: all of it, or this rank's
  // range (the rest keeps this rank's own, unaveraged values, which the sharded step never reads).
  void unpack(Bucket& bk, size_t j) {
    const size_t k = bk.members[j];
    const Tensor& p = params[k];
    Tensor g = p.grad();
    if (!scattered()) {
      const Tensor avg = bk.flat.narrow(0, bk.offsets[j], p.numel()).view(p.shape());
      if (g.defined())
        g.copy_(avg);
      else
        p.set_grad(avg.clone());
      return;
    }
    if (!g.defined() || !g.is_contiguous()) {
      g = g.defined() ? g.contiguous() : zeros(p.shape(), TensorOptions(p.dtype()).device(p.device()));
      p.set_grad(g);
    }
    const auto [lo, hi] = range_of(k, group->rank());
    g.view({-1}).narrow(0, lo, hi - lo).copy_(bk.flat.narrow(0, group->rank() * bk.section + bk.offsets[j], hi - lo));
  }

  void build_buckets() {
    const double cap = options.bucket_mb_ * 1024.0 * 1024.0;
    Bucket cur;
    double bytes = 0;
    auto close = [&] {
      if (!cur.members.empty()) buckets.push_back(std::move(cur));
      cur = Bucket{};
      bytes = 0;
    };
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k];
      const double b = static_cast<double>(p.numel()) * static_cast<double>(dtype_size(p.dtype()));
      if (!cur.members.empty()) {
        const Tensor& first = params[cur.members.front()];
        if (first.dtype() != p.dtype() || first.device() != p.device() || bytes + b > cap) close();
      }
      cur.members.push_back(k);
      bytes += b;
    }
    close();
    bucket_of.assign(params.size(), 0);
    for (size_t bi = 0; bi < buckets.size(); ++bi)
      for (size_t k : buckets[bi].members) bucket_of[k] = bi;
    lay_out_buckets();
  }

  void mark_ready(size_t k) {
    if (!prepared) return;  // outside a synchronized step (no_sync, or no prepare): local only
    OCTET_CHECK(!ready[k], "DistributedDataParallel: parameter '", names[k],
                "' got its gradient twice in one synchronized backward (call prepare_for_backward, or forward, "
                "before each backward)");
    ready[k] = 1;
    if (--buckets[bucket_of[k]].pending == 0) launch_ready();
  }

  // Starts, in bucket order, every bucket whose gradients are all in; the last one finishes the step.
  void launch_ready() {
    NoGradGuard no_grad;
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& bk = buckets[next_launch];
      if (alone()) {  // one process: the gradients are already the averages
        ++next_launch;
        continue;
      }
      for (size_t j = 0; j < bk.members.size(); ++j) pack(bk, j);
      bk.work = scattered() ? group->reduce_scatter_async(flat_of(bk), dist::ReduceOp::average)
                            : group->all_reduce_async(flat_of(bk), dist::ReduceOp::average);
      ++next_launch;
      for (size_t b = 0; b + 1 < next_launch; ++b) buckets[b].work.done();  // drive MPI's progress
    }
    if (next_launch == buckets.size()) finish();
  }

  void finish() {
    NoGradGuard no_grad;
    const auto t0 = std::chrono::steady_clock::now();
    used_work.wait();
    for (Bucket& bk : buckets) bk.work.wait();
    wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int32_t* u = used.data<int32_t>();
    for (Bucket& bk : buckets) {
      if (alone()) break;
      for (size_t j = 0; j < bk.members.size(); ++j)
        if (u[bk.members[j]] != 0) unpack(bk, j);  // no rank has a gradient: it stays undefined, as in PyTorch
    }
    if (options.broadcast_buffers_)
      for (const Tensor& b : buffers) group->broadcast(b, 0);
    prepared = false;
  }
};

Tensor dist_sum(const Tensor& x, const dist::ProcessGroup& group) {
  Tensor y = x.detach().contiguous().clone();
  group.all_reduce(y, dist::ReduceOp::sum);
  if (autograd::needs_grad({x})) {
    const dist::ProcessGroup* g = &group;
    autograd::record("dist_sum", {x}, {y}, [g](const autograd::Grads& dy) {
      Tensor d = dy[0].contiguous().clone();
      g->all_reduce(d, dist::ReduceOp::sum);
      return autograd::Grads{d};
    });
  }
  return y;
}

int64_t convert_sync_batchnorm(Module& model, const dist::ProcessGroup& group) {
  int64_t converted = 0;
  model.apply([&](Module& m) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) {
      bn->set_sync(&group);
      ++converted;
    }
  });
  return converted;
}

void broadcast_weights(const Module& model, const dist::ProcessGroup& group) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  for (const auto& [name, t] : model.named_parameters()) group.broadcast(t, 0);
  for (const auto& [name, t] : model.named_buffers()) group.broadcast(t, 0);
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, dist::ProcessGroup& group,
                                                 DdpOptions options)
    : module_(std::move(module)), group_(group), options_(options) {
  OCTET_CHECK(module_ != nullptr, "DistributedDataParallel: expected a module, got a null pointer");
  OCTET_CHECK(options_.bucket_mb_ >= 0, "DistributedDataParallel: expected bucket_mb >= 0, got ", options_.bucket_mb_);
  register_module("module", module_);
  auto r = std::make_shared<Reducer>();
  r->group = &group_;
  r->options = options_;
  const NamedTensors named = module_->named_parameters();
  // The same model on every rank: compare a hash of the parameter layout.
  const int differing = group_.first_rank_differing(layout_of(named));
  OCTET_CHECK(differing < 0, "DistributedDataParallel: rank ", differing, "'s model differs from rank 0's (",
              named.size(),
              " parameters here; names, shapes or dtypes differ): every rank must build the same model "
              "from the same recipe");
  for (const auto& [name, p] : named) {
    if (!p.requires_grad()) continue;
    r->names.push_back(name);
    r->params.push_back(p);
  }
  for (const auto& [name, b] : module_->named_buffers()) r->buffers.push_back(b);
  broadcast_weights(*module_, group_);
  if (options_.bucket_mb_ == 0) r->options.bucket_mb_ = 1e-12;  // every parameter its own bucket
  r->build_buckets();
  r->ready.assign(r->params.size(), 0);
  r->used = zeros({static_cast<int64_t>(r->params.size())}, TensorOptions(DType::i32));
  std::weak_ptr<Reducer> weak = r;
  for (size_t k = 0; k < r->params.size(); ++k) {
    std::shared_ptr<Node> acc = autograd::grad_accumulator(r->params[k]);
    auto* ag = dynamic_cast<autograd::AccumulateGrad*>(acc.get());
    OCTET_CHECK(ag != nullptr, "DistributedDataParallel: parameter '", r->names[k], "' is not a leaf");
    ag->add_post_hook([weak, k] {
      if (auto red = weak.lock()) red->mark_ready(k);
    });
    r->accumulators.push_back(std::move(acc));
  }
  reducer_ = std::move(r);
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& x) {
  Tensor y = module_->forward(x);
  if (is_training() && autograd::grad_mode_enabled() && no_sync_depth_ == 0 && y.requires_grad())
    prepare_for_backward(y);
  return y;
}

void DistributedDataParallel::prepare_for_backward(const std::vector<Tensor>& outputs) {
  Reducer& r = *reducer_;
  OCTET_CHECK(!r.prepared,
              "DistributedDataParallel: prepare_for_backward called again before the backward of "
              "the last one ran");
  if (no_sync_depth_ > 0) return;
  // The nodes the backward will run: a parameter whose accumulator is not among them gets no
  // gradient this step.
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const Tensor& t : outputs)
    if (t.defined() && t.requires_grad()) {
      const Edge e = autograd::edge_of(t);
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges())
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::fill(r.ready.begin(), r.ready.end(), 0);
  for (auto& bk : r.buckets) bk.pending = static_cast<int>(bk.members.size());
  r.next_launch = 0;
  r.prepared = true;
  std::vector<size_t> unused;
  int32_t* u = r.used.data<int32_t>();
  for (size_t k = 0; k < r.params.size(); ++k) {
    const bool reached = seen.count(r.accumulators[k].get()) > 0;
    u[k] = reached || r.params[k].grad().defined() ? 1 : 0;
    if (!reached) unused.push_back(k);
  }
  r.used_work = r.group->all_reduce_async(r.used, dist::ReduceOp::sum);
  for (size_t k : unused) r.mark_ready(k);
}

bool DistributedDataParallel::sync_pending() const { return reducer_->prepared; }

void DistributedDataParallel::check_synchronized() const {
  OCTET_CHECK(!reducer_->prepared, "DistributedDataParallel: a prepared backward has not run (", reducer_->next_launch,
              " of ", reducer_->buckets.size(),
              " gradient buckets averaged); call backward on the loss before the optimizer step");
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& bk : reducer_->buckets) out.push_back(bk.members);
  return out;
}

double DistributedDataParallel::last_wait_s() const { return reducer_->wait_s; }

void DistributedDataParallel::shard_gradients(const std::function<int64_t(const std::string&)>& shard_size) {
  Reducer& r = *reducer_;
  OCTET_CHECK(!r.prepared, "DistributedDataParallel: shard_gradients during a prepared backward");
  if (r.alone()) return;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < r.params.size(); ++k) {
    const int64_t c = shard_size(r.names[k]), n = r.params[k].numel();
    OCTET_CHECK(c >= 0 && c * r.group->size() >= n, "DistributedDataParallel: shard_gradients: parameter '", r.names[k],
                "' of ", n, " elements gets ", c, " per rank, which do not cover it on ", r.group->size(), " ranks");
    sizes.push_back(c);
  }
  r.shard_sizes = std::move(sizes);
  r.lay_out_buckets();
}

bool DistributedDataParallel::gradients_sharded() const { return reducer_->scattered(); }

}  // namespace octet
