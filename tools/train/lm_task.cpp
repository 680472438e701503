#include "tools/train/lm_task.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "core/octet.h"
#include "data/toy_grammar.h"
#include "models/gpt.h"
#include "models/lstm_lm.h"
#include "tools/train/fetch_data.h"

namespace octet::train {

namespace {

// The logits [B, T, V] of one segment of ids [B, T]. An LstmLm continues from `state` and leaves
// the state after the segment there; a Gpt sees the segment alone (its context: at most
// context_length tokens, as nanoGPT trains and evaluates on blocks), and `state` stays empty.
Tensor segment_logits(Module& model, const Tensor& ids, LstmState& state) {
  if (auto* lstm = dynamic_cast<LstmLm*>(&model)) {
    auto [logits, next] = lstm->forward(ids, state);
    state = next;
    return logits;
  }
  if (auto* gpt = dynamic_cast<Gpt*>(&model)) return (*gpt)(ids);
  OCTET_FAIL("language modeling: expected an LstmLm or Gpt model, got ", model.type_name());
}

const char* level_unit(TextLevel level) {
  return level == TextLevel::word ? "words" : level == TextLevel::character ? "characters" : "BPE tokens";
}

Tensor first_tokens(const Tensor& ids, int64_t limit) {
  return limit > 0 && limit < ids.numel() ? ids.narrow(0, 0, limit) : ids;
}

// Rank `rank` of `ranks`: its rows [begin, begin + count) of n rows, the first n % ranks ranks one
// more (count 0 when n < ranks).
struct Rows {
  int64_t begin = 0, count = 0;
};
Rows rows_of(int64_t n, int rank, int ranks) {
  const int64_t per = n / ranks, extra = n % ranks;
  return {rank * per + std::min<int64_t>(rank, extra), per + (rank < extra ? 1 : 0)};
}

class LanguageModelTask : public Task {
 public:
  LanguageModelTask(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                    const std::string& root_override, const dist::ProcessGroup* group)
      : device_(device),
        batch_size_(r.integer("train.batch_size")),
        eval_batch_size_(r.integer("train.eval_batch_size")),
        bptt_(r.integer("data.bptt")),
        group_(group && group->size() > 1 ? group : nullptr) {
    if (r.text("model.name") == "gpt")
      OCTET_USAGE_CHECK(bptt_ <= r.integer("model.context_length"), r.where("data.bptt"), ": segments of ", bptt_,
                        " tokens are longer than the GPT's model.context_length ", r.integer("model.context_length"),
                        " (a segment is one context)");
    OCTET_CHECK(batch_size_ >= 1, "recipe train.batch_size: expected >= 1, got ", batch_size_);
    OCTET_CHECK(eval_batch_size_ >= 1, "recipe train.eval_batch_size: expected >= 1, got ", eval_batch_size_);
    OCTET_CHECK(batch_size_ % ranks() == 0, "recipe train.batch_size: the global batch of ", batch_size_,
                " streams does not divide among ", ranks(), " processes");
    std::optional<Vocabulary> vocab;
    if (ckpt) vocab = checkpoint_vocabulary(*ckpt);
    corpus_ = load_recipe_corpus(r, vocab ? &*vocab : nullptr, need_train, root_override);
    // Several processes: the split is cut into the same `batch` streams as in one process, and
    // each rank takes its block of them (the training batch divides evenly; an evaluation's may
    // not, and a rank may get none).
    auto streams = [&](const Tensor& ids, int64_t batch, const std::string& name, const char* key) {
      Tensor all;
      try {
        all = batchify(ids, batch);
      } catch (const Error& e) {
        OCTET_USAGE_FAIL("recipe ", key, ": ", name, ": ", e.what());
      }
      const Rows mine = rows_of(batch, rank(), ranks());
      return mine.count == 0 ? BpttSegments() : BpttSegments(all.narrow(0, mine.begin, mine.count), bptt_);
    };
    if (need_train) train_ = streams(corpus_.train, batch_size_, corpus_.train_name, "train.batch_size");
    valid_ = streams(corpus_.valid, eval_batch_size_, corpus_.valid_name, "train.eval_batch_size");
    test_ = streams(corpus_.test, eval_batch_size_, corpus_.test_name, "train.eval_batch_size");
  }

