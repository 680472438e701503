#include "tools/train/builders.h"

#include <filesystem>

#include "data/cifar10.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/transforms.h"
#include "models/registry.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

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

struct DatasetDefaults {
  std::string root;
  std::vector<float> mean, std;
};

DatasetDefaults defaults_for(const std::string& name) {
  if (name == "fashion_mnist") return {"/usr/share/datasets/fashion-mnist", {0.2860f}, {0.3530f}};
  if (name == "mnist") return {"data/mnist", {0.1307f}, {0.3081f}};
  if (name == "cifar10") return {"data/cifar10", {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  if (name == "image_folder") return {"data/imagenet", {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  OCTET_FAIL("recipe data.dataset: unknown dataset '", name, "' (known: fashion_mnist, mnist, cifar10, image_folder)");
}

std::vector<float> floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

std::shared_ptr<Module> build_model_from(const Recipe& r, int64_t vocab_size) {
  return build_model(ModelOptions()
                         .name(r.text("model.name"))
                         .num_classes(r.integer("model.num_classes"))
                         .in_channels(r.integer("model.in_channels"))
                         .image_size(r.integer("model.image_size"))
                         .width_mult(r.real("model.width_mult"))
                         .dropout(r.real("model.dropout"))
                         .shortcut(r.text("model.shortcut"))
                         .vocab_size(vocab_size)
                         .embed_dim(r.integer("model.embed_dim"))
                         .hidden_size(r.integer("model.hidden_size"))
                         .num_layers(r.integer("model.num_layers"))
                         .tie_weights(r.boolean("model.tie_weights"))
                         .embedding(r.text("model.embedding")));
}

Datasets build_datasets(const Recipe& r, bool need_train, const std::string& root_override) {
  const std::string name = r.text("data.dataset");
  DatasetDefaults d = defaults_for(name);
  std::string root = !root_override.empty()        ? root_override
                     : r.text("data.root").empty() ? d.root
                                                   : r.text("data.root");
  std::vector<float> mean = r.real_list("data.mean").empty() ? d.mean : floats(r.real_list("data.mean"));
  std::vector<float> std = r.real_list("data.std").empty() ? d.std : floats(r.real_list("data.std"));
  OCTET_CHECK(mean.size() == std.size(), "recipe data.mean and data.std: ", mean.size(), " and ", std.size(),
              " values (they must match the channels)");
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
    OCTET_CHECK(size >= 1 && short_side >= size, "recipe data.image_size / data.resize: expected 1 <= image_size (",
                size, ") <= resize (", short_side, ")");
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
  // The model must fit the data.
  int64_t channels = out.test->input_shape().at(0);
  OCTET_CHECK(r.integer("model.in_channels") == channels, "recipe model.in_channels is ",
              r.integer("model.in_channels"), " but data.dataset ", name, " has ", channels, "-channel images");
  OCTET_CHECK(static_cast<int64_t>(mean.size()) == channels, "recipe data.mean has ", mean.size(), " values for ",
              channels, "-channel images");
  OCTET_CHECK(r.integer("model.num_classes") >= out.test->num_classes(), "recipe model.num_classes is ",
              r.integer("model.num_classes"), " but data.dataset ", name, " has ", out.test->num_classes(), " classes");
  return out;
}

std::unique_ptr<Optimizer> build_optimizer(const Recipe& r, const NamedTensors& params) {
  const std::string name = r.text("optimizer.name");
  const double lr = r.real("optimizer.lr"), wd = r.real("optimizer.weight_decay"), eps = r.real("optimizer.eps");
  const double momentum = r.real("optimizer.momentum");
  OCTET_CHECK(lr > 0, "recipe optimizer.lr: expected > 0, got ", lr);
  OCTET_CHECK(wd >= 0, "recipe optimizer.weight_decay: expected >= 0, got ", wd);
  const int64_t bits = r.integer("optimizer.state_bits");
  OCTET_CHECK(bits == 32 || bits == 8, "recipe optimizer.state_bits: expected 32 or 8, got ", bits);
  StateOptions state = StateOptions()
                           .bits(bits)
                           .min_8bit_size(r.integer("optimizer.min_8bit_size"))
                           .block_size(r.integer("optimizer.block_size"))
                           .nonzero_second_moment(r.boolean("optimizer.nonzero_second_moment"))
                           .keep_32bit(r.text_list("optimizer.keep_32bit"));
  if (name == "sgd") {
    return std::make_unique<SGD>(params,
                                 SGDOptions(lr)
                                     .momentum(momentum)
                                     .dampening(r.real("optimizer.dampening"))
                                     .nesterov(r.boolean("optimizer.nesterov"))
                                     .weight_decay(wd),
                                 state);
  }
  if (name == "rmsprop")
    return std::make_unique<RMSprop>(params,
                                     RMSpropOptions(lr)
                                         .alpha(r.real("optimizer.alpha"))
                                         .eps(eps)
                                         .weight_decay(wd)
                                         .momentum(momentum)
                                         .centered(r.boolean("optimizer.centered")),
                                     state);
  if (name == "adagrad")
    return std::make_unique<Adagrad>(params,
                                     AdagradOptions(lr)
                                         .lr_decay(r.real("optimizer.lr_decay"))
                                         .weight_decay(wd)
                                         .initial_accumulator_value(r.real("optimizer.initial_accumulator_value"))
                                         .eps(eps),
                                     state);
  if (name == "lars")
    return std::make_unique<Lars>(params,
                                  LarsOptions(lr)
                                      .momentum(momentum)
                                      .weight_decay(wd)
                                      .trust_coefficient(r.real("optimizer.trust_coefficient"))
                                      .eps(eps),
                                  state);
  const auto& b = r.real_list("optimizer.betas");
  OCTET_CHECK(b.size() == 2, "recipe optimizer.betas: expected two values, got ", b.size());
  if (name == "lion")
    return std::make_unique<Lion>(params, LionOptions(lr).betas({b[0], b[1]}).weight_decay(wd), state);
  if (name == "lamb")
    return std::make_unique<Lamb>(params, LambOptions(lr).betas({b[0], b[1]}).eps(eps).weight_decay(wd), state);
  // Adam and AdamW share their options; only the weight decay's meaning differs.
  auto adam_options = [&](auto opts) -> decltype(opts) {
    return opts.betas({b[0], b[1]}).eps(eps).weight_decay(wd).amsgrad(r.boolean("optimizer.amsgrad"));
  };
  if (name == "adam") return std::make_unique<Adam>(params, adam_options(AdamOptions(lr)), state);
  if (name == "adamw") return std::make_unique<AdamW>(params, adam_options(AdamWOptions(lr)), state);
  OCTET_FAIL("recipe optimizer.name: unknown optimizer '", name,
             "' (known: sgd, adam, adamw, rmsprop, adagrad, lion, lamb, lars)");
}

std::shared_ptr<LrSchedule> build_schedule(const Recipe& r, std::shared_ptr<PlateauSchedule>* plateau) {
  if (plateau) plateau->reset();
  const std::string name = r.text("schedule.name");
  const double epochs = static_cast<double>(r.integer("train.epochs"));
  const double warmup = r.real("schedule.warmup_epochs");
  OCTET_CHECK(warmup >= 0 && warmup < epochs, "recipe schedule.warmup_epochs: expected 0 <= value < train.epochs (",
              epochs, "), got ", warmup);
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
    OCTET_CHECK(gamma > 0 && gamma <= 1, "recipe schedule.gamma: plateau expects 0 < gamma <= 1, got ", gamma);
    auto p = std::make_shared<PlateauSchedule>(gamma, r.integer("schedule.patience"));
    if (plateau) *plateau = p;
    main = p;
  } else
    OCTET_FAIL("recipe schedule.name: unknown schedule '", name,
               "' (known: constant, step, multistep, cosine, plateau)");
  if (warmup > 0) return linear_warmup_schedule(warmup, r.real("schedule.warmup_start"), main);
  return main;
}

quant::Int8Config int8_config_from(const Recipe& r) {
  quant::Int8Config c;
  c.stochastic_rounding = r.boolean("quant.stochastic_rounding");
  c.dsgc = r.boolean("quant.dsgc");
  c.clip_update_period = r.integer("quant.clip_update_period");
  c.dclr = r.boolean("quant.dclr");
  c.dclr_alpha = r.real("quant.dclr_alpha");
  c.dclr_beta = r.real("quant.dclr_beta");
  c.cos_distance_warn = r.real("quant.cos_distance_warn");
  return c;
}

std::vector<quant::Int8Conv> build_int8(const Recipe& r, Module& model) {
  if (!r.boolean("quant.int8_conv")) return {};
  try {
    return quant::enable_int8(model, int8_config_from(r), r.boolean("quant.keep_first_last_float"),
                              static_cast<uint64_t>(r.integer("train.seed")));
  } catch (const Error& e) {
    OCTET_FAIL("recipe quant.int8_conv: cannot train model '", r.text("model.name"), "' in INT8: ", e.what());
  }
}

}  // namespace octet::train
