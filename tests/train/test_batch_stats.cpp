// BatchStatsQueue: top-1/top-5 counts by the rank of the label's logit (ties go the label's way),
// the same numbers whether they are read per batch on the CPU or in one drain from a GPU; NaN
// logits never count as right.
#include <gtest/gtest.h>

#include <limits>

#include "core/cuda.h"
#include "core/octet.h"
#include "tools/train/batch_stats.h"

namespace octet::train {
namespace {

TEST(BatchStats, CountsByRank) {
  // Row 0: label logit is the largest; row 1: 5 logits above it; row 2: tied with the largest;
  // row 3: 4 logits above it.
  Tensor logits = from_vector<float>({9, 1, 2, 3, 4, 5, 6,  //
                                      0, 1, 2, 3, 4, 5, 6,  //
                                      7, 7, 0, 0, 0, 0, 0,  //
                                      1, 2, 3, 4, 5, 0, 0},
                                     {4, 7});
  Tensor labels = from_vector<int64_t>({0, 1, 1, 0}, {4});
  BatchStatsQueue q;
  q.push(scalar_tensor(0.25), logits, labels);
  q.push(scalar_tensor(0.5), logits.narrow(0, 0, 2), labels.narrow(0, 0, 2));
  EXPECT_EQ(q.pending(), 2u);
  std::vector<BatchStats> s = q.drain();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(s[0].n, 4);
  EXPECT_EQ(s[0].top1, 2);  // rows 0 and 2
  EXPECT_EQ(s[0].top5, 3);  // rows 0, 2 and 3 (row 1 has rank 5)
  EXPECT_EQ(s[0].loss, 0.25);
  EXPECT_EQ(s[1].n, 2);
  EXPECT_EQ(s[1].top1, 1);
  EXPECT_EQ(s[1].loss, 0.5);
  EXPECT_THROW(q.push(scalar_tensor(0.0), logits, labels.narrow(0, 0, 3)), Error);
}

// A diverged model's logits: NaN never counts as right (it used to, as no logit compares larger than NaN).
TEST(BatchStats, NaNLogitsAreNeverRight) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor logits = from_vector<float>({nan, nan, nan, nan, nan, nan,  //
                                      9, nan, 0, 0, 0, 0,            //
                                      9, 1, 0, 0, 0, 0},
                                     {3, 6});
  Tensor labels = from_vector<int64_t>({0, 0, 0}, {3});
  BatchStatsQueue q;
  q.push(scalar_tensor(0.0), logits, labels);
  BatchStats s = q.drain().at(0);
  EXPECT_EQ(s.top1, 1);  // row 2 only: row 1's NaN counts as larger than its label's 9
  EXPECT_EQ(s.top5, 2);  // rows 1 and 2
}

TEST(BatchStatsCuda, SameNumbersAsTheCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Generator g(5);
  // Integer-valued logits make ties common; NaN in a few rows (a whole row, a label's, another's).
  std::vector<float> v = (rand({300, 10}, {}, &g) * 6.0).to(DType::i64).to(DType::f32).to_vector<float>();
  for (int j = 0; j < 10; ++j) v[j] = std::numeric_limits<float>::quiet_NaN();
  v[10 * 1 + 7] = v[10 * 2 + 3] = std::numeric_limits<float>::quiet_NaN();
  Tensor logits = from_vector(v, {300, 10});
  std::vector<int64_t> y(300);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>(i * 7 % 10);
  Tensor labels = from_vector(y, {300});
  Tensor loss = scalar_tensor(0.5);  // the rows with NaN would make a cross-entropy NaN
  BatchStatsQueue cpu, gpu;
  for (int rep = 0; rep < 3; ++rep) {
    cpu.push(loss, logits, labels);
    gpu.push(loss.to(Device::cuda()), logits.to(Device::cuda()), labels.to(Device::cuda()));
  }
  std::vector<BatchStats> a = cpu.drain(), b = gpu.drain();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].n, b[i].n);
    EXPECT_EQ(a[i].top1, b[i].top1);
    EXPECT_EQ(a[i].top5, b[i].top5);
    EXPECT_EQ(a[i].loss, b[i].loss);  // the same f32 value, copied
  }
}

}  // namespace
}  // namespace octet::train
