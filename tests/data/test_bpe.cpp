// Byte-level BPE (data/bpe.h) and the BPE level of the text corpora (data/text.h): the chunks, the
// merges learned on a text worked by hand, encoding by merge order, exact round trips of any bytes
// (NUL, invalid UTF-8, long runs), the merges' text form and every way it can be malformed, and a
// corpus whose training split teaches the codec the other splits use.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/generator.h"
#include "data/bpe.h"
#include "data/text.h"
#include "data/toy_grammar.h"
#include "tests/data/temp_dir.h"

namespace octet {
namespace {

std::vector<std::string> chunks_of(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view c : bpe_chunks(text)) out.emplace_back(c);
  return out;
}

TEST(Bpe, ChunksAreWordsWithTheirSpaceDigitsPunctuationAndWhitespace) {
  EXPECT_EQ(chunks_of("Hello  world!\n\n42 times, 3x"),
            (std::vector<std::string>{"Hello", " ", " world", "!", "\n\n", "42", " times", ",", " 3", "x"}));
  EXPECT_EQ(chunks_of(" a\tb "), (std::vector<std::string>{" a", "\t", "b", " "}));
  EXPECT_EQ(chunks_of("caf\xc3\xa9 na\xc3\xafve"), (std::vector<std::string>{"caf\xc3\xa9", " na\xc3\xafve"}));
  EXPECT_TRUE(chunks_of("").empty());
  // A long run is cut, so no chunk (and no token) exceeds 256 bytes.
  const std::vector<std::string> long_run = chunks_of(std::string(600, 'a'));
  ASSERT_EQ(long_run.size(), 3U);
  EXPECT_EQ(long_run[0].size(), 256U);
  std::string joined;
  for (const auto& c : chunks_of("x  \n y,,z 12 ab")) joined += c;
  EXPECT_EQ(joined, "x  \n y,,z 12 ab");
}

// "ab ab ab cd": chunks "ab", " ab", " ab", " cd". (a, b) occurs 3 times, (' ', a) twice: merge
// 256 = "ab"; then (' ', 256) twice: 257 = " ab"; then no pair repeats.
TEST(Bpe, LearnsTheMostFrequentPairsInOrder) {
  const BpeCodec c = BpeCodec::learn("ab ab ab cd", 1000);
  EXPECT_EQ(c.merges(), (std::vector<std::pair<int32_t, int32_t>>{{'a', 'b'}, {' ', 256}}));
  EXPECT_EQ(c.size(), 258);
  EXPECT_EQ(c.bytes(257), " ab");
  EXPECT_EQ(c.encode("ab ab cd"), (std::vector<int32_t>{256, 257, ' ', 'c', 'd'}));
  // The size caps the merges; ties go to the smallest ids: in "xy zw xy zw" (chunks "xy", " zw",
  // " xy", " zw") (x, y), (' ', z) and (z, w) occur twice each: (' ', z) = (32, 122) first.
  EXPECT_EQ(BpeCodec::learn("ab ab ab cd", 257).merges().size(), 1U);
  EXPECT_EQ(BpeCodec::learn("xy zw xy zw", 257).merges().front(), (std::pair<int32_t, int32_t>{' ', 'z'}));
  EXPECT_THROW(BpeCodec::learn("ab", 255), Error);
}

// Encoding applies the earliest-learned merge first, wherever it is, not the longest match.
TEST(Bpe, EncodesByMergeOrder) {
  BpeCodec c = BpeCodec::parse("98 99\n97 98\n256 99\n", "test");  // 256 "bc", 257 "ab", 258 "bcc"... (256, c)
  EXPECT_EQ(c.bytes(258), "bcc");
  // "abc": (b, c) is merge 0, before (a, b): a + "bc"; "abcc": a + "bcc".
  EXPECT_EQ(c.encode("abc"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(c.encode("abcc"), (std::vector<int32_t>{'a', 258}));
  EXPECT_EQ(c.encode("abab"), (std::vector<int32_t>{257, 257}));
}

std::string random_bytes(Generator& g, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(philox_at(g.seed(), g.advance(1), 0)[0] & 0xff);
  return s;
}

TEST(Bpe, AnyBytesComeBackExactly) {
  const ToyGrammarText t = toy_grammar_text(ToyGrammarOptions().train_tokens(20000));
  const BpeCodec c = BpeCodec::learn(t.train, 600);
  EXPECT_EQ(c.size(), 600);
  Generator g(3);
  std::vector<std::string> texts = {"",
                                    "\n",
                                    std::string(1, '\0'),
                                    "\xff\xfe\x80",
                                    std::string(1000, ' '),
                                    std::string(700, 'z') + "\r\n",
                                    t.valid.substr(0, 5000)};
  for (int i = 0; i < 50; ++i) texts.push_back(random_bytes(g, static_cast<size_t>(i * 37)));
  for (const std::string& s : texts) {
    const std::vector<int32_t> ids = c.encode(s);
    EXPECT_EQ(c.decode(ids), s);
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < c.size());
  }
  // The learned merges compress the text they came from's kind: under 1/2 the bytes in tokens.
  EXPECT_LT(c.encode(t.valid).size() * 2, t.valid.size());
  EXPECT_THROW(c.decode({600}), Error);
  EXPECT_THROW(c.decode({-1}), Error);
}

TEST(Bpe, MergesRoundTripAndMalformedTextIsAnError) {
  const BpeCodec c = BpeCodec::learn(toy_grammar_text(ToyGrammarOptions().train_tokens(5000)).train, 400);
  EXPECT_EQ(BpeCodec::parse(c.serialize(), "x"), c);
  EXPECT_EQ(BpeCodec::parse("", "x").size(), 256);
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"97 98", "line 1 ends without a newline"},
           {"97 98\n97\n", "line 2: expected two token ids"},
           {"97  98\n", "expected two token ids"},
           {"97 98 \n", "expected two token ids"},
           {"-1 98\n", "names an id not defined before it"},
           {"97 x\n", "expected two token ids"},
           {"97 256\n", "names an id not defined before it"},
           {"97 98\n97 98\n", "repeats an earlier merge"},
           {"99999999999 1\n", "expected two token ids"},
       }) {
    try {
      BpeCodec::parse(text, "ckpt");
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ckpt"), std::string::npos) << e.what();
    }
  }
  // Doubling a token: 2^k bytes; past 256 bytes it is an error, not an allocation.
  std::string doubling = "97 97\n";
  for (int k = 0; k < 8; ++k) doubling += std::to_string(256 + k) + " " + std::to_string(256 + k) + "\n";
  EXPECT_THROW(BpeCodec::parse(doubling, "x"), Error);
}

