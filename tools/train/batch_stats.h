// Loss and top-1/top-5 counts of training steps and evaluation batches, read back to the host in
// batches. On the CPU each push() reads its numbers at once, exactly as the trainer always did.
// On a GPU they stay on the device ([loss, top1, top5] per batch) and drain() copies every pending
// batch back in one transfer, so the host waits for the GPU once per drain, not once per step.
//   BatchStatsQueue q;  q.push(loss, logits, labels);  ...
//   for (const BatchStats& s : q.drain()) sum += s.loss * s.n;
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

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

}  // namespace octet::train
