// DCLR (Unified INT8, deviation-counteractive learning-rate scaling) for any training loop: after
// each backward pass, every INT8 layer's parameters get the lr factor max(exp(-alpha d_c), beta)
// from the layer's latest gradient cosine distance d_c (quant::dclr_scale; 1 before its first
// backward pass or with DCLR off), through Optimizer::set_lr_scale, so it works for every
// optimizer, 32- or 8-bit state, CPU or CUDA, and follows the group's schedule.
//   auto layers = quant::enable_int8(*model, quant::Int8Config{}, true, seed);
//   loss.backward();  apply_dclr(opt, layers);  opt.step();
#pragma once

#include <vector>

#include "optim/optimizer.h"
#include "quant/int8_model.h"

namespace octet {

// Sets the lr factor of each layer's parameters on `opt` (an Error naming a parameter `opt` lacks).
void apply_dclr(Optimizer& opt, const std::vector<quant::Int8Module>& layers);

}  // namespace octet
