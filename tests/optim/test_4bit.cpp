// 4-bit optimizer state (optim/lowbit_state.h): every optimizer's 4-bit step equals a 32-bit step
// from the decoded state followed by the plain 4-bit encoding (codes, scales and parameters bit for
// bit), for block-wise and rank-1 buffers of 1-, 2- and 3-dim parameters; exact checkpoint resume;
// memory; training quality on a small problem; the errors of bad options and checkpoints; and a
// state over a range of the parameter (a shard) against the whole state.
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "core/octet.h"
#include "optim/lowbit_state.h"
#include "quant/lowbit.h"
#include "tests/optim/state_cases.h"

namespace octet {
namespace {

using testing::OptCase;

std::vector<OptCase> cases() { return testing::state_cases(); }

constexpr int64_t kBlock = LowBitState::kBlock;
constexpr float kInf = std::numeric_limits<float>::infinity();

// The dims a rank-1 buffer normalizes over (those of extent > 1), or none when it is block-wise.
Shape rank1_dims(const Shape& shape) {
  Shape dims;
  int64_t count = 0, n = 1;
  for (int64_t e : shape) {
    n *= e;
    if (e > 1) dims.push_back(e), count += e;
  }
  return dims.size() >= 2 && count * kBlock <= n ? dims : Shape{};
}

bool is_unsigned(const std::string& buffer) {
  return buffer == "exp_avg_sq" || buffer == "max_exp_avg_sq" || buffer == "sum" || buffer == "square_avg";
}

// The plain 4-bit form of one state buffer, as optim/lowbit_state.h defines it.
struct Plain4 {
  std::vector<uint8_t> codes;
  std::vector<float> absmax;               // block-wise
  std::vector<std::vector<float>> maxima;  // rank-1
};

int64_t index_along(int64_t flat, const Shape& shape, size_t d) {
  int64_t stride = 1;
  for (size_t e = d + 1; e < shape.size(); ++e) stride *= shape[e];
  return flat / stride % shape[d];
}

float scale_of(const Plain4& q, bool rank1, const Shape& shape, int64_t i) {
  if (!rank1) return q.absmax[static_cast<size_t>(i / kBlock)];
  float s = kInf;
  for (size_t d = 0; d < shape.size(); ++d) s = std::min(s, q.maxima[d][static_cast<size_t>(index_along(i, shape, d))]);
  return s;
}

Plain4 encode_plain(const std::vector<float>& x, const Shape& shape, quant::QuantMap4 map, bool rank1) {
  Plain4 q;
  const int64_t n = static_cast<int64_t>(x.size());
  auto finite_abs = [](float v) { return std::fabs(v) < kInf ? std::fabs(v) : 0.0f; };
  if (rank1) {
    q.maxima.resize(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) q.maxima[d].assign(static_cast<size_t>(shape[d]), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (size_t d = 0; d < shape.size(); ++d) {
        float& m = q.maxima[d][static_cast<size_t>(index_along(i, shape, d))];
        m = std::max(m, finite_abs(x[static_cast<size_t>(i)]));
      }
  } else {
    q.absmax.assign(static_cast<size_t>((n + kBlock - 1) / kBlock), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      float& m = q.absmax[static_cast<size_t>(i / kBlock)];
      m = std::max(m, finite_abs(x[static_cast<size_t>(i)]));
    }
  }
  q.codes.assign(static_cast<size_t>((n + 1) / 2), 0);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[static_cast<size_t>(i)] / scale_of(q, rank1, shape, i);
    if (std::isnan(v)) v = 0.0f;
    const uint8_t c = quant::nearest_code4(quant::quant_map4(map), v);
    q.codes[static_cast<size_t>(i / 2)] |= static_cast<uint8_t>(i % 2 == 0 ? c << 4 : c);
  }
  return q;
}

std::vector<float> decode_plain(const Plain4& q, const Shape& shape, quant::QuantMap4 map, bool rank1, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = q.codes[static_cast<size_t>(i / 2)];
    const int c = i % 2 == 0 ? byte >> 4 : byte & 15;
    out[static_cast<size_t>(i)] = quant::quant_map4(map)[c] * scale_of(q, rank1, shape, i);
  }
  return out;
}

// Buffer `name` of parameter "w" in a 4-bit state_dict, in plain form.
Plain4 plain_of(const NamedTensors& sd, const std::string& name, bool rank1, size_t dims) {
  auto get = [&](const std::string& key) -> const Tensor& {
    for (const auto& [k, t] : sd)
      if (k == "w." + name + "." + key) return t;
    ADD_FAILURE() << "no key w." << name << "." << key;
    static const Tensor none;
    return none;
  };
  Plain4 q;
  q.codes = get("codes").to_vector<uint8_t>();
  if (rank1) {
    for (size_t d = 0; d < dims; ++d) q.maxima.push_back(get("max" + std::to_string(d)).to_vector<float>());
  } else {
    q.absmax = get("absmax").to_vector<float>();
  }
  return q;
}

// From the same state, one 4-bit step equals a 32-bit step from the decoded state followed by the
// plain encoding: parameters, codes and scales bit for bit. Repeated `steps` times.
void check_exact(const OptCase& c, const Shape& shape, int steps) {
  Generator g(7);
  Tensor p4 = randn(shape, DType::f32, &g), p32 = p4.clone();
  p4.requires_grad_(true);
  p32.requires_grad_(true);
  auto opt4 = c.make({{"w", p4}}, StateOptions().state_bits(4));
  auto opt32 = c.make({{"w", p32}}, StateOptions());
  const int64_t n = p4.numel();
  for (int s = 0; s < steps; ++s) {
    // The 32-bit optimizer starts from the decoded 4-bit state.
    NamedTensors sd4 = opt4->state_dict(), start;
    for (const auto& [k, t] : opt32->state_dict()) {
      const std::string buffer = k.substr(2);
      if (buffer == "step" || k == "steps") {
        start.emplace_back(k, t);
        continue;
      }
      const Shape dims = rank1_dims(shape);
      const bool rank1 = is_unsigned(buffer) && !dims.empty();
      const auto map = is_unsigned(buffer) ? quant::QuantMap4::linear_unsigned : quant::QuantMap4::dynamic_signed;
      start.emplace_back(
          k, from_vector<float>(decode_plain(plain_of(sd4, buffer, rank1, dims.size()), dims, map, rank1, n), shape));
    }
    opt32->load_state_dict(start);
    Tensor grad = randn(shape, DType::f32, &g);
    if (s == 1) grad.view({-1}).narrow(0, 3, 1).fill_(std::numeric_limits<double>::quiet_NaN());  // skipped
    p4.set_grad(grad);
    p32.set_grad(grad.clone());
    opt4->step();
    opt32->step();
    ASSERT_EQ(p4.to_vector<float>(), p32.to_vector<float>()) << c.name << " step " << s;
    NamedTensors after4 = opt4->state_dict();
    for (const auto& [k, t] : opt32->state_dict()) {
      const std::string buffer = k.substr(2);
      if (buffer == "step" || k == "steps") continue;
      const Shape dims = rank1_dims(shape);
      const bool rank1 = is_unsigned(buffer) && !dims.empty();
      const auto map = is_unsigned(buffer) ? quant::QuantMap4::linear_unsigned : quant::QuantMap4::dynamic_signed;
      const Plain4 want = encode_plain(t.to_vector<float>(), dims, map, rank1);
      const Plain4 got = plain_of(after4, buffer, rank1, dims.size());
      ASSERT_EQ(got.codes, want.codes) << c.name << " " << buffer << " step " << s;
      ASSERT_EQ(got.absmax, want.absmax) << c.name << " " << buffer;
      ASSERT_EQ(got.maxima, want.maxima) << c.name << " " << buffer;
    }
  }
}

TEST(Optim4bit, StepEqualsA32BitStepAndThePlainEncoding) {
  for (const OptCase& c : cases())
    // Block-wise only: 1 dim, a [1, n], rank-1 scales that would cost more than blocks. Rank-1:
    // 2 and 3 dims, and a dim of extent 1 (squeezed).
    for (Shape s : {Shape{5001}, Shape{1, 4099}, Shape{64, 97}, Shape{2500, 2}, Shape{256, 300}, Shape{4, 130, 141},
                    Shape{256, 1, 300}})
      check_exact(c, s, 3);
}

TEST(Optim4bit, StateLayoutAndMemory) {
  Tensor w = zeros({512, 256}).requires_grad_(true), b = zeros({8192}).requires_grad_(true);
  Tensor small = zeros({100}).requires_grad_(true);
  Adam adam({{"w", w}, {"b", b}, {"small", small}}, AdamOptions(1e-3), StateOptions().state_bits(4));
  EXPECT_EQ(adam.num_4bit_params(), 2);  // "small" is below min_8bit_size: 32-bit
  EXPECT_EQ(adam.num_8bit_params(), 0);
  NamedTensors sd = adam.state_dict();
  auto shape_of = [&](const std::string& key) {
    for (const auto& [k, t] : sd)
      if (k == key) return t.shape();
    ADD_FAILURE() << "no key " << key;
    return Shape{};
  };
  EXPECT_EQ(shape_of("w.exp_avg.codes"), (Shape{512 * 256 / 2}));
  EXPECT_EQ(shape_of("w.exp_avg.absmax"), (Shape{512 * 256 / 128}));
  EXPECT_EQ(shape_of("w.exp_avg_sq.max0"), (Shape{512}));  // rank-1: a scale per row and column
  EXPECT_EQ(shape_of("w.exp_avg_sq.max1"), (Shape{256}));
  EXPECT_EQ(shape_of("b.exp_avg_sq.absmax"), (Shape{8192 / 128}));  // 1-dim: block-wise
  EXPECT_EQ(shape_of("small.exp_avg_sq"), (Shape{100}));
  // Per parameter and buffer: half a byte, plus the scales and the 16-value maps.
  const double n = 512 * 256 + 8192;
  const double bytes = static_cast<double>(adam.state_bytes()) - 2 * 100 * 4;
  const double want = n + 4.0 * (512 * 256 / 128 + 512 + 256 + 2 * 8192 / 128) + 4 * 16 * 4;
  EXPECT_DOUBLE_EQ(bytes, want);
  EXPECT_LT(bytes / (2 * n), 0.5 + 4.0 / 128);  // block-wise first moments: 4 bytes per 128
  // More than 8 dims of extent > 1: block-wise (the kernels take rank-1 over at most 8).
  Tensor deep = zeros(Shape(9, 4)).requires_grad_(true);
  Adam many({{"d", deep}}, AdamOptions(1e-3), StateOptions().state_bits(4));
  deep.set_grad(ones(Shape(9, 4)));
  many.step();
  bool blockwise = false;
  for (const auto& [k, t] : many.state_dict()) blockwise |= k == "d.exp_avg_sq.absmax";
  EXPECT_TRUE(blockwise);
}

TEST(Optim4bit, CheckpointRoundTripContinuesExactly) {
  for (const OptCase& c : cases()) testing::expect_resume_is_exact(c, StateOptions().state_bits(4));
}

TEST(Optim4bit, WrongCheckpointsAndOptionsAreErrors) {
  Tensor w = zeros({64, 128}).requires_grad_(true);
  Adam eight({{"w", w}}, AdamOptions(1e-3), StateOptions().state_bits(8));
  Adam four({{"w", w}}, AdamOptions(1e-3), StateOptions().state_bits(4));
  EXPECT_THROW(four.load_state_dict(eight.state_dict()), Error);
  EXPECT_THROW(eight.load_state_dict(four.state_dict()), Error);
  // A checkpoint whose map values are not the buffer's map.
  NamedTensors sd = four.state_dict();
  for (auto& [k, t] : sd)
    if (k == "w.exp_avg.map") t = from_vector<float>(std::vector<float>(16, 0.5f), {16});
  const std::string msg = [&] {
    try {
      four.load_state_dict(sd);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("exp_avg"), std::string::npos) << msg;
  // A corrupt scale (NaN, negative) is an Error naming its key, not NaN state.
  for (const char* key : {"w.exp_avg.absmax", "w.exp_avg_sq.absmax"}) {
    NamedTensors bad = four.state_dict();
    for (auto& [k, t] : bad)
      if (k == key) t.view({-1}).narrow(0, 1, 1).fill_(k == "w.exp_avg.absmax" ? std::nan("") : -1.0);
    try {
      four.load_state_dict(bad);
      ADD_FAILURE() << key << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key + 2), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Adam({{"w", w}}, AdamOptions(1e-3), StateOptions().state_bits(5)), Error);
  Tensor d = zeros({64, 128}, DType::f64).requires_grad_(true);
  Adam f64({{"d", d}}, AdamOptions(1e-3), StateOptions().state_bits(4));  // f64 keeps 32-bit state
  d.set_grad(ones({64, 128}, DType::f64));
  f64.step();
  EXPECT_EQ(f64.num_4bit_params(), 0);
}

// A state over a range of the parameter (a shard of Optimizer::shard_state) encodes that range of
// the whole state, bit for bit, once its rank-1 maxima are max-merged with the other ranges': two
// "ranks" as threads here, exchanging through Shard::max_over_ranks (across processes in
// tests/dist/test_dist_zero.cpp). A range that does not start on a block is an Error.
TEST(Optim4bit, ShardsOfAStateEncodeAsTheWholeState) {
  const Shape shape{24, 24, 24};  // 13824 elements, 108 blocks; rank-1, as 72 scales * 128 <= 13824
  ASSERT_EQ(rank1_dims(shape).size(), 3u);
  const int64_t n = 24 * 24 * 24, cut = 40 * kBlock;
  Generator gen(5);
  const Tensor p = randn(shape, {}, &gen);
  std::vector<Tensor> grads;
  for (int step = 0; step < 3; ++step) grads.push_back(randn({n}, {}, &gen));
  // Moments of g, as Adam's: the update sees the block's elements at its state's offset.
  auto run = [&](LowBitState& st, int64_t offset, const Tensor& g) {
    st.for_each_block(BlockUpdate<float>([&](const StateBlock<float>& b) {
      for (int64_t i = 0; i < b.n; ++i) {
        const float gi = g.data<float>()[offset + b.begin + i];
        b.buffer(0)[i] = 0.9f * b.buffer(0)[i] + 0.1f * gi;
        b.buffer(1)[i] = 0.99f * b.buffer(1)[i] + 0.01f * gi * gi;
      }
    }));
  };
  LowBitState whole(p, {"exp_avg", "exp_avg_sq"}, {true, false});
  std::barrier sync(2);
  std::array<std::vector<Tensor>*, 2> slots{};
  auto exchange = [&](int r) {
    return [&, r](std::vector<Tensor>& maxima) {
      slots[static_cast<size_t>(r)] = &maxima;
      sync.arrive_and_wait();  // both ranks' maxima are in
      std::vector<Tensor> merged;
      for (size_t k = 0; k < maxima.size(); ++k) merged.push_back(maximum((*slots[0])[k], (*slots[1])[k]));
      sync.arrive_and_wait();  // both have read both
      maxima = merged;
    };
  };
  LowBitState first(p, {"exp_avg", "exp_avg_sq"}, {true, false}, {0, cut, exchange(0)});
  LowBitState second(p, {"exp_avg", "exp_avg_sq"}, {true, false}, {cut, n, exchange(1)});
  EXPECT_TRUE(first.collective());
  EXPECT_FALSE(whole.collective());
  for (const Tensor& g : grads) {
    run(whole, 0, g);
    std::thread other([&] { run(second, cut, g); });
    run(first, 0, g);
    other.join();
  }
  auto bytes = [](const Tensor& t, int64_t from, int64_t count) {
    const uint8_t* b = static_cast<const uint8_t*>(t.raw_data()) + from * static_cast<int64_t>(dtype_size(t.dtype()));
    return std::vector<uint8_t>(b, b + count * static_cast<int64_t>(dtype_size(t.dtype())));
  };
  for (size_t i = 0; i < 2; ++i) {
    const LowBitState::Buffer &w = whole.buffer(i), &a = first.buffer(i), &b = second.buffer(i);
    EXPECT_EQ(bytes(a.codes, 0, cut / 2), bytes(w.codes, 0, cut / 2)) << i;
    EXPECT_EQ(bytes(b.codes, 0, (n - cut) / 2), bytes(w.codes, cut / 2, (n - cut) / 2)) << i;
    if (!w.rank1) {
      EXPECT_EQ(bytes(a.absmax, 0, cut / kBlock), bytes(w.absmax, 0, cut / kBlock));
      EXPECT_EQ(bytes(b.absmax, 0, b.absmax.numel()), bytes(w.absmax, cut / kBlock, b.absmax.numel()));
      continue;
    }
    for (size_t d = 0; d < 3; ++d) {
      EXPECT_EQ(bytes(a.maxima[d], 0, a.maxima[d].numel()), bytes(w.maxima[d], 0, w.maxima[d].numel())) << d;
      EXPECT_EQ(bytes(b.maxima[d], 0, b.maxima[d].numel()), bytes(w.maxima[d], 0, w.maxima[d].numel())) << d;
    }
  }
  EXPECT_TRUE(whole.buffer(1).rank1);
  EXPECT_THROW(LowBitState(p, {"exp_avg"}, {true}, {kBlock / 2, n, {}}), Error);
  EXPECT_THROW(LowBitState(p, {"exp_avg"}, {true}, {0, n + 1, {}}), Error);
}

// Linear regression y = X w* with Adam at 32 and 4 bits: both reach a small loss.
TEST(Optim4bit, TrainsALinearModelAs32BitDoes) {
  Generator g(1);
  const Tensor x = randn({256, 64}, DType::f32, &g), w_true = randn({64, 80}, DType::f32, &g);
  const Tensor y = matmul(x, w_true);
  double final_loss[2] = {0, 0};
  for (int bits : {32, 4}) {
    Tensor w = zeros({64, 80}).requires_grad_(true);
    Adam opt({{"w", w}}, AdamOptions(0.05), StateOptions().state_bits(bits));
    for (int step = 0; step < 300; ++step) {
      Tensor loss = mse_loss(matmul(x, w), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      final_loss[bits == 4] = loss.item<double>();
    }
  }
  EXPECT_LT(final_loss[0], 1e-2);
  EXPECT_LT(final_loss[1], 1e-2) << "32-bit reached " << final_loss[0];
}

}  // namespace
}  // namespace octet
