#include "tools/train/lm_task.h"

#include <filesystem>
#include <map>
#include <optional>

#include "core/octet.h"
#include "data/toy_grammar.h"
#include "models/lstm_lm.h"

namespace octet::train {

namespace {

LstmLm& as_lstm_lm(Module& model) {
  auto* lm = dynamic_cast<LstmLm*>(&model);
  OCTET_CHECK(lm != nullptr, "language modeling: expected an LstmLm model, got ", model.type_name());
  return *lm;
}

Tensor first_tokens(const Tensor& ids, int64_t limit) {
  return limit > 0 && limit < ids.numel() ? ids.narrow(0, 0, limit) : ids;
}

class LanguageModelTask : public Task {
 public:
  LanguageModelTask(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                    const std::string& root_override)
      : device_(device),
        batch_size_(r.integer("train.batch_size")),
        eval_batch_size_(r.integer("train.eval_batch_size")),
        bptt_(r.integer("data.bptt")) {
    OCTET_CHECK(batch_size_ >= 1, "recipe train.batch_size: expected >= 1, got ", batch_size_);
    OCTET_CHECK(eval_batch_size_ >= 1, "recipe train.eval_batch_size: expected >= 1, got ", eval_batch_size_);
    std::optional<Vocabulary> vocab;
    if (ckpt) vocab = checkpoint_vocabulary(*ckpt);
    corpus_ = load_recipe_corpus(r, vocab ? &*vocab : nullptr, need_train, root_override);
    auto streams = [&](const Tensor& ids, int64_t batch, const std::string& name, const char* key) {
      try {
        return BpttSegments(batchify(ids, batch), bptt_);
      } catch (const Error& e) {
        OCTET_FAIL("recipe ", key, ": ", name, ": ", e.what());
      }
    };
    if (need_train) train_ = streams(corpus_.train, batch_size_, corpus_.train_name, "train.batch_size");
    valid_ = streams(corpus_.valid, eval_batch_size_, corpus_.valid_name, "train.eval_batch_size");
    test_ = streams(corpus_.test, eval_batch_size_, corpus_.test_name, "train.eval_batch_size");
  }

  int64_t vocab_size() const override { return corpus_.vocab.size(); }
  std::string describe() const override {
    return detail::str_cat(corpus_.train.defined() ? detail::str_cat(corpus_.train.numel(), " training / ") : "",
                           corpus_.valid.numel(), " valid / ", corpus_.test.numel(), " test tokens, a vocabulary of ",
                           vocab_size(), " ", corpus_.vocab.level() == TextLevel::word ? "words" : "characters");
  }
  int64_t batches_per_epoch() const override { return train_.size(); }
  double units_per_step() const override { return static_cast<double>(batch_size_ * bptt_); }
  const char* unit() const override { return "tok"; }

  void start_epoch(Module&, int64_t epoch, int64_t first_batch) override {
    // From zeros at the start of an epoch; in its middle, the state a resumed checkpoint carried.
    if (first_batch == 0) hidden_ = LstmState{};
    OCTET_CHECK(first_batch == 0 || hidden_.h.defined(), "train: resuming in the middle of epoch ", epoch + 1,
                " needs the LSTM state after batch ", first_batch, ", which the checkpoint lacks");
  }

  StepOutput step(Module& model, int64_t b) override {
    TextBatch t = train_.get(b);
    auto [logits, next] = as_lstm_lm(model).forward(t.input.to(device_), hidden_);
    hidden_ = detach(next);  // carried to the next segment, without its history
    Tensor flat = logits.reshape({-1, vocab_size()}), labels = t.target.to(device_).reshape({-1});
    return {cross_entropy(flat, labels), flat, labels};
  }

  Tensor example_input() const override { return corpus_.test.narrow(0, 0, 1).reshape({1, 1}).clone(); }

  // The carried state may hold the non-finite values: the next segment starts from zeros, as at an
  // epoch's start.
  void skip_step() override { hidden_ = LstmState{}; }

  EvalResult evaluate_epoch(Module& model) override { return evaluate_split(model, valid_, "valid"); }
  std::vector<EvalResult> evaluate_all(Module& model) override {
    return {evaluate_split(model, valid_, "valid"), evaluate_split(model, test_, "test")};
  }
  bool improves(const EvalResult& r, TrainState& state) const override {
    if (!(r.loss < state.best_loss)) return false;
    state.best_loss = r.loss;
    return true;
  }

