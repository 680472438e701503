// 8-bit optimizer state: agreement with 32-bit state step by step, exact checkpoints, memory,
// robustness to non-finite gradients, and training quality.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "quant/blockwise.h"
#include "tests/error_of.h"
#include "tests/isa_scope.h"
#include "tests/optim/state_cases.h"

namespace octet {
namespace {

using testing::OptCase;

std::vector<OptCase> cases() { return testing::state_cases(); }

// The state buffers the optimizers declare unsigned (optim/*.cpp, state_buffers): their 8-bit state
// uses the unsigned map, the others the signed one (RMSprop's square_avg too, as in the reference).
bool unsigned_buffer(const std::string& key) {
  for (const char* b : {".exp_avg_sq", ".max_exp_avg_sq", ".sum"})
    if (key.ends_with(b)) return true;
  return false;
}

// The 8-bit state of `opt`, dequantized, under the 32-bit state's keys.
NamedTensors dequantized_state(const Optimizer& opt, int64_t block_size, const Shape& shape) {
  NamedTensors sd = opt.state_dict(), out;
  for (size_t i = 0; i < sd.size(); ++i) {
    const std::string& k = sd[i].first;
    if (k.size() > 6 && k.compare(k.size() - 6, 6, ".codes") == 0) {
      std::string base = k.substr(0, k.size() - 6);
      const Tensor& absmax = sd[i + 1].second;  // "<base>.absmax" follows its codes
      const quant::QuantMap map =
          unsigned_buffer(base) ? quant::QuantMap::dynamic_unsigned : quant::QuantMap::dynamic_signed;
      const auto& values = quant::quant_map(map);
      EXPECT_EQ(sd[i + 2].second.to_vector<float>(), std::vector<float>(values.begin(), values.end())) << base;
      quant::BlockwiseQuantized q{sd[i].second, absmax, block_size, map, sd[i].second.shape()};
      out.emplace_back(base, quant::dequantize_blockwise(q).reshape(shape));
      i += 2;  // its absmax and its map
    } else {
      out.emplace_back(k, sd[i].second);
    }
  }
  return out;
}

struct Errors {
  double mean_abs = 0, mean_rel = 0;
};

Errors compare(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  Errors e;
  int64_t nz = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::abs(static_cast<double>(x[i]) - y[i]);
    e.mean_abs += d;
    if (y[i] != 0) e.mean_rel += d / std::abs(static_cast<double>(y[i])), ++nz;
  }
  e.mean_abs /= static_cast<double>(x.size());
  e.mean_rel /= static_cast<double>(std::max<int64_t>(nz, 1));
  return e;
}

// From the same state, one 8-bit and one 32-bit step agree (bounds of the issue); then the 32-bit
// reference is re-synced to the 8-bit parameters and dequantized state, `steps` times.
void check_agreement(const OptCase& c, const Shape& shape, int steps) {
  Generator g(42);
  Tensor p8 = randn(shape, DType::f32, &g), p32 = p8.clone();
  p8.requires_grad_(true);
  p32.requires_grad_(true);
  auto opt8 = c.make({{"w", p8}}, StateOptions().state_bits(8));
  auto opt32 = c.make({{"w", p32}}, StateOptions());
  for (int s = 0; s < steps; ++s) {
    Tensor grad = randn(shape, DType::f32, &g);
    p8.set_grad(grad);
    p32.set_grad(grad.clone());
    opt8->step();
    opt32->step();
    Errors e = compare(p8, p32);
    ASSERT_LT(e.mean_abs, 6e-5) << c.name << " step " << s << " " << ::testing::PrintToString(shape);
    ASSERT_LT(e.mean_rel, 6e-4) << c.name << " step " << s << " " << ::testing::PrintToString(shape);
    NoGradGuard ng;
    p32.copy_(p8);
    opt32->load_state_dict(dequantized_state(*opt8, opt8->state_options().block_size_, shape));
  }
}

TEST(Optim8bit, OneStepAgreesWith32BitOnAllShapes) {
  for (const OptCase& c : cases())
    for (Shape s : {Shape{1024, 32}, Shape{1024, 1024}, Shape{1024, 4097}}) check_agreement(c, s, 1);
}

TEST(Optim8bit, FiftyResyncedStepsAgree) {
  for (const OptCase& c : cases()) check_agreement(c, {1024, 256}, 50);
}

TEST(Optim8bit, CheckpointRoundTripContinuesExactly) {
  for (const OptCase& c : cases()) testing::expect_resume_is_exact(c, StateOptions().state_bits(8).block_size(256));
}

TEST(Optim8bit, StateMemoryAndSmallTensors) {
  manual_seed(0);
  auto model = build_model(ModelOptions().name("resnet50").num_classes(1000));
  double n = static_cast<double>(model->num_parameters());
  Adam adam32(model->named_parameters(), AdamOptions(1e-3));
  EXPECT_DOUBLE_EQ(static_cast<double>(adam32.state_bytes()) / n, 8.0);
  // Every tensor 8-bit: 2 bytes per parameter plus one f32 absmax per block (256) and buffer: 2 + 8/256,
  // and a little more for the partial last blocks of small tensors; besides, each 8-bit buffer
  // records its map (256 floats).
  Adam all8(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8).min_8bit_size(0));
  const double maps = 2 * 1024.0 * static_cast<double>(all8.num_8bit_params());
  EXPECT_GE((static_cast<double>(all8.state_bytes()) - maps) / n, 2.0 + 8.0 / 256);
  EXPECT_LE((static_cast<double>(all8.state_bytes()) - maps) / n, 2.0 + 8.0 / 256 + 0.01);
  Adam big_blocks(model->named_parameters(), AdamOptions(1e-3),
                  StateOptions().state_bits(8).min_8bit_size(0).block_size(2048));
  EXPECT_LE((static_cast<double>(big_blocks.state_bytes()) - maps) / n, 2.01);
  // Default: tensors under 4096 elements (biases, batch norm) keep 32-bit state.
  Adam dflt(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));
  double per_param = static_cast<double>(dflt.state_bytes()) / n;
  EXPECT_GT(per_param, 2.0 + 8.0 / 256);
  EXPECT_LT(per_param, 2.06);
  EXPECT_EQ(dflt.num_8bit_params(), 54);  // the convolutions and the fc weight
  // keep_32bit patterns: the classifier's weight stays 32-bit.
  Adam keep(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8).keep_32bit({"fc.*"}));
  EXPECT_EQ(keep.num_8bit_params(), 53);
  EXPECT_THROW(Adam(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(6)), Error);
  EXPECT_THROW(Adam(model->named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8).block_size(1000)),
               Error);
  EXPECT_TRUE(name_matches("*embed*", "encoder.embedding.weight"));
  EXPECT_FALSE(name_matches("fc.*", "layer1.fc"));
}

