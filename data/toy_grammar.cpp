#include "data/toy_grammar.h"

#include <array>
#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "data/file_io.h"

namespace octet {

namespace {

constexpr int kTopics = 8;
constexpr double kOnTopic = 0.9;  // a content word comes from the paragraph's topic

struct Topic {
  std::array<std::array<const char*, 2>, 8> nouns;  // singular, plural
  std::array<std::array<const char*, 2>, 5> verbs;  // with a singular subject, with a plural one
  std::array<const char*, 4> adjectives;
};

const std::array<Topic, kTopics> kWords = {{
    {{{{"dog", "dogs"},
       {"cat", "cats"},
       {"horse", "horses"},
       {"cow", "cows"},
       {"goat", "goats"},
       {"pig", "pigs"},
       {"duck", "ducks"},
       {"farmer", "farmers"}}},
     {{{"chases", "chase"}, {"feeds", "feed"}, {"follows", "follow"}, {"watches", "watch"}, {"rides", "ride"}}},
     {"old", "hungry", "brown", "noisy"}},
    {{{{"cook", "cooks"},
       {"pot", "pots"},
       {"knife", "knives"},
       {"spoon", "spoons"},
       {"plate", "plates"},
       {"oven", "ovens"},
       {"onion", "onions"},
       {"bowl", "bowls"}}},
     {{{"cuts", "cut"}, {"washes", "wash"}, {"fills", "fill"}, {"heats", "heat"}, {"stirs", "stir"}}},
     {"hot", "clean", "sharp", "heavy"}},
    {{{{"singer", "singers"},
       {"drum", "drums"},
       {"song", "songs"},
       {"piano", "pianos"},
       {"guitar", "guitars"},
       {"band", "bands"},
       {"violin", "violins"},
       {"choir", "choirs"}}},
     {{{"plays", "play"}, {"hears", "hear"}, {"tunes", "tune"}, {"praises", "praise"}, {"records", "record"}}},
     {"loud", "soft", "famous", "gentle"}},
    {{{{"sailor", "sailors"},
       {"boat", "boats"},
       {"wave", "waves"},
       {"ship", "ships"},
       {"whale", "whales"},
       {"shell", "shells"},
       {"harbor", "harbors"},
       {"crab", "crabs"}}},
     {{{"sails", "sail"}, {"pulls", "pull"}, {"finds", "find"}, {"lifts", "lift"}, {"carries", "carry"}}},
     {"salty", "blue", "deep", "wet"}},
    {{{{"driver", "drivers"},
       {"bus", "buses"},
       {"street", "streets"},
       {"tower", "towers"},
       {"bridge", "bridges"},
       {"taxi", "taxis"},
       {"market", "markets"},
       {"shop", "shops"}}},
     {{{"builds", "build"}, {"crosses", "cross"}, {"visits", "visit"}, {"paints", "paint"}, {"closes", "close"}}},
     {"busy", "tall", "narrow", "modern"}},
    {{{{"teacher", "teachers"},
       {"student", "students"},
       {"book", "books"},
       {"pencil", "pencils"},
       {"desk", "desks"},
       {"lesson", "lessons"},
       {"map", "maps"},
       {"letter", "letters"}}},
     {{{"reads", "read"}, {"writes", "write"}, {"opens", "open"}, {"studies", "study"}, {"explains", "explain"}}},
     {"clever", "quiet", "long", "new"}},
    {{{{"gardener", "gardeners"},
       {"rose", "roses"},
       {"tree", "trees"},
       {"seed", "seeds"},
       {"flower", "flowers"},
       {"bee", "bees"},
       {"leaf", "leaves"},
       {"fence", "fences"}}},
     {{{"plants", "plant"}, {"waters", "water"}, {"grows", "grow"}, {"trims", "trim"}, {"picks", "pick"}}},
     {"green", "tiny", "wild", "sweet"}},
    {{{{"pilot", "pilots"},
       {"cloud", "clouds"},
       {"storm", "storms"},
       {"star", "stars"},
       {"moon", "moons"},
       {"plane", "planes"},
       {"kite", "kites"},
       {"bird", "birds"}}},
     {{{"sees", "see"}, {"flies", "fly"}, {"covers", "cover"}, {"hides", "hide"}, {"counts", "count"}}},
     {"dark", "bright", "cold", "distant"}},
}};

const std::array<const char*, 5> kDetSingular = {"the", "a", "this", "that", "every"};
const std::array<const char*, 5> kDetPlural = {"the", "some", "these", "those", "many"};
const std::array<const char*, 5> kPrepositions = {"near", "with", "under", "behind", "beside"};
const std::array<const char*, 4> kConjunctions = {"and", "but", "because", "while"};
const std::array<const char*, 3> kAdverbs = {"often", "never", "always"};

// splitmix64: a fixed stream per (seed, split), the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : x_(seed) {}
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  size_t below(size_t n) { return std::min(n - 1, static_cast<size_t>(uniform() * static_cast<double>(n))); }

