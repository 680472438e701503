#include "tools/train/task.h"

#include <cmath>

#include "core/octet.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "tools/train/batch_stats.h"
#include "tools/train/builders.h"
#include "tools/train/dist_run.h"
#include "tools/train/lm_task.h"

namespace octet::train {

namespace {

Device module_device(const Module& m) {
  std::vector<Tensor> tensors = m.parameters();
  if (tensors.empty()) tensors = m.buffers();
  return tensors.empty() ? Device::cpu() : tensors[0].device();
}

// Images of a Dataset through the DataLoader (and, on a GPU, the prefetcher).
class ClassificationTask : public Task {
 public:
  ClassificationTask(const Recipe& r, Device device, bool need_train, const std::string& root_override,
                     dist::ProcessGroup* group)
      : data_(build_datasets(r, need_train, root_override)),
        batch_size_(r.integer("train.batch_size")),
        eval_batch_size_(r.integer("train.eval_batch_size")),
        workers_(r.integer("data.workers")),
        smoothing_(r.real("train.label_smoothing")),
        group_(group) {
    OCTET_CHECK(eval_batch_size_ >= 1, "recipe train.eval_batch_size: expected >= 1, got ", eval_batch_size_);
    if (!need_train) return;
    OCTET_CHECK(batch_size_ >= 1, "recipe train.batch_size: expected >= 1, got ", batch_size_);
    const int64_t ranks = group_ ? group_->size() : 1;
    OCTET_USAGE_CHECK(batch_size_ % ranks == 0, r.where("train.batch_size"), ": ", batch_size_,
                      " is the global batch, split evenly among the ", ranks, " processes: give a multiple of ", ranks,
                      " (e.g. ", (batch_size_ / ranks + 1) * ranks, ")");
    loader_ =
        std::make_unique<DataLoader>(data_.train, DataLoaderOptions()
                                                      .batch_size(batch_size_)
                                                      .shuffle(true)
                                                      .drop_last(true)
                                                      .workers(workers_)
                                                      .seed(static_cast<uint64_t>(r.integer("train.seed")))
                                                      .shard(group_ ? group_->rank() : 0, group_ ? group_->size() : 1));
    OCTET_CHECK(loader_->num_batches() >= 1, "train: ", data_.train->size(),
                " training examples are fewer than one batch of ", batch_size_);
    // On a GPU the prefetcher copies batch b+1 to the device while step b computes.
    batches_ = std::make_unique<DevicePrefetcher>(*loader_, device);
  }

  std::string describe() const override {
    return detail::str_cat(data_.train ? detail::str_cat(data_.train->size(), " training / ") : "", data_.test->size(),
                           " test examples");
  }
  int64_t batches_per_epoch() const override { return loader_->num_batches(); }
  double units_per_step() const override { return static_cast<double>(batch_size_); }
  const char* unit() const override { return "img"; }
  void start_epoch(Module&, int64_t epoch, int64_t first_batch) override { batches_->start_epoch(epoch, first_batch); }

  StepOutput step(Module& model, int64_t b) override {
    std::optional<Batch> batch = batches_->next();
    OCTET_CHECK(batch.has_value(), "train: the data loader ended early at batch ", b, " of ", batches_per_epoch());
    Tensor logits = model(batch->inputs);
    Tensor loss = cross_entropy(logits, batch->labels, CrossEntropyOptions().label_smoothing(smoothing_));
    return {loss, logits, batch->labels};
  }

  EvalResult evaluate_epoch(Module& model) override {
    return evaluate(model, data_.test, eval_batch_size_, workers_, group_);
  }
  std::vector<EvalResult> evaluate_all(Module& model) override { return {evaluate_epoch(model)}; }
  Tensor example_input() const override {
    Generator rng(0);
    Tensor x = data_.test->get(0, rng).input;
    Shape shape = x.shape();
    shape.insert(shape.begin(), 1);
    return x.reshape(shape);
  }
  bool improves(const EvalResult& r, TrainState& state) const override {
    if (!(r.top1 > state.best_top1)) return false;
    state.best_top1 = r.top1;
    return true;
  }

