// ExactSum against a correctly rounded reference (Shewchuk's partials, as Python's math.fsum), and
// its promise: the same bits in any order and any split, digits accumulated as a GPU does included.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/exact_digits.h"
#include "core/exact_sum.h"

namespace octet {
namespace {

// The sum of xs rounded once to nearest even: non-overlapping partials kept exact by two-sum, then
// the final rounding with the half-way correction of Python's fsum.
double fsum(const std::vector<double>& xs) {
  std::vector<double> partials;
  for (double x : xs) {
    size_t i = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y, lo = y - (hi - x);
      if (lo != 0.0) partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  if (partials.empty()) return 0.0;
  size_t n = partials.size();
  double hi = partials[--n], lo = 0.0;
  while (n > 0) {
    const double x = hi, y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0.0) break;
  }
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const double y = lo * 2, x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

double exact(const std::vector<double>& xs) {
  ExactSum s;
  for (double x : xs) s.add(x);
  return s.value();
}

std::vector<double> spread(std::mt19937_64& rng, size_t n, int min_exp, int max_exp, bool signs) {
  std::uniform_real_distribution<double> m(0.5, 1.0);
  std::uniform_int_distribution<int> e(min_exp, max_exp);
  std::vector<double> xs(n);
  for (double& x : xs) x = std::ldexp(m(rng), e(rng)) * (signs && (rng() & 1) ? -1.0 : 1.0);
  return xs;
}

TEST(ExactSum, MatchesACorrectlyRoundedReference) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const bool signs = trial % 2 == 1;
    const int lo = trial % 3 == 0 ? -1070 : -60, hi = trial % 5 == 0 ? 1000 : 60;
    const auto xs = spread(rng, 1 + trial * 7, lo, hi, signs);
    EXPECT_EQ(exact(xs), fsum(xs)) << "trial " << trial;
  }
}

TEST(ExactSum, CancellationAndTiesAreExact) {
  EXPECT_EQ(exact({1e100, 1.0, -1e100}), 1.0);
  EXPECT_EQ(exact({1.0, std::ldexp(1.0, -53)}), 1.0);  // a tie: to even
  EXPECT_EQ(exact({1.0, std::ldexp(1.0, -53), std::ldexp(1.0, -200)}), std::nextafter(1.0, 2.0));
  EXPECT_EQ(exact({std::nextafter(1.0, 2.0), std::ldexp(1.0, -53)}), std::nextafter(std::nextafter(1.0, 2.0), 2.0));
  EXPECT_EQ(exact({-3.5, 1.25}), -2.25);
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(exact({tiny, tiny, tiny}), 3 * tiny);
  EXPECT_EQ(exact({std::numeric_limits<double>::min(), -tiny}), std::numeric_limits<double>::min() - tiny);
  EXPECT_EQ(exact({}), 0.0);
  EXPECT_EQ(exact({0.1, 0.2, 0.3, -0.6}), fsum({0.1, 0.2, 0.3, -0.6}));
}

TEST(ExactSum, OrderAndSplitDoNotChangeTheBits) {
  std::mt19937_64 rng(11);
  auto xs = spread(rng, 5000, -40, 40, true);
  const double whole = exact(xs);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(xs.begin(), xs.end(), rng);
    ExactSum parts[3], merged;
    for (size_t i = 0; i < xs.size(); ++i) parts[i % 3].add(xs[i]);
    for (const ExactSum& p : parts) merged.merge(ExactSum::from_words(p.words()));
    EXPECT_EQ(merged.value(), whole);
  }
  // The serial double sum of the same terms depends on the order; the exact one does not.
  double serial = 0.0;
  for (double x : xs) serial += x;
  EXPECT_NEAR(serial, whole, 1e-9 * std::fabs(whole) + 1e-6);
}

TEST(ExactSum, LargeCountsStayExact) {
  ExactSum s;
  const int64_t n = (int64_t{1} << 31) / 1024;  // enough to pass the carry interval with large digits
  for (int64_t i = 0; i < n; ++i) s.add(4294967295.0);
  EXPECT_EQ(s.value(), 4294967295.0 * static_cast<double>(n));
}

TEST(ExactSum, NonFiniteTermsAreRemembered) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(exact({1.0, inf}), inf);
  EXPECT_EQ(exact({1.0, -inf}), -inf);
  EXPECT_TRUE(std::isnan(exact({inf, -inf})));
  EXPECT_TRUE(std::isnan(exact({1.0, nan, 2.0})));
  ExactSum a, b;
  a.add(1.0);
  b.add(nan);
  a.merge(b);
  EXPECT_TRUE(std::isnan(a.value()));
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(exact({big, big}), inf);
  EXPECT_EQ(exact({big, big, -big}), big);  // an intermediate overflow is not one
}

// The way a GPU accumulates (optim/cuda/update.cu): each term's parts (core/exact_digits.h) added
// into raw 64-bit digits, in any order, carries never propagated; from_words then reads the same
// sum, bit for bit, as ExactSum's own adds.
TEST(ExactSum, DigitsWithCarriesPendingReadAsTheSum) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 6; ++trial) {
    auto xs = spread(rng, 20000, trial < 3 ? -60 : -1074, trial < 3 ? 60 : 1000, trial % 2 == 1);
    xs.push_back(std::numeric_limits<double>::denorm_min());
    xs.push_back(-0.0);
    std::array<int64_t, ExactSum::kWords> words{};
    for (double x : xs) {
      const exact::Parts p = exact::parts_of(x);
      words[ExactSum::kDigits] |= p.flag;
      for (int k = 0; k < 3; ++k) words[p.index + k] += p.part[k];
    }
    EXPECT_EQ(ExactSum::from_words(words).value(), exact(xs)) << "trial " << trial;
    EXPECT_EQ(ExactSum::from_words(words).value(), fsum(xs)) << "trial " << trial;
    // Every term the same (digits far from normalized: 2^14 adds of up to 2^32 per word).
    std::array<int64_t, ExactSum::kWords> same{};
    const exact::Parts p = exact::parts_of(-4294967295.0);
    for (int i = 0; i < (1 << 14); ++i)
      for (int k = 0; k < 3; ++k) same[p.index + k] += p.part[k];
    EXPECT_EQ(ExactSum::from_words(same).value(), -4294967295.0 * (1 << 14));
  }
  std::array<int64_t, ExactSum::kWords> flags{};
  flags[ExactSum::kDigits] = exact::parts_of(-std::numeric_limits<double>::infinity()).flag;
  EXPECT_EQ(ExactSum::from_words(flags).value(), -std::numeric_limits<double>::infinity());
  flags[ExactSum::kDigits] |= exact::parts_of(std::nan("")).flag;
  EXPECT_TRUE(std::isnan(ExactSum::from_words(flags).value()));
}

}  // namespace
}  // namespace octet
