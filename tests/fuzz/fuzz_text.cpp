// Fuzzes the text corpus reader (data/text.h) and the vocabulary text that checkpoints carry.
// Byte 0 picks the case: bit 0 word or character level; bit 1 the vocabulary parser instead of a
// corpus. A corpus input is split into train/valid/test files at the fractions bytes 1 and 2 give,
// written as <split>.txt, so the tokenizer, the UTF-8 checks and the split discovery all see it.
#include "core/error.h"
#include "data/text.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const octet::TextLevel level = (data[0] & 1) ? octet::TextLevel::character : octet::TextLevel::word;
  try {
    if (data[0] & 2) {
      (void)octet::Vocabulary::parse({reinterpret_cast<const char*>(data + 1), size - 1}, "fuzz");
      return 0;
    }
    static const std::string dir = octet::fuzz::scratch_dir();
    const size_t rest = size - 3, a = rest * data[1] / 255, b = a + (rest - a) * data[2] / 255;
    const uint8_t* text = data + 3;
    octet::fuzz::write_bytes(dir + "/train.txt", text, a);
    octet::fuzz::write_bytes(dir + "/valid.txt", text + a, b - a);
    octet::fuzz::write_bytes(dir + "/test.txt", text + b, rest - b);
    octet::TextCorpus c = octet::load_text_corpus(dir, level);
    (void)octet::Vocabulary::parse(c.vocab.serialize(), "round trip");
    (void)octet::batchify(c.train, 1);
  } catch (const octet::Error&) {
  }
  return 0;
}