// A checkpoint whose block scale is corrupt (NaN, infinite, negative) is an Error naming the key, not
// state that decodes to NaN or flips signs; the state it would have replaced is untouched.
TEST(Optim8bit, CorruptScaleInACheckpointIsAnErrorNamingItsKey) {
  Tensor w = randn({64, 128}).requires_grad_(true);
  Adam adam({{"w", w}}, AdamOptions(1e-3), StateOptions().state_bits(8).block_size(256));
  w.set_grad(randn({64, 128}));
  adam.step();
  NamedTensors good;  // copies: state_dict() hands out the live tensors
  for (const auto& [k, t] : adam.state_dict()) good.emplace_back(k, t.clone());
  for (const char* key : {"w.exp_avg.absmax", "w.exp_avg_sq.absmax"})
    for (double bad_value : {std::nan(""), static_cast<double>(INFINITY), -1.0}) {
      NamedTensors bad;
      for (const auto& [k, t] : good) bad.emplace_back(k, t.clone());
      for (auto& [k, t] : bad)
        if (k == key) t.view({-1}).narrow(0, 3, 1).fill_(bad_value);
      try {
        adam.load_state_dict(bad);
        ADD_FAILURE() << key << " = " << bad_value << ": no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(key + 2), std::string::npos) << e.what();
      }
    }
  for (const auto& [k, t] : adam.state_dict())
    for (const auto& [gk, gt] : good) {
      if (k != gk || t.dtype() != DType::f32) continue;
      EXPECT_EQ(max(abs(t - gt)).item<double>(), 0.0) << k;
    }
}

