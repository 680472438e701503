#include "data/text.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/file_io.h"

namespace octet {

namespace {

constexpr std::string_view kVocabHeader = "octet-vocab-1";

// Python's str.isspace() for ASCII: \t \n \v \f \r, the separators \x1c-\x1f and space.
bool ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// Python's str.isspace() beyond ASCII.
bool unicode_space(uint32_t cp) {
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Decodes the multi-byte UTF-8 sequence at p[0] >= 0x80 (n bytes left); returns its length, 0
// when the bytes are not well-formed UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated).
int decode_utf8(const unsigned char* p, size_t n, uint32_t& cp) {
  const unsigned char c = p[0];
  int len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, cp = c & 0x0f;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, cp = c & 0x07;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (n < static_cast<size_t>(len) || p[1] < lo || p[1] > hi) return 0;
  for (int i = 1; i < len; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  return len;
}

std::string hex_byte(unsigned char c) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

// Appends ids, growing by doubling; the final tensor is one copy.
class IdSink {
 public:
  // `scan` (BPE): only the lines are counted; the ids come from the codec.
  IdSink(Vocabulary& vocab, bool grow, TokenizeStats& stats, bool scan)
      : vocab_(vocab), grow_(grow), stats_(stats), scan_(scan) {}
  void token(std::string_view t) {
    if (scan_) return;
    int64_t id = grow_ ? vocab_.add(t) : vocab_.find(t);
    if (id < 0) id = Vocabulary::kUnk, ++stats_.unknown;
    ids_.push_back(id);
  }
  void eos() {
    ++stats_.lines;
    if (!scan_) ids_.push_back(Vocabulary::kEos);
  }
  Tensor tensor() const {
    Tensor t = empty({static_cast<int64_t>(ids_.size())}, DType::i64);
    if (!ids_.empty()) std::memcpy(t.data<int64_t>(), ids_.data(), ids_.size() * sizeof(int64_t));
    return t;
  }
  size_t size() const { return ids_.size(); }

 private:
  Vocabulary& vocab_;
  bool grow_;
  TokenizeStats& stats_;
  bool scan_;
  std::vector<int64_t> ids_;
};

// The ids of `text` in a BPE vocabulary: the codec's, after <unk> and <eos>.
Tensor bpe_ids(const BpeCodec& codec, std::string_view text, TokenizeStats& st) {
  const std::vector<int32_t> ids = codec.encode(text);
  Tensor t = empty({static_cast<int64_t>(ids.size())}, DType::i64);
  int64_t* out = t.data<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) out[i] = ids[i] + 2;
  st.tokens = static_cast<int64_t>(ids.size());
  return t;
}

}  // namespace

const char* text_level_name(TextLevel level) {
  return level == TextLevel::word ? "word" : level == TextLevel::character ? "char" : "bpe";
}

TextLevel parse_text_level(const std::string& name) {
  if (name == "word") return TextLevel::word;
  if (name == "char") return TextLevel::character;
  if (name == "bpe") return TextLevel::bpe;
  OCTET_FAIL("text: unknown level '", name, "' (expected word, char or bpe)");
}

Vocabulary::Vocabulary(TextLevel level) : level_(level) {
  add(kUnkToken);
  add(kEosToken);
  if (level == TextLevel::bpe) bpe_ = std::make_shared<const BpeCodec>();
}

Vocabulary Vocabulary::from_bpe(BpeCodec codec) {
  Vocabulary v(TextLevel::bpe);
  v.bpe_ = std::make_shared<const BpeCodec>(std::move(codec));
  return v;
}

int64_t Vocabulary::add(std::string_view token) {
  auto it = ids_.find(token);
  if (it != ids_.end()) return it->second;
  OCTET_CHECK(!bpe_, "Vocabulary: a BPE vocabulary is fixed when learned; cannot add '", token, "'");
  OCTET_CHECK(!token.empty() && token.find('\n') == std::string_view::npos,
              "Vocabulary: a token must be non-empty and hold no newline");
  const int64_t id = size();
  tokens_.emplace_back(token);
  ids_.emplace(tokens_.back(), id);
  return id;
}

int64_t Vocabulary::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& Vocabulary::token(int64_t id) const {
  OCTET_CHECK(id >= 0 && id < size(), "Vocabulary: id ", id, " out of range [0, ", size(), ")");
  const auto special = static_cast<int64_t>(tokens_.size());
  return id < special ? tokens_[static_cast<size_t>(id)] : bpe_->bytes(static_cast<int32_t>(id - special));
}

std::string Vocabulary::serialize() const {
  std::string out = std::string(kVocabHeader) + " " + text_level_name(level_) + "\n";
  if (bpe_) return out + bpe_->serialize();
  for (const std::string& t : tokens_) out += t + "\n";
  return out;
}

Vocabulary Vocabulary::parse(std::string_view text, const std::string& where) {
  size_t eol = text.find('\n');
  std::string_view header = text.substr(0, eol);
  OCTET_CHECK(eol != std::string_view::npos && header.starts_with(kVocabHeader) && header.size() > kVocabHeader.size(),
              where, ": not a vocabulary (expected a first line '", kVocabHeader, " word|char|bpe')");
  Vocabulary v(parse_text_level(std::string(header.substr(kVocabHeader.size() + 1))));
  if (v.level() == TextLevel::bpe) return from_bpe(BpeCodec::parse(text.substr(eol + 1), where));
  size_t pos = eol + 1;
  int64_t expected = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    OCTET_CHECK(end != std::string_view::npos, where, ": vocabulary ends without a newline after token ", expected);
    std::string_view t = text.substr(pos, end - pos);
    OCTET_CHECK(!t.empty(), where, ": vocabulary token ", expected, " is empty");
    OCTET_CHECK(v.add(t) == expected, where, ": vocabulary token ", expected, " '", t,
                (expected < 2 ? "' must be the special token there" : "' appears twice"));
    ++expected;
    pos = end + 1;
  }
  OCTET_CHECK(expected >= 2, where, ": vocabulary lacks <unk> and <eos>");
  return v;
}

Tensor tokenize(std::string_view text, const std::string& name, Vocabulary& vocab, bool grow, TokenizeStats* stats) {
  TokenizeStats local;
  TokenizeStats& st = stats ? *stats : local;
  st = TokenizeStats();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) pos = 3;  // byte-order mark
  const size_t bom = pos;
  OCTET_CHECK(pos < n, "text: ", name, ": empty file");
  const bool words = vocab.level() == TextLevel::word;
  IdSink sink(vocab, grow, st, vocab.bpe() != nullptr);
  int64_t line = 1;
  size_t line_start = pos, word_start = std::string_view::npos;
  auto end_word = [&](size_t at) {
    if (word_start != std::string_view::npos) sink.token(text.substr(word_start, at - word_start));
    word_start = std::string_view::npos;
  };
  auto where = [&](size_t at) {
    return detail::str_cat(name, ": line ", line, ", column ", at - line_start + 1, " (byte offset ", at, ")");
  };
  while (pos < n) {
    const unsigned char c = p[pos];
    if (c < 0x80) {
      OCTET_CHECK(c != 0, "text: ", where(pos), ": NUL byte (a binary file, or UTF-16 text? expected UTF-8)");
      if (c == '\n') {
        end_word(pos);
        sink.eos();
        ++line;
        line_start = pos + 1;
      } else if (words) {
        if (ascii_space(c))
          end_word(pos);
        else if (word_start == std::string_view::npos)
          word_start = pos;
      } else if (!(c == '\r' && (pos + 1 == n || p[pos + 1] == '\n'))) {
        sink.token(text.substr(pos, 1));
      }
      ++pos;
      continue;
    }
    uint32_t cp = 0;
    const int len = decode_utf8(p + pos, n - pos, cp);
    OCTET_CHECK(len > 0, "text: ", where(pos), ": invalid UTF-8 (byte ", hex_byte(c),
                "); the file must be UTF-8 text (convert it with iconv)");
    if (!words)
      sink.token(text.substr(pos, static_cast<size_t>(len)));
    else if (unicode_space(cp))
      end_word(pos);
    else if (word_start == std::string_view::npos)
      word_start = pos;
    pos += static_cast<size_t>(len);
  }
  if (line_start < n) {  // a last line without its newline
    end_word(n);
    sink.eos();
  }
  if (vocab.bpe() != nullptr) return bpe_ids(*vocab.bpe(), text.substr(bom), st);
  st.tokens = static_cast<int64_t>(sink.size());
  OCTET_CHECK(st.tokens > st.lines, "text: ", name, ": no ", words ? "words" : "characters", " in ", st.lines,
              " line(s) (only line ends and whitespace)");
  return sink.tensor();
}

