#include "tools/train/builders.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "data/cifar10.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/transforms.h"
#include "layers/embedding.h"
#include "models/registry.h"
#include "optim/registry.h"
#include "quant/blockwise.h"
#include "tools/train/fetch_data.h"

namespace octet::train {

namespace {

// The first `n` examples of a dataset (data.limit_train / data.limit_test).
class Prefix : public Dataset {
 public:
  Prefix(std::shared_ptr<Dataset> base, int64_t n) : base_(std::move(base)), n_(std::min(n, base_->size())) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i, Generator& rng) const override { return base_->get(i, rng); }
  Shape input_shape() const override { return base_->input_shape(); }
  int64_t num_classes() const override { return base_->num_classes(); }

 private:
  std::shared_ptr<Dataset> base_;
  int64_t n_;
};

const DatasetDefaults& defaults_for(const std::string& name) {
  const DatasetDefaults* d = dataset_defaults(name);
  OCTET_USAGE_CHECK(d != nullptr, "recipe data.dataset: unknown dataset '", name,
                    "' (known: fashion_mnist, mnist, cifar10, image_folder)");
  return *d;
}

std::vector<float> floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

Datasets build_datasets(const Recipe& r, bool need_train, const std::string& root_override) {
  const std::string name = r.text("data.dataset");
  const DatasetDefaults& d = defaults_for(name);
  std::string root = !root_override.empty()        ? root_override
                     : r.text("data.root").empty() ? d.root
                                                   : r.text("data.root");
  root = download_for_recipe(r, name, root, root_override.empty() && r.text("data.root").empty());
  std::vector<float> mean = r.real_list("data.mean").empty() ? d.mean : floats(r.real_list("data.mean"));
  std::vector<float> std = r.real_list("data.std").empty() ? d.std : floats(r.real_list("data.std"));
  OCTET_USAGE_CHECK(mean.size() == std.size(), "recipe data.mean and data.std: ", mean.size(), " and ", std.size(),
                    " values (they must match the channels)");
  // The defaults have a value per channel of the dataset's images (image_folder: RGB): checked before
  // the images are opened, whose normalization would otherwise fail first, naming no key.
  OCTET_USAGE_CHECK(mean.size() == d.mean.size(), "recipe data.mean and data.std have ", mean.size(),
                    " values for data.dataset ", name, "'s ", d.mean.size(), "-channel images");
  const bool augment = r.boolean("data.augment");
  Transform norm = normalize(mean, std);
  Transform train_t = norm, test_t = norm;
  Datasets out;
  if (name == "fashion_mnist" || name == "mnist") {
    auto open = name == "mnist" ? mnist : fashion_mnist;
    if (need_train) out.train = open(root, true, train_t);
    out.test = open(root, false, test_t);
  } else if (name == "cifar10") {
    if (augment) train_t = compose({random_crop(32, 32, 4), random_horizontal_flip(0.5), norm});
    if (need_train) out.train = cifar10(root, true, train_t);
    out.test = cifar10(root, false, test_t);
  } else {  // image_folder: <root>/train/<class>/*.jpg and <root>/val/<class>/*.jpg (the ImageNet layout)
    int64_t size = r.integer("data.image_size"), short_side = r.integer("data.resize");
    OCTET_USAGE_CHECK(size >= 1 && short_side >= size,
                      "recipe data.image_size / data.resize: expected 1 <= image_size (", size, ") <= resize (",
                      short_side, ")");
    train_t = augment ? compose({random_resized_crop(size), random_horizontal_flip(0.5), norm})
                      : compose({resize(short_side), center_crop(size, size), norm});
    test_t = compose({resize(short_side), center_crop(size, size), norm});
    for (const char* split : {"train", "val"}) {
      if (std::string(split) == "train" && !need_train) continue;
      std::string dir = root + "/" + split;
      OCTET_CHECK(std::filesystem::is_directory(dir), "data: ", dir, " is missing. image_folder expects ", root,
                  "/train/<class>/*.jpg and ", root, "/val/<class>/*.jpg (one subfolder per class, JPEG or PNG; for ",
                  "ImageNet, the usual train/val folders with the validation images sorted into class folders); ",
                  "set data.root");
    }
    // Decoding shrinks large images to about the training size first, which keeps it cheap.
    if (need_train) out.train = image_folder(root + "/train", train_t, short_side);
    out.test = image_folder(root + "/val", test_t, short_side);
  }
  const int64_t limit_train = r.integer("data.limit_train"), limit_test = r.integer("data.limit_test");
  if (out.train && limit_train > 0) out.train = std::make_shared<Prefix>(out.train, limit_train);
  if (limit_test > 0) out.test = std::make_shared<Prefix>(out.test, limit_test);
  // The model must fit the data (before anything is written: a mismatch would otherwise show only at the first
  // step, as the model's own error).
  const Shape input = out.test->input_shape();  // [C, H, W]
  const int64_t channels = input.at(0);
  OCTET_USAGE_CHECK(r.integer("model.in_channels") == channels, "recipe model.in_channels is ",
                    r.integer("model.in_channels"), " but data.dataset ", name, " has ", channels,
                    "-channel images (set it to ", channels, ", or leave it unset to follow the data)");
  // Of the registry's models only small_cnn is built for one image size (the others pool globally).
  OCTET_USAGE_CHECK(r.text("model.name") != "small_cnn" ||
                        (r.integer("model.image_size") == input.at(1) && r.integer("model.image_size") == input.at(2)),
                    "recipe model.image_size is ", r.integer("model.image_size"), " but data.dataset ", name, " has ",
                    input.at(1), "x", input.at(2), " images, which small_cnn must be built for (set it to ",
                    input.at(1), ", or leave it unset to follow the data)");
  OCTET_USAGE_CHECK(static_cast<int64_t>(mean.size()) == channels, "recipe data.mean has ", mean.size(), " values for ",
                    channels, "-channel images");
  OCTET_USAGE_CHECK(r.integer("model.num_classes") >= out.test->num_classes(), "recipe model.num_classes is ",
                    r.integer("model.num_classes"), " but data.dataset ", name, " has ", out.test->num_classes(),
                    " classes");
  return out;
}

namespace {

// The keys of a recipe section; for one of the optimizer's parameter groups, the group's own values,
// else the section's.
class SectionKeys {
 public:
  // The keys of `section` ("model", "optimizer"); `group` (an optimizer's param_groups entry) null:
  // the section itself.
  SectionKeys(const Recipe& r, std::string section, const ParamGroupSpec* group = nullptr, size_t index = 0)
      : r_(r), prefix_(std::move(section) + "."), group_(group), index_(index) {}
  double real(const std::string& k) const { return own<double>(k) ? *own<double>(k) : r_.real(full(k)); }
  int64_t integer(const std::string& k) const { return own<int64_t>(k) ? *own<int64_t>(k) : r_.integer(full(k)); }
  bool boolean(const std::string& k) const { return own<bool>(k) ? *own<bool>(k) : r_.boolean(full(k)); }
  const std::vector<double>& real_list(const std::string& k) const {
    return own<std::vector<double>>(k) ? *own<std::vector<double>>(k) : r_.real_list(full(k));
  }
  const std::vector<std::string>& text_list(const std::string& k) const {
    return own<std::vector<std::string>>(k) ? *own<std::vector<std::string>>(k) : r_.text_list(full(k));
  }
  const std::string& text(const std::string& k) const {
    return own<std::string>(k) ? *own<std::string>(k) : r_.text(full(k));
  }
  const std::vector<int64_t>& int_list(const std::string& k) const {
    return own<std::vector<int64_t>>(k) ? *own<std::vector<int64_t>>(k) : r_.int_list(full(k));
  }
  // The key's name in errors: "recipe optimizer.lr", or "recipe optimizer.param_groups[1].lr" when the
  // group sets it.
  std::string where(const std::string& k) const {
    if (group_ && group_->values.count(k)) return "recipe optimizer.param_groups[" + std::to_string(index_) + "]." + k;
    return r_.where(full(k));
  }

