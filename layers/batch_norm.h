// BatchNorm2d: per-channel batch normalization of NCHW inputs with running statistics.
// Training normalizes with the batch statistics and updates running_mean / running_var
// (r = (1 - momentum) r + momentum * stat, unbiased variance) and num_batches_tracked;
// evaluation normalizes with the running statistics. With set_sync(group) (SyncBatchNorm, as
// PyTorch's: convert_sync_batchnorm in layers/distributed.h sets it on a whole model), training
// normalizes with the statistics of the whole global batch over the group's processes, and the
// backward sums the statistics' gradients over them.
//   auto bn = std::make_shared<BatchNorm2d>(64);   Tensor y = (*bn)(x);   bn->eval();
#pragma once

#include <memory>

#include "core/distributed.h"
#include "core/norm_act.h"
#include "layers/module.h"

namespace octet {

class BatchNorm2d;

// A module that may apply the batch norm in front of it in its own op (set up by the fusion pass,
// layers/fusion.h: Conv2d for an INT8 layer, Add for a residual).
class BatchNormConsumer {
 public:
  virtual ~BatchNormConsumer() = default;
  // Whether its forward, now, applies `bn` itself; bn's forward then passes its input on.
  virtual bool applies(const BatchNorm2d& bn) const = 0;
};

class BatchNorm2d : public Module {
 public:
  // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0 (i64 scalar).
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  // x [N, C, H, W] -> same shape: act_(bn(x)), or x itself where the fusion pass made a consumer
  // that applies this batch norm (consumer_). final: the fused forms rely on what it computes.
  Tensor forward(const Tensor& x) final;
  // act(bn(x) + residual) for act relu/relu6 (or none) and a residual of x's shape (or none) in
  // one op: the same bits, and in training no activation is kept for the backward (batch_norm in
  // core/ops/norm.h). The fused forms call it.
  Tensor forward(const Tensor& x, NormActivation act, const Tensor& residual = Tensor());
  std::string type_name() const override { return sync_ ? "SyncBatchNorm" : "BatchNorm2d"; }
  std::string extra_repr() const override;
  void reset_parameters();
  // Whether a consumer may take this module's training forward into its own op (an INT8 Conv2d's
  // codes): in training mode and not synchronized over processes.
  bool fusable() const { return is_training() && !(sync_ && sync_->size() > 1); }
  // What such a fused forward does besides normalizing: the input check of forward(x) and, in
  // training mode, num_batches_tracked + 1.
  void check_input(const Tensor& x) const;
  void count_batch();
  // Training statistics over every process of `group` (null: this process's batch only).
  void set_sync(const dist::ProcessGroup* group) { sync_ = group; }
  const dist::ProcessGroup* sync() const { return sync_; }

  int64_t num_features_;
  double eps_, momentum_;
  Tensor weight_, bias_;                                     // parameters [C]
  Tensor running_mean_, running_var_, num_batches_tracked_;  // buffers

  // ---- set by the fusion pass (layers/fusion.h), cleared by clear_fusion()
  NormActivation act_ = NormActivation::none;  // applied after normalizing (the ReLU(6) after passes its input on)
  std::weak_ptr<BatchNormConsumer> consumer_;  // when it applies this batch norm, forward passes x on
  void clear_fusion();

 private:
  Tensor sync_forward(const Tensor& x);
  const dist::ProcessGroup* sync_ = nullptr;
};

}  // namespace octet
