#include "quant/int8_model.h"

#include "layers/conv.h"
#include "layers/linear.h"

namespace octet::quant {

uint64_t int8_layer_seed(uint64_t seed, uint64_t index) {
  constexpr uint32_t kTag = 0x494E5438u;  // "INT8": keeps these streams apart from other uses of the seed
  const std::array<uint32_t, 4> w =
      philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), kTag, 0u}, seed);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

namespace {

void check_config(const Int8Config& config, const char* fn) {
  OCTET_CHECK(config.clip_update_period_ >= 1, fn, ": clip_update_period must be >= 1, got ",
              config.clip_update_period_);
  OCTET_CHECK(config.dclr_beta_ > 0.0 && config.dclr_beta_ <= 1.0, fn, ": dclr_beta must be in (0, 1], got ",
              config.dclr_beta_);
  OCTET_CHECK(config.dclr_alpha_ >= 0.0, fn, ": dclr_alpha must be >= 0, got ", config.dclr_alpha_);
}

// Turns the `Layer` modules of `model` (Conv2d or Linear) INT8 but those `keep(i, name)` keeps
// float; layer i gets seed int8_layer_seed(seed, index_base + i).
// all_params: model.named_parameters(), the names as the optimizer sees them (a tensor listed once,
// under its first name).
template <typename Layer, typename Keep>
std::vector<Int8Module> convert(Module& model, const NamedTensors& all_params, const Int8Config& config, uint64_t seed,
                                uint64_t index_base, const char* fn, const char* kinds, Keep keep) {
  auto param_name = [&](const Tensor& t) -> std::string {
    for (const auto& [n, p] : all_params)
      if (p.same(t)) return n;
    OCTET_FAIL(fn, ": a layer's parameter is not among the model's parameters");
  };
  std::vector<std::pair<std::string, std::shared_ptr<Layer>>> found;
  for (const auto& [name, m] : model.named_modules())
    if (auto l = std::dynamic_pointer_cast<Layer>(m)) {
      OCTET_CHECK(!l->int8(), fn, ": ", name, " is INT8 already");
      found.emplace_back(name, l);
    }
  OCTET_CHECK(!found.empty(), fn, ": the model (", model.type_name(), ") has no ", kinds, " layers to train in INT8");
  std::vector<Int8Module> out;
  for (size_t i = 0; i < found.size(); ++i) {
    const auto& [name, l] = found[i];
    if (keep(i, name)) continue;
    auto layer = std::make_shared<Int8Layer>();
    layer->config = config;
    layer->seed = int8_layer_seed(seed, index_base + i);
    Int8Module entry{name, layer, {param_name(l->weight_)}};
    if (l->bias_.defined()) entry.params.push_back(param_name(l->bias_));
    l->set_int8(layer);
    out.push_back(std::move(entry));
  }
  OCTET_CHECK(!out.empty(), fn, ": with keep_first_last_float every ", kinds, " layer of the model stays float (",
              found.size(), " of them: the model's first and final layers); set it false to train them in INT8");
  return out;
}

// The name of the model's final layer: its last Conv2d or Linear.
std::string final_layer(Module& model) {
  std::string last;
  for (const auto& [name, m] : model.named_modules())
    if (std::dynamic_pointer_cast<Conv2d>(m) || std::dynamic_pointer_cast<Linear>(m)) last = name;
  return last;
}

}  // namespace

std::vector<Int8Module> enable_int8(Module& model, const Int8Config& config, bool keep_first_last_float,
                                    uint64_t seed) {
  check_config(config, "enable_int8");
  const std::string last = final_layer(model);
  return convert<Conv2d>(
      model, model.named_parameters(), config, seed, 0, "enable_int8", "Conv2d",
      [&](size_t i, const std::string& name) { return keep_first_last_float && (i == 0 || name == last); });
}

std::vector<Int8Module> enable_int8_linear(Module& model, const Int8Config& config, bool keep_first_last_float,
                                           uint64_t seed) {
  check_config(config, "enable_int8_linear");
  const std::string last = final_layer(model);
  // The input layer: the module that owns the model's first parameter.
  const NamedTensors params = model.named_parameters();
  const std::string first = params.empty() ? "" : params.front().first.substr(0, params.front().first.rfind('.'));
  return convert<Linear>(
      model, params, config, seed, kInt8LinearIndex, "enable_int8_linear", "Linear",
      [&](size_t, const std::string& name) { return keep_first_last_float && (name == first || name == last); });
}

}  // namespace octet::quant
