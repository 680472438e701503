// Optimizer checkpoints (state_dict round trip, strict loading) and clip_grad_norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "core/octet.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

namespace octet {
namespace {

using namespace octet::testing;

// Two params of different dtypes and shapes; "b" gets no gradient on step 1, so the per-param
// step counters differ and Adam's bias corrections must follow each one.
struct Model {
  Tensor w = param_of({0.5, -1.25, 2.0, 0.75, -0.1, 3.0}, {2, 3}, DType::f32);
  Tensor b = param_of({0.2, -0.4}, {2});
  NamedTensors named() const { return {{"layer1.weight", w}, {"layer1.bias", b}}; }
  Model clone() const {
    Model m;
    m.w = w.detach().clone().requires_grad_(true);
    m.b = b.detach().clone().requires_grad_(true);
    return m;
  }
};

void run_model(Optimizer& opt, Model& m, int first, int steps) {
  for (int k = first; k < first + steps; ++k) {
    opt.zero_grad();
    for (const Tensor& p : {m.w, m.b}) {
      if (p.same(m.b) && k == 1) continue;
      p.set_grad(from_vector<double>(grad_of(p.to_vector<double>(), k), p.shape()).to(p.dtype()));
    }
    opt.step();
  }
}

using MakeOpt = std::function<std::unique_ptr<Optimizer>(const NamedTensors&)>;

void check_round_trip(const MakeOpt& make) {
  Model straight;
  auto opt = make(straight.named());
  run_model(*opt, straight, 0, 3);
  Model resumed = straight.clone();
  NamedTensors saved = opt->state_dict();
  run_model(*opt, straight, 3, 3);

  auto fresh = make(resumed.named());
  fresh->load_state_dict(saved);
  EXPECT_EQ(fresh->steps(), 3);
  run_model(*fresh, resumed, 3, 3);
  EXPECT_EQ(resumed.w.to_vector<float>(), straight.w.to_vector<float>());  // bit for bit
  EXPECT_EQ(resumed.b.to_vector<double>(), straight.b.to_vector<double>());
  // And the state itself.
  NamedTensors a = opt->state_dict(), b = fresh->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<double>(), b[i].second.to_vector<double>()) << a[i].first;
  }
}

TEST(OptimState, RoundTripIsBitExact) {
  check_round_trip([](const NamedTensors& p) { return std::make_unique<Adam>(p, AdamOptions(0.1).amsgrad(true)); });
  check_round_trip([](const NamedTensors& p) { return std::make_unique<AdamW>(p, AdamWOptions(0.05)); });
  check_round_trip(
      [](const NamedTensors& p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).nesterov(true)); });
}

TEST(OptimState, RoundTripIsBitExactRmspropLionLambLars) {
  check_round_trip([](const NamedTensors& p) {
    return std::make_unique<RMSprop>(p, RMSpropOptions(0.01).momentum(0.9).centered(true).weight_decay(0.01));
  });
  check_round_trip(
      [](const NamedTensors& p) { return std::make_unique<Lion>(p, LionOptions(0.01).weight_decay(0.1)); });
  check_round_trip(
      [](const NamedTensors& p) { return std::make_unique<Lamb>(p, LambOptions(0.1).weight_decay(0.01)); });
  check_round_trip([](const NamedTensors& p) {
    return std::make_unique<Lars>(p, LarsOptions(1.0).trust_coefficient(0.02).weight_decay(1e-3));
  });
}

