// What the processes agree on (tools/train/dist_agreement.h), for one process (the collectives
// across ranks run in the dist_* tests under mpirun): every answer is this process's own.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>

#include "tests/train/loop_parts.h"
#include "tools/train/dist_agreement.h"

namespace octet::train {
namespace {

TEST(DistributedAgreement, OneProcessDecidesAlone) {
  DistributedAgreement agree;
  EXPECT_TRUE(agree.writer());
  EXPECT_EQ(agree.world_size(), 1);
  EXPECT_EQ(agree.group(), nullptr);
  EXPECT_TRUE(agree.any(true));
  EXPECT_FALSE(agree.any(false));
  RunningSums r;
  r.loss = 3, r.n = 4, r.correct = 2, r.skipped = 1;
  const RunningSums s = agree.sum(r);
  EXPECT_EQ(s.loss, 3);
  EXPECT_EQ(s.n, 4);
  EXPECT_EQ(s.correct, 2);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_NO_THROW(agree.check_same_recipe(parts_recipe("runs")));
  EXPECT_NO_THROW(agree.average_int8_distances(Int8Run({})));
}

TEST(DistributedAgreement, StopAndItsSignal) {
  DistributedAgreement agree;
  std::atomic<bool> stop{false};
  std::atomic<int> sig{0};
  EXPECT_FALSE(agree.stop_requested(nullptr, nullptr));
  EXPECT_FALSE(agree.stop_requested(&stop, &sig));
  stop = true;  // the caller's flag alone: a stop with no signal
  EXPECT_TRUE(agree.stop_requested(&stop, nullptr));
  EXPECT_EQ(agree.stop_signal(), 0);
  sig = SIGTERM;
  EXPECT_TRUE(agree.stop_requested(&stop, &sig));
  EXPECT_EQ(agree.stop_signal(), SIGTERM);
  sig = SIGINT;  // the first signal agreed on stays
  EXPECT_TRUE(agree.stop_requested(&stop, &sig));
  EXPECT_EQ(agree.stop_signal(), SIGTERM);
}

}  // namespace
}  // namespace octet::train
