// Text generation from a language-model checkpoint: `octet generate`. The prompt is read at the
// checkpoint vocabulary's level (words or characters; a word the vocabulary lacks becomes <unk>),
// run through the model, and N tokens are sampled one at a time from softmax(logits / temperature)
// (temperature 0: the most likely token), among the top_k most likely and the nucleus of top_p
// when set, seeded, so the same seed gives the same text. A GPT keeps each layer's keys and values
// (Gpt::forward_cached): each token costs O(its context) and the text is the one a full pass per
// token gives; past context_length the window is read again for each token, as without the cache.
// pbatch / int8 decode through quantized Linear (and LSTM) layers, as `octet eval` evaluates them.
//   GenerateResult g = generate_text("runs/lstm_lm_tiny/best.safetensors",
//                                    GenerateOptions().prompt("the dogs").tokens(30).temperature(0.8));
//   std::cout << g.text;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace octet::cli {

struct GenerateOptions {
  std::string prompt_;        // empty: start as at the beginning of a line
  int64_t tokens_ = 50;       // tokens to sample
  double temperature_ = 1.0;  // >= 0; 0 is greedy
  int64_t top_k_ = 0;         // > 0: only the k most likely tokens (0: all)
  double top_p_ = 1.0;        // in (0, 1]: the fewest most likely tokens whose probability reaches it
  uint64_t seed_ = 0;
  bool kv_cache_ = true;  // GPT: keep the keys and values (false: a full pass per token)
  std::string pbatch_;    // PrecisionBatching: "w=N,a=K" or a plan file, as `octet eval --pbatch`
  bool int8_ = false;     // the zero-point int8 inference baseline, as `octet eval --int8`
  int64_t threads_ = 2;
  std::string device_;  // "", cpu, cuda, cuda:N (as `octet eval --device`)
  GenerateOptions& prompt(std::string v) {
    prompt_ = std::move(v);
    return *this;
  }
  GenerateOptions& tokens(int64_t v) {
    tokens_ = v;
    return *this;
  }
  GenerateOptions& temperature(double v) {
    temperature_ = v;
    return *this;
  }
  GenerateOptions& top_k(int64_t v) {
    top_k_ = v;
    return *this;
  }
  GenerateOptions& top_p(double v) {
    top_p_ = v;
    return *this;
  }
  GenerateOptions& pbatch(std::string v) {
    pbatch_ = std::move(v);
    return *this;
  }
  GenerateOptions& int8(bool v) {
    int8_ = v;
    return *this;
  }
  GenerateOptions& kv_cache(bool v) {
    kv_cache_ = v;
    return *this;
  }
  GenerateOptions& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }
  GenerateOptions& threads(int64_t v) {
    threads_ = v;
    return *this;
  }
  GenerateOptions& device(std::string v) {
    device_ = std::move(v);
    return *this;
  }
};

struct GenerateResult {
  std::string text;                  // the prompt, then the sampled tokens (<eos> as a line end)
  std::vector<int64_t> ids;          // the sampled token ids
  std::vector<std::string> unknown;  // prompt words the vocabulary lacks (fed as <unk>)
};

// `checkpoint`: a file, or a run folder (its best checkpoint). A checkpoint that is not a language
// model's, or bad options, are octet::Errors.
GenerateResult generate_text(const std::string& checkpoint, const GenerateOptions& opts);

}  // namespace octet::cli
