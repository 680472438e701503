// The evaluations of a training run: after each epoch the task's evaluation split (test, or a
// language model's valid split), recorded with the epoch's train averages and logged; at the end a
// language model's test split with the weights of its best epoch (best.safetensors), as PyTorch's
// word_language_model example does.
//   Evaluator ev(*task, *model, folder, agree, device);
//   const EvalResult& r = ev.after_epoch(epoch, epochs, step, agree.sum(epoch_sums));
#pragma once

#include <cstdint>

#include "core/device.h"
#include "layers/module.h"
#include "tools/train/batch_stats.h"
#include "tools/train/dist_agreement.h"
#include "tools/train/run_folder.h"
#include "tools/train/task.h"

namespace octet::train {

class Evaluator {
 public:
  Evaluator(Task& task, Module& model, RunFolder& folder, const DistributedAgreement& agree, Device device)
      : task_(task), model_(model), folder_(folder), agree_(agree), device_(device) {}
  bool language_model() const { return task_.vocab_size() > 0; }

  // The evaluation after epoch `epoch` (0-based) of `epochs`, at optimizer step `step`; `train`: the
  // epoch's sums over every rank. Its record carries the train averages as the summary line shows them.
  const EvalResult& after_epoch(int64_t epoch, int64_t epochs, int64_t step, const RunningSums& train);
  const EvalResult& last() const { return last_; }
  // The result the run reports as its test: a language model's test split with the weights of
  // best.safetensors in the run folder (rank 0 reads it and hands the weights to every rank; the
  // model keeps them), else the last evaluation.
  EvalResult final_test(int64_t step, int64_t epochs);

 private:
  Task& task_;
  Module& model_;
  RunFolder& folder_;
  const DistributedAgreement& agree_;
  Device device_;
  EvalResult last_;
};

}  // namespace octet::train
