// Fuzzes the TensorBoard event-file reader (tools/train/tensorboard.h): TFRecord framing with masked
// CRC32C, then the Event / Summary / Value protobuf fields. Byte 0 picks whether the rest is the
// file as is or with every record's CRCs recomputed (random bytes rarely pass a CRC), so the
// protobuf parsing behind the framing is reached. Whatever is read must survive a round trip
// through TensorBoardWriter.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "tools/train/tensorboard.h"

namespace {

// Rewrites the CRCs of every whole record in place; a tail too short for a record is left alone.
void fix_crcs(std::string& s) {
  size_t at = 0;
  while (s.size() - at >= 12) {
    uint64_t len;
    std::memcpy(&len, s.data() + at, 8);
    uint32_t c = octet::train::masked_crc32c(s.data() + at, 8);
    std::memcpy(s.data() + at + 8, &c, 4);
    if (len > s.size() - at - 12 || s.size() - at - 12 - len < 4) return;
    c = octet::train::masked_crc32c(s.data() + at + 12, len);
    std::memcpy(s.data() + at + 12 + len, &c, 4);
    at += 12 + len + 4;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fix_crcs(bytes);
  const std::string path = octet::fuzz::scratch_dir() + "/events.out.tfevents.fuzz";
  octet::fuzz::write_bytes(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  std::vector<octet::train::ScalarEvent> ev;
  try {
    ev = octet::train::read_scalar_events(path);
  } catch (const octet::Error&) {
    return 0;
  }
  const std::string dir = octet::fuzz::scratch_dir() + "/tb";
  std::filesystem::remove_all(dir);
  std::string written;
  {
    octet::train::TensorBoardWriter tb(dir);
    for (const auto& e : ev) tb.add_scalar(e.tag, e.value, e.step);
    tb.flush();
    written = tb.path();
  }
  std::vector<octet::train::ScalarEvent> back = octet::train::read_scalar_events(written);
  if (back.size() != ev.size()) __builtin_trap();
  for (size_t i = 0; i < ev.size(); ++i)
    if (back[i].tag != ev[i].tag || back[i].step != ev[i].step ||
        std::memcmp(&back[i].value, &ev[i].value, sizeof(float)) != 0)
      __builtin_trap();
  return 0;
}