TEST(OptimState, KeysAreNamesNotPositions) {
  Model m;
  Adam opt(m.named(), AdamOptions(0.1).amsgrad(true));
  std::vector<std::string> keys;
  for (auto& [k, t] : opt.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"layer1.weight.step", "layer1.weight.exp_avg", "layer1.weight.exp_avg_sq",
                                            "layer1.weight.max_exp_avg_sq", "layer1.bias.step", "layer1.bias.exp_avg",
                                            "layer1.bias.exp_avg_sq", "layer1.bias.max_exp_avg_sq", "steps"}));
  NamedTensors state = opt.state_dict();
  EXPECT_EQ(state[0].second.dtype(), DType::i64);
  EXPECT_EQ(state[0].second.dim(), 0);
  EXPECT_EQ(state[1].second.dtype(), DType::f32);
  EXPECT_EQ(state[1].second.shape(), (Shape{2, 3}));

  // Loading into an optimizer that lists the params in another order works: only names matter.
  run_model(opt, m, 0, 2);
  Model other = m.clone();
  Adam reordered(NamedTensors{{"layer1.bias", other.b}, {"layer1.weight", other.w}}, AdamOptions(0.1).amsgrad(true));
  state = opt.state_dict();
  std::reverse(state.begin(), state.end());
  reordered.load_state_dict(state);
  run_model(opt, m, 2, 1);
  run_model(reordered, other, 2, 1);
  EXPECT_EQ(other.w.to_vector<float>(), m.w.to_vector<float>());
  EXPECT_EQ(other.b.to_vector<double>(), m.b.to_vector<double>());

  // SGD without momentum keeps only the counters.
  SGD plain(m.named(), SGDOptions(0.1));
  EXPECT_EQ(plain.state_dict().size(), 3u);
}

// Expects load_state_dict(state) to throw an Error mentioning `key`, and the optimizer unchanged.
void expect_load_error(Optimizer& opt, const NamedTensors& state, const std::string& key) {
  NamedTensors before = opt.state_dict();
  try {
    opt.load_state_dict(state);
    ADD_FAILURE() << "expected an error about " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
  }
  NamedTensors after = opt.state_dict();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(before[i].second.to_vector<double>(), after[i].second.to_vector<double>()) << before[i].first;
}

TEST(OptimState, LoadErrors) {
  Model m;
  Adam opt(m.named(), AdamOptions(0.1));
  run_model(opt, m, 0, 2);
  const NamedTensors good = opt.state_dict();
  auto edit = [&](const std::string& key, const Tensor& t) {
    NamedTensors s = good;
    for (auto& [k, v] : s)
      if (k == key) v = t;
    return s;
  };

  NamedTensors unknown = good;
  unknown.emplace_back("layer2.weight.exp_avg", zeros({2, 3}));
  expect_load_error(opt, unknown, "layer2.weight.exp_avg");

  NamedTensors missing = good;
  missing.erase(missing.begin() + 2);  // layer1.weight.exp_avg_sq
  expect_load_error(opt, missing, "layer1.weight.exp_avg_sq");

  NamedTensors twice = good;
  twice.push_back(good[1]);
  expect_load_error(opt, twice, "layer1.weight.exp_avg");

  expect_load_error(opt, edit("layer1.weight.exp_avg", zeros({3, 2})), "layer1.weight.exp_avg");             // shape
  expect_load_error(opt, edit("layer1.bias.exp_avg_sq", zeros({2}, DType::f32)), "layer1.bias.exp_avg_sq");  // dtype
  expect_load_error(opt, edit("layer1.bias.step", scalar_tensor(2.0)), "layer1.bias.step");  // f32 counter
  expect_load_error(opt, edit("steps", zeros({1}, DType::i64)), "steps");                    // not a scalar
  expect_load_error(opt, edit("layer1.weight.step", scalar_tensor(-1.0, DType::i64)), "layer1.weight.step");
  expect_load_error(opt, edit("layer1.bias.exp_avg", Tensor()), "layer1.bias.exp_avg");

  // amsgrad adds a buffer: a checkpoint without it is missing a key.
  Model m2;
  Adam ams(m2.named(), AdamOptions(0.1).amsgrad(true));
  expect_load_error(ams, good, "layer1.weight.max_exp_avg_sq");
}

TEST(OptimState, ChangingOptionsThatChangeStateIsAnError) {
  Model m;
  SGD opt(m.named(), SGDOptions(0.1));
  run_model(opt, m, 0, 1);
  opt.options(0).momentum(0.9);  // would need a momentum buffer that was never made
  EXPECT_THROW(run_model(opt, m, 1, 1), Error);
}

