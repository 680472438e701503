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

#include "core/options.h"

namespace octet::cli {

// The options, declared once (core/options.h): members (`top_k_`), fluent setters (`.top_k(5)`)
// and their ranges, which generate_text checks, naming the command-line flag.
#define OCTET_GENERATE_OPTIONS(X)                                                                                     \
  X(std::string, prompt, "", ::octet::kAnyValue, "the text to continue (empty: start as at the beginning of a line)") \
  X(int64_t, tokens, 50, ::octet::kNonNegative, "tokens to sample")                                                   \
  X(double, temperature, 1.0, ::octet::kNonNegative, "softmax temperature (0: always the most likely token)")         \
  X(int64_t, top_k, 0, ::octet::kNonNegative, "only the k most likely tokens (0: every token)")                       \
  X(double, top_p, 1.0, ::octet::cli::kTopPRange,                                                                     \
    "the fewest most likely tokens whose probability reaches it (1: every token)")                                    \
  X(int64_t, seed, 0, ::octet::kNonNegative, "seed of the sampling")                                                  \
  X(bool, kv_cache, true, ::octet::kAnyValue, "GPT: keep the keys and values (false: a full pass per token)")         \
  X(std::string, pbatch, "", ::octet::kAnyValue,                                                                      \
    "PrecisionBatching: w=N,a=K or a plan file, as `octet eval --pbatch`")                                            \
  X(bool, int8, false, ::octet::kAnyValue, "the zero-point int8 inference baseline, as `octet eval --int8`")          \
  X(int64_t, threads, 2, ::octet::kAnyValue, "CPU threads")                                                           \
  X(std::string, device, "", ::octet::kAnyValue, "\"\", cpu, cuda or cuda:N (as `octet eval --device`)")

inline constexpr OptionRange kTopPRange{0.0, 1.0, true, false, "in (0, 1]"};

struct GenerateOptions {
  OCTET_OPTIONS(GenerateOptions, OCTET_GENERATE_OPTIONS)
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
