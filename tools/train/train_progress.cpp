#include "tools/train/train_progress.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace octet::train {

using Clock = std::chrono::steady_clock;

TrainProgress::TrainProgress(RunFolder& folder, const DistributedAgreement& agree, const Task& task, bool show)
    : folder_(folder), agree_(agree), task_(task), show_(show), lm_(task.vocab_size() > 0) {}

void TrainProgress::start_epoch(int64_t epoch, int64_t epochs, int64_t batches, const EpochSums& resumed) {
  bar_ = std::make_unique<ProgressBar>("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs), batches,
                                       agree_.writer() && show_, task_.units_per_step(), task_.unit());
  interval_ = RunningSums{}, epoch_ = RunningSums{resumed};
  interval_start_ = Clock::now();
}

void TrainProgress::add(const std::vector<BatchStats>& stats) {
  for (const BatchStats& st : stats) interval_.add(st), epoch_.add(st);
}

void TrainProgress::skipped(int64_t examples) { interval_.skipped += examples, epoch_.skipped += examples; }

void TrainProgress::update(int64_t done, double lr) {
  char lr_text[32];
  std::snprintf(lr_text, sizeof(lr_text), "lr %.4g", lr);
  bar_->update(done, epoch_.n > 0 ? sums_text(epoch_, lm_) + " " + lr_text : std::string(lr_text));
}

void TrainProgress::end_line() {
  if (bar_) bar_->end_line();
}

RunningSums TrainProgress::finish_epoch() {
  const RunningSums train = agree_.sum(epoch_);
  bar_->finish(sums_text(train, lm_));
  return train;
}

void TrainProgress::record(MetricRecord rec, int64_t epoch, const Int8Run& int8) {
  const double secs = std::chrono::duration<double>(Clock::now() - interval_start_).count();
  interval_ = agree_.sum(interval_);
  const double n = static_cast<double>(interval_.n);
  // An interval of skipped steps alone has no loss or accuracy (null in metrics.jsonl).
  const double none = std::numeric_limits<double>::quiet_NaN();
  const std::string rate_key = lm_ ? "tokens_per_s" : "samples_per_s";
  rec.values["loss"] = n > 0 ? interval_.loss / n : none;
  rec.values["top1"] = n > 0 ? 100.0 * static_cast<double>(interval_.correct) / n : none;
  rec.values[rate_key] = secs > 0 ? (n + static_cast<double>(interval_.skipped)) / secs : 0.0;
  rec.values["wall_s"] = folder_.wall_s();
  if (lm_) rec.values["ppl"] = std::exp(rec.values["loss"]);
  if (agree_.writer()) {
    folder_.record_train(rec, {"loss", "top1", "lr", rate_key}, int8);
    if (!ProgressBar::terminal() || !show_) {
      spdlog::info("epoch {} step {}: {} lr {:.4g} {:.0f} {}/s", epoch + 1, static_cast<int64_t>(rec.values["step"]),
                   sums_text(interval_, lm_), rec.values["lr"], rec.values[rate_key], task_.unit());
      if (!int8.empty()) spdlog::info("{}", int8.summary());
    }
  }
  interval_ = RunningSums{};
  interval_start_ = Clock::now();
}

}  // namespace octet::train
