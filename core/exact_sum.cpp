// ExactSum (core/exact_sum.h): a double x = M * 2^e (M a 53-bit integer) adds M, shifted to its
// place, into the 32-bit digits it covers; value() propagates the carries and rounds the top 53 bits
// with the rest as round and sticky bits.
#include "core/exact_sum.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace octet {
namespace {

constexpr int kLowest = 1074;  // digit 0's least bit is 2^-1074
constexpr int64_t kCarryEvery = int64_t{1} << 30;
constexpr int64_t kDigitMask = (int64_t{1} << 32) - 1;
enum Flag : int64_t { kNan = 1, kPosInf = 2, kNegInf = 4 };

__extension__ typedef unsigned __int128 u128;  // GCC and Clang; -Wpedantic knows it as an extension

int bit_length(u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64), lo = static_cast<uint64_t>(v);
  if (hi != 0) return 128 - __builtin_clzll(hi);
  return lo != 0 ? 64 - __builtin_clzll(lo) : 0;
}

}  // namespace

void ExactSum::add(double x) {
  if (!std::isfinite(x)) {
    flags_ |= std::isnan(x) ? kNan : (x > 0 ? kPosInf : kNegInf);
    return;
  }
  if (x == 0.0) return;
  int e = 0;
  const double m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  auto mant = static_cast<uint64_t>(std::ldexp(m, 53));
  int pos = e - 53 + kLowest;  // the place of mant's least bit
  if (pos < 0) {               // a subnormal: its low bits are zeros
    mant >>= -pos;
    pos = 0;
  }
  const u128 v = static_cast<u128>(mant) << (pos % 32);
  const int i = pos / 32;
  const int64_t part[3] = {static_cast<int64_t>(v & kDigitMask), static_cast<int64_t>((v >> 32) & kDigitMask),
                           static_cast<int64_t>(v >> 64)};
  for (int k = 0; k < 3; ++k) digit_[i + k] += x < 0 ? -part[k] : part[k];
  if (++adds_ >= kCarryEvery) normalize();
}

void ExactSum::normalize() {
  for (int i = 0; i + 1 < kDigits; ++i) {
    const int64_t carry = digit_[i] >> 32;  // floor division: the digit ends in [0, 2^32)
    digit_[i] -= carry * (int64_t{1} << 32);
    digit_[i + 1] += carry;
  }
  adds_ = 1;  // every digit within one addition's reach again
}

void ExactSum::merge(const ExactSum& other) {
  flags_ |= other.flags_;
  if (adds_ + other.adds_ < kCarryEvery) {  // no digit can overflow: add them as they are
    for (int i = 0; i < kDigits; ++i) digit_[i] += other.digit_[i];
    adds_ += other.adds_;
    return;
  }
  ExactSum o = other;
  o.normalize();
  normalize();
  for (int i = 0; i < kDigits; ++i) digit_[i] += o.digit_[i];
  adds_ = 2;
}

double ExactSum::value() const {
  if ((flags_ & kNan) || (flags_ & kPosInf && flags_ & kNegInf)) return std::numeric_limits<double>::quiet_NaN();
  if (flags_ & (kPosInf | kNegInf))
    return flags_ & kPosInf ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  ExactSum s = *this;
  s.normalize();
  const bool negative = s.digit_[kDigits - 1] < 0;
  if (negative) {
    for (int64_t& d : s.digit_) d = -d;
    s.normalize();
  }
  int t = kDigits - 1;
  while (t >= 0 && s.digit_[t] == 0) --t;
  if (t < 0) return 0.0;
  auto digit = [&](int i) { return i >= 0 ? static_cast<u128>(s.digit_[i]) : u128{0}; };
  const u128 top = digit(t) << 64 | digit(t - 1) << 32 | digit(t - 2);  // digit t-2's least bit is the unit
  bool sticky = false;
  for (int i = 0; i < t - 2; ++i) sticky = sticky || s.digit_[i] != 0;
  const int shift = std::max(0, bit_length(top) - 53);
  u128 mant = top >> shift;
  if (shift > 0) {
    const u128 rem = top & ((u128{1} << shift) - 1), half = u128{1} << (shift - 1);
    if (rem > half || (rem == half && (sticky || (mant & 1)))) ++mant;
  }
  const double out = std::ldexp(static_cast<double>(static_cast<uint64_t>(mant)), shift + 32 * (t - 2) - kLowest);
  return negative ? -out : out;
}

std::array<int64_t, ExactSum::kWords> ExactSum::words() const {
  ExactSum s = *this;
  s.normalize();
  std::array<int64_t, kWords> out{};
  for (int i = 0; i < kDigits; ++i) out[i] = s.digit_[i];
  out[kDigits] = flags_;
  return out;
}

ExactSum ExactSum::from_words(std::span<const int64_t> words) {
  OCTET_CHECK(words.size() == static_cast<size_t>(kWords), "ExactSum::from_words: expected ", kWords, " words, got ",
              words.size());
  ExactSum s;
  for (int i = 0; i < kDigits; ++i) s.digit_[i] = words[i];
  s.flags_ = words[kDigits] & (kNan | kPosInf | kNegInf);
  s.adds_ = 1;
  return s;
}

}  // namespace octet
