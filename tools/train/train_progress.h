// The progress of a run's training, as a person and metrics.jsonl see it: the bar of each epoch,
// the loss and accuracy sums of the log interval and of the epoch, and each interval's train record
// (through the run folder: metrics.jsonl and TensorBoard; and, without a bar, the log line).
//   TrainProgress p(folder, agree, *task, recipe.boolean("log.progress"));
//   p.start_epoch(0, epochs, {});  p.add(steps.stats().drain());  p.update(b + 1, lr);
//   p.record(MetricRecord{"train", {{"step", 1}, {"epoch", 0.5}, {"lr", 0.1}}}, 0, int8);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tools/train/batch_stats.h"
#include "tools/train/dist_agreement.h"
#include "tools/train/int8_run.h"
#include "tools/train/metrics.h"
#include "tools/train/progress.h"
#include "tools/train/run_folder.h"
#include "tools/train/task.h"

namespace octet::train {

class TrainProgress {
 public:
  // `show`: log.progress (the bar is drawn on a terminal, by the writer alone).
  TrainProgress(RunFolder& folder, const DistributedAgreement& agree, const Task& task, bool show);
  // Epoch `epoch` (0-based) of `epochs` begins; `resumed`: the sums of the epoch a resumed run continues.
  void start_epoch(int64_t epoch, int64_t epochs, int64_t batches, const EpochSums& resumed);
  void add(const std::vector<BatchStats>& stats);
  // A skipped step's examples (train.on_nonfinite: skip): in the rate, not in the loss.
  void skipped(int64_t examples);
  // The bar after `done` batches of the epoch, with the epoch's loss so far and the learning rate.
  void update(int64_t done, double lr);
  // Ends the bar's line, so that a message starts on a line of its own.
  void end_line();
  // The epoch's sums over every rank (for its checkpoint, on every rank).
  RunningSums epoch_sums() const { return agree_.sum(epoch_); }
  // The end of the epoch: the bar's last line with the epoch's sums (over every rank), returned.
  RunningSums finish_epoch();
  // The record of the interval that ends now: `rec` holds what the loop knows (step, epoch, lr and
  // its counters) in epoch `epoch` (0-based); loss, top1, the rate, wall_s (and ppl) are added here.
  // The next interval begins.
  void record(MetricRecord rec, int64_t epoch, const Int8Run& int8);

 private:
  RunFolder& folder_;
  const DistributedAgreement& agree_;
  const Task& task_;
  bool show_;
  bool lm_;
  std::unique_ptr<ProgressBar> bar_;
  RunningSums interval_, epoch_;
  std::chrono::steady_clock::time_point interval_start_;
};

}  // namespace octet::train
