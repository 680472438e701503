#include "tools/cli/sweep.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>

#include "core/octet.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "models/lstm_lm.h"
#include "tools/cli/sweep_detail.h"

namespace octet::cli {

// The trainer library is what every subcommand drives.
using namespace octet::train;

namespace detail {

SweepModel open_sweep_model(const std::string& path, const SweepOptions& opts, const std::string& command) {
  OCTET_CHECK(opts.repeats >= 1 && opts.steps >= 1, command, ": --repeats and --steps must be >= 1");
  OCTET_CHECK(opts.limit >= 0, command, ": --limit must be >= 0, got ", opts.limit);
  SweepModel s;
  s.m = open_checkpoint_model(path, opts.threads, opts.device, command);
  if (opts.limit > 0)
    s.m.recipe = parse_stored_recipe(s.m.checkpoint.recipe_yaml, s.m.path + " (recipe)",
                                     {"data.limit_test=" + std::to_string(opts.limit)});
  s.task = make_task(s.m.recipe, s.m.device, false, &s.m.checkpoint, opts.data_root);
  s.example = s.task->example_input();
  s.lm = is_language_model(s.m.recipe);
  const std::string final_layer = quant::final_layer_name(*s.m.model);
  for (const auto& l : quant::quantizable_layers(*s.m.model))
    if (opts.all_layers || l.name != final_layer) s.layers.push_back(l.name);
  OCTET_CHECK(!s.layers.empty(), command, ": ", s.m.path, " has no quantizable layer (Linear or LSTM)",
              opts.all_layers ? "" : " but its final output layer; --all-layers converts that one too");
  return s;
}

quant::PrecisionPlan plan_for(const SweepModel& m, const quant::LayerPrecision& spec) {
  quant::PrecisionPlan plan;
  for (const auto& name : m.layers) plan.layers[name] = spec;
  for (const auto& l : quant::quantizable_layers(*m.m.model)) plan.layers.emplace(l.name, std::nullopt);
  plan.source = "sweep";
  return plan;
}

float round_to_half(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a < 6.103515625e-05f)  // below 2^-14, half's subnormals: multiples of 2^-24 (exact in float)
    return std::nearbyint(x * 16777216.0f) / 16777216.0f;
  // Keep 10 of float's 23 mantissa bits, rounding the 13 dropped ones to nearest, ties to even.
  uint32_t bits = std::bit_cast<uint32_t>(x);
  bits += 0x0FFFu + ((bits >> 13) & 1u);
  bits &= ~0x1FFFu;
  const float r = std::bit_cast<float>(bits);
  return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
}

HalfWeights::HalfWeights(const SweepModel& m) {
  NoGradGuard ng;
  std::vector<Tensor> weights;
  for (const auto& [name, mod] : m.m.model->named_modules()) {
    if (std::find(m.layers.begin(), m.layers.end(), name) == m.layers.end()) continue;
    if (auto* fc = dynamic_cast<Linear*>(mod.get())) weights.push_back(fc->weight_);
    if (auto* lstm = dynamic_cast<LSTM*>(mod.get())) {
      weights.insert(weights.end(), lstm->weight_ih_.begin(), lstm->weight_ih_.end());
      weights.insert(weights.end(), lstm->weight_hh_.begin(), lstm->weight_hh_.end());
    }
  }
  for (Tensor& w : weights) {
    saved_.emplace_back(w, w.clone());
    Tensor host = w.to(Device::cpu()).contiguous().clone();
    float* p = host.data<float>();
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = round_to_half(p[i]);
    w.copy_(host.to(w.device()));
  }
}

void HalfWeights::restore() {
  NoGradGuard ng;
  for (auto& [w, original] : saved_) w.copy_(original);
  saved_.clear();
}

double batch1_latency(Module& model, const Tensor& example, Device device, const SweepOptions& o) {
  NoGradGuard ng;
  model.eval();
  const Tensor x = example.to(device);
  auto* lm = dynamic_cast<LstmLm*>(&model);
  auto block = [&] {
    LstmState state;
    Tensor out;
    for (int64_t s = 0; s < o.steps; ++s) {
      if (lm) {
        auto [logits, next] = lm->forward(x, state);
        state = next, out = logits;
      } else {
        out = model(x);
      }
    }
    // Reading one output element back waits for a GPU.
    (void)out.reshape({-1}).narrow(0, 0, 1).to(Device::cpu());
  };
  block();
  std::vector<double> times;
  for (int64_t r = 0; r < o.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    block();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    static_cast<double>(o.steps));
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

EvalResult evaluate(SweepModel& m, EvalResult* first) {
  const std::vector<EvalResult> splits = m.task->evaluate_all(*m.m.model);
  if (first) *first = splits.front();
  return splits.back();
}

}  // namespace detail

quant::PbConfig pb_config_for(int w_bits, int a_bits, const std::string& scheme) {
  quant::PbConfig c{w_bits, a_bits, true};
  c.scheme = quant::parse_pb_scheme(scheme, "sweep --scheme");
  return c;
}

SweepResult run_sweep(const std::string& path, const SweepOptions& opts) {
  // The command line's values: a usage error (exit 2) before the checkpoint is read.
  OCTET_USAGE_CHECK(!opts.w_bits.empty() && !opts.a_bits.empty(),
                    "sweep: give at least one weight and activation width");
  OCTET_USAGE_CHECK(!opts.schemes.empty(), "sweep --scheme: give at least one scheme (octet, paper)");
  as_usage_error([&] {
    for (const std::string& s : opts.schemes)
      for (int w : opts.w_bits)
        for (int a : opts.a_bits) quant::check_pb_config(pb_config_for(w, a, s), "sweep --w-bits/--a-bits");
  });
  for (int n : opts.same_bits)
    OCTET_USAGE_CHECK(n >= 1 && n <= quant::kPbMaxWeightBits, "sweep --same-bits: expected bits in 1..",
                      quant::kPbMaxWeightBits, ", got ", n);
  detail::SweepModel s = detail::open_sweep_model(path, opts, "sweep");
  SweepResult r;
  r.checkpoint = s.m.path;
  r.device = s.m.device.str();
  r.lm = s.lm;
  for (const auto& l : quant::quantizable_layers(*s.m.model)) {
    const bool converted = std::find(s.layers.begin(), s.layers.end(), l.name) != s.layers.end();
    r.layers += (r.layers.empty() ? "" : ", ") + l.name + (converted ? ": quantized" : ": float");
  }

  // One row per configuration; `prepare` sets the model up (and returns what undoes it, if anything).
  struct Config {
    SweepRow row;
    std::optional<quant::QuantSpec> spec;  // nullopt: float weights (FP32, 16-bit weights)
    bool half = false;
  };
  std::vector<Config> configs;
  auto add = [&](std::string method, std::string name, int w, int a, std::optional<quant::QuantSpec> spec,
                 bool half = false) {
    SweepRow row;
    row.method = std::move(method), row.config = std::move(name), row.w_bits = w, row.a_bits = a;
    configs.push_back({row, spec, half});
  };
  add("FP32", "fp32", 32, 32, std::nullopt);
  add("int8", "int8", 8, 8, quant::QuantSpec::int8());
  for (int n : opts.same_bits)  // 1 bit: activations on 3 levels, the kernel's a = 2
    add("W = A", "w" + std::to_string(n) + "a" + std::to_string(n), n, n,
        quant::QuantSpec::pbatch(pb_config_for(n, std::max(n, quant::kPbMinActivationBits), "octet")));
  if (opts.w16) add("16-bit weights", "w16", 16, 32, std::nullopt, true);
  for (const std::string& scheme : opts.schemes)
    for (int w : opts.w_bits)
      for (int a : opts.a_bits) {
        const quant::QuantSpec spec = quant::QuantSpec::pbatch(pb_config_for(w, a, scheme));
        add(scheme == "octet" ? "PrecisionBatching" : "PrecisionBatching (paper scheme)", spec.name(), w, a, spec);
      }

  // A kernel configuration met twice (w8a8 as W = A and in the grid) is evaluated once.
  std::map<std::string, SweepRow> done;
  for (Config& c : configs) {
    const std::string key = c.spec ? c.spec->name() : c.row.config;
    if (auto it = done.find(key); it != done.end()) {
      c.row.result = it->second.result, c.row.latency_s = it->second.latency_s;
    } else {
      std::optional<detail::HalfWeights> half;
      if (c.spec) {
        quant::convert_model(*s.m.model, detail::plan_for(s, *c.spec));
      } else {
        quant::reset_to_float(*s.m.model);
        if (c.half) half.emplace(s);
      }
      c.row.result = detail::evaluate(s);
      c.row.latency_s = detail::batch1_latency(*s.m.model, s.example, s.m.device, opts);
      done[key] = c.row;
    }
    spdlog::info("{} {}: {} {:.4g}, batch-1 latency {:.1f} us", c.row.method, c.row.config, detail::quality_name(r.lm),
                 r.quality(c.row), 1e6 * c.row.latency_s);
    r.rows.push_back(c.row);
  }
  quant::reset_to_float(*s.m.model);
  finish_rows(r);
  return r;
}

void finish_rows(SweepResult& r) {
  double fp32 = 0, int8 = 0;
  for (const auto& row : r.rows) {
    if (row.config == "fp32") fp32 = row.latency_s;
    if (row.config == "int8") int8 = row.latency_s;
  }
  for (auto& row : r.rows) {
    row.speedup = fp32 > 0 && row.latency_s > 0 ? fp32 / row.latency_s : 0;
    row.speedup_int8 = int8 > 0 && row.latency_s > 0 ? int8 / row.latency_s : 0;
  }
  mark_pareto(r);
}

void mark_pareto(SweepResult& r) {
  // b beats a when it is no slower and no worse, and better in one of the two.
  auto better_or_equal = [&](const SweepRow& b, const SweepRow& a) {
    return r.lm ? r.quality(b) <= r.quality(a) : r.quality(b) >= r.quality(a);
  };
  for (auto& a : r.rows) {
    a.pareto = true;
    for (const auto& b : r.rows)
      if (&a != &b && b.latency_s <= a.latency_s && better_or_equal(b, a) &&
          (b.latency_s < a.latency_s || r.quality(b) != r.quality(a)))
        a.pareto = false;
  }
}

}  // namespace octet::cli