  int64_t vocab_size() const override { return corpus_.vocab.size(); }
  std::string describe() const override {
    return detail::str_cat(corpus_.train.defined() ? detail::str_cat(corpus_.train.numel(), " training / ") : "",
                           corpus_.valid.numel(), " valid / ", corpus_.test.numel(), " test tokens, a vocabulary of ",
                           vocab_size(), " ", level_unit(corpus_.vocab.level()));
  }
  int64_t batches_per_epoch() const override { return train_.size(); }
  double units_per_step() const override { return static_cast<double>(batch_size_ * bptt_); }
  const char* unit() const override { return "tok"; }

  void start_epoch(Module& model, int64_t epoch, int64_t first_batch) override {
    // From zeros at the start of an epoch; in its middle, the state a resumed checkpoint carried
    // (an LSTM's: a GPT carries none).
    if (first_batch == 0) hidden_ = LstmState{};
    OCTET_CHECK(first_batch == 0 || hidden_.h.defined() || dynamic_cast<LstmLm*>(&model) == nullptr,
                "train: resuming in the middle of epoch ", epoch + 1, " needs the LSTM state after batch ", first_batch,
                ", which the checkpoint lacks");
  }

  StepOutput step(Module& model, int64_t b) override {
    TextBatch t = train_.get(b);
    Tensor logits = segment_logits(model, t.input.to(device_), hidden_);
    if (hidden_.h.defined()) hidden_ = detach(hidden_);  // carried to the next segment, without its history
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

  // The carried state of all train.batch_size streams [layers, batch, hidden], whatever the
  // process count (every rank calls it: the ranks' blocks are gathered), so a run resumes with the
  // same or another number of processes.
  void save_state(NamedTensors& tensors, Metadata& metadata) const override {
    metadata["vocab"] = corpus_.vocab.serialize();
    if (!hidden_.h.defined()) return;
    tensors.emplace_back("hidden.h", all_streams(hidden_.h));
    tensors.emplace_back("hidden.c", all_streams(hidden_.c));
  }
  void load_state(const Checkpoint& c) override {
    std::map<std::string, Tensor> t(c.task.begin(), c.task.end());
    if (!t.count("hidden.h") || !t.count("hidden.c")) return;
    hidden_ = LstmState{my_streams(t.at("hidden.h"), c.path), my_streams(t.at("hidden.c"), c.path)};
  }

 private:
  // Mean next-token loss over the split's streams, each from a zero state.
  EvalResult evaluate_split(Module& model, const BpttSegments& segments, const std::string& split) {
    NoGradGuard ng;
    const bool was_training = model.is_training();
    model.eval();
    LstmState h;
    EvalAccumulator sums;
    for (int64_t k = 0; k < segments.size(); ++k) {  // none on a rank without streams
      TextBatch t = segments.get(k);
      Tensor logits = segment_logits(model, t.input.to(device_), h);
      Tensor flat = logits.reshape({-1, vocab_size()}), labels = t.target.to(device_).reshape({-1});
      sums.push(cross_entropy(flat, labels, CrossEntropyOptions().reduction(Reduction::sum)), flat, labels);
    }
    model.train(was_training);
    EvalResult r = sums.result(group_);
    r.split = split;
    r.tokens = true;
    return r;
  }

  int ranks() const { return group_ ? group_->size() : 1; }
  int rank() const { return group_ ? group_->rank() : 0; }

  // [layers, batch / ranks, hidden] on each rank -> [layers, batch, hidden] on the host.
  Tensor all_streams(const Tensor& mine) const {
    const Tensor host = mine.to(Device::cpu()).contiguous();
    if (!group_) return host;
    const Tensor all = group_->all_gather(host);  // [ranks, layers, batch / ranks, hidden]
    return all.permute({1, 0, 2, 3}).reshape({host.size(0), batch_size_, host.size(2)}).contiguous();
  }
  // This rank's block of a checkpoint's [layers, batch, hidden].
  Tensor my_streams(const Tensor& all, const std::string& path) const {
    OCTET_CHECK(all.dim() == 3 && all.size(1) == batch_size_, path, ": the carried LSTM state (task.hidden) has shape ",
                all.shape(), ", not [layers, ", batch_size_, " (train.batch_size), hidden]");
    const Rows mine = rows_of(batch_size_, rank(), ranks());
    return all.narrow(1, mine.begin, mine.count).contiguous().to(device_);
  }

  Device device_;
  int64_t batch_size_, eval_batch_size_, bptt_;
  const dist::ProcessGroup* group_;  // several processes: each trains and evaluates on its block of the streams
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

TextLevel recipe_text_level(const Recipe& r) {
  const std::string& tokenizer = r.text("data.tokenizer");
  if (tokenizer != "auto") return parse_text_level(tokenizer);
  return r.text("data.dataset") == "text_chars" ? TextLevel::character : TextLevel::word;
}

TextCorpus load_recipe_corpus(const Recipe& r, const Vocabulary* vocab, bool need_train,
                              const std::string& root_override) {
  const std::string& name = r.text("data.dataset");
  const TextLevel level = recipe_text_level(r);
  const int64_t bpe_size = r.integer("data.vocab_size");
  OCTET_CHECK(!vocab || vocab->level() == level, "recipe data.tokenizer: data.dataset ", name, " with data.tokenizer ",
              r.text("data.tokenizer"), " reads ", level_unit(level), ", but the checkpoint's vocabulary is of ",
              level_unit(vocab->level()));
  TextCorpus c;
  if (name == "toy_grammar") {
    OCTET_USAGE_CHECK(root_override.empty(), "--data ", root_override,
                      ": data.dataset toy_grammar is generated, not read ", "from a folder");
    ToyGrammarText t = toy_grammar_text();
    if (!vocab) {
      c = text_corpus_from(t.train, t.valid, t.test, level, "toy_grammar", bpe_size);
    } else {
      c.vocab = *vocab;
      c.train_name = "toy_grammar/train", c.valid_name = "toy_grammar/valid", c.test_name = "toy_grammar/test";
      if (need_train) c.train = tokenize(t.train, c.train_name, c.vocab, false);
      c.valid = tokenize(t.valid, c.valid_name, c.vocab, false);
      c.test = tokenize(t.test, c.test_name, c.vocab, false);
    }
  } else {
    const std::string root = download_for_recipe(r, r.text("data.dataset"),
                                                 !root_override.empty()        ? root_override
                                                 : r.text("data.root").empty() ? std::string("data/wikitext-2")
                                                                               : r.text("data.root"),
                                                 false);
    OCTET_CHECK(std::filesystem::is_directory(root), "recipe data.root: corpus folder ", root, " not found. ",
                "WikiText-2: the folder word_language_model/data/wikitext-2 of github.com/pytorch/examples ",
                "(train.txt, valid.txt, test.txt) or wikitext-2-v1.zip (wiki.{train,valid,test}.tokens); Penn ",
                "Treebank: ptb.{train,valid,test}.txt");
    c = vocab ? load_text_corpus(root, *vocab, need_train) : load_text_corpus(root, level, bpe_size);
  }
  if (c.train.defined()) c.train = first_tokens(c.train, r.integer("data.limit_train"));
  c.valid = first_tokens(c.valid, r.integer("data.limit_test"));
  c.test = first_tokens(c.test, r.integer("data.limit_test"));
  return c;
}

std::unique_ptr<Task> make_language_model_task(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                                               const std::string& root_override, const dist::ProcessGroup* group) {
  return std::make_unique<LanguageModelTask>(r, device, need_train, ckpt, root_override, group);
}

}  // namespace octet::train
