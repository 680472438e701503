// TensorBoard event files: CRC32C, and scalars written then read back through the record framing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tools/tensorboard.h"

namespace octet::tools {
namespace {

TEST(TensorBoard, Crc32cKnownValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard CRC-32C check value
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoard, ScalarsReadBack) {
  std::string dir = (std::filesystem::temp_directory_path() / ("octet_tb_" + std::to_string(::getpid()))).string();
  std::string path;
  {
    TensorBoardWriter tb(dir);
    tb.add_scalar("train/loss", 0.75f, 10);
    tb.add_scalar("test/top1", 91.5f, 300000000000LL);
    tb.flush();
    path = tb.path();
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  std::vector<ScalarEvent> ev = read_scalar_events(path);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].tag, "train/loss");
  EXPECT_EQ(ev[0].value, 0.75f);
  EXPECT_EQ(ev[0].step, 10);
  EXPECT_EQ(ev[1].tag, "test/top1");
  EXPECT_EQ(ev[1].step, 300000000000LL);
  // A flipped byte is caught by the CRC.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);
    f.put('\x55');
  }
  EXPECT_THROW(read_scalar_events(path), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace octet::tools
