#include "tools/train/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/serialization.h"

namespace octet::train {

namespace {

using Series = ChartSeries;

// The keys of MetricRecord::values that count things.
const std::set<std::string> kCountKeys = {"step", "skipped_steps", "save_failures", "world_size"};

Series series_of(const std::vector<MetricRecord>& records, const std::string& split, const std::string& key,
                 const std::string& name, const std::string& color) {
  Series s{name, color, {}, true, {}};
  for (const auto& r : records) {
    if (r.split != split) continue;
    auto e = r.values.find("epoch");
    auto v = r.values.find(key);
    if (e != r.values.end() && v != r.values.end()) s.points.emplace_back(e->second, v->second);
  }
  return s;
}

// INT8 runs (records of split "int8", tools/train/int8_run.h): per-layer d_c, DCLR lr factor and
// gradient clip of the layers whose d_c peaked highest (all layers would crowd the legend).
void int8_charts(std::ostream& os, const std::vector<MetricRecord>& records) {
  constexpr size_t kMaxLayers = 8;
  const std::string kSuffix = ".cos_distance";
  std::map<std::string, double> peak;  // layer -> largest d_c seen
  for (const auto& r : records) {
    if (r.split != "int8") continue;
    for (const auto& [k, v] : r.values) {
      if (k.size() <= kSuffix.size() || k.compare(k.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) continue;
      double& p = peak.try_emplace(k.substr(0, k.size() - kSuffix.size()), -1.0).first->second;
      if (std::isfinite(v)) p = std::max(p, v);
    }
  }
  if (peak.empty()) return;
  std::vector<std::pair<std::string, double>> layers(peak.begin(), peak.end());
  std::stable_sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (layers.size() > kMaxLayers) layers.resize(kMaxLayers);
  static const char* kColors[kMaxLayers] = {"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c",
                                            "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  auto charted = [&](const std::string& stat) {
    std::vector<Series> out;
    for (size_t i = 0; i < layers.size(); ++i)
      out.push_back(series_of(records, "int8", layers[i].first + "." + stat, layers[i].first, kColors[i]));
    return out;
  };
  const std::string which = peak.size() > layers.size() ? detail::str_cat(" (the ", layers.size(), " of ", peak.size(),
                                                                          " INT8 layers with the largest d_c)")
                                                        : std::string(" (INT8 layers)");
  os << "<h3>INT8 layers</h3>";
  os << svg_chart("gradient cosine distance d_c" + which, charted("cos_distance"));
  os << svg_chart("DCLR lr factor" + which, charted("lr_scale"));
  os << svg_chart("gradient clip" + which, charted("grad_clip"));
}

}  // namespace

namespace {

// One line of metrics.jsonl as a record; false when it is not a JSON object.
bool parse_record(const std::string& line, MetricRecord& r) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "split") {
      if (it.value().is_string()) r.split = it.value().get<std::string>();
    } else if (it.value().is_number()) {
      r.values[it.key()] = it.value().get<double>();  // null (a non-finite value) is left out
    }
  }
  return true;
}

}  // namespace

std::vector<MetricRecord> read_metrics(const std::string& path, bool repair) {
  std::string data;
  {
    std::ifstream in(path, std::ios::binary);
    OCTET_CHECK(in.good(), "metrics: cannot read ", path);
    data.assign(std::istreambuf_iterator<char>(in), {});
    OCTET_CHECK(!in.bad(), "metrics: cannot read ", path);
  }
  std::vector<MetricRecord> records;
  size_t bad = 0, first_bad = 0, line_no = 0, at = 0;
  while (at < data.size()) {
    size_t end = data.find('\n', at);
    const bool last_partial = end == std::string::npos;  // no newline: a write cut short by a kill
    if (last_partial) end = data.size();
    std::string line = data.substr(at, end - at);
    ++line_no;
    MetricRecord r;
    if (!line.empty() && line.find_first_not_of(" \t\r") != std::string::npos) {
      if (parse_record(line, r)) {
        records.push_back(std::move(r));
        if (last_partial && repair) {  // a whole record missing only its newline (an editor's save)
          std::ofstream out(path, std::ios::binary | std::ios::app);
          out << "\n";
          OCTET_CHECK(out.good(), "metrics: cannot end the last line of ", path);
        }
      } else if (last_partial) {
        spdlog::warn("{}: dropped a partial last line ({} bytes), left by a run stopped while writing it", path,
                     line.size());
        if (repair) {  // appends start on a line of their own
          std::error_code ec;
          std::filesystem::resize_file(path, at, ec);
          OCTET_CHECK(!ec, "metrics: cannot cut the partial last line from ", path, ": ", ec.message());
        }
      } else {
        if (bad++ == 0) first_bad = line_no;
      }
    }
    at = end + 1;
  }
  if (bad)
    spdlog::warn("{}: skipped {} line(s) that are not JSON objects (the first is line {})", path, bad, first_bad);
  return records;
}

MetricsLog::MetricsLog(const std::string& dir, bool resume) : dir_(dir) {
  std::filesystem::create_directories(dir);
  std::string path = dir + "/metrics.jsonl";
  if (resume && std::filesystem::exists(path)) records_ = read_metrics(path, true);
  out_.open(path, resume ? std::ios::app : std::ios::trunc);
  OCTET_CHECK(out_.good(), "metrics: cannot write ", path);
}

void MetricsLog::record(const MetricRecord& r) {
  nlohmann::json j;
  j["split"] = r.split;
  for (const auto& [k, v] : r.values) {
    if (!std::isfinite(v))
      j[k] = nullptr;
    else if (kCountKeys.count(k) && v == std::trunc(v) && std::abs(v) < 0x1p53)
      j[k] = static_cast<int64_t>(v);  // "step":30, not 30.0
    else
      j[k] = v;
  }
  out_ << j.dump() << "\n";
  out_.flush();
  records_.push_back(r);
}

std::string curves_html(const std::vector<MetricRecord>& records, const std::string& title) {
  std::ostringstream os;
  os << "<!doctype html><html><head><meta charset='utf-8'><title>" << title
     << "</title><style>body{font-family:sans-serif;margin:20px}figure{display:inline-block;margin:8px}"
        "figcaption{font-weight:bold}</style></head><body><h2>"
     << title << "</h2>";
  // Per split: train (per log interval), valid and test (per epoch; a language model's test once, at the end).
  auto splits = [&](const std::string& key) {
    return std::vector<Series>{series_of(records, "train", key, "train", "#1f77b4"),
                               series_of(records, "valid", key, "valid", "#ff7f0e"),
                               series_of(records, "test", key, "test", "#d62728")};
  };
  os << svg_chart("loss", splits("loss"));
  // Language models: perplexity, and top-1 is next-token accuracy.
  const bool lm = std::any_of(records.begin(), records.end(), [](const auto& r) { return r.values.count("ppl"); });
  if (lm) os << svg_chart("perplexity", splits("ppl"));
  os << svg_chart(lm ? "next-token top-1 accuracy (%)" : "top-1 accuracy (%)", splits("top1"));
  os << svg_chart("learning rate", {series_of(records, "train", "lr", "lr", "#2ca02c")});
  os << svg_chart(lm ? "tokens/s" : "samples/s",
                  {series_of(records, "train", lm ? "tokens_per_s" : "samples_per_s", "train", "#9467bd")});
  int8_charts(os, records);
  os << "</body></html>\n";
  return os.str();
}

void MetricsLog::write_curves() const {
  write_file_atomic(dir_ + "/curves.html", curves_html(records_, std::filesystem::path(dir_).filename().string()));
}

}  // namespace octet::train