// The extension point the 8-bit state will use: a state that keeps its buffers in its own
// format and hands the update one small block at a time through scratch memory (a quantized
// state would dequantize into the scratch and quantize back). Adam's update code is unchanged.
// Its read-only pass (LAMB's norms) fills the scratch and never copies back; it counts the
// passes so a test can see which ones an optimizer makes.
class ScratchBlockState : public ParamState {
 public:
  static constexpr int64_t kBlock = 4;
  ScratchBlockState(const Tensor& param, std::vector<std::string> names)
      : ParamState(std::move(names)), n_(param.numel()) {
    for (size_t i = 0; i < buffer_names().size(); ++i) store_.push_back(zeros({param.numel()}, param.dtype()));
  }
  void for_each_block(const BlockUpdate<float>& fn) override { run(fn); }
  void for_each_block(const BlockUpdate<double>& fn) override { run(fn); }
  void read_blocks(const BlockRead<float>& fn) override { read(fn); }
  void read_blocks(const BlockRead<double>& fn) override { read(fn); }
  NamedTensors tensors() const override {
    NamedTensors out;
    for (size_t i = 0; i < store_.size(); ++i) out.emplace_back(buffer_names()[i] + ".blocks", store_[i]);
    return out;
  }
  int reads = 0, updates = 0;

 private:
  template <typename T>
  void read(const BlockRead<T>& fn) {
    ++reads;
    const int64_t n = n_;
    std::vector<std::vector<T>> scratch(store_.size(), std::vector<T>(kBlock));
    std::vector<const T*> ptrs;
    for (auto& s : scratch) ptrs.push_back(s.data());
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      int64_t len = std::min(kBlock, n - begin);
      for (size_t i = 0; i < store_.size(); ++i) std::copy_n(store_[i].data<T>() + begin, len, scratch[i].data());
      fn(StateBlock<const T>{begin, len, ptrs.data()});
    }
  }
  template <typename T>
  void run(const BlockUpdate<T>& fn) {
    ++updates;
    const int64_t n = n_;
    std::vector<std::vector<T>> scratch(store_.size(), std::vector<T>(kBlock));
    std::vector<T*> ptrs;
    for (auto& s : scratch) ptrs.push_back(s.data());
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      int64_t len = std::min(kBlock, n - begin);
      for (size_t i = 0; i < store_.size(); ++i) std::copy_n(store_[i].data<T>() + begin, len, scratch[i].data());
      fn(StateBlock<T>{begin, len, ptrs.data()});
      for (size_t i = 0; i < store_.size(); ++i) std::copy_n(scratch[i].data(), len, store_[i].data<T>() + begin);
    }
  }
  int64_t n_;
  std::vector<Tensor> store_;
};

template <typename Base>
class Scratch : public Base {
 public:
  using Base::Base;
  // The state made for `name` (for counting its passes).
  ScratchBlockState* state_of(const std::string& name) const {
    auto it = made_.find(name);
    return it == made_.end() ? nullptr : it->second;
  }

 protected:
  std::unique_ptr<ParamState> make_state(const std::string& name, const Tensor& param,
                                         const OptimizerOptions& options) const override {
    auto state = std::make_unique<ScratchBlockState>(param, this->state_buffer_names(options));
    made_[name] = state.get();
    return state;
  }

 private:
  mutable std::map<std::string, ScratchBlockState*> made_;
};
using ScratchAdam = Scratch<Adam>;

TEST(OptimState, PluggableStateRunsTheSameUpdate) {
  Model a, b = a.clone();
  Adam dense(a.named(), AdamOptions(0.1).amsgrad(true));
  ScratchAdam blocked(b.named(), AdamOptions(0.1).amsgrad(true));
  run_model(dense, a, 0, 4);
  run_model(blocked, b, 0, 4);
  EXPECT_EQ(a.w.to_vector<float>(), b.w.to_vector<float>());  // 6 elements: blocks of 4 and 2
  EXPECT_EQ(a.b.to_vector<double>(), b.b.to_vector<double>());
  NamedTensors state = blocked.state_dict();
  EXPECT_EQ(state[1].first, "layer1.weight.exp_avg.blocks");
  EXPECT_EQ(state[1].second.shape(), (Shape{6}));
  // Round trip through the custom format.
  Model c = b.clone();
  ScratchAdam resumed(c.named(), AdamOptions(0.1).amsgrad(true));
  resumed.load_state_dict(state);
  run_model(blocked, b, 4, 2);
  run_model(resumed, c, 4, 2);
  EXPECT_EQ(c.w.to_vector<float>(), b.w.to_vector<float>());
  // A dense checkpoint does not load into it: the keys differ.
  EXPECT_THROW(resumed.load_state_dict(dense.state_dict()), Error);
}