 private:
  std::string full(const std::string& k) const { return prefix_ + k; }
  template <typename T>
  const T* own(const std::string& k) const {
    if (!group_) return nullptr;
    auto it = group_->values.find(k);
    return it == group_->values.end() ? nullptr : &std::get<T>(it->second);
  }
  const Recipe& r_;
  std::string prefix_;
  const ParamGroupSpec* group_;
  size_t index_;
};

// `k`'s value of option `f` (the group's or the section's), as the option holds it.
OptionValue option_value(const SectionKeys& k, const OptionInfo& f) {
  switch (f.value.index()) {
    case 0:
      return k.boolean(f.name);
    case 1:
      return k.integer(f.name);
    case 2:
      return k.real(f.name);
    case 3: {
      const auto& b = k.real_list(f.name);
      OCTET_USAGE_CHECK(b.size() == 2, k.where(f.name), ": expected two values, got ", b.size());
      return Betas{b[0], b[1]};
    }
    case 4:
      return k.text_list(f.name);
    case 5:
      return k.text(f.name);
    default:
      return k.int_list(f.name);
  }
}

// The options struct of optimizer `name` from the keys it declares, checked as the optimizer
// checks them (ranges, and the rules between options), the errors naming the recipe's key.
std::unique_ptr<OptimizerOptions> optimizer_options(const std::string& name, const SectionKeys& k) {
  const OptimizerKind* kind = find_optimizer_kind(name);
  OCTET_USAGE_CHECK(kind != nullptr, "recipe optimizer.name: unknown optimizer '", name, "'");  // the recipe checked it
  std::unique_ptr<OptimizerOptions> o = kind->options();
  for (const OptionInfo& f : o->fields()) o->set(f.name, option_value(k, f));
  if (const auto p = o->problem()) OCTET_USAGE_FAIL(k.where(p->key), ": ", p->text, " for ", name);
  return o;
}

// The state options (keep_32bit is the section's alone: a group may not set it).
StateOptions state_options(const Recipe& r, const SectionKeys& k) {
  StateOptions s;
  for (const OptionInfo& f : s.option_table())
    s.set_option(f.name, std::string(f.name) == "keep_32bit" ? OptionValue(r.text_list("optimizer.keep_32bit"))
                                                             : option_value(k, f));
  if (const auto p = s.problem()) OCTET_USAGE_FAIL(k.where(p->key), ": ", p->text);
  return s;
}

// "a, b, c, ... (120 in all)": parameter names for an error message.
std::string some_names(const NamedTensors& params) {
  constexpr size_t kShown = 12;
  std::string out;
  for (size_t i = 0; i < params.size() && i < kShown; ++i) out += (i ? ", " : "") + params[i].first;
  if (params.size() > kShown) out += ", ... (" + std::to_string(params.size()) + " in all)";
  return out.empty() ? "none" : out;
}

// The parameters of each optimizer group: [0] those no param_groups entry matches, [i + 1] those
// whose first matching entry is param_groups[i].
// Whether a params pattern selects parameter `p`: a name glob, or a selector for what no glob
// could name in every model: "@1d" (every parameter of fewer than 2 dimensions: norms' weights
// and biases, the biases), "@embedding" (the weights of the model's Embedding layers, a tied
// decoder's included: `embeddings` holds their names).
bool selects(const std::string& pattern, const std::pair<std::string, Tensor>& p,
             const std::set<std::string>& embeddings) {
  if (pattern == "@1d") return p.second.dim() < 2;
  if (pattern == "@embedding") return embeddings.count(p.first) > 0;
  return name_matches(pattern, p.first);
}

// The parameter names of `model`'s Embedding (and StableEmbedding) weights.
std::set<std::string> embedding_weights(const Module* model) {
  std::set<std::string> out;
  if (model == nullptr) return out;
  for (const auto& [name, m] : model->named_modules())
    if (dynamic_cast<const Embedding*>(m.get()) != nullptr) out.insert(name + ".weight");
  return out;
}

std::vector<NamedTensors> split_params(const std::vector<ParamGroupSpec>& specs, const NamedTensors& params,
                                       const Module* model) {
  const std::set<std::string> embeddings = embedding_weights(model);
  for (size_t i = 0; i < specs.size(); ++i)
    for (const std::string& glob : specs[i].params) {
      OCTET_USAGE_CHECK(
          glob.empty() || glob[0] != '@' || glob == "@1d" || glob == "@embedding", "recipe optimizer.param_groups[", i,
          "]: unknown selector '", glob,
          "' (known: @1d, every parameter of fewer than 2 dimensions; @embedding, the embeddings' weights)");
      OCTET_USAGE_CHECK(glob != "@embedding" || model != nullptr, "recipe optimizer.param_groups[", i,
                        "]: @embedding needs the model (build_optimizer's model argument)");
      const bool any =
          std::any_of(params.begin(), params.end(), [&](const auto& p) { return selects(glob, p, embeddings); });
      OCTET_USAGE_CHECK(any, "recipe optimizer.param_groups[", i, "]: params pattern '", glob,
                        "' matches no parameter of the model ('*' matches any run of characters; the parameters: ",
                        some_names(params), ")");
    }
  std::vector<NamedTensors> out(specs.size() + 1);
  for (const auto& p : params) {
    size_t g = 0;
    for (size_t i = 0; i < specs.size() && g == 0; ++i)
      for (const std::string& glob : specs[i].params)
        if (selects(glob, p, embeddings)) {
          g = i + 1;
          break;
        }
    out[g].push_back(p);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    OCTET_USAGE_CHECK(!out[i + 1].empty(), "recipe optimizer.param_groups[", i,
                      "]: every parameter its params match is in an earlier group (a parameter takes the first group "
                      "that matches it)");
  return out;
}

}  // namespace

std::shared_ptr<Module> build_model_from(const Recipe& r, int64_t vocab_size) {
  ModelOptions o;
  const SectionKeys keys(r, "model");
  for (const OptionInfo& f : o.option_table()) o.set_option(f.name, option_value(keys, f));
  if (const auto p = o.range_problem()) OCTET_USAGE_FAIL(keys.where(p->key), ": ", p->text);  // the recipe checked them
  // A model that cannot be built from the recipe's values (a width no head count divides): the
  // recipe's error, before anything is written.
  try {
    return build_model(o.vocab_size(vocab_size));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    OCTET_USAGE_FAIL("recipe model: cannot build model '", r.text("model.name"), "' from its keys: ", e.what());
  }
}

std::unique_ptr<Optimizer> build_optimizer(const Recipe& r, const NamedTensors& params, const Module* model) {
  const std::string name = r.text("optimizer.name");
  const SectionKeys section(r, "optimizer");
  const std::unique_ptr<OptimizerOptions> defaults = optimizer_options(name, section);
  const StateOptions state = state_options(r, section);
  // Group 0 holds the parameters no entry matches, with the section's values (the lr the trainer
  // logs); group i + 1 is param_groups[i].
  const std::vector<ParamGroupSpec>& specs = r.group_list("optimizer.param_groups");
  std::vector<NamedTensors> split = split_params(specs, params, model);
  std::vector<ParamGroup> groups{ParamGroup(std::move(split[0]))};
  for (size_t i = 0; i < specs.size(); ++i) {
    const SectionKeys keys(r, "optimizer", &specs[i], i);
    groups.emplace_back(std::move(split[i + 1]), *optimizer_options(name, keys));
    groups.back().state_options(state_options(r, keys));
  }
  return find_optimizer_kind(name)->make(std::move(groups), *defaults, state);  // optimizer_options() knew it
}

std::shared_ptr<LrSchedule> build_schedule(const Recipe& r, std::shared_ptr<PlateauSchedule>* plateau) {
  if (plateau) plateau->reset();
  const std::string name = r.text("schedule.name");
  const double epochs = static_cast<double>(r.integer("train.epochs"));
  const double warmup = r.real("schedule.warmup_epochs");
  OCTET_USAGE_CHECK(warmup >= 0 && warmup < epochs,
                    "recipe schedule.warmup_epochs: expected 0 <= value < train.epochs (", epochs, "), got ", warmup);
  std::shared_ptr<LrSchedule> main;
  if (name == "constant")
    main = constant_schedule();
  else if (name == "step")
    main = step_schedule(r.real("schedule.step_size"), r.real("schedule.gamma"));
  else if (name == "multistep")
    main = multistep_schedule(r.real_list("schedule.milestones"), r.real("schedule.gamma"));
  else if (name == "cosine")
    main = cosine_schedule(epochs - warmup, r.real("schedule.eta_min") / r.real("optimizer.lr"));
  else if (name == "plateau") {
    const double gamma = r.real("schedule.gamma");
    OCTET_USAGE_CHECK(gamma > 0 && gamma <= 1, "recipe schedule.gamma: plateau expects 0 < gamma <= 1, got ", gamma);
    auto p = std::make_shared<PlateauSchedule>(gamma, r.integer("schedule.patience"));
    if (plateau) *plateau = p;
    main = p;
  } else
    OCTET_USAGE_FAIL("recipe schedule.name: unknown schedule '", name,
                     "' (known: constant, step, multistep, cosine, plateau)");
  if (warmup > 0) return linear_warmup_schedule(warmup, r.real("schedule.warmup_start"), main);
  return main;
}

quant::Int8Config int8_config_from(const Recipe& r) {
  quant::Int8Config c;
  const SectionKeys keys(r, "quant");
  for (const OptionInfo& f : c.option_table()) c.set_option(f.name, option_value(keys, f));
  if (const auto p = c.range_problem()) OCTET_USAGE_FAIL(keys.where(p->key), ": ", p->text);  // the recipe checked them
  return c;
}

std::vector<quant::Int8Module> build_int8(const Recipe& r, Module& model) {
  std::vector<quant::Int8Module> layers;
  const bool keep = r.boolean("quant.keep_first_last_float");
  const auto seed = static_cast<uint64_t>(r.integer("train.seed"));
  const auto convert = [&](const char* key, auto enable) {
    if (!r.boolean(key)) return;
    try {
      for (quant::Int8Module& l : enable(model, int8_config_from(r), keep, seed)) layers.push_back(std::move(l));
    } catch (const Error& e) {
      OCTET_USAGE_FAIL(r.where(key), ": cannot train model '", r.text("model.name"), "' in INT8: ", e.what());
    }
  };
  convert("quant.int8_conv", quant::enable_int8);
  convert("quant.int8_linear", quant::enable_int8_linear);
  return layers;
}

}  // namespace octet::train
