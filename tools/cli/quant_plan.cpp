#include "tools/cli/quant_plan.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace octet::cli {

namespace {

std::string at_line(const std::string& source, const YAML::Node& n) {
  return source + ":" + std::to_string(n.Mark().line + 1);
}

// One entry's value: {w: N, a: K[, clip: bool, scheme: paper|octet, row_step: bool, a_shift: S]}, int8, or
// float; `scheme` is the plan's top-level one unless the entry names its own.
quant::LayerPrecision layer_precision(const std::string& key, const YAML::Node& v, const std::string& source,
                                      quant::PbScheme scheme) {
  const std::string where = at_line(source, v) + ": '" + key + "'";
  if (v.IsScalar()) {
    const std::string s = v.Scalar();
    if (s == "int8") return quant::QuantSpec::int8();
    if (s == "float" || s == "fp32") return std::nullopt;
    OCTET_FAIL(where, ": expected {w: N, a: K}, int8 or float, got '", s, "'");
  }
  OCTET_CHECK(v.IsMap(), where, ": expected {w: N, a: K}, int8 or float");
  quant::PbConfig c;
  c.scheme = scheme;
  bool has_w = false, has_a = false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string k = it->first.Scalar();
    auto integer = [&](int lo, int hi) {
      try {
        const int n = it->second.as<int>();
        OCTET_CHECK(n >= lo && n <= hi, where, ": ", k, " must be in ", lo, "..", hi, ", got ", n);
        return n;
      } catch (const YAML::Exception&) {
        OCTET_FAIL(where, ": ", k, " must be an integer, got '", it->second.IsScalar() ? it->second.Scalar() : "?",
                   "'");
      }
    };
    if (k == "w") {
      c.w_bits = integer(1, quant::kPbMaxWeightBits), has_w = true;
    } else if (k == "a") {
      c.a_bits = integer(quant::kPbMinActivationBits, quant::kPbMaxActivationBits), has_a = true;
    } else if (k == "clip" || k == "row_step") {
      bool b = false;
      try {
        b = it->second.as<bool>();
      } catch (const YAML::Exception&) {
        OCTET_FAIL(where, ": ", k, " must be true or false");
      }
      (k == "clip" ? c.clip_search : c.row_step) = b;
    } else if (k == "scheme") {
      c.scheme = quant::parse_pb_scheme(it->second.IsScalar() ? it->second.Scalar() : "?", where);
    } else if (k == "a_shift") {
      c.a_shift = integer(0, quant::kPbMaxActShift);
    } else {
      OCTET_FAIL(where, ": unknown key '", k, "' (known: w, a, clip, scheme, row_step, a_shift)");
    }
  }
  OCTET_CHECK(has_w && has_a, where, ": ", has_w ? "a" : "w", " is missing; expected {w: N, a: K}");
  return quant::QuantSpec::pbatch(c);
}

}  // namespace

quant::PrecisionPlan precision_plan_from_yaml(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    OCTET_FAIL(source, ":", e.mark.line + 1, ": invalid YAML: ", e.msg);
  }
  OCTET_CHECK(root.IsMap() && root.size() > 0, source,
              ": expected a mapping of layer names to precisions, e.g. 'lstm: {w: 4, a: 16}'");
  quant::PrecisionPlan plan;
  plan.source = source;
  // `scheme: paper|octet` at the top: every PrecisionBatching entry's scheme unless it names one.
  quant::PbScheme scheme = quant::PbScheme::octet;
  const YAML::Node& const_root = root;  // const: a lookup that inserts nothing
  if (const YAML::Node s = const_root["scheme"]; s && s.IsScalar())
    scheme = quant::parse_pb_scheme(s.Scalar(), at_line(source, s) + ": 'scheme'");
  for (auto it = root.begin(); it != root.end(); ++it) {
    OCTET_CHECK(it->first.IsScalar(), at_line(source, it->first), ": layer names must be text");
    const std::string key = it->first.Scalar();
    if (key == "scheme" && it->second.IsScalar()) continue;
    quant::LayerPrecision p = layer_precision(key, it->second, source, scheme);
    if (key == "default")
      plan.default_spec = p;
    else
      OCTET_CHECK(plan.layers.emplace(key, p).second, at_line(source, it->first), ": '", key, "' given twice");
  }
  return plan;
}

quant::PrecisionPlan precision_plan(const std::string& arg) {
  namespace fs = std::filesystem;
  const std::string ext = fs::path(arg).extension().string();
  if (ext == ".yaml" || ext == ".yml" || fs::is_regular_file(arg)) {
    std::ifstream in(arg);
    OCTET_CHECK(in.good(), "--pbatch: cannot read the plan file ", arg);
    std::stringstream ss;
    ss << in.rdbuf();
    return precision_plan_from_yaml(ss.str(), arg);
  }
  return quant::uniform_plan(quant::QuantSpec::pbatch(quant::parse_pb_config(arg, "--pbatch")), arg);
}

std::optional<quant::PrecisionPlan> cli_plan(const std::string& pbatch, bool int8) {
  OCTET_USAGE_CHECK(pbatch.empty() || !int8, "give --pbatch or --int8, not both");
  if (int8) return quant::uniform_plan(quant::QuantSpec::int8(), "--int8");
  if (!pbatch.empty()) return as_usage_error([&] { return precision_plan(pbatch); });  // the user's spec or plan file
  return std::nullopt;
}

}  // namespace octet::cli
