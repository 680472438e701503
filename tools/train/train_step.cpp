#include "tools/train/train_step.h"

#include <cmath>

#include "core/autocast.h"
#include "optim/clip.h"
#include "tools/train/run_support.h"

namespace octet::train {

StepRunner::StepRunner(Module& model, Optimizer& optimizer, const LrSchedule& schedule, Task& task, Int8Run& int8,
                       const DistributedAgreement& agree, StepPolicy policy)
    : model_(model),
      optimizer_(optimizer),
      schedule_(schedule),
      task_(task),
      int8_(int8),
      agree_(agree),
      policy_(std::move(policy)),
      buffers_(model.buffers()) {}

StepResult StepRunner::run(int64_t epoch, int64_t b, int64_t batches, int64_t step) {
  apply_schedule(optimizer_, schedule_, static_cast<double>(epoch) + static_cast<double>(b) / double(batches));
  // A skipped step must not leave its forward pass's buffer updates (batch-norm running
  // statistics of non-finite activations) behind: they are restored from this copy.
  std::vector<Tensor> buffers_before;
  if (policy_.on_nonfinite == "skip")
    for (const Tensor& t : buffers_) buffers_before.push_back(t.clone());
  StepOutput out;
  {
    AutocastGuard autocast(policy_.precision);  // f32: off; the backward runs as the forward decided
    out = task_.step(model_, b);
  }
  optimizer_.zero_grad();
  if (ddp_) ddp_->prepare_for_backward(out.loss);
  out.loss.backward();
  if (ddp_) {
    ddp_->check_synchronized();
    comm_wait_s_ += ddp_->last_wait_s();
  }
  // The global gradient norm, an exact sum, is finite exactly when every gradient is (clip_grad_norm
  // leaves non-finite gradients unscaled). Over the optimizer's parameters: with sharded state each
  // rank holds only its ranges of the averaged gradients, and their sums are added over the ranks.
  const double clip = policy_.clip_grad_norm;
  const double grad_norm = clip_grad_norm(optimizer_, clip > 0 ? clip : kNoClip);
  if (!int8_.empty()) {
    agree_.average_int8_distances(int8_);
    int8_.after_backward(step + 1);
    int8_.apply_dclr(optimizer_);  // each INT8 layer's lr factor from this backward pass's d_c
  }
  // The loss is read here only where it is read every step anyway (the CPU): on a GPU a
  // non-finite loss shows in its gradients.
  // Several processes decide on the averaged gradients alone, the same on every rank (a rank's
  // non-finite loss makes them non-finite).
  if (!std::isfinite(grad_norm) || !(ddp_ || !policy_.read_every_step || std::isfinite(out.loss.item())))
    return not_finite(out, epoch, b, step, buffers_before);
  optimizer_.step();
  stats_.push(out.loss, out.logits, out.labels);
  return {};
}

StepResult StepRunner::not_finite(const StepOutput& out, int64_t epoch, int64_t b, int64_t step,
                                  const std::vector<Tensor>& buffers_before) {
  StepResult r;
  r.updated = false;
  r.nonfinite = nonfinite_text(model_, optimizer_, out.loss, step + 1, epoch, b);
  if (policy_.on_nonfinite == "stop") {
    r.stop = true;
    return r;
  }
  ++skipped_steps_;
  optimizer_.zero_grad();
  NoGradGuard no_grad;
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(buffers_before[i]);
  task_.skip_step();
  // Its loss and accuracy are not the model's: the metrics count it in skipped_steps alone.
  r.skipped_examples = out.labels.size(0);
  return r;
}

double StepRunner::take_comm_wait_s() {
  const double s = comm_wait_s_;
  comm_wait_s_ = 0;
  return s;
}

}  // namespace octet::train
