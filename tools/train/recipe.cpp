#include "tools/train/recipe.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "models/registry.h"
#include "optim/registry.h"
#include "quant/int8.h"
#include "tools/train/suggest.h"

namespace octet::train {

namespace {

using K = KeyType;

const std::vector<SchemaEntry> kStaticSchema = {
    // model: here schema() inserts ModelOptions' declared options (models/registry.h), then:
    {"model.init_from", K::text, "\"\"",
     "safetensors file whose weights start the run: a PyTorch state_dict (torchvision's names, e.g. from "
     "safetensors.torch.save_file(model.state_dict(), F)) or an octet checkpoint; empty: random initialization"},
    {"model.init_strict", K::boolean, "true",
     "model.init_from: every model tensor outside model.init_ignore must be in the file, and every file tensor in "
     "the model (PyTorch's strict load_state_dict); false: the names both have"},
    {"model.init_ignore", K::text_list, "[]",
     "model.init_from: name globs left as initialized, e.g. [\"classifier.*\"] (MobileNetV2) or [\"fc.*\"] (ResNet) "
     "for a new number of classes"},
    // data
    {"data.dataset", K::text, "fashion_mnist",
     "fashion_mnist, mnist, cifar10, image_folder (ImageNet layout); language models: text (words of a "
     "WikiText/PTB-style folder), text_chars (its characters) or toy_grammar (a generated corpus, no files)",
     false, false, one_of("fashion_mnist|mnist|cifar10|image_folder|text|text_chars|toy_grammar")},
    {"data.root", K::text, "\"\"",
     "data folder; empty: /usr/share/datasets/fashion-mnist, data/mnist, data/cifar10, data/imagenet or "
     "data/wikitext-2"},
    {"data.download", K::boolean, "false",
     "fetch, verify and unpack a missing dataset into data.root first (cifar10, mnist, fashion_mnist: into "
     "data/fashion-mnist where data.root is unset; text: a data.root ending in wikitext-2 or wikitext-103); "
     "ImageNet: `octet data prepare imagenet`"},
    {"data.bptt", K::integer, "35", "text: tokens per truncated-BPTT segment", false, false, kAtLeastOne},
    {"data.tokenizer", K::text, "auto",
     "language models: auto (the dataset's: text and toy_grammar words, text_chars characters), word, char, or "
     "bpe (byte-level BPE learned from the training split, data.vocab_size ids; its merges travel in the "
     "checkpoint)",
     false, false, one_of("auto|word|char|bpe")},
    {"data.vocab_size", K::integer, "8192",
     "data.tokenizer bpe: the vocabulary's size, <unk>, <eos> and the 256 bytes included (learning stops sooner "
     "when no pair of tokens repeats)",
     false, false, OptionRange{258.0, 16777216.0, false, false, "in [258, 2^24]"}},
    {"data.augment", K::boolean, "true",
     "training augmentation: CIFAR crop(32, pad 4)+flip; image_folder random-resized-crop+flip"},
    {"data.image_size", K::integer, "224", "image_folder: training crop and evaluation center crop"},
    {"data.resize", K::integer, "256", "image_folder: evaluation resize of the shorter side"},
    {"data.mean", K::real_list, "[]", "per-channel normalization mean; empty: the dataset's usual values"},
    {"data.std", K::real_list, "[]", "per-channel normalization std; empty: the dataset's usual values"},
    {"data.workers", K::integer, "2", "decoding/augmentation threads (0: on the training thread)", false, false,
     OptionRange{0.0, 256.0, false, false, "in [0, 256]"}},
    {"data.limit_train", K::integer, "0", "use only the first N training examples (text: tokens) (0: all)", false,
     false, kNonNegative},
    {"data.limit_test", K::integer, "0", "use only the first N test examples (text: tokens of valid and test) (0: all)",
     false, false, kNonNegative},
    // optimizer
    {"optimizer.name", K::text, "sgd", ""},  // the doc: the registry's names (schema())
    // Here schema() inserts the options of every optimizer (optim/registry.h: each declared once in
    // its options struct, with its default, range and documentation) and the state options
    // (StateOptions). An optimizer key has no default of its own: unset, it takes the chosen
    // optimizer's (Lion's betas 0.9/0.99, LAMB's eps 1e-6, AdamW's weight decay 0.01, ...).
    {"optimizer.param_groups", K::group_list, "[]",
     "per-parameter settings: [{params: GLOB or [GLOB, ...], KEY: value, ...}, ...] (the GLOB @1d: every "
     "parameter of fewer than 2 dimensions, norms and biases; @embedding: the embeddings' weights) with any optimizer "
     "key but "
     "name, keep_32bit and param_groups; a parameter takes the first group whose params match its name, and "
     "the keys that group does not set from the section (see Parameter groups)"},
    // schedule
    {"schedule.name", K::text, "constant",
     "constant, step, multistep, cosine (applied every step) or plateau (times gamma after each evaluation whose "
     "loss is no new best)",
     false, false, one_of("constant|step|multistep|cosine|plateau")},
    {"schedule.warmup_epochs", K::real, "0.0", "linear warm-up length in epochs"},
    {"schedule.warmup_start", K::real, "0.1", "warm-up starts at this fraction of lr"},
    {"schedule.step_size", K::real, "30.0", "step: epochs between decays"},
    {"schedule.gamma", K::real, "0.1", "step, multistep, plateau: decay factor"},
    {"schedule.patience", K::integer, "0", "plateau: evaluations without a new best loss tolerated before a decay",
     false, false, kNonNegative},
    {"schedule.milestones", K::real_list, "[]", "multistep: epochs at which lr decays"},
    {"schedule.eta_min", K::real, "0.0", "cosine: final learning rate"},
    // quant: INT8 training of convolutions and Linear layers (Unified INT8; quant/int8.h, quant/int8_model.h)
    {"quant.int8_conv", K::boolean, "false",
     "train the model's Conv2d layers in INT8: input and weight (forward) and output gradient (backward) quantized"},
    {"quant.int8_linear", K::boolean, "false",
     "train the model's Linear layers in INT8 as int8_conv does its convolutions (a GPT: every block's QKV, output "
     "and MLP projections; the embeddings, final norm and LM head stay float)"},
    {"quant.keep_first_last_float", K::boolean, "true",
     "keep the first and final layers in float, as the paper does: the first convolution (and the final layer, if "
     "it is a convolution); with int8_linear the input and final layers when they are Linear"},
    // here schema() inserts quant::Int8Config's declared options (quant/int8.h)
    // train
    {"train.epochs", K::integer, "10", "epochs to train", false, false, kAtLeastOne},
    {"train.batch_size", K::integer, "128",
     "training batch size: the global batch, shared out among the processes of an mpirun job (a multiple of "
     "their number)",
     false, false, kAtLeastOne},
    {"train.eval_batch_size", K::integer, "256",
     "evaluation batch size (text: streams of the valid/test text; PyTorch's word_language_model uses 10)", false,
     false, kAtLeastOne},
    {"train.seed", K::integer, "0", "seed of every random choice (init, shuffling, augmentation, dropout)"},
    {"train.device", K::text, "cpu", "cpu, cuda or cuda:N (the N-th GPU); cuda needs a build with the CUDA backend"},
    {"train.precision", K::text, "fp32",
     "fp32, or bf16 mixed precision as torch.autocast: convolutions, matmuls, linear layers, attention and LSTM gates "
     "compute in bf16 (f32 accumulation); norms, softmax, losses and the optimizer in f32; weights, gradients and "
     "checkpoints stay f32. The log says whether this CPU computes bf16 natively (AVX512-BF16) or emulates it. "
     "Evaluation runs in f32",
     false, false, one_of("fp32|bf16")},
    {"train.allow_tf32", K::boolean, "false",
     "cuda: let FP32 GEMMs and convolutions use TF32 tensor cores (10-bit mantissa inputs)"},
    {"train.threads", K::integer, "2", "CPU threads for kernels", false, false,
     OptionRange{1.0, 1024.0, false, false, "in [1, 1024]"}},
    {"train.label_smoothing", K::real, "0.0", "cross-entropy label smoothing (classification)", false, false,
     OptionRange{0.0, 1.0, false, false, "in [0, 1]"}},
    {"train.clip_grad_norm", K::real, "0.0", "clip gradients to this global L2 norm (0: off)", false, false,
     kNonNegative},
    {"train.max_steps", K::integer, "0", "stop after this many steps in total (0: no limit)", false, false,
     kNonNegative},
    {"train.on_nonfinite", K::text, "stop",
     "a step whose loss or gradient is NaN/inf: stop (an error naming the step and the parameter; the weights are "
     "not updated and no checkpoint is written) or skip (no update; the step counts towards train.max_steps but not in "
     "the loss and accuracy; metrics.jsonl's skipped_steps counts them)",
     false, false, one_of("stop|skip")},
    {"train.sync_batchnorm", K::boolean, "false",
     "several processes (mpirun): BatchNorm2d layers normalize with the statistics of the whole global batch "
     "(SyncBatchNorm); false: each process's own share, as PyTorch's plain BatchNorm"},
    {"train.shard_optimizer", K::boolean, "false",
     "several processes (mpirun): each process keeps and updates 1/N of the optimizer state and receives its 1/N "
     "of the averaged gradients (ZeRO stage 1), the weights bit-identical to unsharded; checkpoints hold the whole "
     "state and resume at any process count"},
    {"train.dist_timeout_s", K::real, "300",
     "several processes (mpirun): seconds a rank waits in a collective before it stops the job with an error"},
    // checkpoint
    {"checkpoint.dir", K::text, "runs", "parent folder of run folders"},
    {"checkpoint.every_epochs", K::integer, "1",
     "write last.safetensors every N epochs (0: never during training: only at the end of the run and when it "
     "stops early, by Ctrl-C or train.max_steps, as Lightning's every_n_epochs=0); best.safetensors after every "
     "epoch that improves",
     false, false, kNonNegative},
    {"checkpoint.on_save_error", K::text, "stop",
     "a checkpoint that cannot be written (full disk, read-only folder): stop (an error; the previous checkpoint "
     "stays) or continue (a warning; training goes on and the next save tries again; the run fails at its end if "
     "a checkpoint is still unwritten)",
     false, false, one_of("stop|continue")},
    // log
    {"log.run_name", K::text, "\"\"",
     "run folder name, one path component under checkpoint.dir (no '/', not '.' or '..'; empty: the recipe's file "
     "name)"},
    {"log.every_steps", K::integer, "50",
     "steps between metric records of the training loss and accuracy (and the log line without a progress bar); "
     "every epoch also ends one",
     false, false, kAtLeastOne},
    {"log.progress", K::boolean, "true", "progress bar on a terminal"},
    {"log.tensorboard", K::boolean, "false", "also write TensorBoard event files"},
};

// ---- the declared options (core/options.h): the optimizers' and StateOptions', in the schema

KeyType key_type(const OptionValue& v) {
  switch (v.index()) {
    case 0:
      return K::boolean;
    case 1:
      return K::integer;
    case 2:
      return K::real;
    case 3:
      return K::real_list;
    case 4:
      return K::text_list;
    case 5:
      return K::text;
    default:
      return K::int_list;
  }
}

RecipeValue recipe_value(const OptionValue& v) {
  return std::visit(
      [](const auto& x) -> RecipeValue {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Betas>)
          return std::vector<double>{x.first, x.second};
        else
          return x;
      },
      v);
}

void emit_value(std::ostream& os, const RecipeValue& v);

// A state option's default as YAML, as the resolved recipe writes it.
std::string option_yaml(const OptionValue& v) {
  std::ostringstream os;
  emit_value(os, recipe_value(v));
  return os.str();
}

// Each optimizer's declared options, by kind.
std::vector<std::pair<std::string, std::vector<OptionInfo>>> declared_optimizer_options() {
  std::vector<std::pair<std::string, std::vector<OptionInfo>>> out;
  for (const OptimizerKind& k : optimizer_kinds()) out.emplace_back(k.name, k.options()->fields());
  return out;
}

// The declared option `field` of every optimizer that has it.
std::vector<std::pair<std::string, OptionInfo>> kinds_with(const std::string& field) {
  std::vector<std::pair<std::string, OptionInfo>> out;
  for (const auto& [kind, fields] : declared_optimizer_options())
    for (const OptionInfo& f : fields)
      if (f.name == field) out.emplace_back(kind, f);
  return out;
}

std::string grouped_text(const std::vector<std::pair<std::string, std::string>>& named_values);
std::string joined(const std::vector<std::string>& words);

// An optimizer key's documentation: its doc where every optimizer has it with the same one, else
// "sgd, rmsprop, lars: momentum factor; ..." grouped by doc.
std::string optimizer_key_doc(const std::string& field) {
  std::vector<std::pair<std::string, std::string>> docs;
  for (const auto& [kind, f] : kinds_with(field)) docs.emplace_back(kind, f.doc);
  const bool one_doc = std::all_of(docs.begin(), docs.end(), [&](const auto& d) { return d.second == docs[0].second; });
  if (one_doc && docs.size() == optimizer_kinds().size()) return docs[0].second;
  return grouped_text(docs);
}

// The schema entries of the declared options: every optimizer's (in the registry's order, each key
// once), then the state options.
std::vector<SchemaEntry> declared_entries() {
  std::vector<SchemaEntry> out;
  std::set<std::string> seen;
  for (const auto& [kind, fields] : declared_optimizer_options())
    for (const OptionInfo& f : fields)
      if (seen.insert(f.name).second)
        out.push_back({std::string("optimizer.") + f.name, key_type(f.value), "", optimizer_key_doc(f.name), true});
  for (const OptionInfo& f : StateOptions().option_table())
    out.push_back({std::string("optimizer.") + f.name, key_type(f.value), option_yaml(f.value), f.doc});
  return out;
}

// The model keys that follow the dataset's images where the recipe leaves them unset.
bool from_dataset(const std::string& key) { return key == "model.in_channels" || key == "model.image_size"; }

// The schema entries of ModelOptions' declared options; model.name's doc lists the registry.
std::vector<SchemaEntry> model_entries() {
  std::vector<SchemaEntry> out;
  for (const OptionInfo& f : ModelOptions().option_table()) {
    const std::string key = std::string("model.") + f.name;
    out.push_back({key, key_type(f.value), option_yaml(f.value), f.doc, false, from_dataset(key), f.range});
    if (key == "model.name") out.back().doc = model_catalog();
  }
  return out;
}

// The schema entries of quant::Int8Config's declared options (quant.dsgc, ...).
std::vector<SchemaEntry> int8_entries() {
  std::vector<SchemaEntry> out;
  for (const OptionInfo& f : quant::Int8Config().option_table())
    out.push_back(
        {std::string("quant.") + f.name, key_type(f.value), option_yaml(f.value), f.doc, false, false, f.range});
  return out;
}

// The whole schema: the model's declared options, kStaticSchema, INT8 training's declared options
// after quant.keep_first_last_float, and the optimizers' after optimizer.name, whose doc lists the
// registry's names.
const std::vector<SchemaEntry>& schema() {
  static const std::vector<SchemaEntry> all = [] {
    std::vector<SchemaEntry> out = model_entries();
    for (const SchemaEntry& e : kStaticSchema) {
      out.push_back(e);
      if (e.key == "quant.keep_first_last_float")
        for (const SchemaEntry& d : int8_entries()) out.push_back(d);
      if (e.key != "optimizer.name") continue;
      std::vector<std::string> names;
      for (const OptimizerKind& k : optimizer_kinds()) names.push_back(k.name);
      out.back().doc = joined(names);
      for (const SchemaEntry& d : declared_entries()) out.push_back(d);
    }
    return out;
  }();
  return all;
}

// The numeric ranges: every schema entry's (the model's declared ones among them), and an optimizer
// key whose optimizers declare one range (lr >= 0 in each); one they declare differently (betas:
// [0, 1) for Adam, [0, 1] for Lion) is checked when the chosen optimizer is built.
using ValueRange = OptionRange;
const std::map<std::string, ValueRange>& ranges() {
  static const std::map<std::string, ValueRange> all = [] {
    std::map<std::string, ValueRange> out;
    for (const SchemaEntry& e : schema())
      if (!e.range.any() && e.range.choices == nullptr) out.emplace(e.key, e.range);
    for (const auto& [kind, fields] : declared_optimizer_options())
      for (const OptionInfo& f : fields) {
        const auto with = kinds_with(f.name);
        const bool one = std::all_of(with.begin(), with.end(),
                                     [&](const auto& w) { return std::string(w.second.range.text) == f.range.text; });
        if (one && !f.range.any()) out.emplace(std::string("optimizer.") + f.name, f.range);
      }
    for (const OptionInfo& f : StateOptions().option_table())
      if (!f.range.any()) out.emplace(std::string("optimizer.") + f.name, f.range);
    return out;
  }();
  return all;
}

// The image datasets (dataset_defaults()).
const std::vector<DatasetDefaults> kImageDatasets = {
    {"fashion_mnist", "/usr/share/datasets/fashion-mnist", {0.2860f}, {0.3530f}, 1, 28},
    {"mnist", "data/mnist", {0.1307f}, {0.3081f}, 1, 28},
    {"cifar10", "data/cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, 3, 32},
    {"image_folder", "data/imagenet", {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, 3, 0},
};

// The values a text key allows, where it is a choice among a few (null: any); convert() checks them.
// optimizer.name is checked by its defaults (optimizer_defaults()).
const std::vector<std::string>* choices_of(const std::string& key) {
  static const std::map<std::string, std::vector<std::string>> table = [] {
    std::map<std::string, std::vector<std::string>> out = {{"model.name", model_names()}};
    for (const SchemaEntry& e : schema())
      if (e.range.choices != nullptr) out.emplace(e.key, e.range.choice_list());
    return out;
  }();
  auto it = table.find(key);
  return it == table.end() ? nullptr : &it->second;
}

const SchemaEntry* find_entry(const std::string& key) {
  for (const SchemaEntry& e : schema())
    if (e.key == key) return &e;
  return nullptr;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// The keys of a section, without the section's name.
std::vector<std::string> section_keys(const std::string& section) {
  std::vector<std::string> out;
  for (const SchemaEntry& e : schema())
    if (e.key.compare(0, section.size() + 1, section + ".") == 0) out.push_back(e.key.substr(section.size() + 1));
  return out;
}
std::string known_keys(const std::string& section) { return joined(section_keys(section)); }

std::vector<std::string> section_names() {
  std::vector<std::string> seen;
  for (const SchemaEntry& e : schema()) {
    std::string s = e.key.substr(0, e.key.find('.'));
    if (seen.empty() || seen.back() != s) seen.push_back(s);
  }
  return seen;
}
std::string known_sections() { return joined(section_names()); }

// "; did you mean 'optimizer.lr'?" for an unknown "section.key": the nearest key, else the same key
// in another section (train.lr: optimizer.lr).
std::string key_suggestion(const std::string& key) {
  std::vector<std::string> keys;
  for (const SchemaEntry& e : schema()) keys.push_back(e.key);
  if (std::string hint = did_you_mean(key, keys); !hint.empty()) return hint;
  const std::string field = key.substr(key.find('.') + 1);
  for (const std::string& k : keys)
    if (k.substr(k.find('.') + 1) == field) return "; did you mean '" + k + "'?";
  return "";
}

// A YAML error's text, with what a '*' at the start of a value means: an alias, which a glob such as
// *embedding* is read as unless quoted (`quoted`: the value as it should be written).
std::string yaml_error_text(const YAML::Exception& e, const std::string& quoted = "\"*embedding*\"") {
  std::string text = e.msg;
  if (text.find("anchor") != std::string::npos)
    text += " (a value that starts with '*' is a YAML alias; quote it: " + quoted + ")";
  return text;
}

const char* type_name(KeyType t) {
  switch (t) {
    case K::integer:
      return "an integer";
    case K::real:
      return "a number";
    case K::boolean:
      return "true or false";
    case K::text:
      return "a string";
    case K::real_list:
      return "a list of numbers";
    case K::int_list:
      return "a list of integers";
    case K::text_list:
      return "a list of strings";
    case K::group_list:
      return "a list of groups";
  }
  return "?";
}

// A recipe larger than this is refused unread: real ones are a few kilobytes.
constexpr size_t kMaxRecipeBytes = 1 << 20;
// Nor may it nest deeper than this (real ones nest 3 or 4 levels). yaml-cpp gives up near 500
// levels, before its recursion can exhaust the stack, with only "bad file" to say why.
constexpr int kMaxRecipeDepth = 256;

// A node for an error message: a scalar as written (cut short), a collection by its kind only, as
// printing a collection built from aliases could take exponential time and memory.
std::string describe(const YAML::Node& n) {
  if (!n.IsScalar()) return n.IsSequence() ? "a list" : n.IsMap() ? "a mapping" : "nothing";
  std::string s = n.Scalar();
  if (s.size() > 80) s = s.substr(0, 80) + "...";
  return "'" + s + "'";
}

// A mapping key as text; keys that are lists or mappings are errors.
std::string key_text(const YAML::Node& k, const std::string& where) {
  OCTET_CHECK(k.IsScalar(), where, ": expected a key name, got ", describe(k));
  return k.Scalar();
}

// The 1-based number of the first line whose indentation holds a tab (0: none).
int first_tab_indented_line(const std::string& yaml) {
  int line = 1;
  bool indent = true;  // still in the line's leading whitespace
  for (char c : yaml) {
    if (c == '\n') {
      ++line, indent = true;
    } else if (indent && c == '\t') {
      return line;
    } else if (c != ' ') {
      indent = false;
    }
  }
  return 0;
}

// The 1-based line where a YAML text first nests deeper than `limit` levels (0: it does not): block
// indentation, "- " entries and flow collections ([ and {) counted together, as the reader recurses
// into each. Quoted text and comments do not count.
int line_nesting_deeper_than(const std::string& yaml, int limit) {
  std::vector<size_t> indents;  // the open block levels' indentation
  int flow = 0, line = 1;
  size_t at = 0;
  while (at < yaml.size()) {
    const size_t end = std::min(yaml.find('\n', at), yaml.size());
    const size_t first = yaml.find_first_not_of(' ', at);
    if (flow == 0 && first < end && yaml[first] != '#') {
      const size_t indent = first - at;
      while (!indents.empty() && indents.back() >= indent) indents.pop_back();
      indents.push_back(indent);
    }
    int entries = 0;  // "- - x": each dash opens a sequence
    for (size_t i = first; i < end && i + 1 < end && yaml[i] == '-' && yaml[i + 1] == ' ';
         i = yaml.find_first_not_of(' ', i + 1))
      ++entries;
    char quote = 0;
    for (size_t i = at; i < end; ++i) {
      const char c = yaml[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (i == at || yaml[i - 1] == ' ')) {
        break;
      } else if (c == '[' || c == '{') {
        if (static_cast<int>(indents.size()) + entries + ++flow > limit) return line;
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      }
    }
    if (static_cast<int>(indents.size()) + entries + flow > limit) return line;
    at = end + 1, ++line;
  }
  return 0;
}

std::string at_line(const std::string& source, const YAML::Node& n) {
  return source + ":" + std::to_string(n.Mark().line + 1);
}

// A YAML node as a value of the entry's type, in its range; `where` names the place for errors,
// and `source` (the file, or empty for overrides and defaults) lets a list of groups name the line
// of each group and key.
RecipeValue convert(const YAML::Node& n, const SchemaEntry& e, const std::string& where,
                    const std::string& source = "");

// The optimizer keys a group may not set: they are the whole optimizer's.
bool optimizer_wide(const std::string& field) {
  return field == "name" || field == "keep_32bit" || field == "param_groups";
}

// The keys a group may set.
std::vector<std::string> group_field_names() {
  std::vector<std::string> out = {"params"};
  for (const std::string& field : section_keys("optimizer"))
    if (!optimizer_wide(field)) out.push_back(field);
  return out;
}
std::string group_keys() { return joined(group_field_names()); }

// optimizer.param_groups: a list of mappings, each with `params` (a glob or a non-empty list of
// globs) and optimizer keys, each converted and range-checked as the section's key is. Errors name
// the line (when there is a file), the group's index and the key.
std::vector<ParamGroupSpec> convert_groups(const YAML::Node& n, const SchemaEntry& e, const std::string& where,
                                           const std::string& source) {
  OCTET_CHECK(n.IsSequence(), where, ": key '", e.key, "' must be ", type_name(e.type),
              " ([{params: GLOB, key: value, ...}, ...]), got ", describe(n));
  const std::string section = e.key.substr(0, e.key.find('.') + 1);  // "optimizer."
  std::vector<ParamGroupSpec> groups;
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node item = n[i];
    const std::string index = e.key + "[" + std::to_string(i) + "]";
    auto at = [&](const YAML::Node& x) { return (source.empty() ? where : at_line(source, x)) + ": " + index; };
    OCTET_CHECK(item.IsMap(), at(item), " must be a mapping {params: GLOB, key: value, ...}, got ", describe(item));
    ParamGroupSpec g;
    bool has_params = false;
    for (auto kv = item.begin(); kv != item.end(); ++kv) {
      const std::string field = key_text(kv->first, at(kv->first));
      const YAML::Node value = kv->second;
      if (field == "params") {
        has_params = true;
        const bool ok = value.IsScalar() || (value.IsSequence() && value.size() > 0);
        OCTET_CHECK(ok, at(value), ": 'params' must be a name glob or a non-empty list of them, got ", describe(value));
        if (value.IsScalar()) {
          g.params.push_back(value.Scalar());
        } else {
          for (const auto& x : value) {
            OCTET_CHECK(x.IsScalar(), at(x), ": 'params' must be a name glob or a non-empty list of them, got ",
                        describe(x), " in the list");
            g.params.push_back(x.Scalar());
          }
        }
        for (const std::string& glob : g.params)
          OCTET_CHECK(!glob.empty(), at(value), ": 'params' has an empty pattern");
        continue;
      }
      OCTET_CHECK(!optimizer_wide(field), at(kv->first), ": key '", field,
                  "' cannot be set per group: it is the whole optimizer's (set ", section, field, ")");
      const SchemaEntry* k = find_entry(section + field);
      OCTET_CHECK(k != nullptr, at(kv->first), ": unknown key '", field, "'", did_you_mean(field, group_field_names()),
                  " (known keys in a group: ", group_keys(), ")");
      OCTET_CHECK(!g.values.count(field), at(kv->first), ": key '", field, "' appears twice");
      g.values[field] = convert(value, *k, at(value));
    }
    OCTET_CHECK(has_params, at(item), ": 'params' is missing (a name glob or a list of them, e.g. params: \"*.bias\")");
    groups.push_back(std::move(g));
  }
  return groups;
}

// Converts a YAML node to the entry's type; `where` names the place for errors.
RecipeValue convert_type(const YAML::Node& n, const SchemaEntry& e, const std::string& where,
                         const std::string& source) {
  auto bad = [&]() -> RecipeValue {
    OCTET_FAIL(where, ": key '", e.key, "' must be ", type_name(e.type), ", got ", describe(n));
  };
  // .inf and .nan read as numbers, but no key means anything by them.
  auto finite = [&](double x) {
    OCTET_CHECK(std::isfinite(x), where, ": key '", e.key, "' must be a finite number, got ", describe(n));
    return x;
  };
  try {
    switch (e.type) {
      case K::integer:
        if (!n.IsScalar()) return bad();
        return n.as<int64_t>();
      case K::real:
        if (!n.IsScalar()) return bad();
        return finite(n.as<double>());
      case K::boolean:
        if (!n.IsScalar()) return bad();
        return n.as<bool>();
      case K::text:
        if (!n.IsScalar()) return bad();
        return n.as<std::string>();
      case K::real_list: {
        if (!n.IsSequence()) return bad();
        std::vector<double> v;
        for (const auto& x : n) v.push_back(finite(x.as<double>()));
        return v;
      }
      case K::int_list: {
        if (!n.IsSequence()) return bad();
        std::vector<int64_t> v;
        for (const auto& x : n) v.push_back(x.as<int64_t>());
        return v;
      }
      case K::text_list: {
        if (!n.IsSequence()) return bad();
        std::vector<std::string> v;
        for (const auto& x : n) {
          if (!x.IsScalar()) return bad();
          v.push_back(x.as<std::string>());
        }
        return v;
      }
      case K::group_list:
        return convert_groups(n, e, where, source);
    }
  } catch (const YAML::Exception&) {
    return bad();
  }
  return bad();
}

// log.run_name names one folder under checkpoint.dir: a separator, "." or ".." would put the run
// (and its `latest` link) somewhere else, an absolute name anywhere on the file system.
void check_run_name(const std::string& name, const std::string& where) {
  OCTET_CHECK(name.find_first_of("/\\") == std::string::npos && name != "." && name != "..", where,
              ": key 'log.run_name' must be one folder name (no '/' or '\\', not '.' or '..'), got '", name,
              "'; use checkpoint.dir for the parent folder");
  OCTET_CHECK(name.find('\0') == std::string::npos, where, ": key 'log.run_name' holds a NUL character");
}

// convert_type, then the key's choices (choices_of) or range (ranges()), if it has them.
RecipeValue convert(const YAML::Node& n, const SchemaEntry& e, const std::string& where, const std::string& source) {
  RecipeValue v = convert_type(n, e, where, source);
  if (e.key == "log.run_name") check_run_name(std::get<std::string>(v), where);
  if (const std::vector<std::string>* allowed = choices_of(e.key)) {
    const std::string& x = std::get<std::string>(v);
    if (std::find(allowed->begin(), allowed->end(), x) != allowed->end()) return v;
    OCTET_FAIL(where, ": key '", e.key, "' must be one of ", joined(*allowed), ", got ", describe(n),
               did_you_mean(x, *allowed));
  }
  auto range = ranges().find(e.key);
  if (range == ranges().end()) return v;
  const ValueRange& r = range->second;
  auto ok = [&](double x) { return (r.lo_open ? x > r.lo : x >= r.lo) && (r.hi_open ? x < r.hi : x <= r.hi); };
  if (const auto* list = std::get_if<std::vector<int64_t>>(&v)) {  // a range of an int_list holds for each element
    for (int64_t x : *list)
      OCTET_CHECK(ok(static_cast<double>(x)), where, ": key '", e.key, "' must be a list of integers ", r.text,
                  ", got ", x, " in it");
    return v;
  }
  const double x = std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
  OCTET_CHECK(ok(x), where, ": key '", e.key, "' must be ", r.text, ", got ", n.Scalar());  // a number
  return v;
}

// The shortest decimal that reads back as exactly x (0.05, not 0.050000000000000003; 30, not
// 3e+01), in positional notation from 1e-5 up to 1e16 (0.0001, not 1e-04), else in scientific.
std::string shortest(double x) {
  const double a = std::fabs(x);
  const bool positional = a == 0 || (a >= 1e-5 && a < 1e16);
  char buf[64];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), x, positional ? std::chars_format::fixed : std::chars_format::scientific);
  return std::string(buf, end);
}

void emit_value(std::ostream& os, const RecipeValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::string>) {
          YAML::Emitter em;
          em << YAML::DoubleQuoted << x;
          os << em.c_str();
        } else if constexpr (std::is_same_v<T, double>) {
          std::string t = shortest(x);
          if (t.find_first_of(".eEn") == std::string::npos) t += ".0";  // stays a real when read back
          os << t;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          os << x;
        } else if constexpr (std::is_same_v<T, std::vector<ParamGroupSpec>>) {
          // Flow style, `params` first and the keys in schema order: [{params: ["*.bias"], lr: 0.1}]
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) {
            os << (i ? ", " : "") << "{params: ";
            emit_value(os, x[i].params);
            for (const SchemaEntry& e : schema()) {
              const std::string field = e.key.substr(e.key.find('.') + 1);
              if (e.key.rfind("optimizer.", 0) != 0 || !x[i].values.count(field)) continue;
              os << ", " << field << ": ";
              emit_value(os, x[i].values.at(field));
            }
            os << "}";
          }
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) {
            YAML::Emitter em;
            em << YAML::DoubleQuoted << x[i];
            os << (i ? ", " : "") << em.c_str();
          }
          os << "]";
        } else {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << shortest(x[i]);
          os << "]";
        }
      },
      v);
}

}  // namespace

