#include "models/registry.h"

#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"
#include "models/gpt.h"
#include "models/lstm_lm.h"
#include "models/mlp.h"
#include "models/mobilenetv2.h"
#include "models/resnet.h"
#include "models/small_cnn.h"

namespace octet {

namespace {

using Builder = std::function<std::shared_ptr<Module>(const ModelOptions&)>;

Shortcut parse_shortcut(const std::string& s) { return s == "A" ? Shortcut::A : Shortcut::B; }  // checked: "A" or "B"

// Every model, in the order `octet schema` documents them, with the family a reader knows it by.
struct ModelEntry {
  std::string name, family;
  Builder build;
};

const std::vector<ModelEntry>& entries() {
  static const std::vector<ModelEntry> table = [] {
    std::vector<ModelEntry> t;
    t.push_back({"small_cnn", "", [](const ModelOptions& o) {
                   return std::make_shared<SmallCnn>(o.num_classes_, o.in_channels_, o.image_size_, o.dropout_);
                 }});
    for (bool cifar : {false, true})
      t.push_back({cifar ? "mobilenetv2_cifar" : "mobilenetv2", "", [cifar](const ModelOptions& o) {
                     return std::make_shared<MobileNetV2>(o.num_classes_, o.width_mult_, cifar, o.in_channels_,
                                                          o.dropout_);
                   }});
    auto imagenet = [&t](const char* name, ResNet::Block block, std::vector<int64_t> layers) {
      t.push_back({name, "ImageNet ResNets", [block, layers](const ModelOptions& o) {
                     return std::make_shared<ResNet>(block, layers, o.num_classes_, o.in_channels_);
                   }});
    };
    imagenet("resnet18", ResNet::Block::basic, {2, 2, 2, 2});
    imagenet("resnet34", ResNet::Block::basic, {3, 4, 6, 3});
    imagenet("resnet50", ResNet::Block::bottleneck, {3, 4, 6, 3});
    for (int64_t depth : {20, 32, 44, 56, 110})
      t.push_back({"resnet" + std::to_string(depth), "CIFAR ResNets", [depth](const ModelOptions& o) {
                     return std::make_shared<CifarResNet>(depth, o.num_classes_, parse_shortcut(o.shortcut_),
                                                          o.in_channels_);
                   }});
    t.push_back({"lstm_lm", "", [](const ModelOptions& o) {
                   OCTET_CHECK(o.embedding_ == "plain" || o.embedding_ == "stable",
                               "build_model: embedding must be \"plain\" or \"stable\", got \"", o.embedding_, "\"");
                   return std::make_shared<LstmLm>(LstmLmOptions()
                                                       .vocab_size(o.vocab_size_)
                                                       .embed_dim(o.embed_dim_)
                                                       .hidden_size(o.hidden_size_)
                                                       .num_layers(o.num_layers_)
                                                       .dropout(o.dropout_)
                                                       .tie_weights(o.tie_weights_)
                                                       .stable_embedding(o.embedding_ == "stable"));
                 }});
    t.push_back({"gpt", "", [](const ModelOptions& o) {
                   // The width is embed_dim (hidden_size where embed_dim is 0): named by its key here, as
                   // Gpt's own check knows only its C++ option.
                   const int64_t width = o.embed_dim_ > 0 ? o.embed_dim_ : o.hidden_size_;
                   OCTET_CHECK(o.num_heads_ > 0 && width % o.num_heads_ == 0, "build_model: ",
                               o.embed_dim_ > 0 ? "embed_dim " : "hidden_size (the width while embed_dim is 0) ", width,
                               " is not a multiple of num_heads ", o.num_heads_, " (each head takes width / ",
                               "num_heads of it)");
                   return std::make_shared<Gpt>(GptOptions()
                                                    .vocab_size(o.vocab_size_)
                                                    .context_length(o.context_length_)
                                                    .num_layers(o.num_layers_)
                                                    .num_heads(o.num_heads_)
                                                    .width(width)
                                                    .dropout(o.dropout_)
                                                    .tie_weights(o.tie_weights_)
                                                    .stable_embedding(o.embedding_ == "stable"));
                 }});
    t.push_back({"mlp", "", [](const ModelOptions& o) {
                   return std::make_shared<Mlp>(o.in_channels_ * o.image_size_ * o.image_size_, o.hidden_sizes_,
                                                o.num_classes_, o.dropout_);
                 }});
    return t;
  }();
  return table;
}

const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> table = [] {
    std::map<std::string, Builder> t;
    for (const ModelEntry& e : entries()) t[e.name] = e.build;
    return t;
  }();
  return table;
}

std::string joined_names() {
  std::string out;
  for (const auto& n : model_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::shared_ptr<Module> build_model(const ModelOptions& o) {
  auto it = builders().find(o.name_);
  OCTET_CHECK(it != builders().end(), "build_model: unknown model \"", o.name_, "\"; known models: ", joined_names());
  if (const auto p = o.range_problem()) OCTET_FAIL("build_model: ", p->key, ": ", p->text);
  return it->second(o);
}

std::string model_catalog() {
  std::string out;
  const std::vector<ModelEntry>& e = entries();
  for (size_t i = 0; i < e.size(); ++i) {
    out += (out.empty() ? "" : ", ") + e[i].name;
    if (!e[i].family.empty() && (i + 1 == e.size() || e[i + 1].family != e[i].family)) out += " (" + e[i].family + ")";
  }
  return out;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, builder] : builders()) names.push_back(name);
  return names;
}

}  // namespace octet
