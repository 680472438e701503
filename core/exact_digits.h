// The arithmetic of ExactSum (core/exact_sum.h) on a plain array of digits, compiled for the host
// and for CUDA kernels (OCTET_HD), so that a sum taken on the GPU (optim/cuda/update.cu: LAMB's and
// LARS's norms, clip_grad_norm) has the CPU's digits and rounds to the CPU's double.
// The number is sum_i digit[i] * 2^(32 i - 1074): digit 0's least bit is the least subnormal,
// each digit a signed 64-bit count of 32-bit units (carries deferred), and one more word of flags
// for the non-finite terms seen.
//   exact::Parts p = exact::parts_of(x);          // what x adds, exactly
//   for (int k = 0; k < 3; ++k) digit[p.index + k] += p.part[k];   // or flags |= p.flag
//   exact::normalize(digit);  double v = exact::value_of(digit, flags);
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"

namespace octet::exact {

// 70 digits cover every finite double with 2^63 additions of headroom.
inline constexpr int kDigits = 70;
inline constexpr int kLowest = 1074;  // digit 0's least bit is 2^-1074
inline constexpr int64_t kDigitMask = (int64_t{1} << 32) - 1;
enum Flag : int64_t { kNan = 1, kPosInf = 2, kNegInf = 4 };

// What a double adds: part[k] (signed, |part| < 2^32) to digit index + k, or a flag (non-finite;
// then the parts are 0). Zero adds nothing.
struct Parts {
  int index = 0;
  int64_t part[3] = {0, 0, 0};
  int64_t flag = 0;
};

// The bits of a double as a uint64_t, or back (memcpy: host and device code both have it).
template <typename To, typename From>
OCTET_HD inline To same_bits(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  memcpy(&out, &x, sizeof out);
  return out;
}
OCTET_HD inline uint64_t bits_of(double x) { return same_bits<uint64_t>(x); }
OCTET_HD inline double from_bits(uint64_t b) { return same_bits<double>(b); }

OCTET_HD inline Parts parts_of(double x) {
  Parts out;
  const uint64_t b = bits_of(x);
  const bool negative = (b >> 63) != 0;
  const int biased = static_cast<int>((b >> 52) & 0x7ff);
  uint64_t mant = b & ((uint64_t{1} << 52) - 1);
  if (biased == 0x7ff) {
    out.flag = mant != 0 ? kNan : (negative ? kNegInf : kPosInf);
    return out;
  }
  if (mant == 0 && biased == 0) return out;  // +-0
  // |x| = mant * 2^(pos - 1074): a normal number has its implicit bit; a subnormal is mant units
  // of the least subnormal.
  int pos = 0;
  if (biased != 0) {
    mant |= uint64_t{1} << 52;
    pos = biased - 1;
  }
  const int shift = pos % 32;
  out.index = pos / 32;
  // mant << shift spans at most 85 bits: three 32-bit parts.
  const uint64_t lo = mant << shift;                          // bits 0..63
  const uint64_t hi = shift == 0 ? 0 : mant >> (64 - shift);  // bits 64..84
  const int64_t part[3] = {static_cast<int64_t>(lo & kDigitMask), static_cast<int64_t>(lo >> 32),
                           static_cast<int64_t>(hi)};
  for (int k = 0; k < 3; ++k) out.part[k] = negative ? -part[k] : part[k];
  return out;
}

// Propagates the carries: every digit but the last ends in [0, 2^32); the last keeps the sign.
OCTET_HD inline void normalize(int64_t* digit) {
  for (int i = 0; i + 1 < kDigits; ++i) {
    const int64_t carry = digit[i] >> 32;  // floor division
    digit[i] -= carry * (int64_t{1} << 32);
    digit[i + 1] += carry;
  }
}

OCTET_HD inline int bit_length(uint64_t v) {
#ifdef __CUDA_ARCH__
  return v != 0 ? 64 - __clzll(static_cast<long long>(v)) : 0;
#else
  return v != 0 ? 64 - __builtin_clzll(v) : 0;
#endif
}

// 2^e as a double, e in [-1074, 1023].
OCTET_HD inline double pow2(int e) {
  return from_bits(e >= -1022 ? static_cast<uint64_t>(e + 1023) << 52 : uint64_t{1} << (e + 1074));
}

// The sum of `digits` (kDigits words, any carries) and `flags`, rounded to the nearest double,
// ties to even; any NaN, or both infinities, read NaN; one infinity reads it; overflow reads +-inf.
OCTET_HD inline double value_of(const int64_t* digits, int64_t flags) {
  const double inf = from_bits(uint64_t{0x7ff} << 52);
  if ((flags & kNan) || ((flags & kPosInf) && (flags & kNegInf))) return from_bits(uint64_t{0x7ff8} << 48);  // quiet
  if (flags & kPosInf) return inf;
  if (flags & kNegInf) return -inf;
  int64_t d[kDigits];
  for (int i = 0; i < kDigits; ++i) d[i] = digits[i];
  normalize(d);
  const bool negative = d[kDigits - 1] < 0;
  if (negative) {
    for (int i = 0; i < kDigits; ++i) d[i] = -d[i];
    normalize(d);
  }
  int t = kDigits - 1;
  while (t >= 0 && d[t] == 0) --t;
  if (t < 0) return 0.0;
  // The top three digits as a 96-bit number hi:lo (digit t - 2's least bit is the unit), the
  // digits below only as a sticky bit.
  auto digit = [&](int i) { return i >= 0 ? static_cast<uint64_t>(d[i]) : uint64_t{0}; };
  const uint64_t hi = digit(t);
  const uint64_t lo = digit(t - 1) << 32 | digit(t - 2);
  bool sticky = false;
  for (int i = 0; i < t - 2; ++i) sticky = sticky || d[i] != 0;
  // hi, digit t, is not 0: the number has 65 to 96 bits, so 12 <= shift < 44; more only in the
  // top digit of a sum past the double range.
  const int shift = 64 + bit_length(hi) - 53;
  // mant = (hi:lo) >> shift (53 bits), rounded: the bits shifted out against half of 2^shift.
  uint64_t mant;
  if (shift < 64) {
    mant = lo >> shift | hi << (64 - shift);
    const uint64_t rem = lo & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (sticky || (mant & 1)))) ++mant;
  } else {
    mant = hi >> (shift - 64);  // an overflow: inf below, whatever the rounding
  }
  // out = mant * 2^e (mant < 2^54, exact as a double), as ldexp: e is at least 12 - 64 - 1074, and
  // a sum below 2^-1022 has fewer than 53 bits, all of them in mant (only the zeros below digit 0
  // are shifted out), so its product lands exactly on a subnormal; two factors where 2^e alone is
  // out of range.
  const int e = shift + 32 * (t - 2) - kLowest;
  double out = static_cast<double>(mant);
  if (e > 1023) {
    out = out * pow2(1023) * pow2(e - 1023 > 1023 ? 1023 : e - 1023);  // inf: at least 2^1024
  } else if (e < -1022) {
    out = out * pow2(e + 1022) * pow2(-1022);
  } else {
    out *= pow2(e);
  }
  return negative ? -out : out;
}

}  // namespace octet::exact