const std::vector<SchemaEntry>& recipe_schema() { return schema(); }

const DatasetDefaults* dataset_defaults(const std::string& name) {
  for (const DatasetDefaults& d : kImageDatasets)
    if (d.name == name) return &d;
  return nullptr;
}

const std::vector<OptimizerDefaults>& optimizer_defaults() {
  static const std::vector<OptimizerDefaults> table = [] {
    std::vector<OptimizerDefaults> out;
    for (const auto& [kind, fields] : declared_optimizer_options()) {
      OptimizerDefaults d{kind, {}};
      for (const OptionInfo& f : fields) d.values[f.name] = recipe_value(f.value);
      out.push_back(d);
    }
    return out;
  }();
  return table;
}

namespace {

const OptimizerDefaults& defaults_of(const std::string& name) {
  std::vector<std::string> known;
  for (const OptimizerDefaults& o : optimizer_defaults()) {
    if (o.name == name) return o;
    known.push_back(o.name);
  }
  OCTET_FAIL("recipe optimizer.name: unknown optimizer '", name, "'", did_you_mean(name, known),
             " (known: ", joined(known), ")");
}

// The value of an optimizer key the recipe left unset: the chosen optimizer's default, or, for a
// key it does not use, the default of the first optimizer that does (the resolved recipe still
// names every key).
RecipeValue optimizer_default(const OptimizerDefaults& chosen, const std::string& key) {
  const std::string field = key.substr(key.find('.') + 1);
  if (auto it = chosen.values.find(field); it != chosen.values.end()) return it->second;
  for (const OptimizerDefaults& o : optimizer_defaults())
    if (auto it = o.values.find(field); it != o.values.end()) return it->second;
  OCTET_FAIL("recipe schema: internal error, no optimizer has a default for ", key);
}

// "sgd, adam: 0.001; rmsprop: 0.01": (name, value) pairs with the names of equal values together,
// in order of first appearance.
std::string grouped_text(const std::vector<std::pair<std::string, std::string>>& named_values) {
  std::vector<std::pair<std::string, std::string>> groups;  // value -> names
  for (const auto& nv : named_values) {                     // not a structured binding: clang 14 cannot capture one
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == nv.second; });
    if (g == groups.end())
      groups.emplace_back(nv.second, nv.first);
    else
      g->second += ", " + nv.first;
  }
  std::string text;
  for (const auto& [value, names] : groups) text += (text.empty() ? "" : "; ") + names + ": " + value;
  return text;
}

