// File helpers shared by the dataset loaders and writers. Every failure throws octet::Error naming
// `who` (the loader) and the path, so a bad download is found from the message alone.
//   std::vector<uint8_t> bytes = read_file_maybe_gz("mnist", "/data/train-images-idx3-ubyte.gz");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

bool file_exists(const std::string& path);
// The whole file; transparently gunzipped when it starts with the gzip magic bytes 1f 8b.
std::vector<uint8_t> read_file_maybe_gz(const std::string& who, const std::string& path);
std::vector<uint8_t> read_file(const std::string& who, const std::string& path);
// Writes `bytes` to `path`, gzip-compressed when `gzip`.
void write_file(const std::string& who, const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false);
// Big-endian u32 at p[0..3].
inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace octet
