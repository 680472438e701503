#include "tools/train/suggest.h"

#include <algorithm>

namespace octet::train {

size_t edit_distance(const std::string& a, const std::string& b) {
  // Three rows of the dynamic-programming table: a swap looks two rows back.
  std::vector<size_t> back(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], back[j - 2] + 1);
    }
    std::swap(back, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    const size_t allowed = std::max<size_t>(1, std::min(word.size(), c.size()) / 4);
    if (d == 0 || d > allowed || d >= word.size()) continue;
    if (best.empty() || d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string n = nearest_word(word, candidates);
  return n.empty() ? "" : "; did you mean '" + n + "'?";
}

}  // namespace octet::train