TEST(Optim8bit, NonFiniteGradientDoesNotPoisonState) {
  Tensor p = ones({4096}).requires_grad_(true);
  Adam adam({{"w", p}}, AdamOptions(1e-3), StateOptions().state_bits(8));
  std::vector<float> gv(4096, 0.5f);
  gv[7] = NAN;
  gv[3000] = INFINITY;
  p.set_grad(from_vector(gv, {4096}));
  adam.step();
  for (const auto& [k, t] : adam.state_dict()) {
    if (k.find("absmax") == std::string::npos) continue;
    for (float v : t.to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << k;
  }
  Tensor m;
  for (const auto& [k, t] : dequantized_state(adam, adam.state_options().block_size_, {4096}))
    if (k == "w.exp_avg") m = t;
  ASSERT_TRUE(m.defined());
  std::vector<float> mv = m.to_vector<float>();
  EXPECT_NEAR(mv[8], 0.05f, 1e-3);  // (1 - beta1) * 0.5 next to the NaN element
  EXPECT_NEAR(mv[2999], 0.05f, 1e-3);
}

TEST(Optim8bit, TrainingTracks32BitAdam) {
  // A small MLP on a fixed synthetic task: the final loss with 8-bit Adam is within 2% of 32-bit.
  auto run = [](int64_t bits) {
    manual_seed(1);
    auto model = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<Linear>(64, 256), std::make_shared<ReLU>(), std::make_shared<Linear>(256, 256),
        std::make_shared<ReLU>(), std::make_shared<Linear>(256, 10)});
    Adam opt(model->named_parameters(), AdamOptions(1e-3),
             StateOptions().state_bits(bits).min_8bit_size(0).block_size(256));
    Generator g(2);
    Tensor x = randn({512, 64}, DType::f32, &g);
    Tensor y = argmax(matmul(x, randn({64, 10}, DType::f32, &g)), 1);
    double loss = 0;
    for (int s = 0; s < 300; ++s) {
      Tensor l = cross_entropy((*model)(x), y);
      opt.zero_grad();
      l.backward();
      opt.step();
      loss = l.item();
    }
    return loss;
  };
  double l32 = run(32), l8 = run(8);
  EXPECT_LT(l32, 0.3);  // it learned something
  EXPECT_NEAR(l8, l32, 0.02 * l32 + 1e-3) << "8-bit " << l8 << " vs 32-bit " << l32;
}

// The optimizer loops are compiled for each instruction set (core/cpu/isa.h): every path moves
// parameters and state to the same bits as the portable one, in 32- and 8-bit state, on sizes
// that leave vector tails and partial quantization blocks, for each optimizer and its variants.
// RMSprop's square_avg uses the signed map, as in the reference; a state without its recorded map
// does not load.
TEST(Optim8bit, RmspropSquareAvgMapFollowsTheReference) {
  auto make = [](Tensor p) {
    return RMSprop({{"w", p}}, RMSpropOptions(0.01), StateOptions().state_bits(8).block_size(256).min_8bit_size(0));
  };
  Tensor p = randn({1000}).requires_grad_(true);
  p.set_grad(randn({1000}) * 0.01);
  RMSprop opt = make(p);
  opt.step();
  auto map_of = [](const NamedTensors& sd) {
    for (const auto& [k, t] : sd)
      if (k == "w.square_avg.map") return t.to_vector<float>();
    return std::vector<float>{};
  };
  const auto& signed_map = quant::quant_map(quant::QuantMap::dynamic_signed);
  EXPECT_EQ(map_of(opt.state_dict()), std::vector<float>(signed_map.begin(), signed_map.end()));
  NamedTensors without_map;
  for (const auto& [k, t] : opt.state_dict())
    if (!k.ends_with(".map")) without_map.emplace_back(k, t);
  RMSprop fresh = make(p);
  EXPECT_NE(testing::error_of([&] { fresh.load_state_dict(without_map); }).find("missing key(s) 'w.square_avg.map'"),
            std::string::npos);
}

