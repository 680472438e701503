// Seeded, counter-based random numbers (Philox4x32-10). Element i of a draw depends only on
// (seed, offset + i), so results are the same for any thread count and can be reproduced on the
// GPU with the same function; a generator's state is just (seed, offset).
//   Generator g(42);  Tensor x = randn({3, 4}, {}, &g);   manual_seed(0);  // the default one
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace octet {

// Philox4x32's multipliers and the key's step between rounds (core/cpu/philox.cpp's AVX2 kernel
// runs the same round on eight blocks per register, tested word for word against philox_at).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One Philox round on the block (c0, c1, c2, c3) with the round's key (k0, k1).
OCTET_HD inline void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0, p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
  const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<uint32_t>(p1), c3 = static_cast<uint32_t>(p0), c0 = n0, c2 = n2;
}

// One Philox4x32 block with 10 rounds: four 32-bit outputs from a 128-bit counter and a 64-bit key.
// OCTET_HD: the CUDA random fills call the same functions, so both devices draw the same bits.
OCTET_HD inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, uint64_t key) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r, k0 += kPhiloxW0, k1 += kPhiloxW1) philox_round(c0, c1, c2, c3, k0, k1);
  return {c0, c1, c2, c3};
}

// Four random 32-bit words for element `index` of the draw starting at `offset`.
OCTET_HD inline std::array<uint32_t, 4> philox_at(uint64_t seed, uint64_t offset, uint64_t index) {
  uint64_t c = offset + index;
  return philox4x32({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u}, seed);
}

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits. w >> 8 < 2^24 converts exactly
// through int32, which AVX2 converts 8 at a time (an unsigned conversion is AVX-512 only, and kept
// GCC from vectorizing the loops that call this: stochastic rounding ran one element at a time).
OCTET_HD inline float uniform_float(uint32_t w) { return static_cast<float>(static_cast<int32_t>(w >> 8)) * 0x1p-24f; }
OCTET_HD inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1p-53;
}

// Dropout with probability p keeps a draw w iff its 24-bit uniform is below 1 - p:
// uniform_float(w) < 1 - p, the same (both sides times 2^24, exact) as (w >> 8) < K for the integer
// K = ceil((1 - p) 2^24), in [1, 2^24] for p in [0, 1). The integer form is what a vectorized loop
// compares (core/cpu/attention.cpp).
OCTET_HD inline uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(std::ceil((1.0 - p) * 0x1p24)); }
OCTET_HD inline bool dropout_keeps_word(uint32_t w, uint32_t threshold) { return (w >> 8) < threshold; }

// Whether dropout with probability p keeps element `index` of the draw at (seed, offset).
// Attention's dropout (core/ops/attention.h) draws with it on both devices, and its reference path
// builds the same mask.
OCTET_HD inline bool dropout_keeps(uint64_t seed, uint64_t offset, uint64_t index, double p) {
  return dropout_keeps_word(philox_at(seed, offset, index)[0], dropout_threshold(p));
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `n` counters; returns the offset of the first.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when none is passed.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace octet