// The default column of an optimizer key: each optimizer's default.
std::string optimizer_defaults_text(const std::string& key) {
  const std::string field = key.substr(key.find('.') + 1);
  std::vector<std::pair<std::string, std::string>> values;
  for (const OptimizerDefaults& o : optimizer_defaults()) {
    auto it = o.values.find(field);
    if (it == o.values.end()) continue;
    std::ostringstream v;
    emit_value(v, it->second);
    values.emplace_back(o.name, v.str());
  }
  return grouped_text(values);
}

// A from_dataset key's value for an image dataset, as the recipe resolves it (image_size 0: data.image_size).
int64_t dataset_value(const DatasetDefaults& d, const std::string& key) {
  if (key == "model.in_channels") return d.in_channels;
  if (key == "model.image_size") return d.image_size;
  OCTET_FAIL("recipe schema: internal error, no dataset default for ", key);
}

// The default column of a key that follows the dataset: "fashion_mnist, mnist: 1; cifar10, image_folder: 3; else 3".
std::string dataset_defaults_text(const SchemaEntry& e) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const DatasetDefaults& d : kImageDatasets) {
    const int64_t v = dataset_value(d, e.key);
    values.emplace_back(d.name, v > 0 ? std::to_string(v) : "data.image_size");
  }
  return grouped_text(values) + "; else " + e.default_yaml;
}

}  // namespace

