// The evaluations alone (tools/train/evaluator.h): the record after an epoch with the train
// averages, and the final test of a classifier (its last evaluation).
#include <gtest/gtest.h>

#include "tests/data/temp_dir.h"
#include "tests/train/loop_parts.h"
#include "tests/train/run_util.h"
#include "tools/train/evaluator.h"

namespace octet::train {
namespace {

// A classifier's evaluator writing into a new run folder.
struct EvalFixture {
  EvalFixture() : folder(true, RunFolder::Clock::now()), model(4, 3), ev(task, model, folder, agree, Device::cpu()) {
    folder.open(parts_recipe(dir.path() + "/runs"), "", "", RunFacts{});
  }
  octet::testing::TempDir dir;
  RunFolder folder;
  FixedBatchTask task;
  Linear model;
  DistributedAgreement agree;
  Evaluator ev;
};

TEST(Evaluator, RecordsTheEpochWithItsTrainAverages) {
  EvalFixture f;
  EXPECT_FALSE(f.ev.language_model());
  RunningSums train;
  train.loss = 8.0, train.n = 16, train.correct = 12;
  const EvalResult& r = f.ev.after_epoch(0, 2, 10, train);
  EXPECT_EQ(r.top1, 75.0);
  EXPECT_EQ(f.ev.last().loss, 0.5);
  const auto records = records_of(f.folder.dir(), "test");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["step"].get<double>(), 10.0);
  EXPECT_EQ(records[0]["epoch"].get<double>(), 1.0);
  EXPECT_EQ(records[0]["train_loss"].get<double>(), 0.5);
  EXPECT_EQ(records[0]["train_top1"].get<double>(), 75.0);
  // A classifier's final test is its last evaluation; nothing more is recorded.
  f.task.eval.top1 = 10;
  EXPECT_EQ(f.ev.final_test(10, 2).top1, 75.0);
  EXPECT_EQ(records_of(f.folder.dir(), "test").size(), 1u);
}

TEST(Evaluator, AnEpochOfSkippedStepsHasNoTrainLoss) {
  EvalFixture f;
  f.ev.after_epoch(0, 1, 1, RunningSums{});
  const auto records = records_of(f.folder.dir(), "test");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].contains("train_loss") && records[0]["train_loss"].is_number());
}

}  // namespace
}  // namespace octet::train
