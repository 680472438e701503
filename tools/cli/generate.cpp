#include "tools/cli/generate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "core/octet.h"
#include "models/gpt.h"
#include "models/lstm_lm.h"
#include "quant/precision.h"
#include "tools/cli/quant_plan.h"
#include "tools/train/lm_task.h"
#include "tools/train/trainer.h"

namespace octet::cli {

// The trainer library is what every subcommand drives.
using namespace octet::train;

namespace {

// The next token from the last position's logits [V]: the argmax at temperature 0, else a draw
// with the uniform number u in [0, 1) from softmax(logits / temperature) cut to the top_k most
// likely tokens (0: all) and then to the fewest of those whose probabilities reach top_p (the
// nucleus; 1: all). Ties keep the lower id first, so the cut is the same on every machine.
int64_t pick_token(const std::vector<float>& logits, const GenerateOptions& o, double u) {
  if (o.temperature_ == 0.0)  // the first of the largest: the lower id of a tie
    return static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const size_t v = logits.size();
  std::vector<size_t> order(v);
  for (size_t i = 0; i < v; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t keep = o.top_k_ > 0 ? std::min(v, static_cast<size_t>(o.top_k_)) : v;
  std::vector<double> p(keep);
  double total = 0;
  for (size_t r = 0; r < keep; ++r) total += p[r] = std::exp((logits[order[r]] - logits[order[0]]) / o.temperature_);
  if (o.top_p_ < 1.0) {
    double acc = 0;
    size_t n = 0;
    while (n < keep && (n == 0 || acc < o.top_p_ * total)) acc += p[n++];
    keep = n;
    total = acc;
  }
  const double target = u * total;
  double acc = 0;
  for (size_t r = 0; r < keep; ++r)
    if ((acc += p[r]) > target) return static_cast<int64_t>(order[r]);
  return static_cast<int64_t>(order.front());  // only reached through rounding at u close to 1
}

// The GPT's logits for the last token of `context`: from the cache where the context still fits
// (the prompt read whole once, then one token at a time), else a full pass over the last
// context_length tokens (and the cache, its positions now shifted, is dropped).
Tensor gpt_logits(Gpt& gpt, const std::vector<int64_t>& context, bool use_cache, GptCache& cache,
                  const Device& device) {
  const int64_t limit = gpt.options_.context_length_, size = static_cast<int64_t>(context.size());
  if (use_cache && size <= limit) {
    const int64_t past = cache.length();
    const std::vector<int64_t> fresh(context.begin() + past, context.end());
    return gpt.forward_cached(from_vector(fresh, {1, size - past}).to(device), cache);
  }
  cache = GptCache();
  const int64_t n = std::min(size, limit);
  const std::vector<int64_t> window(context.end() - n, context.end());
  return gpt(from_vector(window, {1, n}).to(device));
}

}  // namespace

GenerateResult generate_text(const std::string& checkpoint, const GenerateOptions& opts) {
  if (const auto p = opts.range_problem()) {
    std::string flag = p->key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    OCTET_USAGE_FAIL("generate --", flag, ": ", p->text);
  }
  CheckpointModel m = open_checkpoint_model(checkpoint, opts.threads_, opts.device_, "generate");
  auto* lstm = dynamic_cast<LstmLm*>(m.model.get());
  auto* gpt = dynamic_cast<Gpt*>(m.model.get());
  OCTET_CHECK((lstm != nullptr || gpt != nullptr) && is_language_model(m.recipe), "generate: ", m.path,
              " is not a language model's checkpoint (model '", m.recipe.text("model.name"), "', data.dataset '",
              m.recipe.text("data.dataset"), "'); train one with a recipe such as recipes/lstm_lm_tiny.yaml or ",
              "recipes/gpt_tiny.yaml");
  const Vocabulary vocab = checkpoint_vocabulary(m.checkpoint);
  const bool words = vocab.level() == TextLevel::word, bpe = vocab.bpe() != nullptr;

  // The prompt's tokens; those a grown copy of the vocabulary adds are the unknown ones. A prompt
  // that does not end its line leaves out the line's <eos>; none at all starts a line. BPE has no
  // unknown bytes and no <eos>: its prompt is its bytes' ids, and none at all is a newline's.
  GenerateResult out;
  std::vector<int64_t> prompt = {bpe ? 2 + int64_t{'\n'} : Vocabulary::kEos};
  if (!opts.prompt_.empty() && bpe) {
    Vocabulary same = vocab;
    try {
      prompt = tokenize(opts.prompt_, "--prompt", same, false).to_vector<int64_t>();
    } catch (const Error& e) {
      OCTET_FAIL("generate: ", e.what());
    }
  } else if (!opts.prompt_.empty()) {
    Vocabulary grown = vocab;
    try {
      prompt = tokenize(opts.prompt_, "--prompt", grown, true).to_vector<int64_t>();
    } catch (const Error& e) {
      OCTET_FAIL("generate: ", e.what());
    }
    if (opts.prompt_.back() != '\n') prompt.pop_back();
    for (int64_t& id : prompt)
      if (id >= vocab.size()) out.unknown.push_back(grown.token(id)), id = Vocabulary::kUnk;
    if (prompt.empty()) prompt = {Vocabulary::kEos};  // a prompt of spaces only
  }
  if (!out.unknown.empty()) {
    std::string list;
    for (const auto& w : out.unknown) list += (list.empty() ? "'" : ", '") + w + "'";
    spdlog::warn("generate: {} prompt {} not in the vocabulary, fed as <unk>: {}", out.unknown.size(),
                 words ? "word(s)" : "character(s)", list);
  }

  if (const auto plan = cli_plan(opts.pbatch_, opts.int8_))
    spdlog::info("generate: quantized inference: {}", quant::describe_layers(quant::convert_model(*m.model, *plan)));
  NoGradGuard ng;
  m.model->eval();
  out.text = opts.prompt_;
  bool line_start = out.text.empty() || out.text.back() == '\n';
  Generator gen(static_cast<uint64_t>(opts.seed_));
  // The LSTM reads each token once, carrying its state; the GPT keeps its keys and values.
  Tensor input = from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}).to(m.device);
  std::vector<int64_t> context = prompt;
  LstmState state;
  GptCache cache;
  for (int64_t i = 0; i < opts.tokens_; ++i) {
    Tensor logits;
    if (lstm != nullptr) {
      auto [l, next] = lstm->forward(input, state);
      state = next;
      logits = l;
    } else {
      logits = gpt_logits(*gpt, context, opts.kv_cache_, cache, m.device);
    }
    const int64_t t = logits.size(1);
    std::vector<float> last = logits.select(1, t - 1).reshape({-1}).to(Device::cpu()).to_vector<float>();
    const std::array<uint32_t, 4> w = philox_at(gen.seed(), gen.advance(1), 0);
    const int64_t id = pick_token(last, opts, uniform_double(w[0], w[1]));
    out.ids.push_back(id);
    if (id == Vocabulary::kEos) {
      out.text += "\n";
      line_start = true;
    } else {
      if (words && !line_start) out.text += " ";
      out.text += vocab.token(id);
      line_start = false;
    }
    context.push_back(id);
    input = from_vector(std::vector<int64_t>{id}, {1, 1}).to(m.device);
  }
  return out;
}

}  // namespace octet::cli
