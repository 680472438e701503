// ExactSum: a sum of doubles kept exactly (a fixed-point number over the whole double range) and
// rounded once, to nearest even, when read. Its value does not depend on the order of the additions
// or on how they were split, across threads or across processes: the norms of clip_grad_norm, LAMB
// and LARS are the same bits on one process and on N with sharded optimizer state, at any thread
// count. Non-finite terms are remembered apart: any NaN, or +inf with -inf, reads NaN; one sign of
// infinity reads that infinity.
//   ExactSum s;
//   for (double x : terms) s.add(x);   // any order, any split: s.merge(other_part)
//   double total = s.value();
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/exact_digits.h"

namespace octet {

class ExactSum {
 public:
  // 32 bits of the fixed-point number per digit, from 2^-1074 (the least subnormal) up: 70 digits
  // cover every finite double with 2^63 additions of headroom. Carries are deferred (each digit is
  // a signed 64-bit count) and propagated when 2^30 additions could have reached a digit. The
  // arithmetic is core/exact_digits.h's, which CUDA kernels share.
  static constexpr int kDigits = exact::kDigits;
  // The serialized form (words()): the digits, then the non-finite flags.
  static constexpr int kWords = kDigits + 1;

  void add(double x);
  // Adds another sum (e.g. another thread's or process's part).
  void merge(const ExactSum& other);
  // The sum, rounded to the nearest double (ties to even); overflow reads +-inf.
  double value() const;

  // The state as kWords int64 values, for collectives (dist all_gather), and back; from_words also
  // takes digits whose carries are pending (each word within 2^63 - 2^32 of 0: a GPU accumulator's
  // of up to 2^31 units, core/exact_digits.h).
  std::array<int64_t, kWords> words() const;
  static ExactSum from_words(std::span<const int64_t> words);

 private:
  void normalize();
  std::array<int64_t, kDigits> digit_{};
  int64_t adds_ = 0;   // a bound on every digit's magnitude, in additions of 2^32
  int64_t flags_ = 0;  // bit 0: NaN seen, 1: +inf, 2: -inf
};

}  // namespace octet