 private:
  uint64_t next() {
    uint64_t z = (x_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t x_;
};

// Writes one split, counting -log P of every choice made.
class Writer {
 public:
  explicit Writer(uint64_t seed) : rng_(seed) {}

  void paragraph() {
    const int topic = static_cast<int>(pick_uniform(kTopics));
    // 1, 2 or 3 sentences with probabilities 0.4, 0.4, 0.2.
    const double u = rng_.uniform();
    const int sentences = u < 0.4 ? 1 : u < 0.8 ? 2 : 3;
    nll_ -= std::log(sentences == 3 ? 0.2 : 0.4);
    for (int s = 0; s < sentences; ++s) sentence(topic);
    text_.back() = '\n';  // the line's last word ends it
    ++tokens_;            // <eos>
  }
  int64_t tokens() const { return tokens_; }
  double nll() const { return nll_; }
  std::string& text() { return text_; }

 private:
  void word(const char* w) {
    text_ += w;
    text_ += ' ';
    ++tokens_;
  }
  bool coin(double p) {
    bool yes = rng_.uniform() < p;
    nll_ -= std::log(yes ? p : 1 - p);
    return yes;
  }
  size_t pick_uniform(size_t n) {
    nll_ += std::log(static_cast<double>(n));
    return rng_.below(n);
  }
  // A content word from `topic` with probability kOnTopic, else from a uniformly drawn topic; the
  // cost is the word's total probability over both ways.
  size_t content(int topic, int& from, size_t per_topic) {
    from = rng_.uniform() < kOnTopic ? topic : static_cast<int>(rng_.below(kTopics));
    size_t i = rng_.below(per_topic);
    double p = ((from == topic ? kOnTopic : 0.0) + (1 - kOnTopic) / kTopics) / static_cast<double>(per_topic);
    nll_ -= std::log(p);
    return i;
  }
  void noun_phrase(int topic, bool plural, bool allow_pp) {
    word(plural ? kDetPlural[pick_uniform(5)] : kDetSingular[pick_uniform(5)]);
    if (coin(0.5)) {
      if (coin(0.2)) word("very");
      int from = 0;
      size_t a = content(topic, from, 4);
      word(kWords[static_cast<size_t>(from)].adjectives[a]);
    }
    int from = 0;
    size_t n = content(topic, from, 8);
    word(kWords[static_cast<size_t>(from)].nouns[n][plural ? 1 : 0]);
    if (allow_pp && coin(0.2)) {
      word(kPrepositions[pick_uniform(kPrepositions.size())]);
      noun_phrase(topic, coin(0.5), false);
    }
  }
  void clause(int topic) {
    const bool plural = coin(0.5);
    noun_phrase(topic, plural, true);
    if (coin(0.2)) word(kAdverbs[pick_uniform(kAdverbs.size())]);
    int from = 0;
    size_t v = content(topic, from, 5);
    word(kWords[static_cast<size_t>(from)].verbs[v][plural ? 1 : 0]);
    noun_phrase(topic, coin(0.5), true);
  }
  void sentence(int topic) {
    clause(topic);
    if (coin(0.25)) {
      word(",");
      word(kConjunctions[pick_uniform(kConjunctions.size())]);
      clause(topic);
    }
    word(".");
  }

  Rng rng_;
  std::string text_;
  int64_t tokens_ = 0;
  double nll_ = 0;
};

uint64_t split_seed(uint64_t seed, uint64_t split) { return seed * 0x100000001B3ull + split * 0x9E3779B97F4A7C15ull; }

}  // namespace

ToyGrammarText toy_grammar_text(const ToyGrammarOptions& opts) {
  OCTET_CHECK(opts.train_tokens_ >= 1 && opts.valid_tokens_ >= 1 && opts.test_tokens_ >= 1,
              "toy_grammar: expected at least one token per split");
  ToyGrammarText out;
  const std::array<std::pair<std::string*, int64_t>, 3> splits = {
      {{&out.train, opts.train_tokens_}, {&out.valid, opts.valid_tokens_}, {&out.test, opts.test_tokens_}}};
  for (size_t s = 0; s < splits.size(); ++s) {
    Writer w(split_seed(opts.seed_, s));
    while (w.tokens() < splits[s].second) w.paragraph();
    *splits[s].first = std::move(w.text());
    if (s == 2) out.test_process_perplexity = std::exp(w.nll() / static_cast<double>(w.tokens()));
  }
  return out;
}

void write_toy_grammar(const std::string& dir, const ToyGrammarOptions& opts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  OCTET_CHECK(!ec, "toy_grammar: cannot create ", dir, ": ", ec.message());
  ToyGrammarText t = toy_grammar_text(opts);
  for (const auto& [name, text] : {std::pair{"train", &t.train}, {"valid", &t.valid}, {"test", &t.test}})
    write_file("toy_grammar", dir + "/" + name + ".txt", std::vector<uint8_t>(text->begin(), text->end()));
}

}  // namespace octet
