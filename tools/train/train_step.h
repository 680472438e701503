// One training step: the learning rate of its place in the schedule, forward and backward (with
// DistributedDataParallel's gradient all-reduce), the gradient norm and its clip, the INT8 layers'
// DSGC bookkeeping and DCLR factors, and the update -- or, for a non-finite loss or gradient,
// train.on_nonfinite's policy: stop before the update, or skip it, leaving the weights, the buffers
// (batch-norm running statistics) and the task as they were before the step.
//   StepRunner steps(*model, *optimizer, *schedule, *task, int8, agree, {clip, "skip", true});
//   StepResult r = steps.run(epoch, b, batches_per_epoch, state.step);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/distributed.h"
#include "layers/module.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tools/train/batch_stats.h"
#include "tools/train/dist_agreement.h"
#include "tools/train/int8_run.h"
#include "tools/train/task.h"

namespace octet::train {

// The recipe's step policies.
struct StepPolicy {
  double clip_grad_norm = 0;          // train.clip_grad_norm (0: only measured)
  std::string on_nonfinite = "stop";  // train.on_nonfinite: stop or skip
  // Whether the loss is read every step (the CPU; a GPU keeps it until the next metric record, and
  // a non-finite loss then shows in its gradients).
  bool read_every_step = true;
  DType precision = DType::f32;  // train.precision: the forward runs under AutocastGuard(precision)
};

struct StepResult {
  bool updated = true;           // the optimizer stepped
  bool stop = false;             // non-finite, train.on_nonfinite: stop (the weights are as before)
  int64_t skipped_examples = 0;  // non-finite, train.on_nonfinite: skip: the batch's examples
  std::string nonfinite;         // what went non-finite (nonfinite_text), when not updated
};

class StepRunner {
 public:
  StepRunner(Module& model, Optimizer& optimizer, const LrSchedule& schedule, Task& task, Int8Run& int8,
             const DistributedAgreement& agree, StepPolicy policy);
  // Several processes: gradients averaged in each backward pass.
  void set_ddp(std::shared_ptr<DistributedDataParallel> ddp) { ddp_ = std::move(ddp); }

  // Batch b of epoch `epoch` (of `batches` per epoch), the optimizer's step `step` + 1. An updated
  // step's loss and accuracy go to stats().
  StepResult run(int64_t epoch, int64_t b, int64_t batches, int64_t step);
  BatchStatsQueue& stats() { return stats_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  // Seconds waited for the gradient all-reduce since the last call.
  double take_comm_wait_s();

 private:
  StepResult not_finite(const StepOutput& out, int64_t epoch, int64_t b, int64_t step,
                        const std::vector<Tensor>& buffers_before);

  Module& model_;
  Optimizer& optimizer_;
  const LrSchedule& schedule_;
  Task& task_;
  Int8Run& int8_;
  const DistributedAgreement& agree_;
  StepPolicy policy_;
  std::shared_ptr<DistributedDataParallel> ddp_;
  std::vector<Tensor> buffers_;
  BatchStatsQueue stats_;
  int64_t skipped_steps_ = 0;
  double comm_wait_s_ = 0;
};

}  // namespace octet::train
