#include "tools/train/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>

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

// "layer10" after "layer9": names compared with their runs of digits as numbers (the order of the
// INT8 layers a page gets without the run's list of them).
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i1 = i, j1 = j;
      while (i1 < a.size() && std::isdigit(static_cast<unsigned char>(a[i1]))) ++i1;
      while (j1 < b.size() && std::isdigit(static_cast<unsigned char>(b[j1]))) ++j1;
      const std::string da = a.substr(i, i1 - i), db = b.substr(j, j1 - j);
      const size_t za = std::min(da.find_first_not_of('0'), da.size()),
                   zb = std::min(db.find_first_not_of('0'), db.size());
      const std::string_view na(da.data() + za, da.size() - za), nb(db.data() + zb, db.size() - zb);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i1, j = j1;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// The d_c of every INT8 layer (rows: the run's order of them, then any other layer the records
// name) at every logged step (a step logged twice, by a run resumed from before it: the later).
HeatMap int8_heat_map(const std::vector<MetricRecord>& records, const std::vector<std::string>& order,
                      const std::vector<std::string>& in_records) {
  std::vector<std::string> rows = order;
  std::set<std::string> seen(order.begin(), order.end());
  std::vector<std::string> rest;
  for (const std::string& l : in_records)
    if (!seen.count(l)) rest.push_back(l);
  std::sort(rest.begin(), rest.end(), natural_less);
  rows.insert(rows.end(), rest.begin(), rest.end());
  std::map<double, const MetricRecord*> by_step;
  for (const auto& r : records) {
    auto step = r.values.find("step");
    if (r.split == "int8" && step != r.values.end() && std::isfinite(step->second)) by_step[step->second] = &r;
  }
  HeatMap m{rows, {}, {}, std::vector<std::vector<double>>(rows.size())};
  for (const auto& [step, r] : by_step) {
    m.x.push_back(step);
    for (size_t i = 0; i < rows.size(); ++i) {
      auto v = r->values.find(rows[i] + ".cos_distance");
      m.values[i].push_back(v == r->values.end() ? std::numeric_limits<double>::quiet_NaN() : v->second);
    }
  }
  return m;
}

