// Loss and top-1/top-5 counts of training steps and evaluation batches, read back to the host in
// batches. On the CPU each push() reads its numbers at once, exactly as the trainer always did.
// On a GPU they stay on the device ([loss, top1, top5] per batch) and drain() copies every pending
// batch back in one transfer, so the host waits for the GPU once per drain, not once per step.
//   BatchStatsQueue q;  q.push(loss, logits, labels);  ...
//   for (const BatchStats& s : q.drain()) sum += s.loss * s.n;
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "tools/train/checkpoint.h"

namespace octet::train {

struct BatchStats {
  double loss = 0;  // the pushed loss tensor's value (a mean or a sum, as the caller chose)
  int64_t n = 0, top1 = 0, top5 = 0;
};

class BatchStatsQueue {
 public:
  // loss: one element; logits [N, C]; labels i64 [N]; all on one device.
  void push(const Tensor& loss, const Tensor& logits, const Tensor& labels);
  // Every batch pushed since the last drain, in order.
  std::vector<BatchStats> drain();
  size_t pending() const { return host_.size() + device_.size(); }

 private:
  std::vector<BatchStats> host_;
  std::vector<Tensor> device_;  // f32 [3] per batch: loss, top1, top5
  std::vector<int64_t> device_n_;
};

// On the host: a row counts for top-k when fewer than k logits are strictly larger than its
// label's (so ties go the label's way); a NaN logit counts as larger, so a row of NaNs is never right.
void count_topk(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5);

// Loss and accuracy summed over the steps of a log interval or an epoch; `skipped`: the examples of
// skipped steps (train.on_nonfinite: skip), in the rate but not in the loss and accuracy. An epoch's
// sums travel in checkpoints (TrainState::epoch_sums).
struct RunningSums : EpochSums {
  void add(const BatchStats& st) {
    loss += st.loss * static_cast<double>(st.n);
    n += st.n;
    correct += st.top1;
  }
  double mean_loss() const { return loss / std::max<double>(1, static_cast<double>(n)); }
};
// Loss (and perplexity for a language model, `lm`) or accuracy, as the progress bar and the log
// show them: "loss 0.4100 acc 87.10%", "loss 4.5012 ppl 90.14".
std::string sums_text(const RunningSums& r, bool lm);

}  // namespace octet::train
