// DCLR in a training loop (optim/dclr.h): each INT8 layer's parameters get the lr factor
// max(exp(-alpha d_c), beta) of its latest d_c, 1 before a backward pass or with DCLR off, beta
// after a non-finite gradient; other parameters keep their lr.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/octet.h"
#include "optim/dclr.h"
#include "optim/sgd.h"
#include "tests/quant/int8_stats_util.h"

namespace octet {
namespace {

using octet::testing::layer_with;
using octet::testing::set_backward;
using octet::testing::two_layers;
using quant::Int8Module;

TEST(Dclr, SetsEachLayersLrFactor) {
  NamedTensors params = {{"conv_a.weight", zeros({4})},
                         {"conv_a.bias", zeros({2})},
                         {"conv_b.weight", zeros({4})},
                         {"fc.weight", zeros({3})}};
  SGD opt(params, SGDOptions(0.1));
  std::vector<Int8Module> layers = two_layers();
  apply_dclr(opt, layers);  // no backward yet: d_c is NaN, factor 1
  for (const auto& [n, t] : params) EXPECT_EQ(opt.lr_scale(n), 1.0) << n;

  set_backward(layers[0].layer->stats, 0.05);  // exp(-20 * 0.05) = e^-1
  set_backward(layers[1].layer->stats, 0.5);   // exp(-10) < beta: the floor 0.1
  apply_dclr(opt, layers);
  EXPECT_DOUBLE_EQ(opt.lr_scale("conv_a.weight"), std::exp(-1.0));
  EXPECT_DOUBLE_EQ(opt.lr_scale("conv_a.bias"), std::exp(-1.0));
  EXPECT_DOUBLE_EQ(opt.lr_scale("conv_b.weight"), 0.1);
  EXPECT_EQ(opt.lr_scale("fc.weight"), 1.0);  // float layers keep their lr

  layers[1].layer->config.dclr_ = false;  // quant.dclr: false
  layers[0].layer->config.dclr_alpha_ = 10.0;
  apply_dclr(opt, layers);
  EXPECT_DOUBLE_EQ(opt.lr_scale("conv_a.weight"), std::exp(-0.5));
  EXPECT_EQ(opt.lr_scale("conv_b.weight"), 1.0);

  // A NaN d_c after a backward pass is a non-finite gradient: the largest deviation, the floor.
  set_backward(layers[0].layer->stats, NAN, 3);
  apply_dclr(opt, layers);
  EXPECT_EQ(opt.lr_scale("conv_a.weight"), 0.1);

  const std::vector<Int8Module> unknown = {{"conv_x", layer_with(0.0), {"conv_x.weight"}}};
  EXPECT_THROW(apply_dclr(opt, unknown), Error);  // a parameter the optimizer does not have
}

}  // namespace
}  // namespace octet
