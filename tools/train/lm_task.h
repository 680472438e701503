// The language-modeling task (tools/train/task.h): an LstmLm trained on a text corpus with truncated
// BPTT. make_task() picks it for data.dataset text, text_chars and toy_grammar.
//   auto task = make_language_model_task(recipe, Device::cpu(), true, nullptr, "");
// Under several processes (`group`) each rank trains and evaluates on its block of the streams.
#pragma once

#include <memory>
#include <string>

#include "data/text.h"
#include "tools/train/task.h"

namespace octet::train {

std::unique_ptr<Task> make_language_model_task(const Recipe& r, Device device, bool need_train, const Checkpoint* ckpt,
                                               const std::string& root_override,
                                               const dist::ProcessGroup* group = nullptr);

// The vocabulary a language-model checkpoint carries (metadata "task.vocab"); an octet::Error
// naming the file when it has none.
Vocabulary checkpoint_vocabulary(const Checkpoint& c);

// The tokens a language-model recipe reads: data.tokenizer, or with auto the dataset's.
TextLevel recipe_text_level(const Recipe& r);

// The corpus of a language-model recipe: data.dataset's folder (data.root or `root_override`) or
// the generated toy grammar, tokenized with `vocab` when given (else the vocabulary is built from
// train: a BPE vocabulary of data.vocab_size ids), cut to data.limit_train / data.limit_test tokens.
TextCorpus load_recipe_corpus(const Recipe& r, const Vocabulary* vocab, bool need_train,
                              const std::string& root_override = "");

}  // namespace octet::train
