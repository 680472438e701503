#include "tools/cli/sweep.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/octet.h"
#include "models/lstm_lm.h"
#include "tools/train/metrics.h"
#include "tools/train/trainer.h"

namespace octet::cli {

// The trainer library is what every subcommand drives.
using namespace octet::train;

namespace {

// Median over `repeats` blocks of the mean time of one batch-1 forward (a language model: one
// token, the state carried), after a warm-up block. Reading one output element back waits for a GPU.
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

std::string quality_name(const SweepResult& r) { return r.lm ? "perplexity" : "top-1 (%)"; }

}  // namespace

SweepResult run_sweep(const std::string& path, const SweepOptions& opts) {
  OCTET_CHECK(opts.repeats >= 1 && opts.steps >= 1, "sweep: repeats and steps must be >= 1");
  OCTET_CHECK(!opts.w_bits.empty() && !opts.a_bits.empty(), "sweep: give at least one weight and activation width");
  for (int w : opts.w_bits)
    for (int a : opts.a_bits) quant::check_pb_config(quant::PbConfig{w, a, true}, "sweep --w-bits/--a-bits");
  CheckpointModel m = open_checkpoint_model(path, opts.threads, opts.device, "sweep");
  std::unique_ptr<Task> task = make_task(m.recipe, m.device, false, &m.checkpoint, opts.data_root);
  const Tensor example = task->example_input();
  SweepResult r;
  r.checkpoint = m.path;
  r.device = m.device.str();
  r.lm = is_language_model(m.recipe);
  std::vector<std::pair<std::string, std::optional<quant::QuantSpec>>> configs{{"fp32", std::nullopt},
                                                                               {"int8", quant::QuantSpec::int8()}};
  for (int w : opts.w_bits)
    for (int a : opts.a_bits) {
      quant::QuantSpec s = quant::QuantSpec::pbatch(quant::PbConfig{w, a, true});
      configs.emplace_back(s.name(), s);
    }
  for (const auto& [name, spec] : configs) {
    if (spec) {
      auto layers = quant::convert_model(*m.model, quant::uniform_plan(*spec));
      if (r.layers.empty())
        for (const auto& l : layers)
          r.layers += (r.layers.empty() ? "" : ", ") + l.name + (l.precision ? ": quantized" : ": float");
    } else {
      quant::reset_to_float(*m.model);
    }
    SweepRow row;
    row.config = name;
    row.result = task->evaluate_all(*m.model).back();
    row.latency_s = batch1_latency(*m.model, example, m.device, opts);
    spdlog::info("{}: {} {:.4g}, batch-1 latency {:.1f} us", name, quality_name(r), r.quality(row),
                 1e6 * row.latency_s);
    r.rows.push_back(row);
  }
  for (auto& row : r.rows) row.speedup = r.rows[0].latency_s / row.latency_s;
  quant::reset_to_float(*m.model);
  mark_pareto(r);
  return r;
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

std::string sweep_markdown(const SweepResult& r) {
  std::string s = "| config | " + quality_name(r) + " | loss | batch-1 latency (us/" + (r.lm ? "token" : "sample") +
                  ") | speedup vs FP32 | Pareto |\n|---|---:|---:|---:|---:|:-:|\n";
  char buf[256];
  for (const auto& row : r.rows) {
    std::snprintf(buf, sizeof(buf), "| %s | %.2f | %.4f | %.1f | %.2fx | %s |\n", row.config.c_str(), r.quality(row),
                  row.result.loss, 1e6 * row.latency_s, row.speedup, row.pareto ? "*" : "");
    s += buf;
  }
  return s;
}

std::string sweep_csv(const SweepResult& r) {
  std::string s = "config,quality_metric,quality,loss,latency_s,speedup,pareto\n";
  char buf[256];
  for (const auto& row : r.rows) {
    std::snprintf(buf, sizeof(buf), "%s,%s,%.6g,%.6g,%.6g,%.4f,%d\n", row.config.c_str(), r.lm ? "perplexity" : "top1",
                  r.quality(row), row.result.loss, row.latency_s, row.speedup, row.pareto ? 1 : 0);
    s += buf;
  }
  return s;
}

std::string sweep_html(const SweepResult& r) {
  ChartSeries all{"configurations", "#1f77b4", {}, false, {}}, front{"Pareto front", "#d62728", {}, true, {}};
  std::vector<const SweepRow*> on_front;
  for (const auto& row : r.rows) {
    all.points.emplace_back(1e6 * row.latency_s, r.quality(row));
    all.labels.push_back(row.config);
    if (row.pareto) on_front.push_back(&row);
  }
  std::sort(on_front.begin(), on_front.end(), [](auto* a, auto* b) { return a->latency_s < b->latency_s; });
  for (const SweepRow* row : on_front) front.points.emplace_back(1e6 * row->latency_s, r.quality(*row));
  std::string html =
      "<!doctype html><html><head><meta charset='utf-8'><title>octet sweep</title><style>"
      "body{font-family:sans-serif;margin:20px}figure{display:inline-block;margin:8px}"
      "figcaption{font-weight:bold}td,th{padding:2px 8px}</style></head><body><h2>" +
      r.checkpoint + " on " + r.device + "</h2><p>quantized layers: " + r.layers + "</p>";
  html += svg_chart(quality_name(r) + " against batch-1 latency", {all, front},
                    std::string("latency (us per ") + (r.lm ? "token)" : "sample)"));
  html += "<table><tr><th>config</th><th>" + quality_name(r) +
          "</th><th>latency (us)</th><th>speedup</th><th>Pareto</th></tr>";
  char buf[256];
  for (const auto& row : r.rows) {
    std::snprintf(buf, sizeof(buf), "<tr><td>%s</td><td>%.2f</td><td>%.1f</td><td>%.2fx</td><td>%s</td></tr>",
                  row.config.c_str(), r.quality(row), 1e6 * row.latency_s, row.speedup, row.pareto ? "*" : "");
    html += buf;
  }
  return html + "</table></body></html>\n";
}

std::vector<std::string> write_sweep(const std::string& dir, const SweepResult& r) {
  std::filesystem::create_directories(dir);
  const std::string csv = (std::filesystem::path(dir) / "sweep.csv").string();
  const std::string html = (std::filesystem::path(dir) / "sweep.html").string();
  write_file_atomic(csv, sweep_csv(r));
  write_file_atomic(html, sweep_html(r));
  return {csv, html};
}

}  // namespace octet::cli
