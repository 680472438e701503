// The training step alone (tools/train/train_step.h): an update with its statistics, and
// train.on_nonfinite's two policies leaving the weights, the buffers and the task as they were.
#include <gtest/gtest.h>

#include <memory>

#include "tests/data/temp_dir.h"
#include "tests/train/loop_parts.h"
#include "tools/train/builders.h"
#include "tools/train/train_step.h"

namespace octet::train {
namespace {

struct StepFixture {
  explicit StepFixture(const std::string& on_nonfinite, double clip = 0)
      : recipe(parts_recipe(dir.path())),
        model(std::make_shared<Linear>(4, 3)),
        optimizer(build_optimizer(recipe, model->named_parameters())),
        schedule(build_schedule(recipe)),
        steps(*model, *optimizer, *schedule, task, int8, agree, StepPolicy{clip, on_nonfinite, true}) {}
  std::vector<float> weights() const { return model->weight_.to_vector<float>(); }

  octet::testing::TempDir dir;
  Recipe recipe;
  std::shared_ptr<Linear> model;
  std::unique_ptr<Optimizer> optimizer;
  std::shared_ptr<LrSchedule> schedule;
  FixedBatchTask task;
  Int8Run int8{{}};
  DistributedAgreement agree;
  StepRunner steps;
};

TEST(StepRunner, UpdatesAndKeepsTheStatistics) {
  StepFixture f("stop");
  const std::vector<float> before = f.weights();
  const StepResult r = f.steps.run(0, 0, 1, 0);
  EXPECT_TRUE(r.updated);
  EXPECT_FALSE(r.stop);
  EXPECT_NE(f.weights(), before);
  const std::vector<BatchStats> st = f.steps.stats().drain();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].n, 8);
  EXPECT_EQ(f.steps.skipped_steps(), 0);
}

TEST(StepRunner, ClipBoundsTheUpdate) {
  // SGD without momentum moves the weights by lr x the clipped gradient: at most 0.1 x 1e-3 in norm.
  StepFixture f("stop", 1e-3);
  const std::vector<float> before = f.weights();
  const Tensor bias_before = f.model->bias_.clone();
  f.steps.run(0, 0, 1, 0);
  const std::vector<float> after = f.weights();
  double moved = sum(square(f.model->bias_ - bias_before)).item();
  for (size_t i = 0; i < after.size(); ++i) moved += double(after[i] - before[i]) * double(after[i] - before[i]);
  EXPECT_LE(std::sqrt(moved), 0.1 * 1e-3 * (1 + 1e-4));
  EXPECT_GT(moved, 0);
}

TEST(StepRunner, NonFiniteSkipLeavesTheModel) {
  StepFixture f("skip");
  f.task.poison = true;
  const std::vector<float> before = f.weights();
  const StepResult r = f.steps.run(0, 0, 1, 4);
  EXPECT_FALSE(r.updated);
  EXPECT_FALSE(r.stop);
  EXPECT_EQ(r.skipped_examples, 8);
  EXPECT_NE(r.nonfinite.find("step 5"), std::string::npos) << r.nonfinite;
  EXPECT_EQ(f.weights(), before);
  EXPECT_EQ(f.task.skips, 1);
  EXPECT_EQ(f.steps.skipped_steps(), 1);
  EXPECT_TRUE(f.steps.stats().drain().empty());
  f.task.poison = false;  // and the next finite step updates
  EXPECT_TRUE(f.steps.run(0, 0, 1, 5).updated);
}

TEST(StepRunner, NonFiniteStopAsksToStop) {
  StepFixture f("stop");
  f.task.poison = true;
  const std::vector<float> before = f.weights();
  const StepResult r = f.steps.run(0, 0, 1, 0);
  EXPECT_TRUE(r.stop);
  EXPECT_FALSE(r.updated);
  EXPECT_FALSE(r.nonfinite.empty());
  EXPECT_EQ(f.weights(), before);
  EXPECT_EQ(f.task.skips, 0);
}

}  // namespace
}  // namespace octet::train