std::string schema_markdown() {
  std::ostringstream os;
  std::string section;
  for (const SchemaEntry& e : schema()) {
    std::string s = e.key.substr(0, e.key.find('.'));
    if (s != section) {
      section = s;
      os << "\n### `" << section << "`\n\n| key | type | default | meaning |\n|---|---|---|---|\n";
    }
    const std::string dflt = e.from_optimizer ? optimizer_defaults_text(e.key)
                             : e.from_dataset ? dataset_defaults_text(e)
                                              : e.default_yaml;
    const auto range = ranges().find(e.key);
    const std::string allowed = range == ranges().end() ? "" : std::string(" (") + range->second.text + ")";
    os << "| `" << e.key.substr(s.size() + 1) << "` | " << type_name(e.type) << " | `" << dflt << "` | " << e.doc
       << allowed << " |\n";
  }
  return os.str();
}

// What a recipe may not combine, beyond each key's own type and range. A stored recipe names every
// key (the resolved recipe), so this checks recipes as written.
void Recipe::check_combinations(const OptimizerDefaults& chosen) {
  const Recipe& r = *this;
  std::vector<std::string> used;
  for (const auto& [field, value] : chosen.values) used.push_back(field);
  const auto by_override = [&](const std::string& key) { return set_.count(key) && set_.at(key).empty(); };
  for (const SchemaEntry& e : schema()) {
    if (!e.from_optimizer || !r.is_set(e.key)) continue;
    const std::string field = e.key.substr(e.key.find('.') + 1);
    if (chosen.values.count(field)) continue;
    // A resolved recipe (a run folder's recipe.yaml) names every key, the unused ones with the value
    // optimizer_default() gives them: those are not a choice the recipe made.
    std::ostringstream resolved;
    emit_value(resolved, optimizer_default(chosen, e.key));
    if (r.value_yaml(e.key) == resolved.str()) continue;
    // The file's SGD keys under `optimizer.name=adam` on the command line: a switch of optimizer, not
    // a mistake in the recipe.
    if (by_override("optimizer.name") && !by_override(e.key)) {
      spdlog::warn("{}: optimizer {} (optimizer.name={}) does not use it; ignored", r.where(e.key), chosen.name,
                   chosen.name);
      values_[e.key] = optimizer_default(chosen, e.key);  // the resolved recipe, read again, is valid
      set_.erase(e.key);
      continue;
    }
    OCTET_FAIL(r.where(e.key), ": optimizer ", chosen.name, " does not use it (its keys: ", joined(used),
               "); remove it, or choose an optimizer that has it");
  }
  const std::vector<double>& m = r.real_list("schedule.milestones");
  for (size_t i = 1; i < m.size(); ++i)
    OCTET_USAGE_CHECK(m[i] > m[i - 1], r.where("schedule.milestones"), ": the epochs must increase, got ",
                      shortest(m[i - 1]), " then ", shortest(m[i]));
  for (double x : m)
    OCTET_USAGE_CHECK(x >= 0, r.where("schedule.milestones"), ": epochs must be >= 0, got ", shortest(x));
  OCTET_USAGE_CHECK(r.real("schedule.eta_min") <= r.real("optimizer.lr"), r.where("schedule.eta_min"), ": ",
                    shortest(r.real("schedule.eta_min")), " is above optimizer.lr ", shortest(r.real("optimizer.lr")),
                    ": the cosine schedule would raise the lr instead of lowering it");
}

