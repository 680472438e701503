#include "tools/train/batch_stats.h"

#include <cmath>
#include <cstdio>

#include "core/autograd.h"
#include "core/ops/concat.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/reduce.h"

namespace octet::train {

void count_topk(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5) {
  Tensor l = logits.detach().to(DType::f32).contiguous();
  std::vector<float> v = l.to_vector<float>();
  std::vector<int64_t> y = labels.to_vector<int64_t>();
  int64_t c = l.size(1);
  for (size_t i = 0; i < y.size(); ++i) {
    const float* row = v.data() + i * c;
    float t = row[y[i]];
    int64_t rank = 0;
    for (int64_t j = 0; j < c; ++j) rank += !(row[j] <= t);  // a NaN beats the label (and a NaN label loses)
    top1 += rank < 1;
    top5 += rank < 5;
  }
}

void BatchStatsQueue::push(const Tensor& loss, const Tensor& logits, const Tensor& labels) {
  OCTET_CHECK(loss.numel() == 1 && logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "BatchStatsQueue::push: expected a one-element loss, logits [N, C] and labels [N], got ", loss.shape(),
              ", ", logits.shape(), " and ", labels.shape());
  const int64_t n = labels.size(0);
  if (logits.device().is_cpu()) {
    BatchStats s;
    s.n = n;
    count_topk(logits, labels, s.top1, s.top5);
    s.loss = loss.item();
    host_.push_back(s);
    return;
  }
  // The same rank as count_topk, in tensor ops: counts up to 2^24 are exact in f32.
  NoGradGuard ng;
  Tensor l = logits.detach().to(DType::f32);
  Tensor label_logit = gather(l, 1, labels.reshape({n, 1}));           // [N, 1]
  Tensor rank = sum(eq(le(l, label_logit), 0.0).to(DType::f32), {1});  // [N]: logits not <= the label's
  Tensor top1 = sum(lt(rank, 1.0).to(DType::f32)).reshape({1});
  Tensor top5 = sum(lt(rank, 5.0).to(DType::f32)).reshape({1});
  device_.push_back(cat({loss.detach().to(DType::f32).reshape({1}), top1, top5}, 0));
  device_n_.push_back(n);
}

std::vector<BatchStats> BatchStatsQueue::drain() {
  std::vector<BatchStats> out = std::move(host_);
  host_.clear();
  if (device_.empty()) return out;
  std::vector<float> v = cat(device_, 0).to_vector<float>();  // one copy back, one wait for the device
  for (size_t i = 0; i < device_n_.size(); ++i) {
    BatchStats s;
    s.loss = v[3 * i];
    s.n = device_n_[i];
    s.top1 = static_cast<int64_t>(v[3 * i + 1]);
    s.top5 = static_cast<int64_t>(v[3 * i + 2]);
    out.push_back(s);
  }
  device_.clear();
  device_n_.clear();
  return out;
}

std::string sums_text(const RunningSums& r, bool lm) {
  if (r.n == 0) return "no loss (every step skipped)";  // train.on_nonfinite: skip
  char buf[96];
  if (lm)
    std::snprintf(buf, sizeof(buf), "loss %.4f ppl %.2f", r.mean_loss(), std::exp(r.mean_loss()));
  else
    std::snprintf(buf, sizeof(buf), "loss %.4f acc %.2f%%", r.mean_loss(),
                  100.0 * static_cast<double>(r.correct) / std::max<double>(1, static_cast<double>(r.n)));
  return std::string(buf);
}

}  // namespace octet::train