 private:
  Datasets data_;
  int64_t batch_size_, eval_batch_size_, workers_;
  double smoothing_;
  dist::ProcessGroup* group_;  // several processes: each trains on its shard of every batch
  std::unique_ptr<DataLoader> loader_;
  std::unique_ptr<DevicePrefetcher> batches_;
};

}  // namespace

Task::~Task() = default;

double EvalResult::perplexity() const { return std::exp(loss); }

std::string describe_eval(const EvalResult& r) {
  char buf[160];
  if (r.tokens)
    std::snprintf(buf, sizeof(buf), "%s loss %.4f, perplexity %.2f", r.split.c_str(), r.loss, r.perplexity());
  else
    std::snprintf(buf, sizeof(buf), "%s loss %.4f, top-1 %.2f%%, top-5 %.2f%%", r.split.c_str(), r.loss, r.top1,
                  r.top5);
  return buf;
}

bool is_language_model(const Recipe& r) {
  const std::string& d = r.text("data.dataset");
  return d == "text" || d == "text_chars" || d == "toy_grammar";
}

std::unique_ptr<Task> make_task(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                                const std::string& root_override, dist::ProcessGroup* group) {
  const bool lm_model = r.text("model.name") == "lstm_lm" || r.text("model.name") == "gpt";
  if (is_language_model(r)) {
    OCTET_CHECK(lm_model, "recipe model.name: data.dataset ", r.text("data.dataset"), " is text, which needs a ",
                "language model (lstm_lm or gpt), not '", r.text("model.name"), "'");
    return make_language_model_task(r, device, need_train, ckpt, root_override, group);
  }
  OCTET_CHECK(!lm_model, "recipe data.dataset: the language model ", r.text("model.name"),
              " trains on text (data.dataset text, text_chars or toy_grammar), not '", r.text("data.dataset"), "'");
  return std::make_unique<ClassificationTask>(r, device, need_train, root_override, group);
}

void EvalAccumulator::push(const Tensor& loss_sum, const Tensor& logits, const Tensor& labels) {
  stats_.push(loss_sum, logits, labels);
  if (stats_.pending() >= 256) take();
}

void EvalAccumulator::take() {
  for (const BatchStats& s : stats_.drain()) loss_sum_ += s.loss, top1_ += s.top1, top5_ += s.top5, n_ += s.n;
}

EvalResult EvalAccumulator::result(const dist::ProcessGroup* group) {
  take();
  std::vector<double> sums{loss_sum_, static_cast<double>(top1_), static_cast<double>(top5_), static_cast<double>(n_)};
  sum_over_ranks(sums, group);
  EvalResult r;
  r.examples = static_cast<int64_t>(sums[3]);
  if (r.examples > 0) {
    const double n = sums[3];
    r.loss = sums[0] / n;
    r.top1 = 100.0 * sums[1] / n;
    r.top5 = 100.0 * sums[2] / n;
  }
  return r;
}

EvalResult evaluate(Module& model, const std::shared_ptr<Dataset>& data, int64_t batch_size, int64_t workers,
                    const dist::ProcessGroup* group) {
  NoGradGuard ng;
  bool was_training = model.is_training();
  model.eval();
  // Several processes: each evaluates its shard of every batch of batch_size per process (every
  // example once), and the sums are added over the ranks.
  const int64_t ranks = group ? group->size() : 1;
  DataLoader loader(data, DataLoaderOptions()
                              .batch_size(batch_size * ranks)
                              .shuffle(false)
                              .workers(workers)
                              .shard(group ? group->rank() : 0, ranks));
  DevicePrefetcher batches(loader, module_device(model));
  batches.start_epoch(0);
  EvalAccumulator sums;
  while (auto batch = batches.next()) {
    if (batch->labels.numel() == 0) continue;  // this shard of a short last batch is empty
    Tensor logits = model(batch->inputs);
    sums.push(cross_entropy(logits, batch->labels, CrossEntropyOptions().reduction(Reduction::sum)), logits,
              batch->labels);
  }
  model.train(was_training);
  return sums.result(group);
}

}  // namespace octet::train
