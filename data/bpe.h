// Byte-level byte-pair encoding (Sennrich et al. 2016 on bytes, as GPT-2 tokenizes), learned here
// from a training text. Ids 0..255 are the bytes; each learned merge (a, b) adds the id of the
// pair's bytes. Text is first cut into chunks -- a word with the one space before it, a run of
// digits, of punctuation, of other whitespace -- and merges never cross a chunk. Any byte string
// encodes, and decoding gives it back exactly.
//   BpeCodec bpe = BpeCodec::learn(train_text, 4096);      // up to 4096 ids: 256 bytes + 3840 merges
//   std::vector<int32_t> ids = bpe.encode("In the beginning");
//   bpe.decode(ids) == "In the beginning";
//   BpeCodec again = BpeCodec::parse(bpe.serialize(), "checkpoint"); // the merges, one "a b" a line
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace octet {

class BpeCodec {
 public:
  static constexpr int32_t kBytes = 256;
  // The most merges a codec holds (a vocabulary of about a million ids).
  static constexpr int64_t kMaxMerges = int64_t{1} << 20;

  BpeCodec();  // the 256 bytes, no merges
  // Merges learned from `text` until there are `size` ids (256 <= size <= 256 + kMaxMerges), or
  // fewer when no pair of neighbouring tokens in a chunk appears twice any more. Each step merges
  // the most frequent pair (ties: the smallest ids), counted over the text's chunks.
  static BpeCodec learn(std::string_view text, int64_t size);

  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of `ids`; an id out of range is an octet::Error.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes of one id.
  const std::string& bytes(int32_t id) const;
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

  // The merges as text, one "a b" line each in order.
  std::string serialize() const;
  // The inverse: every id must exist before its merge and every pair be new; anything else is an
  // octet::Error naming `where` and the line.
  static BpeCodec parse(std::string_view text, const std::string& where);

  bool operator==(const BpeCodec& o) const { return merges_ == o.merges_; }

 private:
  // Appends merge (a, b) as the next id.
  void add_merge(int32_t a, int32_t b);
  // The ids of one chunk.
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> bytes_;              // of every id
  std::unordered_map<uint64_t, int32_t> rank_;  // pair -> its merge's index
};

// The chunks of `text`, in order, covering it exactly (concatenated they give it back).
std::vector<std::string_view> bpe_chunks(std::string_view text);

}  // namespace octet
