// Checksums of downloaded files: MD5 (RFC 1321; what CIFAR-10, MNIST, Fashion-MNIST and WikiText
// publish) and SHA-256 (FIPS 180-4). Streaming, so a 500 MB archive is hashed as it is read.
//   Digest d(HashKind::md5);  d.update(bytes.data(), bytes.size());  std::string hex = d.hex();
//   std::string h = file_digest(HashKind::sha256, "data/cifar10/cifar-10-binary.tar.gz");
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace octet {

enum class HashKind { md5, sha256 };

const char* hash_name(HashKind kind);  // "md5", "sha256"

class Digest {
 public:
  explicit Digest(HashKind kind);
  void update(const void* data, size_t size);
  // Lower-case hex of the digest; ends the hash (update() after it is an error).
  std::string hex();

 private:
  void block(const uint8_t* p);
  HashKind kind_;
  std::array<uint32_t, 8> h_{};
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t length_ = 0;  // bytes hashed
  bool done_ = false;
};

// The digest of a whole file (an octet::Error naming the file when it cannot be read).
std::string file_digest(HashKind kind, const std::string& path);

}  // namespace octet