TEST(OptimIsa, EveryPathGivesThePortableBits) {
  std::vector<OptCase> all = cases();
  all.push_back({"adam-l2-amsgrad", [](const NamedTensors& p, const StateOptions& s) {
                   return std::make_unique<Adam>(p, AdamOptions(1e-3).weight_decay(0.1).amsgrad(true), s);
                 }});
  all.push_back({"nesterov-wd", [](const NamedTensors& p, const StateOptions& s) {
                   return std::make_unique<SGD>(p, SGDOptions(1e-2).momentum(0.9).nesterov(true).weight_decay(1e-2), s);
                 }});
  all.push_back({"sgd-plain", [](const NamedTensors& p, const StateOptions& s) {
                   return std::make_unique<SGD>(p, SGDOptions(1e-2).weight_decay(1e-2), s);
                 }});
  all.push_back({"rmsprop-centered-momentum", [](const NamedTensors& p, const StateOptions& s) {
                   return std::make_unique<RMSprop>(p, RMSpropOptions(1e-3).centered(true).momentum(0.9), s);
                 }});
  all.push_back({"lion-wd", [](const NamedTensors& p, const StateOptions& s) {
                   return std::make_unique<Lion>(p, LionOptions(1e-4).weight_decay(0.1), s);
                 }});
  octet::testing::IsaScope isa_scope;
  // state_dict() plus the parameter after 3 steps, as floats.
  auto run = [](const OptCase& c, int64_t bits, const Shape& shape, cpu::Isa isa) {
    cpu::set_active_isa(isa);
    Generator g(11);
    Tensor p = randn(shape, DType::f32, &g).requires_grad_(true);
    auto opt = c.make({{"w", p}}, StateOptions().state_bits(bits).min_8bit_size(0).block_size(256));
    for (int s = 0; s < 3; ++s) {
      std::vector<float> grad = randn(shape, DType::f32, &g).to_vector<float>();
      if (s == 1) grad[0] = NAN;  // a non-finite element takes the same path everywhere
      p.set_grad(from_vector(grad, shape));
      opt->step();
    }
    // Every value as a double (exact for f32, u8 and i64); NaN written as a marker so == works.
    std::vector<double> out = p.to(DType::f64).to_vector<double>();
    for (const auto& [k, t] : opt->state_dict())
      for (double v : t.to(DType::f64).to_vector<double>()) out.push_back(v);
    for (double& v : out)
      if (std::isnan(v)) v = -12345.678;
    return out;
  };
  int tested = 0;
  for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (!cpu::isa_supported(isa)) continue;
    ++tested;
    for (const OptCase& c : all)
      for (int64_t bits : {32, 8, 4})
        for (const Shape& shape : {Shape{1}, Shape{37}, Shape{1000}, Shape{4099}, Shape{300, 400}}) {
          EXPECT_EQ(run(c, bits, shape, isa), run(c, bits, shape, cpu::Isa::portable))
              << c.name << " " << bits << "-bit, shape " << ::testing::PrintToString(shape) << ", "
              << cpu::isa_name(isa);
        }
  }
  std::cout << "[ optim    ] ISA paths compared with the portable loop: " << tested << "\n";
}

}  // namespace
}  // namespace octet
