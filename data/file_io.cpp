#include "data/file_io.h"

#include <zlib.h>

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

std::vector<uint8_t> read_file(const std::string& who, const std::string& path) {
  std::error_code ec;
  OCTET_CHECK(std::filesystem::exists(path, ec), who, ": ", path, ": file not found");
  OCTET_CHECK(std::filesystem::is_regular_file(path, ec), who, ": ", path, ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in.good(), who, ": ", path, ": cannot open: ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  OCTET_CHECK(size >= 0, who, ": ", path, ": cannot determine the file size");
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  OCTET_CHECK(in.gcount() == size, who, ": ", path, ": read ", in.gcount(), " of ", size, " bytes");
  return bytes;
}

std::vector<uint8_t> read_file_maybe_gz(const std::string& who, const std::string& path) {
  std::vector<uint8_t> raw = read_file(who, path);
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  raw.clear();
  raw.shrink_to_fit();
  GzFile f(gzopen(path.c_str(), "rb"));
  OCTET_CHECK(f != nullptr, who, ": ", path, ": cannot open: ", std::strerror(errno));
  gzbuffer(f.get(), 1 << 20);
  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t used = out.size();
    out.resize(used + kChunk);
    int n = gzread(f.get(), out.data() + used, static_cast<unsigned>(kChunk));
    OCTET_CHECK(n >= 0, who, ": ", path, ": corrupt gzip data: ", gz_error(f.get(), path));
    out.resize(used + static_cast<size_t>(n));
    if (n == 0) break;
  }
  // gzread stops quietly at a truncated stream; gzerror tells it apart from a clean end.
  int code = 0;
  gzerror(f.get(), &code);
  OCTET_CHECK(code == Z_OK || code == Z_STREAM_END, who, ": ", path,
              ": corrupt or truncated gzip data: ", gz_error(f.get(), path));
  return out;
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
