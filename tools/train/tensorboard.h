// TensorBoard scalars without a protobuf dependency: event files are TFRecord streams
// (u64 length, masked CRC32C of the length, payload, masked CRC32C of the payload) whose payloads
// are `Event` protos; we hand-encode the few fields scalars need.
//   TensorBoardWriter tb("runs/x/tensorboard");  tb.add_scalar("train/loss", 0.7, 100);
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace octet::train {

// CRC-32C (Castagnoli), and the masking TFRecord applies to stored CRCs.
uint32_t crc32c(const void* data, size_t n);
inline uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::string& dir);  // creates dir and one events file in it
  void add_scalar(const std::string& tag, float value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::ofstream out_;
};

// A scalar read back from an event file (for tests and `octet inspect`).
struct ScalarEvent {
  std::string tag;
  float value;
  int64_t step;
};
// Reads every scalar (a summary value with simple_value; other values, such as images or
// histograms, are skipped) in an events file, checking each record's CRCs; an octet::Error naming
// the file and the byte offset on damage (a bad CRC, a truncated record or field, a bad wire type).
std::vector<ScalarEvent> read_scalar_events(const std::string& path);

}  // namespace octet::train
