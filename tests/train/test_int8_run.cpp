// The trainer's side of INT8 layers (tools/train/int8_run.h) on hand-made layer states: DCLR through
// the run, d_c warnings once per crossing, the metrics record, TensorBoard scalars and
// curves, and the stats through a checkpoint file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/octet.h"
#include "optim/sgd.h"
#include "tests/data/temp_dir.h"
#include "tests/quant/int8_stats_util.h"
#include "tools/train/checkpoint.h"
#include "tools/train/int8_run.h"

namespace octet::train {
namespace {

using octet::testing::layer_with;
using octet::testing::set_backward;
using octet::testing::TempDir;
using octet::testing::two_layers;
using quant::Int8Layer;
using quant::Int8Module;

TEST(Int8Run, DclrThroughTheRun) {
  // The factors themselves: tests/optim/test_dclr.cpp. The run sets them for its layers.
  NamedTensors params = {{"conv_a.weight", zeros({4})}, {"conv_a.bias", zeros({2})}, {"conv_b.weight", zeros({4})}};
  SGD opt(params, SGDOptions(0.1));
  Int8Run run(two_layers());
  set_backward(run.layers()[0].layer->stats, 0.05);
  run.apply_dclr(opt);
  EXPECT_DOUBLE_EQ(opt.lr_scale("conv_a.bias"), std::exp(-1.0));
  EXPECT_DOUBLE_EQ(run.lr_scale(0), std::exp(-1.0));
  EXPECT_EQ(opt.lr_scale("conv_b.weight"), 1.0);
}

TEST(Int8Run, WarnsOncePerCrossing) {
  Int8Run run(two_layers());
  auto& a = run.layers()[0].layer->stats;
  auto& b = run.layers()[1].layer->stats;
  using Names = std::vector<std::string>;
  EXPECT_EQ(run.after_backward(1), Names{});  // NaN: no backward yet
  a.backward_steps = b.backward_steps = 1;
  a.cos_distance = 0.05, b.cos_distance = 0.02;
  EXPECT_EQ(run.after_backward(2), Names{});
  a.cos_distance = 0.15;
  EXPECT_EQ(run.after_backward(3), Names{"conv_a"});
  a.cos_distance = 0.2, b.cos_distance = 0.3;
  EXPECT_EQ(run.after_backward(4), Names{"conv_b"});  // conv_a still above: no second warning
  a.cos_distance = 0.01;
  EXPECT_EQ(run.after_backward(5), Names{});
  a.cos_distance = 0.11;
  EXPECT_EQ(run.after_backward(6), Names{"conv_a"});  // a new crossing
  run.layers()[1].layer->config.cos_distance_warn_ = 0.5;
  b.cos_distance = 0.6;
  EXPECT_EQ(run.after_backward(7), Names{});  // was above 0.3 > 0.1 before, and is above 0.5 now
  b.cos_distance = 0.2;
  EXPECT_EQ(run.after_backward(8), Names{});
  b.cos_distance = NAN;  // a non-finite gradient after backward passes: a crossing
  EXPECT_EQ(run.after_backward(9), Names{"conv_b"});
  b.cos_distance = 0.1;
  EXPECT_EQ(run.after_backward(10), Names{});
}

TEST(Int8Run, RecordScalarsAndCurves) {
  Int8Run run(two_layers());
  auto& a = run.layers()[0].layer->stats;
  set_backward(a, 0.05);
  a.grad_clip = 0.25f, a.input_clip = 3.0f, a.weight_clip = 0.5f;
  MetricRecord r = run.record(40, 0.5);
  EXPECT_EQ(r.split, "int8");
  EXPECT_EQ(r.values.at("step"), 40.0);
  EXPECT_EQ(r.values.at("epoch"), 0.5);
  EXPECT_EQ(r.values.at("conv_a.cos_distance"), 0.05);
  EXPECT_EQ(r.values.at("conv_a.grad_clip"), 0.25);
  EXPECT_EQ(r.values.at("conv_a.input_clip"), 3.0);
  EXPECT_EQ(r.values.at("conv_a.weight_clip"), 0.5);
  EXPECT_DOUBLE_EQ(r.values.at("conv_a.lr_scale"), std::exp(-1.0));
  EXPECT_TRUE(std::isnan(r.values.at("conv_b.cos_distance")));  // written as null
  EXPECT_EQ(r.values.at("conv_b.lr_scale"), 1.0);
  EXPECT_EQ(r.values.at("max_cos_distance"), 0.05);
  EXPECT_NE(run.summary().find("max d_c 0.05 (conv_a)"), std::string::npos) << run.summary();

  TempDir dir;
  {
    TensorBoardWriter tb(dir.path());
    run.add_scalars(tb, 40);
    tb.flush();
    std::vector<ScalarEvent> ev = read_scalar_events(tb.path());
    auto find = [&](const std::string& tag) {
      for (const auto& e : ev)
        if (e.tag == tag) return true;
      return false;
    };
    EXPECT_TRUE(find("int8_cos_distance/conv_a"));
    EXPECT_TRUE(find("int8_lr_scale/conv_b"));
    EXPECT_TRUE(find("int8_weight_clip/conv_a"));
    EXPECT_FALSE(find("int8_cos_distance/conv_b"));  // NaN is left out
  }

  // The curves show the INT8 layers with the largest d_c (at most 8 of them).
  std::vector<Int8Module> many;
  for (int i = 0; i < 10; ++i) many.push_back({"layer" + std::to_string(i), layer_with(0.01 * i), {}});
  std::vector<MetricRecord> records = {{"train", {{"step", 1}, {"epoch", 0.1}, {"loss", 2.0}}},
                                       Int8Run(many).record(1, 0.1)};
  std::string html = curves_html(records, "run");
  EXPECT_NE(html.find("gradient cosine distance d_c (the 8 of 10 INT8 layers with the largest d_c)"),
            std::string::npos);
  EXPECT_NE(html.find(">layer9<"), std::string::npos);
  // layer1 is a row of the heat map (every layer) and in no line chart's legend.
  const size_t first = html.find(">layer1</text>");
  ASSERT_NE(first, std::string::npos);
  EXPECT_LT(first, html.find("gradient cosine distance d_c (the 8"));
  EXPECT_EQ(html.find(">layer1</text>", first + 1), std::string::npos);
  EXPECT_EQ(curves_html({records[0]}, "run").find("INT8"), std::string::npos);  // float runs: no INT8 charts
}

TEST(Int8Run, StatsThroughACheckpoint) {
  Int8Run run(two_layers());
  auto& a = run.layers()[0].layer->stats;
  a = {.input_clip = 2.5f,
       .weight_clip = 0.125f,
       .grad_clip = 1e-3f,
       .cos_distance = 0.0123456789,
       .backward_steps = 1234,
       .searches = 13,
       .clip_ratio = 0.375f};
  TempDir dir;
  const std::string path = dir.path() + "/c.safetensors";
  save_checkpoint(path, {{"w", zeros({2})}}, {}, TrainState{}, "model: {}\n", run.state_dict());
  Checkpoint c = load_checkpoint(path);
  EXPECT_EQ(c.int8.size(), 14u);  // 7 stats x 2 layers

  Int8Run back(two_layers());
  back.load_state_dict(c.int8);
  const quant::Int8Stats& got = back.layers()[0].layer->stats;
  EXPECT_EQ(got.input_clip, 2.5f);
  EXPECT_EQ(got.weight_clip, 0.125f);
  EXPECT_EQ(got.grad_clip, 1e-3f);
  EXPECT_EQ(got.cos_distance, 0.0123456789);
  EXPECT_EQ(got.backward_steps, 1234);
  EXPECT_EQ(got.searches, 13);
  EXPECT_EQ(got.clip_ratio, 0.375f);
  EXPECT_TRUE(std::isnan(back.layers()[1].layer->stats.cos_distance));

  // Strict: a missing, unexpected or mistyped key is an error, and nothing changes.
  auto expect_error = [&](NamedTensors state, const std::string& fragment) {
    Int8Run fresh(two_layers());
    try {
      fresh.load_state_dict(state);
      FAIL() << "no error; expected one containing: " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_EQ(fresh.layers()[0].layer->stats.backward_steps, 0);
  };
  NamedTensors missing(c.int8.begin() + 1, c.int8.end());
  expect_error(missing, "missing '");
  NamedTensors extra = c.int8;
  extra.emplace_back("conv_z.grad_clip", scalar_tensor(1.0, DType::f32));
  expect_error(extra, "unexpected key 'conv_z.grad_clip'");
  NamedTensors typed = c.int8;
  for (auto& [k, t] : typed)
    if (k == "conv_a.backward_steps") t = scalar_tensor(3.0, DType::f32);
  expect_error(typed, "key 'conv_a.backward_steps' expected a i64 scalar");
  expect_error({}, "missing 'conv_a.input_clip'");
  // A checkpoint from before clip_ratio loads, with ratio 0 (the next backward pass searches).
  NamedTensors older;
  for (const auto& [k, t] : c.int8)
    if (k.find(".clip_ratio") == std::string::npos) older.emplace_back(k, t);
  Int8Run old_run(two_layers());
  old_run.load_state_dict(older);
  EXPECT_EQ(old_run.layers()[0].layer->stats.clip_ratio, 0.0f);
  EXPECT_EQ(old_run.layers()[0].layer->stats.backward_steps, 1234);
  // A data-parallel job's checkpoint: the stats each rank has of its own shard (max|x|, the DSGC
  // clip, the clip ratio) one per rank; process r takes element r, or r % n at another count.
  NamedTensors per_rank = c.int8;
  for (auto& [k, t] : per_rank)
    if (k == "conv_a.grad_clip") t = from_vector(std::vector<float>{1e-3f, 2e-3f, 3e-3f}, {3});
  for (int rank : {0, 1, 2, 3, 4}) {
    Int8Run r(two_layers());
    r.load_state_dict(per_rank, rank);
    EXPECT_EQ(r.layers()[0].layer->stats.grad_clip, (rank % 3 + 1) * 1e-3f) << rank;
    EXPECT_EQ(r.layers()[0].layer->stats.backward_steps, 1234);
  }
  auto with = [&](const std::string& key, const Tensor& value) {
    NamedTensors s = c.int8;
    for (auto& [k, t] : s)
      if (k == key) t = value;
    return s;
  };
  // Only those three may be per rank, as vectors of at least one element.
  expect_error(with("conv_a.backward_steps", from_vector(std::vector<int64_t>{3, 3}, {2})),
               "key 'conv_a.backward_steps' expected a i64 scalar, got");
  expect_error(with("conv_a.grad_clip", zeros({0})), "key 'conv_a.grad_clip' expected a f32 scalar or one per process");
  expect_error(with("conv_a.grad_clip", zeros({2, 1})), "expected a f32 scalar or one per process");
  expect_error(with("conv_a.clip_ratio", zeros({2}, TensorOptions(DType::f64))),
               "key 'conv_a.clip_ratio' expected a f32");
  // A checkpoint without INT8 stats still loads, with none.
  save_checkpoint(path, {{"w", zeros({2})}}, {}, TrainState{}, "model: {}\n");
  EXPECT_TRUE(load_checkpoint(path).int8.empty());
}

}  // namespace
}  // namespace octet::train
