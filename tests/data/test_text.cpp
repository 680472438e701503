// Text corpora: tokenizing at the word and character level as PyTorch's word_language_model reads
// WikiText/PTB, the vocabulary and its text form, split discovery, errors for bad files, batchify
// and the BPTT segments, and the generated toy-grammar corpus.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/octet.h"
#include "data/file_io.h"
#include "data/text.h"
#include "data/toy_grammar.h"
#include "tests/data/temp_dir.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using octet::testing::TempDir;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> tokens_of(const Tensor& ids, const Vocabulary& v) {
  std::vector<std::string> out;
  for (int64_t id : ids.to_vector<int64_t>()) out.push_back(v.token(id));
  return out;
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << fragments[0];
  } catch (const Error& e) {
    for (const auto& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(Text, WordsLinesAndUnknowns) {
  Vocabulary v;
  EXPECT_EQ(v.size(), 2);
  EXPECT_EQ(v.token(Vocabulary::kUnk), "<unk>");
  EXPECT_EQ(v.token(Vocabulary::kEos), "<eos>");
  // WikiText style: a leading space, a blank line, a heading, tabs and CRLF; the file's last line
  // has no newline. Every line, the empty one too, ends in <eos> (PyTorch's example does the same).
  TokenizeStats st;
  Tensor ids = tokenize(" = Title = \n\n the cat sat\t on <unk> mat \r\nthe end", "train.txt", v, true, &st);
  using S = std::vector<std::string>;
  EXPECT_EQ(tokens_of(ids, v), (S{"=", "Title", "=", "<eos>", "<eos>", "the", "cat", "sat", "on", "<unk>", "mat",
                                  "<eos>", "the", "end", "<eos>"}));
  EXPECT_EQ(st.lines, 4);
  EXPECT_EQ(st.tokens, 15);
  EXPECT_EQ(st.unknown, 0);
  // First-seen order after <unk> and <eos>; the text's <unk> is the vocabulary's.
  EXPECT_EQ(v.size(), 10);
  EXPECT_EQ(v.id("="), 2);
  EXPECT_EQ(v.id("Title"), 3);
  EXPECT_EQ(v.id("end"), 9);
  EXPECT_EQ(ids.to_vector<int64_t>()[9], Vocabulary::kUnk);
  // Without growing: unknown words become <unk> and are counted.
  Tensor valid = tokenize("the dog sat\nend\n", "valid.txt", v, false, &st);
  EXPECT_EQ(tokens_of(valid, v), (S{"the", "<unk>", "sat", "<eos>", "end", "<eos>"}));
  EXPECT_EQ(st.unknown, 1);
  EXPECT_EQ(v.size(), 10);
  // Unicode spaces split words as Python's str.split() does (U+00A0, U+3000); other characters
  // are part of words; a byte-order mark is skipped.
  Vocabulary u;
  Tensor uni = tokenize(
      "\xef\xbb\xbf"
      "caf\xc3\xa9\xc2\xa0na\xc3\xafve\xe3\x80\x80\xe6\x97\xa5\xe6\x9c\xac\n",
      "u.txt", u, true);
  EXPECT_EQ(tokens_of(uni, u), (S{"caf\xc3\xa9", "na\xc3\xafve", "\xe6\x97\xa5\xe6\x9c\xac", "<eos>"}));
}

TEST(Text, Characters) {
  Vocabulary v(TextLevel::character);
  // Code points, spaces included; \r\n is a line end; an empty line is one <eos>.
  Tensor ids = tokenize("ab a\r\n\n\xc3\xa9\xe2\x82\xac", "c.txt", v, true);
  using S = std::vector<std::string>;
  EXPECT_EQ(tokens_of(ids, v), (S{"a", "b", " ", "a", "<eos>", "<eos>", "\xc3\xa9", "\xe2\x82\xac", "<eos>"}));
  EXPECT_EQ(v.size(), 2 + 5);
  Tensor other = tokenize("ax\n", "c2.txt", v, false);
  EXPECT_EQ(tokens_of(other, v), (S{"a", "<unk>", "<eos>"}));
}

TEST(Text, BadBytesNameFileLineAndOffset) {
  Vocabulary v;
  // Line 2, column 4, byte offset 6: a lone continuation byte.
  expect_error([&] { tokenize("ok\nabc\x80 d\n", "data/bad.txt", v, true); },
               {"data/bad.txt: line 2, column 4 (byte offset 6)", "invalid UTF-8 (byte 0x80)"});
  // Latin-1 text, a truncated sequence at the end, an overlong form, a surrogate, > U+10FFFF.
  for (const std::string& bad :
       {std::string("caf\xe9 au lait\n"), std::string("x \xe2\x82"), std::string("\xc0\xaf\n"),
        std::string("\xed\xa0\x80\n"), std::string("\xf4\x90\x80\x80\n"), std::string("\xff\n")})
    expect_error([&] { tokenize(bad, "bad.txt", v, true); }, {"bad.txt: line 1", "invalid UTF-8"});
  Vocabulary c(TextLevel::character);
  expect_error([&] { tokenize("a\nb\xfe", "c.txt", c, true); }, {"c.txt: line 2, column 2 (byte offset 3)"});
  expect_error([&] { tokenize(std::string("a\0b\n", 4), "nul.txt", v, true); }, {"nul.txt: line 1", "NUL byte"});
  expect_error([&] { tokenize("", "empty.txt", v, true); }, {"empty.txt: empty file"});
  expect_error([&] { tokenize("\xef\xbb\xbf", "bom.txt", v, true); }, {"bom.txt: empty file"});
  expect_error([&] { tokenize(" \n\t\n\n", "blank.txt", v, true); }, {"blank.txt: no words in 3 line(s)"});
}

TEST(Text, VocabularyRoundTrip) {
  for (TextLevel level : {TextLevel::word, TextLevel::character}) {
    Vocabulary v(level);
    tokenize(level == TextLevel::word ? "b a c a\nd\n" : "b\ta \xc3\xa9\r x\n", "t", v, true);
    std::string text = v.serialize();
    Vocabulary back = Vocabulary::parse(text, "ckpt");
    EXPECT_EQ(back, v);
    EXPECT_EQ(back.level(), level);
    EXPECT_EQ(back.id(v.token(3)), 3);
  }
  expect_error([] { Vocabulary::parse("hello\n", "x.safetensors"); }, {"x.safetensors: not a vocabulary"});
  expect_error([] { Vocabulary::parse("octet-vocab-1 word\n<unk>\n<eos>\na\na\n", "x"); }, {"'a' appears twice"});
  expect_error([] { Vocabulary::parse("octet-vocab-1 word\n<eos>\n<unk>\n", "x"); }, {"special token"});
  expect_error([] { Vocabulary::parse("octet-vocab-1 bytes\n<unk>\n<eos>\n", "x"); }, {"unknown level 'bytes'"});
  expect_error([] { Vocabulary::parse("octet-vocab-1 word\n<unk>\n<eos>\nx", "x"); }, {"without a newline"});
}

TEST(Text, CorpusLayouts) {
  TempDir dir;
  // WikiText names (one of them gzip-compressed), PTB names, plain names.
  const std::string wiki = dir.path() + "/wikitext-2", ptb = dir.path() + "/ptb", plain = dir.path() + "/plain";
  for (const auto& d : {wiki, ptb, plain}) fs::create_directories(d);
  write_text(wiki + "/wiki.train.tokens", " = A = \n\n a b c a \n");
  write_text(wiki + "/wiki.valid.tokens", " a z \n");
  write_file("t", wiki + "/wiki.test.tokens.gz", {'b', ' ', 'q', '\n'}, /*gzip=*/true);
  TextCorpus c = load_text_corpus(wiki, TextLevel::word);
  EXPECT_EQ(c.vocab.size(), 2 + 5);  // =, A, a, b, c
  EXPECT_EQ(c.train.numel(), 10);
  EXPECT_EQ(tokens_of(c.valid, c.vocab), (std::vector<std::string>{"a", "<unk>", "<eos>"}));
  EXPECT_EQ(tokens_of(c.test, c.vocab), (std::vector<std::string>{"b", "<unk>", "<eos>"}));
  EXPECT_EQ(c.test_name, wiki + "/wiki.test.tokens.gz");
  for (const char* s : {"train", "valid", "test"}) write_text(ptb + "/ptb." + s + ".txt", " x y \n");
  EXPECT_EQ(text_split_path(ptb, "valid"), ptb + "/ptb.valid.txt");
  for (const char* s : {"train", "valid", "test"}) write_text(plain + "/" + s + ".txt", "x y\n");
  TextCorpus p = load_text_corpus(plain, TextLevel::character);
  EXPECT_EQ(p.vocab.size(), 2 + 3);  // x, space, y
  // With a checkpoint's vocabulary: train is optional, and unknown tokens of every split are <unk>.
  TextCorpus again = load_text_corpus(wiki, c.vocab, false);
  EXPECT_FALSE(again.train.defined());
  EXPECT_EQ(again.vocab, c.vocab);
  EXPECT_EQ(again.valid.to_vector<int64_t>(), c.valid.to_vector<int64_t>());
  // A missing split, a missing folder, an empty split file, bad bytes in a split.
  fs::remove(plain + "/valid.txt");
  expect_error([&] { load_text_corpus(plain, TextLevel::word); },
               {"no valid split in " + plain, "wiki.valid.tokens", "ptb.valid.txt", "valid.txt"});
  expect_error([&] { load_text_corpus(dir.path() + "/nowhere", TextLevel::word); },
               {"corpus folder " + dir.path() + "/nowhere not found"});
  write_text(plain + "/valid.txt", "");
  expect_error([&] { load_text_corpus(plain, TextLevel::word); }, {plain + "/valid.txt: empty file"});
  write_text(plain + "/valid.txt", "x\n\xff\n");
  expect_error([&] { load_text_corpus(plain, TextLevel::word); }, {plain + "/valid.txt: line 2, column 1"});
}

TEST(Text, BatchifyAndSegments) {
  Tensor ids = arange(0, 23, 1, DType::i64);
  Tensor s = batchify(ids, 4);  // 23 tokens, 4 streams of 5; 3 dropped
  ASSERT_EQ(s.shape(), (Shape{4, 5}));
  EXPECT_EQ(s.select(0, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.select(0, 3).to_vector<int64_t>(), (std::vector<int64_t>{15, 16, 17, 18, 19}));
  BpttSegments seg(s, 3);  // 4 targets per stream: segments of 3 and 1
  ASSERT_EQ(seg.size(), 2);
  EXPECT_EQ(seg.tokens(), 16);
  TextBatch b0 = seg.get(0), b1 = seg.get(1);
  EXPECT_EQ(b0.input.shape(), (Shape{4, 3}));
  EXPECT_EQ(b1.input.shape(), (Shape{4, 1}));
  EXPECT_EQ(b0.input.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17}));
  EXPECT_EQ(b0.target.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18}));
  EXPECT_EQ(b1.input.to_vector<int64_t>(), (std::vector<int64_t>{3, 8, 13, 18}));
  EXPECT_EQ(b1.target.to_vector<int64_t>(), (std::vector<int64_t>{4, 9, 14, 19}));
  EXPECT_TRUE(b0.input.is_contiguous());
  EXPECT_EQ(BpttSegments(s, 4).size(), 1);
  EXPECT_EQ(BpttSegments(s, 100).get(0).input.shape(), (Shape{4, 4}));
  expect_error([&] { batchify(ids, 12); }, {"23 tokens are too few for 12 streams"});
  expect_error([&] { BpttSegments(s, 0); }, {"bptt >= 1"});
  expect_error([&] { seg.get(2); }, {"segment 2 out of range"});
}

