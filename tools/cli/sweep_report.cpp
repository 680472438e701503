// The sweep's tables and files (tools/cli/sweep.h): the paper's table form, its Table II grid, CSV
// and the HTML chart.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "tools/cli/sweep.h"
#include "tools/cli/sweep_detail.h"
#include "tools/train/charts.h"

namespace octet::cli {

using namespace octet::train;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Appends the parts one by one: GCC 12 reports "literal" + std::string temporaries as overlapping
// memcpy (-Wrestrict, a false positive).
template <typename... Parts>
void append(std::string& s, const Parts&... parts) {
  (s.append(parts), ...);
}

std::string bits(int b) { return b <= 0 ? "per layer" : b >= 32 ? "32 (float)" : std::to_string(b); }

bool has(const SweepResult& r, const std::string& config) {
  return std::any_of(r.rows.begin(), r.rows.end(), [&](const SweepRow& x) { return x.config == config; });
}

}  // namespace

std::string sweep_markdown(const SweepResult& r) {
  const bool int8 = has(r, "int8");
  std::string s = "| method | config | W bits | A bits | " + detail::quality_name(r.lm) +
                  " | loss | batch-1 latency (us/" + (r.lm ? "token" : "sample") + ") | speedup vs FP32 |" +
                  (int8 ? " speedup vs int8 |" : "") + " Pareto |\n|---|---|---:|---:|---:|---:|---:|---:|" +
                  (int8 ? "---:|" : "") + ":-:|\n";
  for (const auto& row : r.rows) {
    append(s, "| ", row.method, " | ", row.config, " | ", bits(row.w_bits), " | ", bits(row.a_bits), " | ",
           fmt("%.2f", r.quality(row)), " | ", fmt("%.4f", row.result.loss), " | ", fmt("%.1f", 1e6 * row.latency_s),
           " | ", fmt("%.2fx", row.speedup), " |");
    if (int8) append(s, " ", fmt("%.2fx", row.speedup_int8), " |");
    append(s, row.pareto ? " * |\n" : "  |\n");
  }
  if (has(r, "w1a1"))
    s += "\nW = A = 1: the activations on 3 levels, round(x / max|x|) per row (the reference's 1-bit fake "
         "quantization), computed by the PrecisionBatching kernel at a = 2.";
  if (has(r, "w16"))
    s += "\n16-bit weights: rounded to IEEE half precision, FP32 arithmetic (no 16-bit kernel here: FP32's "
         "latency).";
  return s + (has(r, "w1a1") || has(r, "w16") ? "\n" : "");
}

std::string sweep_grid_markdown(const SweepResult& r) {
  std::set<std::string> methods;
  for (const auto& row : r.rows)
    if (row.method.rfind("PrecisionBatching", 0) == 0) methods.insert(row.method);
  std::string out;
  for (const std::string& method : methods) {
    std::set<int, std::greater<>> a_cols;
    std::set<int> w_rows;
    for (const auto& row : r.rows)
      if (row.method == method) a_cols.insert(row.a_bits), w_rows.insert(row.w_bits);
    for (const auto& row : r.rows)
      if (row.method == "W = A" || row.config == "w16" || row.config == "fp32") w_rows.insert(row.w_bits);
    auto cell = [&](auto&& match) {
      for (const auto& row : r.rows)
        if (match(row)) return fmt("%.2f", r.quality(row));
      return std::string("-");
    };
    out += "| " + method + ": " + detail::quality_name(r.lm) + " | A = 32 |";
    a_cols.erase(32);
    for (int a : a_cols) out += " A = " + std::to_string(a) + " |";
    out += " A = W (W = A baseline) |\n|---|---:|";
    for (size_t i = 0; i < a_cols.size(); ++i) out += "---:|";
    out += "---:|\n";
    for (int w : w_rows) {
      out += "| W = " + std::to_string(w) + " | ";
      out += cell([&](const SweepRow& x) {
        if (w == 32) return x.config == "fp32";
        if (w == 16) return x.config == "w16";
        return x.method == method && x.w_bits == w && x.a_bits == 32;
      });
      out += " |";
      for (int a : a_cols)
        append(out, " ", cell([&](const SweepRow& x) { return x.method == method && x.w_bits == w && x.a_bits == a; }),
               " |");
      append(out, " ", cell([&](const SweepRow& x) {
               return w == 32 ? x.config == "fp32" : x.method == "W = A" && x.w_bits == w;
             }),
             " |\n");
    }
    out += "\n";
  }
  return out;
}

std::string sweep_csv(const SweepResult& r) {
  std::string s = "method,config,w_bits,a_bits,quality_metric,quality,loss,latency_s,speedup,speedup_int8,pareto\n";
  char buf[512];
  for (const auto& row : r.rows) {
    std::snprintf(buf, sizeof(buf), "%s,%s,%d,%d,%s,%.6g,%.6g,%.6g,%.4f,%.4f,%d\n", row.method.c_str(),
                  row.config.c_str(), row.w_bits, row.a_bits, r.lm ? "perplexity" : "top1", r.quality(row),
                  row.result.loss, row.latency_s, row.speedup, row.speedup_int8, row.pareto ? 1 : 0);
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
  const std::string q = detail::quality_name(r.lm);
  std::string html =
      "<!doctype html><html><head><meta charset='utf-8'><title>octet sweep</title><style>"
      "body{font-family:sans-serif;margin:20px}figure{display:inline-block;margin:8px;vertical-align:top}"
      "figcaption{font-weight:bold}td,th{padding:2px 8px}</style></head><body><h2>" +
      r.checkpoint + " on " + r.device + "</h2><p>quantized layers: " + r.layers + "</p>";
  html += svg_chart(q + " against batch-1 latency", {all, front},
                    std::string("latency (us per ") + (r.lm ? "token)" : "sample)"));
  html += "<table><tr><th>method</th><th>config</th><th>W</th><th>A</th><th>" + q +
          "</th><th>latency (us)</th><th>speedup</th><th>Pareto</th></tr>";
  for (const auto& row : r.rows)
    html += "<tr><td>" + row.method + "</td><td>" + row.config + "</td><td>" + std::to_string(row.w_bits) +
            "</td><td>" + std::to_string(row.a_bits) + "</td><td>" + fmt("%.2f", r.quality(row)) + "</td><td>" +
            fmt("%.1f", 1e6 * row.latency_s) + "</td><td>" + fmt("%.2fx", row.speedup) + "</td><td>" +
            (row.pareto ? "*" : "") + "</td></tr>";
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
