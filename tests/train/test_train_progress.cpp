// The progress of training alone (tools/train/train_progress.h): the sums of an epoch (a resumed
// one's carried on) and of a log interval, each interval's train record in metrics.jsonl, skipped
// steps, and a language model's rate and perplexity.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/data/temp_dir.h"
#include "tests/train/loop_parts.h"
#include "tests/train/run_util.h"
#include "tools/train/train_progress.h"

namespace octet::train {
namespace {

// FixedBatchTask as a language model: a vocabulary, and tokens as its unit.
class TokenTask : public FixedBatchTask {
 public:
  int64_t vocab_size() const override { return 10; }
  const char* unit() const override { return "tokens"; }
};

// The progress of `task`'s training (no bar), recording into a new run folder.
struct ProgressFixture {
  explicit ProgressFixture(const Task& task)
      : folder(true, RunFolder::Clock::now()), progress(folder, agree, task, /*show=*/false) {
    folder.open(parts_recipe(dir.path() + "/runs"), "", "", RunFacts{});
  }
  // The record of the interval that ends at `step`.
  void record(double step) {
    progress.record(MetricRecord{"train", {{"step", step}, {"epoch", step / 2}, {"lr", 0.1}}}, 0, int8);
  }
  octet::testing::TempDir dir;
  RunFolder folder;
  DistributedAgreement agree;
  TrainProgress progress;
  Int8Run int8{{}};
};

TEST(TrainProgress, EpochSumsCarryTheResumedOnes) {
  FixedBatchTask task;
  ProgressFixture f(task);
  EpochSums resumed;
  resumed.loss = 4.0, resumed.n = 8, resumed.correct = 6;
  f.progress.start_epoch(1, 3, 4, resumed);
  f.progress.add({BatchStats{0.5, 8, 4, 8}, BatchStats{0.25, 8, 8, 8}});
  f.progress.update(2, 0.1);
  const RunningSums sums = f.progress.epoch_sums();
  EXPECT_EQ(sums.n, 24);
  EXPECT_EQ(sums.loss, 4.0 + 0.5 * 8 + 0.25 * 8);  // each batch's mean loss times its examples
  EXPECT_EQ(sums.correct, 18);
  const RunningSums done = f.progress.finish_epoch();
  EXPECT_EQ(done.n, 24);
  EXPECT_EQ(done.loss, sums.loss);
  // The next epoch starts from zero.
  f.progress.start_epoch(2, 3, 4, {});
  EXPECT_EQ(f.progress.epoch_sums().n, 0);
}

TEST(TrainProgress, RecordsEachIntervalAndStartsTheNext) {
  FixedBatchTask task;
  ProgressFixture f(task);
  f.progress.start_epoch(0, 1, 2, {});
  f.progress.add({BatchStats{0.5, 8, 6, 8}});
  f.record(1);
  f.progress.add({BatchStats{1.0, 8, 2, 8}});
  f.record(2);
  const auto records = records_of(f.folder.dir(), "train");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["step"].get<double>(), 1.0);
  EXPECT_EQ(records[0]["lr"].get<double>(), 0.1);
  EXPECT_EQ(records[0]["loss"].get<double>(), 0.5);
  EXPECT_EQ(records[0]["top1"].get<double>(), 75.0);
  EXPECT_TRUE(records[0].contains("samples_per_s"));
  EXPECT_TRUE(records[0].contains("wall_s"));
  EXPECT_FALSE(records[0].contains("ppl"));
  // The second interval holds its own batch alone; the epoch, both.
  EXPECT_EQ(records[1]["loss"].get<double>(), 1.0);
  EXPECT_EQ(records[1]["top1"].get<double>(), 25.0);
  EXPECT_EQ(f.progress.epoch_sums().n, 16);
}

TEST(TrainProgress, SkippedStepsCountInTheRateNotTheLoss) {
  FixedBatchTask task;
  ProgressFixture f(task);
  f.progress.start_epoch(0, 1, 1, {});
  f.progress.skipped(8);
  f.record(1);
  const auto records = records_of(f.folder.dir(), "train");
  ASSERT_EQ(records.size(), 1u);
  // An interval of skipped steps alone has no loss or accuracy (null), but a rate.
  EXPECT_TRUE(records[0]["loss"].is_null());
  EXPECT_TRUE(records[0]["top1"].is_null());
  EXPECT_GE(records[0]["samples_per_s"].get<double>(), 0.0);
  const RunningSums sums = f.progress.epoch_sums();
  EXPECT_EQ(sums.n, 0);
  EXPECT_EQ(sums.skipped, 8);
}

TEST(TrainProgress, ALanguageModelRecordsTokensAndPerplexity) {
  TokenTask task;
  ProgressFixture f(task);
  f.progress.start_epoch(0, 1, 1, {});
  f.progress.add({BatchStats{2.0, 16, 0, 0}});
  f.record(1);
  const auto records = records_of(f.folder.dir(), "train");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["loss"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(records[0]["ppl"].get<double>(), std::exp(2.0));
  EXPECT_TRUE(records[0].contains("tokens_per_s"));
  EXPECT_FALSE(records[0].contains("samples_per_s"));
}

}  // namespace
}  // namespace octet::train
