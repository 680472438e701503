// Metrics: JSONL records survive a resume, and the curves page draws what was recorded.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/data/temp_dir.h"
#include "tools/metrics.h"

namespace octet::tools {
namespace {

TEST(Metrics, RecordsResumeAndCurves) {
  octet::testing::TempDir dir;
  {
    MetricsLog log(dir.path(), false);
    log.record({"train", {{"step", 1}, {"epoch", 0.5}, {"loss", 2.0}, {"top1", 10}, {"lr", 0.1}}});
    log.record({"test", {{"step", 2}, {"epoch", 1}, {"loss", 1.5}, {"top1", 40}}});
  }
  {
    std::ofstream(dir.path() + "/metrics.jsonl", std::ios::app) << "{\"split\":\"tra";  // a line cut by a crash
  }
  MetricsLog resumed(dir.path(), true);
  ASSERT_EQ(resumed.records().size(), 2u);
  EXPECT_EQ(resumed.records()[1].split, "test");
  EXPECT_EQ(resumed.records()[1].values.at("top1"), 40);
  resumed.record({"train", {{"step", 3}, {"epoch", 1.5}, {"loss", 1.0}, {"top1", 60}, {"lr", 0.05}}});
  resumed.write_curves();
  std::ifstream in(dir.path() + "/curves.html");
  std::string html((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(html.find("<svg"), std::string::npos);
  size_t lines = 0;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 5u);  // loss train/test, top-1 train/test, lr; samples/s was never recorded
  EXPECT_NE(html.find("learning rate"), std::string::npos);
}

}  // namespace
}  // namespace octet::tools
