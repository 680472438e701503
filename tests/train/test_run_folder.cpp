// The run folder and its logs alone (tools/train/run_folder.h): what opening writes, the latest
// link, the records, a resumed session's wall time, and a non-writer rank that touches nothing.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/data/temp_dir.h"
#include "tests/train/loop_parts.h"
#include "tests/train/run_util.h"
#include "tools/train/run_folder.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;
using Clock = RunFolder::Clock;

TEST(RunFolder, OpensRecordsAndPointsLatest) {
  octet::testing::TempDir dir;
  const Recipe recipe = parts_recipe(dir.path() + "/runs");
  std::string path;
  {
    RunFolder f(true, Clock::now());
    f.open(recipe, "", "", RunFacts{"parts.yaml", "Linear", 15, "CPU", 1, {}});
    path = f.dir();
    EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir.path() + "/runs"));
    for (const char* name : {"recipe.yaml", "train.log", "run.json"}) EXPECT_TRUE(fs::exists(f.path(name))) << name;
    EXPECT_FALSE(fs::exists(dir.path() + "/runs/latest"));  // no checkpoint yet
    f.point_latest();
    EXPECT_TRUE(fs::equivalent(dir.path() + "/runs/latest", path));
    MetricRecord rec{"train", {{"step", 3}, {"epoch", 0.5}, {"loss", 1.5}, {"top1", 50}, {"lr", 0.1}, {"wall_s", 42}}};
    f.record_train(rec, {"loss"}, Int8Run({}));
    f.record_eval(EvalResult{0.5, 75, 100, 8, "test", false}, 3, 1.0, Device::cpu());
    f.write_curves();
    EXPECT_TRUE(fs::exists(f.path("curves.html")));
  }
  ASSERT_EQ(records_of(path, "train").size(), 1u);
  EXPECT_EQ(records_of(path, "train")[0]["loss"].get<double>(), 1.5);
  EXPECT_EQ(records_of(path, "test")[0]["top1"].get<double>(), 75.0);
  // A resumed session opens the same folder and goes on from the wall time recorded before.
  RunFolder again(true, Clock::now());
  again.open(recipe, path, path + "/last.safetensors", RunFacts{});
  EXPECT_EQ(again.dir(), path);
  EXPECT_GE(again.wall_s(), 42.0);
}

TEST(RunFolder, ANewNameWhenTaken) {
  octet::testing::TempDir dir;
  const Recipe recipe = parts_recipe(dir.path() + "/runs");
  RunFolder a(true, Clock::now()), b(true, Clock::now());
  a.open(recipe, "", "", RunFacts{});
  b.open(recipe, "", "", RunFacts{});
  EXPECT_NE(a.dir(), b.dir());
}

TEST(RunFolder, NonWriterTouchesNothing) {
  octet::testing::TempDir dir;
  RunFolder f(false, Clock::now());
  f.open(parts_recipe(dir.path() + "/runs"), "", "", RunFacts{});
  f.point_latest();
  f.record_eval(EvalResult{}, 1, 1.0, Device::cpu());
  f.write_curves();
  EXPECT_FALSE(fs::exists(dir.path() + "/runs"));
  EXPECT_TRUE(f.dir().empty());
}

}  // namespace
}  // namespace octet::train
