#include "tools/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"

namespace octet::train {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected Castagnoli
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// ---- protobuf wire format, just what Event/Summary need
void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
void put_tag(std::string& s, int field, int wire) { put_varint(s, static_cast<uint64_t>(field << 3 | wire)); }
void put_bytes(std::string& s, int field, const std::string& b) {
  put_tag(s, field, 2);
  put_varint(s, b.size());
  s += b;
}
template <typename T>
void put_fixed(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
std::string event(int64_t step, const std::string& file_version, const std::string& summary) {
  std::string e;
  put_tag(e, 1, 1);
  put_fixed(e, std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  put_tag(e, 2, 0);
  put_varint(e, static_cast<uint64_t>(step));
  if (!file_version.empty()) put_bytes(e, 3, file_version);
  if (!summary.empty()) put_bytes(e, 5, summary);
  return e;
}

struct Reader {
  const std::string& s;
  size_t at = 0;
  std::string where;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      OCTET_CHECK(at < s.size(), where, ": truncated varint");
      uint8_t b = static_cast<uint8_t>(s[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    OCTET_FAIL(where, ": varint too long");
  }
  std::string bytes(size_t n) {
    OCTET_CHECK(n <= s.size() - at, where, ": truncated field");
    std::string b = s.substr(at, n);
    at += n;
    return b;
  }
  void skip(int wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      bytes(8);
    else if (wire == 2)
      bytes(varint());
    else if (wire == 5)
      bytes(4);
    else
      OCTET_FAIL(where, ": unsupported wire type ", wire);
  }
};

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = dir + "/events.out.tfevents." +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "." + host;
  out_.open(path_, std::ios::binary | std::ios::app);
  OCTET_CHECK(out_.good(), "tensorboard: cannot create ", path_);
  write_record(event(0, "brain.Event:2", ""));
}

void TensorBoardWriter::write_record(const std::string& payload) {
  std::string header;
  put_fixed(header, static_cast<uint64_t>(payload.size()));
  std::string rec = header;
  put_fixed(rec, masked_crc32c(header.data(), header.size()));
  rec += payload;
  put_fixed(rec, masked_crc32c(payload.data(), payload.size()));
  out_.write(rec.data(), static_cast<std::streamsize>(rec.size()));
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  // Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
  std::string v;
  put_bytes(v, 1, tag);
  put_tag(v, 2, 5);
  put_fixed(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  write_record(event(step, "", summary));
}

void TensorBoardWriter::flush() { out_.flush(); }

std::vector<ScalarEvent> read_scalar_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in.good(), "tensorboard: cannot open ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<ScalarEvent> out;
  size_t at = 0;
  while (at < data.size()) {
    OCTET_CHECK(data.size() - at >= 12, path, ": truncated record header at byte ", at);
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, data.data() + at, 8);
    std::memcpy(&len_crc, data.data() + at + 8, 4);
    OCTET_CHECK(len_crc == masked_crc32c(data.data() + at, 8), path, ": bad length CRC at byte ", at);
    OCTET_CHECK(len <= data.size() - at - 12 && data.size() - at - 12 - len >= 4, path, ": truncated record at byte ",
                at);
    std::string payload = data.substr(at + 12, len);
    uint32_t crc;
    std::memcpy(&crc, data.data() + at + 12 + len, 4);
    OCTET_CHECK(crc == masked_crc32c(payload.data(), payload.size()), path, ": bad data CRC at byte ", at);
    at += 12 + len + 4;
    Reader r{payload, 0, path};
    int64_t step = 0;
    std::string summary;
    while (r.at < payload.size()) {
      uint64_t key = r.varint();
      int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      if (field == 2 && wire == 0)
        step = static_cast<int64_t>(r.varint());
      else if (field == 5 && wire == 2)
        summary = r.bytes(r.varint());
      else
        r.skip(wire);
    }
    Reader sr{summary, 0, path};
    while (sr.at < summary.size()) {
      uint64_t key = sr.varint();
      if (key != ((1 << 3) | 2)) {
        sr.skip(static_cast<int>(key & 7));
        continue;
      }
      std::string value = sr.bytes(sr.varint());
      Reader vr{value, 0, path};
      ScalarEvent ev{"", 0.0f, step};
      bool scalar = false;
      while (vr.at < value.size()) {
        uint64_t k = vr.varint();
        if (k == ((1 << 3) | 2)) {
          ev.tag = vr.bytes(vr.varint());
        } else if (k == ((2 << 3) | 5)) {
          std::memcpy(&ev.value, vr.bytes(4).data(), 4);
          scalar = true;
        } else {
          vr.skip(static_cast<int>(k & 7));
        }
      }
      if (scalar) out.push_back(ev);  // images, histograms and tensors are not scalars
    }
  }
  return out;
}

}  // namespace octet::train
