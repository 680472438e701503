#include "data/bpe.h"

#include <charconv>
#include <limits>
#include <queue>

#include "core/error.h"

namespace octet {

namespace {

// The longest chunk: longer runs are cut, so no token and no chunk's encoding grows without bound.
constexpr size_t kMaxChunk = 256;

enum class ByteClass : uint8_t { letter, digit, space, other_space, punct };

ByteClass byte_class(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::letter;  // UTF-8 too
  if (c >= '0' && c <= '9') return ByteClass::digit;
  if (c == ' ') return ByteClass::space;
  if (c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return ByteClass::other_space;
  return ByteClass::punct;
}

bool is_space(ByteClass c) { return c == ByteClass::space || c == ByteClass::other_space; }

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// End of the run of bytes of class `c` from `i` (at most kMaxChunk bytes from `start`).
size_t run_end(std::string_view text, size_t i, size_t start, ByteClass c) {
  while (i < text.size() && i - start < kMaxChunk && byte_class(text[i]) == c) ++i;
  return i;
}

}  // namespace

std::vector<std::string_view> bpe_chunks(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    const ByteClass c = byte_class(text[i]);
    size_t end = 0;
    if (!is_space(c)) {
      end = run_end(text, i, i, c);
    } else {
      end = i;
      while (end < text.size() && end - i < kMaxChunk && is_space(byte_class(text[end]))) ++end;
      // A run of whitespace before a word leaves its last space to the word: " the", not " " "the".
      const bool word_follows = end < text.size() && !is_space(byte_class(text[end])) && text[end - 1] == ' ';
      if (word_follows) {
        if (end - 1 > i) out.push_back(text.substr(i, end - 1 - i));
        i = end - 1;
        end = run_end(text, end, i, byte_class(text[end]));
      }
    }
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

BpeCodec::BpeCodec() {
  for (int b = 0; b < kBytes; ++b) bytes_.emplace_back(1, static_cast<char>(b));
}

void BpeCodec::add_merge(int32_t a, int32_t b) {
  rank_.emplace(pair_key(a, b), static_cast<int32_t>(merges_.size()));
  merges_.emplace_back(a, b);
  bytes_.push_back(bytes_[static_cast<size_t>(a)] + bytes_[static_cast<size_t>(b)]);
}

const std::string& BpeCodec::bytes(int32_t id) const {
  OCTET_CHECK(id >= 0 && id < size(), "BPE: token id ", id, " out of range [0, ", size(), ")");
  return bytes_[static_cast<size_t>(id)];
}

// ---------------------------------------------------------------- encoding

void BpeCodec::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  std::vector<int32_t> s;
  for (char ch : chunk) s.push_back(static_cast<unsigned char>(ch));
  // Apply the earliest-learned merge present, everywhere in the chunk, until none applies.
  while (s.size() > 1) {
    int32_t best = std::numeric_limits<int32_t>::max();
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (auto it = rank_.find(pair_key(s[i], s[i + 1])); it != rank_.end() && it->second < best) best = it->second;
    if (best == std::numeric_limits<int32_t>::max()) break;
    const auto [a, b] = merges_[static_cast<size_t>(best)];
    size_t w = 0;
    for (size_t r = 0; r < s.size(); ++r) {
      if (r + 1 < s.size() && s[r] == a && s[r + 1] == b) {
        s[w++] = kBytes + best;
        ++r;
      } else {
        s[w++] = s[r];
      }
    }
    s.resize(w);
  }
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<int32_t> BpeCodec::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;  // a text repeats its chunks
  for (std::string_view chunk : bpe_chunks(text)) {
    auto it = cache.find(chunk);
    if (it == cache.end()) {
      std::vector<int32_t> ids;
      encode_chunk(chunk, ids);
      it = cache.emplace(chunk, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

std::string BpeCodec::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += bytes(id);
  return out;
}

// ---------------------------------------------------------------- learning

namespace {

// The pair counts over the chunks, kept up to date as merges rewrite the chunks that hold them.
class PairCounts {
 public:
  explicit PairCounts(std::string_view text) {
    std::unordered_map<std::string_view, int64_t> freq;
    for (std::string_view chunk : bpe_chunks(text)) ++freq[chunk];
    for (const auto& [chunk, n] : freq) {
      std::vector<int32_t> s;
      for (char ch : chunk) s.push_back(static_cast<unsigned char>(ch));
      words_.push_back(std::move(s));
      counts_.push_back(n);
    }
    last_merge_.assign(words_.size(), -1);
    std::unordered_map<uint64_t, int64_t> delta;
    for (size_t w = 0; w < words_.size(); ++w) add_pairs(w, +1, delta);
    apply(delta);
  }

  // The most frequent pair (ties: the smallest ids) and its count; count 0 when none is left.
  std::pair<uint64_t, int64_t> best() {
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      const uint64_t key = pair_key(e.a, e.b);
      if (auto it = counts_of_.find(key); it != counts_of_.end() && it->second == e.count) return {key, e.count};
    }
    return {0, 0};
  }

  // Rewrites every chunk holding pair `key` with `id` in its place.
  void merge(uint64_t key, int32_t id) {
    const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xffffffffu);
    std::vector<size_t> holders = std::move(where_[key]);
    where_.erase(key);
    std::unordered_map<uint64_t, int64_t> delta;
    for (size_t w : holders) {
      if (last_merge_[w] == id) continue;  // listed twice
      last_merge_[w] = id;
      add_pairs(w, -1, delta);
      std::vector<int32_t>& s = words_[w];
      size_t out = 0;
      for (size_t r = 0; r < s.size(); ++r) {
        if (r + 1 < s.size() && s[r] == a && s[r + 1] == b) {
          s[out++] = id;
          ++r;
        } else {
          s[out++] = s[r];
        }
      }
      s.resize(out);
      add_pairs(w, +1, delta);
    }
    apply(delta);
  }

 private:
  struct Entry {
    int64_t count;
    int32_t a, b;
    bool operator<(const Entry& o) const {  // the heap's top: the largest count, then the smallest ids
      if (count != o.count) return count < o.count;
      return a != o.a ? a > o.a : b > o.b;
    }
  };

  void add_pairs(size_t w, int sign, std::unordered_map<uint64_t, int64_t>& delta) {
    const std::vector<int32_t>& s = words_[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t key = pair_key(s[i], s[i + 1]);
      delta[key] += sign * counts_[w];
      if (sign > 0) where_[key].push_back(w);
    }
  }

  void apply(const std::unordered_map<uint64_t, int64_t>& delta) {
    for (const auto& [key, d] : delta) {
      if (d == 0) continue;
      int64_t& c = counts_of_[key];
      c += d;
      if (c <= 0) {
        counts_of_.erase(key);
        continue;
      }
      heap_.push({c, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu)});
    }
  }

  std::vector<std::vector<int32_t>> words_;  // each distinct chunk as tokens
  std::vector<int64_t> counts_;              // how often it occurs
  std::vector<int32_t> last_merge_;          // the last merge that rewrote it
  std::unordered_map<uint64_t, int64_t> counts_of_;
  std::unordered_map<uint64_t, std::vector<size_t>> where_;  // the chunks that held a pair (some no more)
  std::priority_queue<Entry> heap_;                          // counts, some stale (best() skips those)
};

}  // namespace

BpeCodec BpeCodec::learn(std::string_view text, int64_t size) {
  OCTET_CHECK(size >= kBytes && size <= kBytes + kMaxMerges, "BPE: expected a vocabulary of ", kBytes, " to ",
              kBytes + kMaxMerges, " ids, got ", size);
  BpeCodec codec;
  PairCounts counts(text);
  while (codec.size() < size) {
    const auto [key, n] = counts.best();
    if (n < 2) break;  // a pair seen once: merging it only memorizes the text
    const auto id = static_cast<int32_t>(codec.size());
    codec.add_merge(static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu));
    counts.merge(key, id);
  }
  return codec;
}

// ---------------------------------------------------------------- the merges as text

std::string BpeCodec::serialize() const {
  std::string out;
  for (const auto& [a, b] : merges_) out += std::to_string(a) + " " + std::to_string(b) + "\n";
  return out;
}

BpeCodec BpeCodec::parse(std::string_view text, const std::string& where) {
  BpeCodec c;
  size_t pos = 0;
  for (int64_t line = 1; pos < text.size(); ++line) {
    const size_t end = text.find('\n', pos);
    OCTET_CHECK(end != std::string_view::npos, where, ": BPE merge line ", line, " ends without a newline");
    OCTET_CHECK(c.size() < kBytes + kMaxMerges, where, ": more than ", kMaxMerges, " BPE merges");
    const std::string_view l = text.substr(pos, end - pos);
    int32_t a = -1, b = -1;
    const char* p = l.data();
    const char* stop = l.data() + l.size();
    auto r1 = std::from_chars(p, stop, a);
    const bool space = r1.ec == std::errc() && r1.ptr != stop && *r1.ptr == ' ';
    auto r2 = space ? std::from_chars(r1.ptr + 1, stop, b) : r1;
    OCTET_CHECK(space && r2.ec == std::errc() && r2.ptr == stop && r1.ptr != p && r2.ptr != r1.ptr + 1, where,
                ": BPE merge line ", line, ": expected two token ids 'a b', got '", l.substr(0, 40), "'");
    OCTET_CHECK(a >= 0 && b >= 0 && a < c.size() && b < c.size(), where, ": BPE merge line ", line, " (", a, " ", b,
                ") names an id not defined before it (", c.size(), " so far)");
    OCTET_CHECK(c.rank_.count(pair_key(a, b)) == 0, where, ": BPE merge line ", line, " (", a, " ", b,
                ") repeats an earlier merge");
    OCTET_CHECK(c.bytes_[static_cast<size_t>(a)].size() + c.bytes_[static_cast<size_t>(b)].size() <= kMaxChunk, where,
                ": BPE merge line ", line, " makes a token of more than ", kMaxChunk, " bytes");
    c.add_merge(a, b);
    pos = end + 1;
  }
  return c;
}

}  // namespace octet
