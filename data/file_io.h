// File helpers shared by the dataset loaders and writers. Every failure throws octet::Error naming
// `who` (the loader) and the path, so a bad download is found from the message alone.
//   std::vector<uint8_t> bytes = read_file_maybe_gz("mnist", "/data/train-images-idx3-ubyte.gz");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

// Readers pass the most bytes a valid file can hold, so that a corrupt or hostile file (a huge file,
// a gzip bomb) is refused before it is allocated, not after.
constexpr uint64_t kNoSizeLimit = UINT64_MAX;

bool file_exists(const std::string& path);
// The file's size in bytes (an octet::Error naming `who` when it is missing or not a regular file).
uint64_t file_size(const std::string& who, const std::string& path);
// The whole file; transparently gunzipped when it starts with the gzip magic bytes 1f 8b. A file
// (or its decompressed content) longer than `max_bytes` is an error, found without reading past it.
std::vector<uint8_t> read_file_maybe_gz(const std::string& who, const std::string& path,
                                        uint64_t max_bytes = kNoSizeLimit);
std::vector<uint8_t> read_file(const std::string& who, const std::string& path, uint64_t max_bytes = kNoSizeLimit);
// At most the first `n` bytes of the file, gunzipped like read_file_maybe_gz.
std::vector<uint8_t> read_head_maybe_gz(const std::string& who, const std::string& path, size_t n);
// Writes `bytes` to `path`, gzip-compressed when `gzip`.
void write_file(const std::string& who, const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false);
// Big-endian u32 at p[0..3].
inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace octet