std::string text_split_path(const std::string& root, const std::string& split) {
  std::error_code ec;
  OCTET_CHECK(std::filesystem::is_directory(root, ec), "text: corpus folder ", root,
              " not found (set data.root to the folder with the train/valid/test files)");
  const std::vector<std::string> names = {"wiki." + split + ".tokens", "wiki." + split + ".raw",
                                          "ptb." + split + ".txt", split + ".txt"};
  std::string tried;
  for (const std::string& name : names) {
    for (const char* ext : {"", ".gz"}) {
      std::string path = root + "/" + name + ext;
      if (file_exists(path)) return path;
    }
    tried += (tried.empty() ? "" : ", ") + name;
  }
  OCTET_FAIL("text: no ", split, " split in ", root, " (looked for ", tried, ", each also .gz)");
}

namespace {

// A BPE vocabulary of `size` ids learned from `text` (its byte-order mark aside).
Vocabulary learn_bpe(std::string_view text, int64_t size) {
  OCTET_CHECK(size >= 2 + BpeCodec::kBytes, "text: a BPE vocabulary needs at least ", 2 + BpeCodec::kBytes,
              " ids (<unk>, <eos> and the 256 bytes), got ", size);
  if (text.starts_with("\xef\xbb\xbf")) text.remove_prefix(3);
  return Vocabulary::from_bpe(BpeCodec::learn(text, size - 2));
}

// A split's ids; the training split, `grow`, makes a BPE vocabulary of `bpe_size` ids first.
Tensor split_ids(std::string_view text, const std::string& name, Vocabulary& vocab, bool grow, int64_t bpe_size) {
  if (grow && vocab.level() == TextLevel::bpe) vocab = learn_bpe(text, bpe_size);  // tokenize checks the file
  return tokenize(text, name, vocab, grow);
}

Tensor load_split(const std::string& path, Vocabulary& vocab, bool grow, int64_t bpe_size = 0) {
  std::vector<uint8_t> bytes = read_file_maybe_gz("text", path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return split_ids(text, path, vocab, grow, bpe_size);
}

}  // namespace

TextCorpus load_text_corpus(const std::string& root, TextLevel level, int64_t bpe_size) {
  TextCorpus c{Vocabulary(level),
               {},
               {},
               {},
               text_split_path(root, "train"),
               text_split_path(root, "valid"),
               text_split_path(root, "test")};
  c.train = load_split(c.train_name, c.vocab, true, bpe_size);
  c.valid = load_split(c.valid_name, c.vocab, false);
  c.test = load_split(c.test_name, c.vocab, false);
  return c;
}

TextCorpus load_text_corpus(const std::string& root, const Vocabulary& vocab, bool need_train) {
  TextCorpus c{vocab,
               {},
               {},
               {},
               need_train ? text_split_path(root, "train") : "",
               text_split_path(root, "valid"),
               text_split_path(root, "test")};
  if (need_train) c.train = load_split(c.train_name, c.vocab, false);
  c.valid = load_split(c.valid_name, c.vocab, false);
  c.test = load_split(c.test_name, c.vocab, false);
  return c;
}

TextCorpus text_corpus_from(const std::string& train, const std::string& valid, const std::string& test,
                            TextLevel level, const std::string& name, int64_t bpe_size) {
  TextCorpus c{Vocabulary(level), {}, {}, {}, name + "/train", name + "/valid", name + "/test"};
  c.train = split_ids(train, c.train_name, c.vocab, true, bpe_size);
  c.valid = tokenize(valid, c.valid_name, c.vocab, false);
  c.test = tokenize(test, c.test_name, c.vocab, false);
  return c;
}

Tensor batchify(const Tensor& ids, int64_t batch) {
  OCTET_CHECK(ids.defined() && ids.dim() == 1 && ids.dtype() == DType::i64, "batchify: expected i64 ids [n], got ",
              ids.defined() ? ids.str() : std::string("an undefined tensor"));
  OCTET_CHECK(batch >= 1, "batchify: expected batch >= 1, got ", batch);
  const int64_t per = ids.numel() / batch;
  OCTET_CHECK(per >= 2, "batchify: ", ids.numel(), " tokens are too few for ", batch,
              " streams (each needs at least 2 tokens)");
  return ids.contiguous().narrow(0, 0, per * batch).view({batch, per});
}

BpttSegments::BpttSegments(Tensor streams, int64_t bptt) : streams_(std::move(streams)), bptt_(bptt) {
  OCTET_CHECK(streams_.defined() && streams_.dim() == 2 && streams_.size(1) >= 2 && streams_.dtype() == DType::i64,
              "BpttSegments: expected i64 streams [B, n >= 2]");
  OCTET_CHECK(bptt >= 1, "BpttSegments: expected bptt >= 1, got ", bptt);
  segments_ = (streams_.size(1) - 1 + bptt - 1) / bptt;
}

int64_t BpttSegments::tokens() const { return streams_.defined() ? batch() * (streams_.size(1) - 1) : 0; }

TextBatch BpttSegments::get(int64_t k) const {
  OCTET_CHECK(k >= 0 && k < segments_, "BpttSegments: segment ", k, " out of range [0, ", segments_, ")");
  const int64_t start = k * bptt_, len = std::min(bptt_, streams_.size(1) - 1 - start);
  return {streams_.narrow(1, start, len).contiguous(), streams_.narrow(1, start + 1, len).contiguous()};
}

}  // namespace octet
