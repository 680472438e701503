// Fuzzes the text corpus reader (data/text.h), the vocabulary text that checkpoints carry, and the
// byte-level BPE codec (data/bpe.h). Byte 0 picks the case:
//   bits 0-1: the level: word, character or BPE;
//   bit 2: the vocabulary parser (a BPE vocabulary: the merges reader) on the bytes after byte 2,
//          instead of a corpus;
//   bit 3: the BPE codec alone: the merges are learned from the first part of the input (the
//          vocabulary size from byte 1), and the rest must encode and decode back to itself,
//          byte for byte (a mismatch aborts, which the fuzzer reports).
// A corpus input is split into train/valid/test files at the fractions bytes 1 and 2 give,
// written as <split>.txt, so the tokenizer, the UTF-8 checks and the split discovery all see it.
#include <cstdlib>

#include "core/error.h"
#include "data/bpe.h"
#include "data/text.h"
#include "fuzz_util.h"

namespace {

void codec_round_trip(const uint8_t* data, size_t size) {
  const size_t cut = size * data[2] / 255;
  const std::string_view learn(reinterpret_cast<const char*>(data + 3), cut > 3 ? cut - 3 : 0);
  const std::string_view rest(reinterpret_cast<const char*>(data + 3 + learn.size()), size - 3 - learn.size());
  const octet::BpeCodec codec = octet::BpeCodec::learn(learn, 256 + data[1] * 4);
  if (codec.decode(codec.encode(rest)) != rest) std::abort();
  if (octet::BpeCodec::parse(codec.serialize(), "round trip") != codec) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const int level_bits = data[0] & 3;
  const octet::TextLevel level = level_bits == 0   ? octet::TextLevel::word
                                 : level_bits == 1 ? octet::TextLevel::character
                                                   : octet::TextLevel::bpe;
  try {
    if (data[0] & 8) {
      codec_round_trip(data, size);
      return 0;
    }
    if (data[0] & 4) {
      const std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);
      const octet::Vocabulary v = octet::Vocabulary::parse(text, "fuzz");
      if (v.bpe() != nullptr && v.bpe()->decode(v.bpe()->encode(text)) != text) std::abort();
      return 0;
    }
    static const std::string dir = octet::fuzz::scratch_dir();
    const size_t rest = size - 3, a = rest * data[1] / 255, b = a + (rest - a) * data[2] / 255;
    const uint8_t* text = data + 3;
    octet::fuzz::write_bytes(dir + "/train.txt", text, a);
    octet::fuzz::write_bytes(dir + "/valid.txt", text + a, b - a);
    octet::fuzz::write_bytes(dir + "/test.txt", text + b, rest - b);
    octet::TextCorpus c = octet::load_text_corpus(dir, level, 258 + data[1]);
    (void)octet::Vocabulary::parse(c.vocab.serialize(), "round trip");
    (void)octet::batchify(c.train, 1);
  } catch (const octet::Error&) {
  }
  return 0;
}