// The generated corpus: deterministic, about the asked size, ~266 words, and much more predictable
// from context than from word frequencies (unigram perplexity of the test split under the
// train counts vs the generating process's bound).
TEST(Text, ToyGrammar) {
  ToyGrammarText a = toy_grammar_text(ToyGrammarOptions().train_tokens(30000));
  ToyGrammarText b = toy_grammar_text(ToyGrammarOptions().train_tokens(30000));
  EXPECT_EQ(a.train, b.train);
  EXPECT_NE(a.train.substr(0, 200), a.valid.substr(0, 200));
  EXPECT_NE(toy_grammar_text(ToyGrammarOptions().seed(1).train_tokens(1000)).train.substr(0, 200),
            a.train.substr(0, 200));
  TextCorpus c = text_corpus_from(a.train, a.valid, a.test, TextLevel::word, "toy");
  EXPECT_GE(c.train.numel(), 30000);
  EXPECT_LT(c.train.numel(), 30100);
  EXPECT_GE(c.test.numel(), 20000);
  EXPECT_GT(c.vocab.size(), 240);
  EXPECT_LE(c.vocab.size(), 266);
  std::map<int64_t, double> counts;
  for (int64_t id : c.train.to_vector<int64_t>()) counts[id] += 1;
  double nll = 0;
  const std::vector<int64_t> test = c.test.to_vector<int64_t>();
  for (int64_t id : test)
    nll -= std::log((counts[id] + 1) / (static_cast<double>(c.train.numel()) + static_cast<double>(c.vocab.size())));
  const double unigram = std::exp(nll / static_cast<double>(test.size()));
  EXPECT_GT(unigram, 60);
  EXPECT_LT(a.test_process_perplexity, 12);
  EXPECT_LT(a.test_process_perplexity * 5, unigram);
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", ToyGrammarOptions().train_tokens(500).valid_tokens(100).test_tokens(100));
  TextCorpus files = load_text_corpus(dir.path() + "/toy", TextLevel::word);
  EXPECT_GE(files.valid.numel(), 100);
}

}  // namespace
}  // namespace octet
