// The checkpoints alone (tools/train/checkpoint_keeper.h): checkpoint.on_save_error's policies on a
// writer that fails, what is said of the file on disk, a required save, and the end of a run with
// an unwritten checkpoint; resuming from an export is refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/data/temp_dir.h"
#include "tests/train/loop_parts.h"
#include "tests/train/run_util.h"
#include "tools/train/checkpoint_keeper.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;

struct KeeperFixture {
  explicit KeeperFixture(const std::string& on_save_error) : folder(true, RunFolder::Clock::now()) {
    folder.open(parts_recipe(dir.path() + "/runs"), "", "", RunFacts{});
  }
  // Writes a small file, or fails as a full disk would.
  CheckpointKeeper::Writer writer(bool fail) {
    return [fail](const std::string& path) {
      if (fail) OCTET_FAIL("no space left on device");
      write_file_atomic(path, std::string("checkpoint"));
      return true;
    };
  }
  octet::testing::TempDir dir;
  RunFolder folder;
};

TEST(CheckpointKeeper, SavesAndPointsLatest) {
  KeeperFixture f("stop");
  CheckpointKeeper k(f.folder, "stop");
  EXPECT_EQ(k.on_disk_text(), "no last.safetensors was written yet");
  k.save("last.safetensors", 7, f.writer(false));
  EXPECT_TRUE(fs::exists(f.folder.path("last.safetensors")));
  EXPECT_TRUE(fs::exists(f.dir.path() + "/runs/latest"));
  EXPECT_EQ(k.on_disk_text(), f.folder.path("last.safetensors") + " (step 7) is intact");
  EXPECT_NO_THROW(k.check_all_written(7));
}

TEST(CheckpointKeeper, ContinueWarnsAndWritesAgain) {
  KeeperFixture f("continue");
  CheckpointKeeper k(f.folder, "continue");
  k.save("last.safetensors", 3, f.writer(false));
  EXPECT_NO_THROW(k.save("last.safetensors", 5, f.writer(true)));
  EXPECT_TRUE(k.unwritten("last.safetensors"));
  EXPECT_EQ(k.failures(), 1);
  EXPECT_EQ(k.on_disk_text(), f.folder.path("last.safetensors") + " (step 3) is intact");
  expect_error([&] { k.check_all_written(5); }, "could not be written");
  k.save("last.safetensors", 6, f.writer(false));
  EXPECT_FALSE(k.unwritten("last.safetensors"));
  EXPECT_NO_THROW(k.check_all_written(6));
}

TEST(CheckpointKeeper, StopAndRequiredSavesFail) {
  KeeperFixture f("stop");
  CheckpointKeeper stop(f.folder, "stop");
  expect_error([&] { stop.save("best.safetensors", 2, f.writer(true)); }, "checkpoint.on_save_error: stop");
  CheckpointKeeper cont(f.folder, "continue");
  expect_error([&] { cont.save("last.safetensors", 2, f.writer(true), /*required=*/true); }, "stopped;");
}

TEST(CheckpointKeeper, AnotherRanksSaveWritesNothing) {
  KeeperFixture f("stop");
  CheckpointKeeper k(f.folder, "stop");
  k.save("last.safetensors", 1, [](const std::string&) { return false; });
  EXPECT_FALSE(fs::exists(f.dir.path() + "/runs/latest"));
  EXPECT_EQ(k.on_disk_text(), "no last.safetensors was written yet");
}

TEST(CheckpointKeeper, ResumeRefusesAMissingCheckpoint) {
  octet::testing::TempDir dir;
  EXPECT_THROW(read_resume_point(dir.path() + "/nothing.safetensors", {}), Error);
}

}  // namespace
}  // namespace octet::train