TEST(BpeCorpus, TheTrainingSplitTeachesTheCodec) {
  testing::TempDir dir;
  const ToyGrammarText t = toy_grammar_text(ToyGrammarOptions().train_tokens(20000));
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"train", "\xef\xbb\xbf" + t.train}, {"valid", t.valid}, {"test", t.test + "\r\nno newline at the end"}})
    std::ofstream(dir.path() + "/" + name + ".txt", std::ios::binary) << text;
  TextCorpus c = load_text_corpus(dir.path(), TextLevel::bpe, 500);
  ASSERT_NE(c.vocab.bpe(), nullptr);
  EXPECT_EQ(c.vocab.size(), 500);
  EXPECT_EQ(c.vocab.token(2 + 'a'), "a");
  EXPECT_EQ(c.vocab.token(Vocabulary::kEos), "<eos>");
  // Every split is the codec's ids after <unk> and <eos>; the bytes come back (the mark aside).
  auto text_of = [&](const Tensor& ids) {
    std::string s;
    for (int64_t id : ids.to_vector<int64_t>()) {
      EXPECT_GE(id, 2);
      s += c.vocab.token(id);
    }
    return s;
  };
  EXPECT_EQ(text_of(c.train), t.train);
  EXPECT_EQ(text_of(c.test), t.test + "\r\nno newline at the end");
  // The checkpoint's text form gives the same vocabulary, which reads the splits as before.
  const Vocabulary again = Vocabulary::parse(c.vocab.serialize(), "ckpt");
  EXPECT_EQ(again, c.vocab);
  EXPECT_EQ(c.vocab.serialize().rfind("octet-vocab-1 bpe\n", 0), 0U);
  TextCorpus reread = load_text_corpus(dir.path(), again, false);
  EXPECT_FALSE(reread.train.defined());
  EXPECT_EQ(reread.valid.to_vector<int64_t>(), c.valid.to_vector<int64_t>());
  Vocabulary fixed = again;
  EXPECT_THROW(fixed.add("new"), Error);
  EXPECT_THROW(load_text_corpus(dir.path(), TextLevel::bpe, 100), Error);  // fewer ids than the bytes
  // The file checks stay: a NUL byte is an error naming the file.
  std::ofstream(dir.path() + "/train.txt", std::ios::binary) << std::string("ab\0cd", 5);
  EXPECT_THROW(load_text_corpus(dir.path(), TextLevel::bpe, 500), Error);
}

}  // namespace
}  // namespace octet
