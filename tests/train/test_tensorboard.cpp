// TensorBoard event files: CRC32C, scalars written then read back through the record framing, and
// damaged files (also behind valid CRCs) read as errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tools/train/tensorboard.h"

namespace octet::train {
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

// A TFRecord around `payload`, with correct CRCs.
std::string record(const std::string& payload) {
  std::string r(8, '\0');
  uint64_t n = payload.size();
  std::memcpy(r.data(), &n, 8);
  uint32_t c = masked_crc32c(r.data(), 8);
  r.append(reinterpret_cast<const char*>(&c), 4);
  r += payload;
  c = masked_crc32c(payload.data(), payload.size());
  r.append(reinterpret_cast<const char*>(&c), 4);
  return r;
}

// A length-delimited protobuf field.
std::string ld(int field, const std::string& b) {
  return std::string{static_cast<char>(field << 3 | 2), static_cast<char>(b.size())} + b;
}

struct EventFile {
  std::string path =
      (std::filesystem::temp_directory_path() / ("octet_tb_file_" + std::to_string(::getpid()))).string();
  explicit EventFile(const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }
  ~EventFile() { std::filesystem::remove(path); }
};

// Summary values that are not scalars (an image, a histogram: no simple_value) are skipped, not
// read as 0.
TEST(TensorBoard, NonScalarValuesAreSkipped) {
  std::string step = std::string("\x10\x05", 2);  // Event.step = 5
  std::string image = ld(1, ld(1, "img") + ld(4, "\x08\x01"));
  std::string scalar = ld(1, ld(1, "loss") + std::string("\x15\x00\x00\x80\x3f", 5));  // simple_value 1.0f
  EventFile f(record(step + ld(5, image + scalar)));
  std::vector<ScalarEvent> ev = read_scalar_events(f.path);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].tag, "loss");
  EXPECT_EQ(ev[0].value, 1.0f);
  EXPECT_EQ(ev[0].step, 5);
}

// Damage behind valid CRCs (what the CRC cannot catch: a writer's own bug) is an error naming the
// file, never a read past the record.
TEST(TensorBoard, MalformedEventsAreErrors) {
  auto expect_error = [](const std::string& bytes, const std::string& what) {
    EventFile f(bytes);
    try {
      read_scalar_events(f.path);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f.path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(record("\x10"), "truncated varint");
  expect_error(record(std::string("\x10") + std::string(10, '\xff')), "varint too long");
  expect_error(record(ld(5, "").substr(0, 1) + "\x7f"), "truncated field");  // summary claims 127 bytes
  expect_error(record("\x0b"), "unsupported wire type 3");
  expect_error(record(ld(5, std::string("\x0a\x05\x0a\x09", 4))),
               "truncated field");  // the value claims 5 bytes, 2 follow
  expect_error(record("") + std::string(5, '\0'), "truncated record header");
  std::string huge = record("");
  uint64_t n = uint64_t{1} << 62;  // a length far past the file, with its CRC right
  std::memcpy(huge.data(), &n, 8);
  uint32_t c = masked_crc32c(huge.data(), 8);
  std::memcpy(huge.data() + 8, &c, 4);
  expect_error(huge, "truncated record");
}

}  // namespace
}  // namespace octet::train