TEST(OptimState, PluggableStateRunsLayerwiseUpdates) {
  // LAMB through blocks of 4: one read-only pass for the norms, one update pass, per step. Only
  // the order of the norm's partial sums differs from the dense run (blocks 4 + 2 vs one).
  constexpr double kSumOrderTol = 1e-14;  // a few f64 ulps of values ~1
  const Vec init = {0.5, -1.25, 2.0, 0.75, -0.1, 3.0, 0.2};
  Tensor a = param_of(init, {7}), b = param_of(init, {7});
  Lamb dense(NamedTensors{{"w", a}}, LambOptions(0.1).weight_decay(0.05));
  Scratch<Lamb> blocked(NamedTensors{{"w", b}}, LambOptions(0.1).weight_decay(0.05));
  run_steps(dense, {a}, 0, 4);
  run_steps(blocked, {b}, 0, 4);
  expect_near(b.to_vector<double>(), a.to_vector<double>(), kSumOrderTol);
  ASSERT_NE(blocked.state_of("w"), nullptr);
  EXPECT_EQ(blocked.state_of("w")->reads, 4);
  EXPECT_EQ(blocked.state_of("w")->updates, 4);

  // LARS's norms need no state: only the update pass runs.
  Tensor c = param_of(init, {7}), d = param_of(init, {7});
  Lars dense_lars(NamedTensors{{"w", c}}, LarsOptions(1.0).trust_coefficient(0.05));
  Scratch<Lars> blocked_lars(NamedTensors{{"w", d}}, LarsOptions(1.0).trust_coefficient(0.05));
  run_steps(dense_lars, {c}, 0, 4);
  run_steps(blocked_lars, {d}, 0, 4);
  EXPECT_EQ(d.to_vector<double>(), c.to_vector<double>());
  EXPECT_EQ(blocked_lars.state_of("w")->reads, 0);
  EXPECT_EQ(blocked_lars.state_of("w")->updates, 4);
}

TEST(OptimClip, Norms) {
  // Norm 13 = sqrt(3^2 + 4^2 + 12^2).
  auto make = [] {
    Tensor a = param_of({0, 0}, {2}), b = param_of({0}, {1}, DType::f32), none = param_of({1}, {1});
    a.set_grad(from_vector<double>({3, 4}, {2}));
    b.set_grad(from_vector<float>({12}, {1}));
    return std::vector<Tensor>{a, b, none};
  };
  std::vector<Tensor> ps = make();
  EXPECT_NEAR(clip_grad_norm(ps, 100.0), 13.0, 1e-12);
  EXPECT_EQ(ps[0].grad().to_vector<double>(), (Vec{3, 4}));  // below max_norm: untouched

  ps = make();
  EXPECT_NEAR(clip_grad_norm(ps, 6.5), 13.0, 1e-12);
  const double coef = 6.5 / (13.0 + 1e-6);
  expect_near(ps[0].grad().to_vector<double>(), {3 * coef, 4 * coef}, 1e-15);
  EXPECT_NEAR(ps[1].grad().item(), 12 * coef, 1e-6);  // f32 grad: f32 rounding
  std::vector<Tensor> again = {ps[0], ps[1]};
  EXPECT_NEAR(clip_grad_norm(again, 100.0), 6.5, 1e-5);  // the clipped norm is max_norm

  // Non-finite norm: returned as is, grads untouched.
  ps = make();
  ps[0].set_grad(from_vector<double>({3, std::numeric_limits<double>::infinity()}, {2}));
  EXPECT_TRUE(std::isinf(clip_grad_norm(ps, 1.0)));
  EXPECT_EQ(ps[1].grad().item(), 12.0);
  ps[0].set_grad(from_vector<double>({std::nan(""), 1}, {2}));
  EXPECT_TRUE(std::isnan(clip_grad_norm(ps, 1.0)));
  EXPECT_EQ(ps[1].grad().item(), 12.0);

  // No gradients at all.
  EXPECT_EQ(clip_grad_norm({param_of({1}, {1})}, 1.0), 0.0);
  EXPECT_THROW(clip_grad_norm(ps, -1.0), Error);
}

}  // namespace
}  // namespace octet
