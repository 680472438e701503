// ExactSum (core/exact_sum.h) over the digit arithmetic of core/exact_digits.h, which the CUDA sums
// share: a double x = M * 2^e (M a 53-bit integer) adds M, shifted to its place, into the 32-bit
// digits it covers; value() propagates the carries and rounds the top 53 bits with the rest as
// round and sticky bits.
#include "core/exact_sum.h"

#include "core/error.h"
#include "core/exact_digits.h"

namespace octet {
namespace {

constexpr int64_t kCarryEvery = int64_t{1} << 30;

}  // namespace

void ExactSum::add(double x) {
  const exact::Parts p = exact::parts_of(x);
  flags_ |= p.flag;
  if (p.flag != 0 || (p.part[0] == 0 && p.part[1] == 0 && p.part[2] == 0)) return;
  for (int k = 0; k < 3; ++k) digit_[p.index + k] += p.part[k];
  if (++adds_ >= kCarryEvery) normalize();
}

void ExactSum::normalize() {
  exact::normalize(digit_.data());
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

double ExactSum::value() const { return exact::value_of(digit_.data(), flags_); }

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
  s.flags_ = words[kDigits] & (exact::kNan | exact::kPosInf | exact::kNegInf);
  s.normalize();  // digits with carries pending (a GPU's accumulator) are within reach again
  return s;
}

}  // namespace octet
