// A generated English-like corpus with learnable structure, for tests and the small LM recipe
// (recipes/lstm_lm_tiny.yaml): no download, the same text for the same seed on every machine.
//   ToyGrammarText t = toy_grammar_text(ToyGrammarOptions().train_tokens(50000));
//   TextCorpus c = text_corpus_from(t.train, t.valid, t.test, TextLevel::word, "toy_grammar");
//
// Each line is a paragraph of 1-3 sentences about one of 8 topics (animals, kitchen, music, ...);
// 266 words in all. Sentences are subject, verb and object noun phrases with determiners and
// adjectives that agree in number with their noun, optional prepositional phrases, and the verb
// agreeing with the subject across them ("the old dogs near a farmer chase ..."); nouns, verbs and
// adjectives come from the paragraph's topic 90% of the time. So the next word is far more
// predictable from the history than from word frequencies alone: on the default corpus the
// unigram perplexity of the test split is about 123, that of the generating process under 11.
#pragma once

#include <cstdint>
#include <string>

namespace octet {

struct ToyGrammarOptions {
  uint64_t seed_ = 0;
  int64_t train_tokens_ = 200000;  // at least this many tokens (words and <eos>) per split
  int64_t valid_tokens_ = 20000;
  int64_t test_tokens_ = 20000;
  ToyGrammarOptions& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }
  ToyGrammarOptions& train_tokens(int64_t v) {
    train_tokens_ = v;
    return *this;
  }
  ToyGrammarOptions& valid_tokens(int64_t v) {
    valid_tokens_ = v;
    return *this;
  }
  ToyGrammarOptions& test_tokens(int64_t v) {
    test_tokens_ = v;
    return *this;
  }
};

struct ToyGrammarText {
  std::string train, valid, test;  // lines of space-separated words, each ending in '\n'
  // exp(mean over the test split's tokens of -log P(the choices that generated them)): the
  // perplexity of the generating process on the test text is at most this (a word sequence can
  // have several derivations, which only adds probability).
  double test_process_perplexity = 0;
};

// Each split is drawn from its own stream of (seed, split).
ToyGrammarText toy_grammar_text(const ToyGrammarOptions& opts = {});
// Writes train.txt, valid.txt and test.txt into `dir` (created if needed).
void write_toy_grammar(const std::string& dir, const ToyGrammarOptions& opts = {});

}  // namespace octet