  void save_state(NamedTensors& tensors, Metadata& metadata) const override {
    metadata["vocab"] = corpus_.vocab.serialize();
    if (!hidden_.h.defined()) return;
    tensors.emplace_back("hidden.h", hidden_.h.to(Device::cpu()));
    tensors.emplace_back("hidden.c", hidden_.c.to(Device::cpu()));
  }
  void load_state(const Checkpoint& c) override {
    std::map<std::string, Tensor> t(c.task.begin(), c.task.end());
    if (!t.count("hidden.h") || !t.count("hidden.c")) return;
    hidden_ = LstmState{t.at("hidden.h").to(device_), t.at("hidden.c").to(device_)};
  }

 private:
  // Mean next-token loss over the split's streams, each from a zero state.
  EvalResult evaluate_split(Module& model, const BpttSegments& segments, const std::string& split) {
    NoGradGuard ng;
    const bool was_training = model.is_training();
    model.eval();
    LstmLm& lm = as_lstm_lm(model);
    LstmState h;
    EvalAccumulator sums;
    for (int64_t k = 0; k < segments.size(); ++k) {
      TextBatch t = segments.get(k);
      auto [logits, next] = lm.forward(t.input.to(device_), h);
      h = next;
      Tensor flat = logits.reshape({-1, vocab_size()}), labels = t.target.to(device_).reshape({-1});
      sums.push(cross_entropy(flat, labels, CrossEntropyOptions().reduction(Reduction::sum)), flat, labels);
    }
    model.train(was_training);
    EvalResult r = sums.result();
    r.split = split;
    r.tokens = true;
    return r;
  }

  Device device_;
  int64_t batch_size_, eval_batch_size_, bptt_;
  TextCorpus corpus_;
  BpttSegments train_, valid_, test_;
  LstmState hidden_;
};

}  // namespace

Vocabulary checkpoint_vocabulary(const Checkpoint& c) {
  auto it = c.task_metadata.find("vocab");
  OCTET_CHECK(it != c.task_metadata.end(), c.path,
              ": checkpoint has no vocabulary (metadata 'task.vocab'): not a language-model checkpoint");
  return Vocabulary::parse(it->second, c.path + " (task.vocab)");
}

TextCorpus load_recipe_corpus(const Recipe& r, const Vocabulary* vocab, bool need_train,
                              const std::string& root_override) {
  const std::string& name = r.text("data.dataset");
  const TextLevel level = name == "text_chars" ? TextLevel::character : TextLevel::word;
  OCTET_CHECK(!vocab || vocab->level() == level, "recipe data.dataset: ", name, " reads ", text_level_name(level),
              "s, but the checkpoint's vocabulary is of ", text_level_name(vocab->level()), "s");
  TextCorpus c;
  if (name == "toy_grammar") {
    ToyGrammarText t = toy_grammar_text();
    if (!vocab) {
      c = text_corpus_from(t.train, t.valid, t.test, level, "toy_grammar");
    } else {
      c.vocab = *vocab;
      c.train_name = "toy_grammar/train", c.valid_name = "toy_grammar/valid", c.test_name = "toy_grammar/test";
      if (need_train) c.train = tokenize(t.train, c.train_name, c.vocab, false);
      c.valid = tokenize(t.valid, c.valid_name, c.vocab, false);
      c.test = tokenize(t.test, c.test_name, c.vocab, false);
    }
  } else {
    const std::string root = !root_override.empty()        ? root_override
                             : r.text("data.root").empty() ? std::string("data/wikitext-2")
                                                           : r.text("data.root");
    OCTET_CHECK(std::filesystem::is_directory(root), "recipe data.root: corpus folder ", root, " not found. ",
                "WikiText-2: the folder word_language_model/data/wikitext-2 of github.com/pytorch/examples ",
                "(train.txt, valid.txt, test.txt) or wikitext-2-v1.zip (wiki.{train,valid,test}.tokens); Penn ",
                "Treebank: ptb.{train,valid,test}.txt");
    c = vocab ? load_text_corpus(root, *vocab, need_train) : load_text_corpus(root, level);
  }
  if (c.train.defined()) c.train = first_tokens(c.train, r.integer("data.limit_train"));
  c.valid = first_tokens(c.valid, r.integer("data.limit_test"));
  c.test = first_tokens(c.test, r.integer("data.limit_test"));
  return c;
}

std::unique_ptr<Task> make_language_model_task(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                                               const std::string& root_override) {
  return std::make_unique<LanguageModelTask>(r, device, need_train, ckpt, root_override);
}

}  // namespace octet::train
