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

std::vector<Int8Conv> enable_int8(Module& model, const Int8Config& config, bool keep_first_last_float, uint64_t seed) {
  OCTET_CHECK(config.clip_update_period_ >= 1, "enable_int8: clip_update_period must be >= 1, got ",
              config.clip_update_period_);
  OCTET_CHECK(config.dclr_beta_ > 0.0 && config.dclr_beta_ <= 1.0, "enable_int8: dclr_beta must be in (0, 1], got ",
              config.dclr_beta_);
  OCTET_CHECK(config.dclr_alpha_ >= 0.0, "enable_int8: dclr_alpha must be >= 0, got ", config.dclr_alpha_);
  // Parameter names as the optimizer sees them: a tensor listed once, under its first name.
  const NamedTensors all_params = model.named_parameters();
  auto param_name = [&](const Tensor& t) -> std::string {
    for (const auto& [n, p] : all_params)
      if (p.same(t)) return n;
    OCTET_FAIL("enable_int8: a convolution's parameter is not among the model's parameters");
  };

  std::vector<std::pair<std::string, std::shared_ptr<Conv2d>>> convs;
  std::string last_layer;  // the last Conv2d or Linear: the model's final layer
  for (const auto& [name, m] : model.named_modules()) {
    if (auto conv = std::dynamic_pointer_cast<Conv2d>(m)) {
      OCTET_CHECK(!conv->int8(), "enable_int8: ", name, " is INT8 already");
      convs.emplace_back(name, conv);
      last_layer = name;
    } else if (std::dynamic_pointer_cast<Linear>(m)) {
      last_layer = name;
    }
  }
  OCTET_CHECK(!convs.empty(), "enable_int8: the model (", model.type_name(),
              ") has no Conv2d layers; INT8 training applies to convolutions only");

  std::vector<Int8Conv> out;
  for (size_t i = 0; i < convs.size(); ++i) {
    const auto& [name, conv] = convs[i];
    if (keep_first_last_float && (i == 0 || name == last_layer)) continue;
    auto layer = std::make_shared<Int8Layer>();
    layer->config = config;
    layer->seed = int8_layer_seed(seed, i);
    Int8Conv entry{name, layer, {param_name(conv->weight_)}};
    if (conv->bias_.defined()) entry.params.push_back(param_name(conv->bias_));
    conv->set_int8(layer);
    out.push_back(std::move(entry));
  }
  OCTET_CHECK(!out.empty(), "enable_int8: with keep_first_last_float every convolution of the model stays float (",
              convs.size(), " Conv2d: the first, and the last when it is the final layer); set it false to train them ",
              "in INT8");
  return out;
}

}  // namespace octet::quant
