// Turning a model's convolutions or Linear layers into INT8-trained ones (Unified INT8,
// ../shared/papers/NOTES.md): every Conv2d (enable_int8) or Linear (enable_int8_linear) gets its own
// quant::Int8Layer (config, stats, a seed mixed from the run's seed and the layer's index), except,
// as the paper does, the model's first and last layers (for convolutions: the first convolution
// and, if the model ends in one, the last; the classifier of the models here is a Linear, which
// stays float anyway; for Linear layers: the model's input layer when it is a Linear, and the
// final layer -- a GPT's lm_head -- so its embedding, final norm and LM head stay float and every
// block's QKV, output and MLP projections train in INT8).
// The returned list tells a trainer where each INT8 layer's stats are and which parameters its
// DCLR factor scales.
//   auto layers = quant::enable_int8(*model, quant::Int8Config{}, /*keep_first_last_float=*/true, seed);
//   loss.backward();  apply_dclr(opt, layers);  opt.step();   // DCLR, optim/dclr.h
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "quant/int8.h"

namespace octet::quant {

// One converted convolution or Linear layer.
struct Int8Module {
  std::string name;                  // its module name, e.g. "features.4" or "transformer.h.0.attn.c_attn"
  std::shared_ptr<Int8Layer> layer;  // shared with the Conv2d and its autograd nodes
  std::vector<std::string> params;   // its parameters' names in model.named_parameters() (weight, bias)
};

// Converts the Conv2d layers of `model`, in the order of model.named_modules() (registration
// order, which is the order of the forward pass in the models of models/). With
// keep_first_last_float the first Conv2d stays float, and so does the final layer (the last Conv2d
// or Linear) when it is a Conv2d. Layer i (the i-th Conv2d, counting the float ones too) gets seed
// int8_layer_seed(seed, i), so its stochastic rounding draws do not depend on which other layers
// are INT8. Nothing is drawn from the default generator. An Error when the model has no Conv2d,
// when a Conv2d is INT8 already, when nothing is left to convert, or for a config out of range
// (clip_update_period < 1, dclr_beta outside (0, 1], dclr_alpha < 0).
std::vector<Int8Module> enable_int8(Module& model, const Int8Config& config, bool keep_first_last_float, uint64_t seed);

// Converts the Linear layers of `model` likewise, in the order of model.named_modules(). With
// keep_first_last_float the input layer (the module of the model's first parameter) stays float
// when it is a Linear, and so does the final layer (the last Conv2d or Linear) when it is a Linear.
// Linear i gets seed int8_layer_seed(seed, kInt8LinearIndex + i): apart from every convolution's.
// An Error as enable_int8's, for Linear layers (a model without any, a Linear that is INT8 already,
// none left to convert).
inline constexpr uint64_t kInt8LinearIndex = uint64_t{1} << 32;
std::vector<Int8Module> enable_int8_linear(Module& model, const Int8Config& config, bool keep_first_last_float,
                                           uint64_t seed);

// The seed of INT8 layer `index` of a run seeded with `seed` (one Philox block: distinct
// layers get unrelated seeds).
uint64_t int8_layer_seed(uint64_t seed, uint64_t index);

}  // namespace octet::quant
