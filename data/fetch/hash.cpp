#include "data/fetch/hash.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace octet {
namespace {

uint32_t rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// RFC 1321 3.4: T[i] = floor(2^32 * |sin(i + 1)|) and the per-round shift amounts.
constexpr std::array<uint32_t, 64> kMd5T = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
constexpr std::array<int, 16> kMd5Shift = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};

// FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr std::array<uint32_t, 64> kSha256K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

void md5_block(std::array<uint32_t, 8>& h, const uint8_t* p) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i)  // little-endian words
    m[i] =
        uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 | uint32_t{p[4 * i + 3]} << 24;
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    switch (i / 16) {
      case 0:
        f = (b & c) | (~b & d), g = i;
        break;
      case 1:
        f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
        break;
      case 2:
        f = b ^ c ^ d, g = (3 * i + 5) % 16;
        break;
      default:
        f = c ^ (b | ~d), g = (7 * i) % 16;
    }
    const uint32_t t = d;
    d = c;
    c = b;
    b = b + rotl(a + f + kMd5T[static_cast<size_t>(i)] + m[g], kMd5Shift[static_cast<size_t>(i / 16 * 4 + i % 4)]);
    a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void sha256_block(std::array<uint32_t, 8>& h, const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)  // big-endian words
    w[i] =
        uint32_t{p[4 * i]} << 24 | uint32_t{p[4 * i + 1]} << 16 | uint32_t{p[4 * i + 2]} << 8 | uint32_t{p[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::array<uint32_t, 8> v = h;  // a..h
  for (int i = 0; i < 64; ++i) {
    const uint32_t e = v[4], a = v[0];
    const uint32_t t1 = v[7] + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & v[5]) ^ (~e & v[6])) +
                        kSha256K[static_cast<size_t>(i)] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
    for (size_t j = 7; j > 0; --j) v[j] = v[j - 1];
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (size_t j = 0; j < 8; ++j) h[j] += v[j];
}

}  // namespace

const char* hash_name(HashKind kind) { return kind == HashKind::md5 ? "md5" : "sha256"; }

Digest::Digest(HashKind kind) : kind_(kind) {
  if (kind == HashKind::md5)
    h_ = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0, 0, 0, 0};
  else
    h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
}

void Digest::block(const uint8_t* p) { kind_ == HashKind::md5 ? md5_block(h_, p) : sha256_block(h_, p); }

void Digest::update(const void* data, size_t size) {
  OCTET_CHECK(!done_, "Digest: update() after hex()");
  const auto* p = static_cast<const uint8_t*>(data);
  length_ += size;
  if (used_ > 0) {
    const size_t take = std::min(size, 64 - used_);
    std::memcpy(buf_.data() + used_, p, take);
    used_ += take, p += take, size -= take;
    if (used_ < 64) return;
    block(buf_.data());
    used_ = 0;
  }
  for (; size >= 64; p += 64, size -= 64) block(p);
  std::memcpy(buf_.data(), p, size);
  used_ = size;
}

std::string Digest::hex() {
  OCTET_CHECK(!done_, "Digest: hex() called twice");
  // Both pad with 0x80, zeros, then the bit length in the last 8 bytes: little-endian for MD5,
  // big-endian for SHA-256.
  const uint64_t bits = length_ * 8;
  const uint8_t one = 0x80, zero = 0;
  update(&one, 1);
  while (used_ != 56) update(&zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(kind_ == HashKind::md5 ? bits >> (8 * i) : bits >> (8 * (7 - i)));
  update(len, 8);
  done_ = true;
  const int words = kind_ == HashKind::md5 ? 4 : 8;
  std::string out;
  char buf[3];
  for (int w = 0; w < words; ++w)
    for (int b = 0; b < 4; ++b) {
      const int shift = kind_ == HashKind::md5 ? 8 * b : 8 * (3 - b);
      std::snprintf(buf, sizeof(buf), "%02x", (h_[static_cast<size_t>(w)] >> shift) & 0xff);
      out += buf;
    }
  return out;
}

std::string file_digest(HashKind kind, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  OCTET_CHECK(f != nullptr, "checksum: cannot open ", path, ": ", std::strerror(errno));
  Digest d(kind);
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) d.update(buf.data(), n);
  OCTET_CHECK(!std::ferror(f.get()), "checksum: reading ", path, " failed: ", std::strerror(errno));
  return d.hex();
}

}  // namespace octet