Recipe Recipe::parse(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides,
                     bool stored) {
  OCTET_CHECK(yaml.size() <= kMaxRecipeBytes, source, ": ", yaml.size(), " bytes, more than the ", kMaxRecipeBytes,
              " bytes a recipe may have");
  // A binary file (a checkpoint or an image given for a recipe): named as such, not by the YAML
  // reader's complaint about its first odd byte.
  for (size_t i = 0; i < yaml.size(); ++i) {
    const auto c = static_cast<unsigned char>(yaml[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", c);
      OCTET_FAIL(source, ": not a text file (byte ", i, " is ", hex, "); a recipe is a YAML text file");
    }
  }
  if (const int line = line_nesting_deeper_than(yaml, kMaxRecipeDepth); line > 0)
    OCTET_FAIL(source, ":", line, ": the recipe nests deeper than ", kMaxRecipeDepth,
               " levels (a recipe has sections of keys, and lists in a few of them)");
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports a tab in indentation as whatever it then fails to read ("illegal map value").
    if (const int line = first_tab_indented_line(yaml); line > 0 && line <= e.mark.line + 1)
      OCTET_FAIL(source, ":", line, ": tabs are not allowed in YAML indentation; indent with spaces");
    OCTET_FAIL(source, ":", e.mark.line + 1, ": invalid YAML: ", yaml_error_text(e));
  }
  Recipe r;
  r.source_ = source;
  for (const SchemaEntry& e : schema())
    if (!e.from_optimizer) r.values_[e.key] = convert(YAML::Load(e.default_yaml), e, "schema default");
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  OCTET_CHECK(root.IsMap(), source, ": a recipe must be a mapping of sections (", known_sections(), ")");
  // YAML leaves a key given twice to the reader (yaml-cpp keeps both): here it is an error.
  std::map<std::string, YAML::Mark> seen;
  auto once = [&](const std::string& what, const std::string& name, const YAML::Node& at) {
    const auto [first, fresh] = seen.try_emplace(name, at.Mark());
    OCTET_CHECK(fresh, at_line(source, at), ": ", what, " '", name, "' appears twice (lines ", first->second.line + 1,
                " and ", at.Mark().line + 1, "); keep one");
  };
  for (auto sec = root.begin(); sec != root.end(); ++sec) {
    std::string name = key_text(sec->first, at_line(source, sec->first));
    OCTET_CHECK(!known_keys(name).empty(), at_line(source, sec->first), ": unknown section '", name, "'",
                did_you_mean(name, section_names()), " (known: ", known_sections(), ")");
    once("section", name, sec->first);
    const YAML::Node body = sec->second;  // a copy: the iterator's value is a temporary
    if (body.IsNull()) continue;
    OCTET_CHECK(body.IsMap(), at_line(source, sec->first), ": section '", name, "' must be a mapping of keys");
    for (auto kv = body.begin(); kv != body.end(); ++kv) {
      std::string key = name + "." + key_text(kv->first, at_line(source, kv->first));
      const SchemaEntry* e = find_entry(key);
      OCTET_CHECK(e != nullptr, at_line(source, kv->first), ": unknown key '", key, "'", key_suggestion(key),
                  " (known keys in ", name, ": ", known_keys(name), ")");
      once("key", key, kv->first);
      r.values_[key] = convert(kv->second, *e, at_line(source, kv->second), source);
      r.set_[key] = at_line(source, kv->first);
    }
  }
  for (const std::string& o : overrides) {
    size_t eq = o.find('=');
    OCTET_CHECK(eq != std::string::npos && eq > 0, "override '", o, "': expected section.key=value");
    std::string key = o.substr(0, eq);
    OCTET_CHECK(key.rfind("optimizer.param_groups.", 0) != 0, "override '", o,
                "': a group's keys cannot be overridden one by one; give the whole list, e.g. "
                "optimizer.param_groups='[{params: \"*.bias\", weight_decay: 0}]'");
    const SchemaEntry* e = find_entry(key);
    if (!e) {
      const std::string section = key.substr(0, key.find('.'));
      const std::string known = known_keys(section).empty() ? "known sections: " + known_sections()
                                                            : "known keys in " + section + ": " + known_keys(section);
      OCTET_FAIL("override '", o, "': unknown key '", key, "'", key_suggestion(key), " (", known, ")");
    }
    const std::string text = o.substr(eq + 1);
    YAML::Node v;
    try {
      v = YAML::Load(text);
    } catch (const YAML::Exception& ex) {
      const std::string quoted = "\"" + text + "\"";
      OCTET_FAIL("override '", o, "': key '", key, "' must be ", type_name(e->type), "; the value is not valid YAML: ",
                 yaml_error_text(ex, key + "='" + (e->type == K::text_list ? "[" + quoted + "]" : quoted) + "'"));
    }
    r.values_[key] = convert(v, *e, "override '" + o + "'");
    r.set_[key] = "";  // an override: the key alone names it
  }
  // An unknown optimizer is an error here, before anything is built.
  const OptimizerDefaults& optimizer = defaults_of(r.text("optimizer.name"));
  for (const SchemaEntry& e : schema())
    if (e.from_optimizer && !r.values_.count(e.key)) r.values_[e.key] = optimizer_default(optimizer, e.key);
  if (!stored) r.check_combinations(optimizer);
  // The model's input follows the dataset's images where the recipe says nothing.
  if (const DatasetDefaults* d = dataset_defaults(r.text("data.dataset"))) {
    for (const SchemaEntry& e : schema()) {
      if (!e.from_dataset || r.is_set(e.key)) continue;
      const int64_t v = dataset_value(*d, e.key);
      r.values_[e.key] = v > 0 ? v : r.integer("data.image_size");
    }
  }
  return r;
}

