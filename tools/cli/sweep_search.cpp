// `octet sweep --search` (tools/cli/sweep.h): per-layer precision within a quality budget.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/cli/sweep.h"
#include "tools/cli/sweep_detail.h"

namespace octet::cli {

using namespace octet::train;

std::string Budget::text() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, relative ? "%g%%" : "%g", value);
  return buf;
}

Budget parse_budget(const std::string& text) {
  Budget b;
  std::string t = text;
  b.relative = !t.empty() && t.back() == '%';
  if (b.relative) t.pop_back();
  size_t used = 0;
  try {
    b.value = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  OCTET_USAGE_CHECK(
      used == t.size() && used > 0 && std::isfinite(b.value) && b.value >= 0, "sweep --budget: expected ",
      "a number >= 0, relative to FP32's quality with '%' (1%) or in the metric's units (0.5: accuracy points ",
      "or perplexity), got '", text, "'");
  return b;
}

namespace {

struct Candidate {
  quant::QuantSpec spec;
  int w, a;
};

// The search's quality bound: the worst quality the budget allows.
double bound_of(double fp32, const Budget& b, bool lm) {
  const double allowed = b.relative ? std::fabs(fp32) * b.value / 100.0 : b.value;
  return lm ? fp32 + allowed : fp32 - allowed;
}

}  // namespace

SearchResult run_search(const std::string& path, const SweepOptions& opts, const Budget& budget) {
  OCTET_CHECK(!opts.w_bits.empty() && !opts.a_bits.empty() && !opts.schemes.empty(),
              "sweep --search: give at least one weight width, activation width and scheme");
  std::vector<Candidate> candidates;
  for (const std::string& scheme : opts.schemes)
    for (int w : opts.w_bits)
      for (int a : opts.a_bits) {
        const quant::PbConfig c = pb_config_for(w, a, scheme);
        quant::check_pb_config(c, "sweep --w-bits/--a-bits");
        candidates.push_back({quant::QuantSpec::pbatch(c), w, a});
      }
  // Lowest weight bits first, then lowest activation bits; a scheme's order as given.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& x, const Candidate& y) { return std::pair(x.w, x.a) < std::pair(y.w, y.a); });

  detail::SweepModel s = detail::open_sweep_model(path, opts, "sweep --search");
  SearchResult out;
  out.lm = s.lm;
  out.checkpoint = s.m.path;
  out.device = s.m.device.str();
  out.budget = budget.text();
  auto quality = [&](const EvalResult& e) { return s.lm ? e.perplexity() : e.top1; };
  auto within = [&](double q) { return s.lm ? q <= out.bound : q >= out.bound; };

  quant::reset_to_float(*s.m.model);
  EvalResult first;
  SweepRow fp32;
  fp32.method = "FP32", fp32.config = "fp32";
  fp32.result = detail::evaluate(s, &first);
  fp32.latency_s = detail::batch1_latency(*s.m.model, s.example, s.m.device, opts);
  out.search_split = first.split;
  out.fp32_search = quality(first);
  out.bound = bound_of(out.fp32_search, budget, s.lm);
  out.plan_search = out.fp32_search;
  spdlog::info("search: FP32 {} {:.4g} on {}; budget {}: {} {:.4g}", detail::quality_name(s.lm), out.fp32_search,
               out.search_split, out.budget, s.lm ? "at most" : "at least", out.bound);

  quant::PrecisionPlan plan = detail::plan_for(s, std::nullopt);
  for (const std::string& layer : s.layers) {
    bool kept = false;
    for (const Candidate& c : candidates) {
      plan.layers[layer] = c.spec;
      quant::convert_model(*s.m.model, plan);
      detail::evaluate(s, &first);
      ++out.evaluations;
      const double q = quality(first);
      spdlog::info("search: {} at {}: {:.4g}{}", layer, c.spec.name(), q, within(q) ? " (kept)" : "");
      if (within(q)) {
        out.plan_search = q;
        kept = true;
        break;
      }
    }
    if (!kept) {
      plan.layers[layer] = std::nullopt;
      spdlog::warn("search: no candidate keeps {} within the budget; it stays float", layer);
    }
  }

  SweepRow int8;
  int8.method = "int8", int8.config = "int8", int8.w_bits = int8.a_bits = 8;
  quant::convert_model(*s.m.model, detail::plan_for(s, quant::QuantSpec::int8()));
  int8.result = detail::evaluate(s);
  int8.latency_s = detail::batch1_latency(*s.m.model, s.example, s.m.device, opts);

  SweepRow p;
  p.method = "searched plan";
  p.w_bits = p.a_bits = 0;  // per layer
  const bool any = std::any_of(plan.layers.begin(), plan.layers.end(), [](const auto& kv) { return kv.second; });
  if (any) {
    out.layers = quant::convert_model(*s.m.model, plan);
    p.result = detail::evaluate(s);
    p.latency_s = detail::batch1_latency(*s.m.model, s.example, s.m.device, opts);
  } else {
    quant::reset_to_float(*s.m.model);
    out.layers = quant::quantizable_layers(*s.m.model);
    p.result = fp32.result, p.latency_s = fp32.latency_s;
  }
  quant::reset_to_float(*s.m.model);
  SweepResult rows;
  rows.lm = s.lm;
  rows.rows = {fp32, int8, p};
  finish_rows(rows);
  out.rows = rows.rows;
  out.rows[2].config = plan_notation(out);
  return out;
}

std::string plan_notation(const SearchResult& s) {
  std::string out;
  for (const auto& l : s.layers) {
    if (!l.precision)
      out += "(32)";
    else if (l.precision->kind == quant::QuantSpec::Kind::int8)
      out += "(8)";
    else
      out += "(" + std::to_string(l.precision->pb.w_bits) + "," + std::to_string(l.precision->pb.a_bits) + ")";
  }
  return out;
}

std::string plan_yaml(const SearchResult& s) {
  char head[512];
  std::snprintf(head, sizeof head,
                "# octet sweep --search %s, budget %s: FP32 %s %.4g on %s, %s %.4g allowed; this plan %.4g\n",
                s.checkpoint.c_str(), s.budget.c_str(), detail::quality_name(s.lm).c_str(), s.fp32_search,
                s.search_split.c_str(), s.lm ? "at most" : "at least", s.bound, s.plan_search);
  std::string out = head;
  for (const auto& l : s.layers) {
    out += l.name + ": ";
    if (!l.precision) {
      out += "float\n";
    } else if (l.precision->kind == quant::QuantSpec::Kind::int8) {
      out += "int8\n";
    } else {
      const quant::PbConfig& c = l.precision->pb;
      out += "{w: " + std::to_string(c.w_bits) + ", a: " + std::to_string(c.a_bits);
      if (c.scheme != quant::PbScheme::octet) out += ", scheme: " + std::string(quant::pb_scheme_name(c.scheme));
      out += "}\n";
    }
  }
  return out;
}

std::string search_markdown(const SearchResult& s) {
  SweepResult r;
  r.lm = s.lm;
  r.rows = s.rows;
  char head[512];
  std::snprintf(head, sizeof head,
                "budget %s of FP32 on %s: FP32 %.4g, bound %.4g, the plan %.4g (%d evaluations); plan %s\n\n",
                s.budget.c_str(), s.search_split.c_str(), s.fp32_search, s.bound, s.plan_search, s.evaluations,
                plan_notation(s).c_str());
  return head + sweep_markdown(r);
}

}  // namespace octet::cli