// INT8 runs (records of split "int8", tools/train/int8_run.h): every layer's d_c as a layer x step
// heat map, then per-layer d_c, DCLR lr factor and gradient clip of the layers whose d_c peaked
// highest (all layers would crowd the legend).
void int8_charts(std::ostream& os, const std::vector<MetricRecord>& records, const std::vector<std::string>& order) {
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
  std::vector<std::string> in_records;
  for (const auto& [name, p] : layers) in_records.push_back(name);
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
  const HeatMap map = int8_heat_map(records, order, in_records);
  os << svg_heat_map(detail::str_cat("gradient cosine distance d_c of the ", map.rows.size(),
                                     " INT8 layers (model order) at each logged step"),
                     map, "step", "d_c");
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

namespace {

// run.json: the facts as one JSON object; what is missing or of the wrong type is left empty (a
// page's summary is not worth failing a resume for).
RunFacts read_facts(const std::string& path) {
  RunFacts f;
  std::ifstream in(path, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    spdlog::warn("{}: not a JSON object; the page's summary starts afresh", path);
    return f;
  }
  auto text = [&](const char* key, std::string& to) {
    if (j.contains(key) && j[key].is_string()) to = j[key].get<std::string>();
  };
  auto count = [&](const char* key, int64_t& to) {
    if (j.contains(key) && j[key].is_number_integer()) to = j[key].get<int64_t>();
  };
  text("recipe", f.recipe), text("model", f.model), text("device", f.device);
  count("parameters", f.parameters), count("epochs", f.epochs);
  if (j.contains("int8_layers") && j["int8_layers"].is_array())
    for (const auto& l : j["int8_layers"])
      if (l.is_string()) f.int8_layers.push_back(l.get<std::string>());
  return f;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& dir, bool resume) : dir_(dir) {
  std::filesystem::create_directories(dir);
  std::string path = dir + "/metrics.jsonl";
  if (resume && std::filesystem::exists(path)) records_ = read_metrics(path, true);
  if (resume && std::filesystem::exists(dir + "/run.json")) facts_ = read_facts(dir + "/run.json");
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

namespace {

std::string printed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// 42 s, 7 min 05 s, 3 h 12 min.
std::string duration_text(double s) {
  if (s < 60) return printed("%.0f s", s);
  const auto whole = static_cast<int64_t>(std::llround(s));
  if (whole < 3600) return detail::str_cat(whole / 60, " min ", printed("%02.0f", double(whole % 60)), " s");
  return detail::str_cat(whole / 3600, " h ", printed("%02.0f", double(whole / 60 % 60)), " min");
}

// 11,173,962
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// The record of the best per-epoch evaluation: split `split`, the smallest (or largest) `key`; the
// first of equals; null when none has it.
const MetricRecord* best_of(const std::vector<MetricRecord>& records, const std::string& split, const std::string& key,
                            bool lowest) {
  const MetricRecord* best = nullptr;
  for (const auto& r : records) {
    auto v = r.values.find(key);
    if (r.split != split || v == r.values.end() || !std::isfinite(v->second)) continue;
    if (!best || (lowest ? v->second < best->values.at(key) : v->second > best->values.at(key))) best = &r;
  }
  return best;
}

std::string when_text(const MetricRecord& r) {
  std::string s;
  if (auto e = r.values.find("epoch"); e != r.values.end()) s += "epoch " + printed("%.4g", e->second);
  if (auto st = r.values.find("step"); st != r.values.end())
    s += (s.empty() ? "step " : " (step ") + printed("%.0f", st->second) + (s.empty() ? "" : ")");
  return s.empty() ? s : " at " + s;
}

}  // namespace

std::string run_summary_html(const std::vector<MetricRecord>& records, const RunFacts& facts) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (!facts.recipe.empty()) rows.emplace_back("recipe", facts.recipe);
  if (!facts.model.empty())
    rows.emplace_back(
        "model",
        facts.model + (facts.parameters > 0 ? ", " + grouped(facts.parameters) + " parameters (" +
                                                  printed("%.3g", static_cast<double>(facts.parameters) / 1e6) + " M)"
                                            : std::string()));
  if (!facts.device.empty()) rows.emplace_back("device", facts.device);
  const bool lm = std::any_of(records.begin(), records.end(), [](const auto& r) { return r.values.count("ppl"); });
  if (lm) {
    if (const MetricRecord* b = best_of(records, "valid", "ppl", true))
      rows.emplace_back("best", "valid perplexity " + printed("%.2f", b->values.at("ppl")) + when_text(*b));
    const MetricRecord* test = nullptr;  // the last: the weights of the best epoch, after the run
    for (const auto& r : records)
      if (r.split == "test" && r.values.count("ppl")) test = &r;
    if (test) rows.emplace_back("test", "perplexity " + printed("%.2f", test->values.at("ppl")));
  } else {
    const bool has_valid = best_of(records, "valid", "top1", false) != nullptr;
    const std::string split = has_valid ? "valid" : "test";
    if (const MetricRecord* b = best_of(records, split, "top1", false))
      rows.emplace_back("best", split + " top-1 " + printed("%.2f", b->values.at("top1")) + "%" + when_text(*b));
  }
  double step = -1, epoch = -1, wall = -1;
  for (const auto& r : records) {
    auto take = [&](const char* key, double& most) {
      if (auto v = r.values.find(key); v != r.values.end() && std::isfinite(v->second))
        most = std::max(most, v->second);
    };
    take("step", step), take("epoch", epoch), take("wall_s", wall);
  }
  if (step >= 0)
    rows.emplace_back("progress", "step " + printed("%.0f", step) +
                                      (epoch >= 0 ? ", epoch " + printed("%.4g", epoch) +
                                                        (facts.epochs > 0 ? " of " + std::to_string(facts.epochs) : "")
                                                  : std::string()));
  if (wall >= 0) rows.emplace_back("wall time", duration_text(wall));
  if (rows.empty()) return "";
  std::string html = "<table class='summary'>";
  for (const auto& [k, v] : rows) html += "<tr><th>" + k + "</th><td>" + xml_text(v) + "</td></tr>";
  return html + "</table>";
}

std::string curves_html(const std::vector<MetricRecord>& records, const std::string& title, const RunFacts& facts) {
  std::ostringstream os;
  os << "<!doctype html><html><head><meta charset='utf-8'><title>" << xml_text(title)
     << "</"
        "title><style>body{font-family:sans-serif;margin:20px}figure{display:inline-block;margin:8px;vertical-align:"
        "top}"
        "figcaption{font-weight:bold}table.summary{border-collapse:collapse;margin:0 8px 12px}"
        "table.summary th{text-align:left;font-weight:normal;color:#555;padding:2px 16px 2px 0}"
        "table.summary td{padding:2px 0}</style></head><body><h2>"
     << xml_text(title) << "</h2>" << run_summary_html(records, facts);
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
  os << svg_chart("learning rate", {series_of(records, "train", "lr", "lr", "#2ca02c")}, "epoch", false);
  os << svg_chart(lm ? "tokens/s" : "samples/s",
                  {series_of(records, "train", lm ? "tokens_per_s" : "samples_per_s", "train", "#9467bd")});
  int8_charts(os, records, facts.int8_layers);
  os << "</body></html>\n";
  return os.str();
}

void MetricsLog::set_facts(RunFacts facts) {
  if (!facts_.recipe.empty()) facts.recipe = facts_.recipe;  // the run's recipe, not a resume's checkpoint
  facts_ = std::move(facts);
  const nlohmann::json j = {{"recipe", facts_.recipe}, {"model", facts_.model},   {"parameters", facts_.parameters},
                            {"device", facts_.device}, {"epochs", facts_.epochs}, {"int8_layers", facts_.int8_layers}};
  write_file_atomic(dir_ + "/run.json", j.dump(1) + "\n");
}

void MetricsLog::write_curves() const {
  write_file_atomic(dir_ + "/curves.html",
                    curves_html(records_, std::filesystem::path(dir_).filename().string(), facts_));
}

}  // namespace octet::train
