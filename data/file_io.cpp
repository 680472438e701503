#include "data/file_io.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.h"

namespace octet {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// zlib's message without the "path: " prefix it adds (our messages name the path already).
std::string gz_error(gzFile f, const std::string& path) {
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  std::string s = msg ? msg : "unknown zlib error";
  if (s.starts_with(path + ": ")) s.erase(0, path.size() + 2);
  return s;
}

}  // namespace

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

uint64_t file_size(const std::string& who, const std::string& path) {
  std::error_code ec;
  OCTET_CHECK(std::filesystem::exists(path, ec), who, ": ", path, ": file not found");
  OCTET_CHECK(std::filesystem::is_regular_file(path, ec), who, ": ", path, ": not a regular file");
  uint64_t size = std::filesystem::file_size(path, ec);
  OCTET_CHECK(!ec, who, ": ", path, ": cannot determine the file size: ", ec.message());
  return size;
}

std::vector<uint8_t> read_file(const std::string& who, const std::string& path, uint64_t max_bytes) {
  uint64_t size = file_size(who, path);
  OCTET_CHECK(size <= max_bytes, who, ": ", path, ": ", size, " bytes, more than the ", max_bytes,
              " bytes a valid file can hold here");
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in.good(), who, ": ", path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  OCTET_CHECK(static_cast<uint64_t>(in.gcount()) == size, who, ": ", path, ": read ", in.gcount(), " of ", size,
              " bytes (did the file change while being read?)");
  return bytes;
}

namespace {

bool starts_with_gzip_magic(const std::string& who, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in.good(), who, ": ", path, ": cannot open: ", std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// Decompresses at most `max_bytes`; `whole` says whether more data than that is an error (a whole
// file) or is simply not read (a head).
std::vector<uint8_t> gunzip(const std::string& who, const std::string& path, uint64_t max_bytes, bool whole) {
  GzFile f(gzopen(path.c_str(), "rb"));
  OCTET_CHECK(f != nullptr, who, ": ", path, ": cannot open: ", std::strerror(errno));
  gzbuffer(f.get(), 1 << 20);
  std::vector<uint8_t> out;
  constexpr uint64_t kChunk = 1 << 20;
  for (;;) {
    size_t used = out.size();
    // One byte past the limit tells a file of exactly max_bytes from a longer one.
    uint64_t room = max_bytes - used;
    if (whole && room < kNoSizeLimit) ++room;
    if (room == 0) break;
    size_t want = static_cast<size_t>(std::min(kChunk, room));
    out.resize(used + want);
    int n = gzread(f.get(), out.data() + used, static_cast<unsigned>(want));
    OCTET_CHECK(n >= 0, who, ": ", path, ": corrupt gzip data: ", gz_error(f.get(), path));
    out.resize(used + static_cast<size_t>(n));
    OCTET_CHECK(out.size() <= max_bytes, who, ": ", path, ": decompresses to more than the ", max_bytes,
                " bytes a valid file can hold here");
    if (n == 0) break;
  }
  if (!whole) return out;
  // gzread stops quietly at a truncated stream; gzerror tells it apart from a clean end.
  int code = 0;
  gzerror(f.get(), &code);
  OCTET_CHECK(code == Z_OK || code == Z_STREAM_END, who, ": ", path,
              ": corrupt or truncated gzip data: ", gz_error(f.get(), path));
  return out;
}

}  // namespace

std::vector<uint8_t> read_file_maybe_gz(const std::string& who, const std::string& path, uint64_t max_bytes) {
  file_size(who, path);  // exists and is a regular file
  if (!starts_with_gzip_magic(who, path)) return read_file(who, path, max_bytes);
  return gunzip(who, path, max_bytes, /*whole=*/true);
}

std::vector<uint8_t> read_head_maybe_gz(const std::string& who, const std::string& path, size_t n) {
  file_size(who, path);
  if (!starts_with_gzip_magic(who, path)) {
    std::ifstream in(path, std::ios::binary);
    OCTET_CHECK(in.good(), who, ": ", path, ": cannot open: ", std::strerror(errno));
    std::vector<uint8_t> head(n);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(n));
    head.resize(static_cast<size_t>(in.gcount()));
    return head;
  }
  return gunzip(who, path, n, /*whole=*/false);
}

void write_file(const std::string& who, const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    GzFile f(gzopen(path.c_str(), "wb"));
    OCTET_CHECK(f != nullptr, who, ": ", path, ": cannot create: ", std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      auto n = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1 << 30));
      OCTET_CHECK(gzwrite(f.get(), bytes.data() + done, n) == static_cast<int>(n), who, ": ", path,
                  ": write failed: ", gz_error(f.get(), path));
      done += n;
    }
    OCTET_CHECK(gzclose(f.release()) == Z_OK, who, ": ", path, ": write failed when closing");
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  OCTET_CHECK(out.good(), who, ": ", path, ": cannot create: ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  OCTET_CHECK(!out.fail(), who, ": ", path, ": write failed");
}

}  // namespace octet