Recipe parse_recipe(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides) {
  return as_usage_error([&] { return Recipe::parse(yaml, source, overrides, false); });
}

Recipe parse_stored_recipe(const std::string& yaml, const std::string& source,
                           const std::vector<std::string>& overrides) {
  return as_usage_error([&] { return Recipe::parse(yaml, source, overrides, true); });
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  OCTET_USAGE_CHECK(std::filesystem::is_regular_file(path, ec), "recipe: ", path,
                    " does not exist or is not a regular file");
  const uintmax_t size = std::filesystem::file_size(path, ec);
  OCTET_USAGE_CHECK(!ec && size <= kMaxRecipeBytes, "recipe: ", path, ": ", size, " bytes, more than the ",
                    kMaxRecipeBytes, " bytes a recipe may have");
  std::ifstream in(path);
  OCTET_USAGE_CHECK(in.good(), "recipe: cannot open ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  // An empty file would train the schema's defaults (10 epochs of a small CNN) without a word.
  std::string line;
  bool has_content = false;
  while (!has_content && std::getline(ss, line)) {
    const size_t first = line.find_first_not_of(" \t\r");
    has_content = first != std::string::npos && line[first] != '#' && line.compare(first, 3, "---") != 0;
  }
  OCTET_USAGE_CHECK(has_content, "recipe: ", path,
                    " is empty (no section, only comments or blank lines); a recipe names at least its model and "
                    "data (see recipes/*.yaml and `octet schema`)");
  return parse_recipe(ss.str(), path, overrides);
}

const RecipeValue& Recipe::value(const std::string& key, KeyType want) const {
  const SchemaEntry* e = find_entry(key);
  OCTET_CHECK(e != nullptr, "recipe: no key '", key, "' in the schema");
  OCTET_CHECK(e->type == want, "recipe: key '", key, "' is ", type_name(e->type), ", not ", type_name(want));
  const auto it = values_.find(key);
  OCTET_CHECK(it != values_.end(), "recipe: no value for '", key,
              "': a default-constructed Recipe is empty (make one with load_recipe or parse_recipe)");
  return it->second;
}

int64_t Recipe::integer(const std::string& key) const { return std::get<int64_t>(value(key, K::integer)); }
double Recipe::real(const std::string& key) const { return std::get<double>(value(key, K::real)); }
bool Recipe::boolean(const std::string& key) const { return std::get<bool>(value(key, K::boolean)); }
const std::string& Recipe::text(const std::string& key) const { return std::get<std::string>(value(key, K::text)); }
const std::vector<double>& Recipe::real_list(const std::string& key) const {
  return std::get<std::vector<double>>(value(key, K::real_list));
}
const std::vector<int64_t>& Recipe::int_list(const std::string& key) const {
  return std::get<std::vector<int64_t>>(value(key, K::int_list));
}
const std::vector<std::string>& Recipe::text_list(const std::string& key) const {
  return std::get<std::vector<std::string>>(value(key, K::text_list));
}
const std::vector<ParamGroupSpec>& Recipe::group_list(const std::string& key) const {
  return std::get<std::vector<ParamGroupSpec>>(value(key, K::group_list));
}
bool Recipe::is_set(const std::string& key) const { return set_.count(key) > 0; }

std::string Recipe::where(const std::string& key) const {
  const auto it = set_.find(key);
  return (it == set_.end() || it->second.empty() ? "" : it->second + ": ") + "recipe " + key;
}

std::string Recipe::value_yaml(const std::string& key) const {
  OCTET_CHECK(find_entry(key) != nullptr, "recipe: no key '", key, "' in the schema");
  std::ostringstream os;
  emit_value(os, values_.at(key));
  return os.str();
}

const std::vector<std::string>& keys_fixed_on_resume() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const SchemaEntry& e : schema())
      if (e.key.rfind("model.", 0) == 0 && e.key != "model.dropout") out.push_back(e.key);
    for (const char* k : {"optimizer.name", "optimizer.state_bits", "optimizer.min_8bit_size", "optimizer.block_size",
                          "optimizer.keep_32bit"})
      out.push_back(k);
    return out;
  }();
  return keys;
}

std::string first_changed(const Recipe& stored, const Recipe& changed, const std::vector<std::string>& keys) {
  for (const std::string& key : keys)
    if (changed.value_yaml(key) != stored.value_yaml(key)) return key;
  return "";
}

std::string Recipe::resolved_yaml() const {
  std::ostringstream os;
  std::string section;
  for (const SchemaEntry& e : schema()) {
    std::string s = e.key.substr(0, e.key.find('.'));
    if (s != section) {
      section = s;
      os << section << ":\n";
    }
    os << "  " << e.key.substr(s.size() + 1) << ": ";
    emit_value(os, value(e.key, e.type));
    os << "\n";
  }
  return os.str();
}

}  // namespace octet::train
