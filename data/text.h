// Text corpora for language modeling: word-level (WikiText-2/-103, Penn Treebank, anything in their
// layout), character-level or byte-level BPE (data/bpe.h, learned from the training split), the
// vocabulary, and the batching for truncated back-propagation through time.
//   TextCorpus c = load_text_corpus("data/wikitext-2", TextLevel::word);
//   BpttSegments train(batchify(c.train, 20), 35);      // 20 contiguous streams, 35-token segments
//   TextBatch b = train.get(0);                          // b.input, b.target i64 [20, 35]
//
// Tokens, as PyTorch's word_language_model example reads these corpora:
// - word level: each line's whitespace-separated words (whitespace as Python's str.split(): ASCII
//   and Unicode spaces) followed by `<eos>`. Every line counts, an empty one too (it is one
//   `<eos>`), as in the example; WikiText's blank lines between paragraphs are such lines. A file
//   that does not end with a newline ends its last line anyway. WikiText's `<unk>` is the
//   vocabulary's `<unk>`.
// - character level: each line's Unicode code points (spaces included; a `\r` before the `\n`
//   dropped) followed by `<eos>`, which generation prints as a newline.
// - BPE: the file's bytes as they are (line ends, `\r` and all; a byte-order mark dropped), encoded
//   with merges learned from the training split; no `<unk>` and no `<eos>` (a newline is a byte).
// Files must be UTF-8 (a leading byte-order mark is skipped): a bad byte is an octet::Error naming
// the file, the line, the column and the byte offset. So are a NUL byte, an empty file, a file
// with nothing but line ends, a missing split and a missing folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "data/bpe.h"

namespace octet {

enum class TextLevel { word, character, bpe };
// "word" / "char" / "bpe", as recipes and checkpoints name the levels.
const char* text_level_name(TextLevel level);
TextLevel parse_text_level(const std::string& name);

// Token <-> id. Ids 0 and 1 are always `<unk>` and `<eos>`; the other tokens follow in the order
// they were first added (first seen in the training text), as the PyTorch example numbers them. A
// BPE vocabulary is its codec's ids after those two, fixed when made: token(2 + b) is byte b.
class Vocabulary {
 public:
  static constexpr int64_t kUnk = 0, kEos = 1;
  static constexpr std::string_view kUnkToken = "<unk>", kEosToken = "<eos>";

  // A word or character vocabulary (the BPE level: from_bpe).
  explicit Vocabulary(TextLevel level = TextLevel::word);
  static Vocabulary from_bpe(BpeCodec codec);
  // The token's id, adding it when new (an octet::Error for a BPE vocabulary).
  int64_t add(std::string_view token);
  // The token's id, or -1 when absent.
  int64_t find(std::string_view token) const;
  // The token's id, or kUnk when absent.
  int64_t id(std::string_view token) const {
    int64_t i = find(token);
    return i < 0 ? kUnk : i;
  }
  // The token's text (a BPE token's bytes).
  const std::string& token(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()) + (bpe_ ? bpe_->size() : 0); }
  TextLevel level() const { return level_; }
  // The BPE codec (null at the other levels).
  const BpeCodec* bpe() const { return bpe_.get(); }

  // A text form for checkpoints: a header line "octet-vocab-1 word|char|bpe", then one token per
  // line in id order (tokens never contain a newline), or for BPE the merges (BpeCodec::serialize).
  std::string serialize() const;
  // The inverse; a malformed text is an octet::Error naming `where`.
  static Vocabulary parse(std::string_view text, const std::string& where);

  bool operator==(const Vocabulary& o) const {
    return level_ == o.level_ && tokens_ == o.tokens_ && (bpe_ ? o.bpe_ && *bpe_ == *o.bpe_ : !o.bpe_);
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  TextLevel level_;
  std::vector<std::string> tokens_;      // the word and character levels' (BPE: <unk> and <eos>)
  std::shared_ptr<const BpeCodec> bpe_;  // the BPE level's
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
};

struct TokenizeStats {
  int64_t lines = 0, tokens = 0;  // tokens include the <eos> of every line
  int64_t unknown = 0;            // tokens not in the vocabulary, mapped to <unk> (when not growing it)
};

// Token ids (i64 [n]) of `text` at the vocabulary's level. With `grow`, new tokens are added to the
// vocabulary; without, they become <unk>. `name` (a file path) names the text in errors.
Tensor tokenize(std::string_view text, const std::string& name, Vocabulary& vocab, bool grow,
                TokenizeStats* stats = nullptr);

// The file of split "train", "valid" or "test" in `root`: the first that exists of
// wiki.<split>.tokens, wiki.<split>.raw (WikiText), ptb.<split>.txt (Penn Treebank as Mikolov
// distributes it) and <split>.txt, each also with a .gz ending. None there, or no folder `root`,
// is an octet::Error listing the names tried.
std::string text_split_path(const std::string& root, const std::string& split);

struct TextCorpus {
  Vocabulary vocab;
  Tensor train, valid, test;  // i64 [n] token ids; undefined for splits not loaded
  std::string train_name, valid_name, test_name;
};

// The three splits of `root`, the vocabulary built from train (BPE: `bpe_size` ids, the 2 special
// tokens included, learned from train's bytes: BpeCodec::learn).
TextCorpus load_text_corpus(const std::string& root, TextLevel level, int64_t bpe_size = 0);
// With a given vocabulary (a checkpoint's): every split maps its unknown tokens to <unk>; train is
// loaded only when `need_train`.
TextCorpus load_text_corpus(const std::string& root, const Vocabulary& vocab, bool need_train);
// The same from texts in memory (generated corpora); names stand for file paths in errors.
TextCorpus text_corpus_from(const std::string& train, const std::string& valid, const std::string& test,
                            TextLevel level, const std::string& name, int64_t bpe_size = 0);

// ids i64 [n] -> [batch, n / batch]: row b is the contiguous stream of tokens [b m, (b + 1) m),
// m = n / batch; the n % batch tokens at the end are dropped (PyTorch's example batchifies the
// same streams, transposed). Fewer than 2 tokens per stream is an octet::Error.
Tensor batchify(const Tensor& ids, int64_t batch);

struct TextBatch {
  Tensor input, target;  // i64 [B, T]; target is input shifted by one token
};

// The segments of truncated BPTT over batchified streams [B, n]: segment k starts at token k bptt
// and has T = min(bptt, n - 1 - k bptt) steps (the last one may be shorter).
class BpttSegments {
 public:
  BpttSegments() = default;
  BpttSegments(Tensor streams, int64_t bptt);
  int64_t size() const { return segments_; }
  int64_t batch() const { return streams_.defined() ? streams_.size(0) : 0; }
  int64_t bptt() const { return bptt_; }
  // Predicted tokens over all segments: B (n - 1).
  int64_t tokens() const;
  // Contiguous copies.
  TextBatch get(int64_t k) const;

 private:
  Tensor streams_;
  int64_t bptt_ = 0, segments_ = 0;
};

}  // namespace octet
