// What the trainer trains on: the data of an epoch, the forward pass and loss of one step, the
// evaluations, and any state of its own that a checkpoint must carry. The training loop
// (tools/train/trainer.cpp) is the same for every task.
// - classification: a Dataset of images through the DataLoader; cross-entropy over classes;
//   evaluated on the test split after each epoch.
// - language modeling (model.name lstm_lm, data.dataset text / text_chars / toy_grammar): the
//   training text batchified into train.batch_size streams and cut into data.bptt-token segments;
//   the LSTM's hidden state carries from segment to segment, detached, and restarts from zeros at
//   each epoch (and each evaluation); cross-entropy over the next token; evaluated on the valid
//   split after each epoch and on the test split at the end; the vocabulary and the hidden state
//   in the middle of an epoch go into checkpoints.
//   auto task = make_task(recipe, device, /*need_train=*/true);
//   auto model = build_model_from(recipe, task->vocab_size());
//   task->start_epoch(*model, 0, 0);  StepOutput s = task->step(*model, 0);  s.loss.backward();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/distributed.h"
#include "data/dataset.h"
#include "layers/module.h"
#include "tools/train/batch_stats.h"
#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"

namespace octet::train {

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;  // mean loss per example (or token), accuracies in %
  int64_t examples = 0;                 // images, or predicted tokens
  std::string split = "test";           // "test", or "valid"
  bool tokens = false;                  // a language model's result: examples are tokens
  double perplexity() const;            // exp(loss)
};

// "test loss 0.3120, top-1 91.20%, top-5 99.80%" or "valid loss 4.5012, perplexity 90.14".
std::string describe_eval(const EvalResult& r);

// Sums evaluation batches into an EvalResult. On a GPU the numbers stay there until result() (or
// every 256 batches, which bounds what the GPU keeps queued; the sums do not depend on it).
class EvalAccumulator {
 public:
  // loss_sum: the batch's summed loss (one element); logits [N, C]; labels i64 [N].
  void push(const Tensor& loss_sum, const Tensor& logits, const Tensor& labels);
  // The means over every example pushed here and, with a group, on every rank.
  EvalResult result(const dist::ProcessGroup* group = nullptr);

 private:
  void take();
  BatchStatsQueue stats_;
  double loss_sum_ = 0;
  int64_t top1_ = 0, top5_ = 0, n_ = 0;
};

struct StepOutput {
  Tensor loss;    // the mean loss to back-propagate
  Tensor logits;  // [N, C]: N images or tokens (for the statistics)
  Tensor labels;  // i64 [N]
};

class Task {
 public:
  virtual ~Task();
  // Vocabulary size for the model (0: not a language model).
  virtual int64_t vocab_size() const { return 0; }
  // "60000 training / 10000 test examples", for the log.
  virtual std::string describe() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // What a step processes, for the progress rate: images or tokens per step, and their unit.
  virtual double units_per_step() const = 0;
  virtual const char* unit() const = 0;
  // Begins `epoch` at batch `first_batch` (> 0 when resuming in its middle).
  virtual void start_epoch(Module& model, int64_t epoch, int64_t first_batch) = 0;
  // The forward pass of the epoch's next batch, `b`.
  virtual StepOutput step(Module& model, int64_t b) = 0;
  // The last step's loss or gradients were not finite and the trainer skips its update
  // (train.on_nonfinite: skip): drop whatever that forward pass carried into the next step.
  virtual void skip_step() {}
  // After each epoch: the test split (classification) or the valid split (language modeling).
  virtual EvalResult evaluate_epoch(Module& model) = 0;
  // Every split `octet eval` reports: test, or valid and test.
  virtual std::vector<EvalResult> evaluate_all(Module& model) = 0;
  // Whether `r` (from evaluate_epoch) beats the best so far in `state` (top-1, or loss), updating it.
  virtual bool improves(const EvalResult& r, TrainState& state) const = 0;
  // One input of batch 1 on the CPU, for batch-1 latency (`octet sweep`): a test image [1, ...], or
  // a language model's first test token, ids [1, 1].
  virtual Tensor example_input() const = 0;
  // The task's own checkpoint state, and restoring it on resume.
  virtual void save_state(NamedTensors& tensors, Metadata& metadata) const {}
  virtual void load_state(const Checkpoint& c) {}
};

// The task of `r`'s data.dataset. `ckpt` (resuming, or `octet eval`) supplies a language model's
// vocabulary; with `need_train` false only what evaluation needs is loaded; `root_override`
// replaces data.root when non-empty. Bad values are octet::Errors naming the recipe key.
// `group`: the processes of a data-parallel run; each trains and evaluates its shard of every
// batch, and evaluations sum over the ranks (null: this process alone).
std::unique_ptr<Task> make_task(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt = nullptr,
                                const std::string& root_override = "", dist::ProcessGroup* group = nullptr);

// Whether `r` trains a language model (data.dataset text, text_chars or toy_grammar).
bool is_language_model(const Recipe& r);

// Classification accuracy and loss of `model` on `data`, on the device of the model's parameters.
EvalResult evaluate(Module& model, const std::shared_ptr<Dataset>& data, int64_t batch_size, int64_t workers,
                    const dist::ProcessGroup* group = nullptr);

}  // namespace octet::train
