// Models by name, for recipes and the CLI. ModelOptions' fields are the recipe's `model:` keys.
//   auto net = build_model(ModelOptions().name("resnet20").num_classes(10).shortcut("B"));
//   auto mlp = build_model(ModelOptions().name("mlp").in_channels(1).image_size(28).hidden_sizes({4096, 4096}));
//   auto lm = std::dynamic_pointer_cast<LstmLm>(build_model(ModelOptions().name("lstm_lm").vocab_size(10000)));
//   for (const auto& n : model_names()) std::cout << n << "\n";
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace octet {

struct ModelOptions {
  std::string name_ = "small_cnn";
  int64_t num_classes_ = 10;
  int64_t in_channels_ = 3;
  int64_t image_size_ = 32;     // input height = width; sizes small_cnn's classifier
  double width_mult_ = 1.0;     // mobilenetv2*
  double dropout_ = 0.2;        // before the classifier: mobilenetv2* and small_cnn; lstm_lm's dropout
  std::string shortcut_ = "A";  // CIFAR resnets: "A" (zero padding) or "B" (projection)
  // lstm_lm (models/lstm_lm.h; dropout_ is its dropout):
  int64_t vocab_size_ = 0;  // required, > 0
  int64_t embed_dim_ = 0;   // 0: same as hidden_size
  int64_t hidden_size_ = 650;
  int64_t num_layers_ = 1;
  bool tie_weights_ = false;         // decoder.weight is embedding.weight
  std::string embedding_ = "plain";  // "plain" or "stable" (StableEmbedding)
  // mlp (models/mlp.h; in_channels x image_size^2 inputs, dropout_ after each hidden ReLU):
  std::vector<int64_t> hidden_sizes_{4096, 4096};

  ModelOptions& name(std::string v) {
    name_ = std::move(v);
    return *this;
  }
  ModelOptions& num_classes(int64_t v) {
    num_classes_ = v;
    return *this;
  }
  ModelOptions& in_channels(int64_t v) {
    in_channels_ = v;
    return *this;
  }
  ModelOptions& image_size(int64_t v) {
    image_size_ = v;
    return *this;
  }
  ModelOptions& width_mult(double v) {
    width_mult_ = v;
    return *this;
  }
  ModelOptions& dropout(double v) {
    dropout_ = v;
    return *this;
  }
  ModelOptions& shortcut(std::string v) {
    shortcut_ = std::move(v);
    return *this;
  }
  ModelOptions& vocab_size(int64_t v) {
    vocab_size_ = v;
    return *this;
  }
  ModelOptions& embed_dim(int64_t v) {
    embed_dim_ = v;
    return *this;
  }
  ModelOptions& hidden_size(int64_t v) {
    hidden_size_ = v;
    return *this;
  }
  ModelOptions& num_layers(int64_t v) {
    num_layers_ = v;
    return *this;
  }
  ModelOptions& tie_weights(bool v) {
    tie_weights_ = v;
    return *this;
  }
  ModelOptions& embedding(std::string v) {
    embedding_ = std::move(v);
    return *this;
  }
  ModelOptions& hidden_sizes(std::vector<int64_t> v) {
    hidden_sizes_ = std::move(v);
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
