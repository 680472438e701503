// DistributedDataParallel: the same model on every process of a job, each on its share of the
// batch, with gradients averaged across processes during the backward pass, so every process
// takes the update one process would take on the whole batch and the weights stay bit-identical.
//  - At construction, rank 0's parameters and buffers go to every rank, and a hash of the
//    parameters' names, shapes and dtypes is compared across ranks (a mismatch names the rank).
//  - Gradients are averaged in buckets of about bucket_mb (25 MB), in reverse registration order
//    (roughly the order the backward produces them). A bucket starts communicating as soon as its
//    last gradient is accumulated, so communication overlaps the rest of the backward; the last
//    one finishes inside the backward. Buckets start in the same order on every rank.
//  - A parameter that gets no gradient in a step (unused by this forward) is handled: its slot
//    counts as zeros, and a parameter no rank used keeps no gradient, as in PyTorch.
//  - no_sync(): while its guard lives, backward passes accumulate locally (gradient accumulation
//    over micro-batches); the first backward after it averages the accumulated gradients.
//  - Buffers (BatchNorm's running statistics) are rank 0's after every synchronized backward.
// The collectives are core/distributed.h's: deterministic, and bounded by the group's time-out.
//   auto ddp = std::make_shared<DistributedDataParallel>(model);   // model: any Module
//   Tensor loss = cross_entropy((*ddp)(x_local), y_local);          // forward prepares the sync
//   loss.backward();  opt.step();                                   // grads averaged over ranks
// A model whose forward takes other arguments: call it directly, then
// ddp->prepare_for_backward(loss) before loss.backward().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/distributed.h"
#include "layers/module.h"

namespace octet {

struct DdpOptions {
  double bucket_mb_ = 25.0;        // gradient bytes per bucket (MiB); 0: one bucket per parameter
  bool broadcast_buffers_ = true;  // rank 0's buffers to every rank after each synchronized backward

  DdpOptions& bucket_mb(double v) {
    bucket_mb_ = v;
    return *this;
  }
  DdpOptions& broadcast_buffers(bool v) {
    broadcast_buffers_ = v;
    return *this;
  }
};

// The sum of x over the ranks of `group`, differentiable: the gradient each rank gets is the sum of
// every rank's gradient of the result (the result enters every rank's loss). SyncBatchNorm's
// statistics are built on it.
Tensor dist_sum(const Tensor& x, const dist::ProcessGroup& group);

// Every BatchNorm2d of `model` (and its descendants) normalizes with the statistics of the global
// batch over `group` (PyTorch's SyncBatchNorm.convert_sync_batchnorm; recipe train.sync_batchnorm).
// Returns how many were converted.
int64_t convert_sync_batchnorm(Module& model, const dist::ProcessGroup& group = dist::ProcessGroup::world());

// Every parameter and buffer of `model` = rank 0's, in place (what DistributedDataParallel does at
// its start; the trainer again after rank 0 alone read weights from a file).
void broadcast_weights(const Module& model, const dist::ProcessGroup& group = dist::ProcessGroup::world());

class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   dist::ProcessGroup& group = dist::ProcessGroup::world(), DdpOptions options = {});
  ~DistributedDataParallel() override;

  // module's forward; in training with grad mode on and outside no_sync(), then
  // prepare_for_backward(y).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "DistributedDataParallel"; }

  // The next backward from `outputs` (the loss, or the forward's outputs) averages gradients. It
  // finds the parameters that backward will reach; the others count as unused this step.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  void prepare_for_backward(const Tensor& output) { prepare_for_backward(std::vector<Tensor>{output}); }
  // True while a prepared backward has not yet averaged every gradient.
  bool sync_pending() const;
  // An Error when a prepared backward did not run (call before the optimizer step).
  void check_synchronized() const;

  // While the returned guard lives, forward() prepares nothing and backward passes accumulate
  // locally.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.no_sync_depth_++; }
    ~NoSync() { ddp_.no_sync_depth_--; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  Module& module() { return *module_; }
  dist::ProcessGroup& group() { return group_; }
  // ZeRO stage 1's communication: from now on each bucket is reduce-scattered rather than
  // all-reduced, so each rank receives only its range of every averaged gradient -- rank r the
  // flattened elements [r c, (r + 1) c) of a parameter with c = shard_size(name) -- at the bytes of
  // half an all-reduce; the rest of each grad keeps this rank's own values. For a sharded optimizer
  // (Optimizer::shard_state, whose step reads only this range): pass its shard_size. The values in
  // the range are the bits the all-reduce gives. A group of one process changes nothing.
  //   ddp.shard_gradients([&](const std::string& name) { return opt.shard_size(name); });
  void shard_gradients(const std::function<int64_t(const std::string&)>& shard_size);
  bool gradients_sharded() const;
  // How the parameters were bucketed: parameter indices (into named_parameters order) per bucket.
  std::vector<std::vector<size_t>> bucket_indices() const;
  // Seconds spent waiting for communication in the last synchronized backward (not overlapped).
  double last_wait_s() const;

  struct Reducer;

 private:
  std::shared_ptr<Module> module_;
  dist::ProcessGroup& group_;
  DdpOptions options_;
  int no_sync_depth_ = 0;
  std::shared_ptr<Reducer> reducer_;  // shared: the gradient hooks hold it weakly
};

}  // namespace octet
