// Models by name, for recipes and the CLI. ModelOptions' fields are the recipe's `model:` keys.
//   auto net = build_model(ModelOptions().name("resnet20").num_classes(10).shortcut("B"));
//   auto mlp = build_model(ModelOptions().name("mlp").in_channels(1).image_size(28).hidden_sizes({4096, 4096}));
//   auto lm = std::dynamic_pointer_cast<LstmLm>(build_model(ModelOptions().name("lstm_lm").vocab_size(10000)));
//   for (const auto& n : model_names()) std::cout << n << "\n";
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/options.h"
#include "layers/module.h"

namespace octet {

// The recipe's `model:` keys, each declared once (core/options.h): type, name, default, range, doc.
// The schema, `octet schema`, recipes/README.md and the checks of build_model and of recipes are
// made from this list. model.name's documentation is the registry's catalog (model_catalog()).
#define OCTET_MODEL_OPTIONS(X)                                                                                  \
  X(std::string, name, "small_cnn", ::octet::kAnyValue, "the model (model_catalog())")                          \
  X(int64_t, num_classes, 10, ::octet::kAtLeastOne, "classifier outputs")                                       \
  X(int64_t, in_channels, 3, ::octet::kAtLeastOne, "input image channels (unset: the dataset's)")               \
  X(int64_t, image_size, 32, ::octet::kAtLeastOne, "input height and width (small_cnn) (unset: the dataset's)") \
  X(double, width_mult, 1.0, ::octet::kPositive, "MobileNetV2 width multiplier")                                \
  X(double, dropout, 0.2, ::octet::kUnitHalfOpen,                                                               \
    "dropout before the classifier (MobileNetV2, small_cnn); lstm_lm: after the embedding, between LSTM "       \
    "layers and before the decoder")                                                                            \
  X(std::string, shortcut, "A", ::octet::one_of("A|B"),                                                         \
    "CIFAR ResNet shortcut: A (zero-padding identity) or B (1x1 projection)")                                   \
  X(int64_t, embed_dim, 0, ::octet::kNonNegative, "lstm_lm: embedding size; gpt: width (0: hidden_size)")       \
  X(int64_t, hidden_size, 650, ::octet::kAtLeastOne, "lstm_lm: LSTM hidden units per layer")                    \
  X(int64_t, num_layers, 1, ::octet::kAtLeastOne, "lstm_lm: LSTM layers; gpt: transformer blocks")              \
  X(int64_t, num_heads, 6, ::octet::kAtLeastOne, "gpt: attention heads (dividing the width)")                   \
  X(int64_t, context_length, 256, ::octet::kAtLeastOne, "gpt: the longest sequence (learned positions)")        \
  X(bool, tie_weights, false, ::octet::kAnyValue,                                                               \
    "lstm_lm, gpt: the decoder uses the embedding's weight (lstm_lm: embed_dim must equal hidden_size)")        \
  X(std::string, embedding, "plain", ::octet::one_of("plain|stable"),                                           \
    "lstm_lm, gpt: plain, or stable (StableEmbedding: Xavier init, LayerNorm, 32-bit optimizer state)")         \
  X(std::vector<int64_t>, hidden_sizes, (std::vector<int64_t>{4096, 4096}), ::octet::kAtLeastOne,               \
    "mlp: hidden layer widths, e.g. [4096, 4096] (the PrecisionBatching paper's MNIST network); [] a linear "   \
    "classifier")

struct ModelOptions {
  OCTET_OPTIONS(ModelOptions, OCTET_MODEL_OPTIONS)
  // lstm_lm's vocabulary (required, > 0): the data's, not a recipe key.
  int64_t vocab_size_ = 0;
  ModelOptions& vocab_size(int64_t v) {
    vocab_size_ = v;
    return *this;
  }
};

// Builds the named model with fresh weights drawn from default_generator(). Unknown names and
// out-of-range values are octet::Errors (the former lists the known names).
std::shared_ptr<Module> build_model(const ModelOptions& opts);
// The known names, sorted.
std::vector<std::string> model_names();
// Every model in the registry's order, families named: "small_cnn, ..., resnet50 (ImageNet ResNets),
// ..." (the recipe schema's model.name).
std::string model_catalog();

}  // namespace octet
