#include "quant/precision.h"

#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>

#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/quantized.h"

namespace octet::quant {

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

LayerPrecision current_precision(const Module& m) {
  if (auto* l = dynamic_cast<const Linear*>(&m))
    return l->inference() ? LayerPrecision(l->inference()->spec()) : std::nullopt;
  if (auto* l = dynamic_cast<const LSTM*>(&m))
    return l->inference() ? LayerPrecision(l->inference()->spec()) : std::nullopt;
  return std::nullopt;
}

void set_precision(Module& m, const LayerPrecision& p) {
  if (auto* l = dynamic_cast<Linear*>(&m))
    l->set_inference(p ? std::make_shared<QuantLinear>(*l, *p) : nullptr);
  else if (auto* l = dynamic_cast<LSTM*>(&m))
    l->set_inference(p ? std::make_shared<QuantLstm>(*l, *p) : nullptr);
}

std::string layer_list(const std::vector<ConvertedLayer>& layers) {
  std::string s;
  for (const auto& l : layers) s += (s.empty() ? "" : ", ") + l.name + " (" + l.type + ")";
  return s;
}

}  // namespace

PbScheme parse_pb_scheme(const std::string& text, const std::string& what) {
  if (text == "octet") return PbScheme::octet;
  if (text == "paper") return PbScheme::paper;
  OCTET_FAIL(what, ": scheme must be paper or octet, got '", text, "'");
}

PbConfig parse_pb_config(const std::string& text, const std::string& what) {
  const std::string usage =
      "expected w=N,a=K (weight bits N in 1..8, activation bits K in 2..32), e.g. w=4,a=16, and optionally "
      "scheme=paper|octet, row_step=0|1, a_shift=S (paper scheme), clip=0|1";
  PbConfig c;
  bool has_w = false, has_a = false;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    OCTET_CHECK(eq != std::string::npos, what, " '", text, "': '", trim(item), "' is not key=value; ", usage);
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "scheme") {
      c.scheme = parse_pb_scheme(value, detail::str_cat(what, " '", text, "'"));
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    OCTET_CHECK(!value.empty() && end == value.c_str() + value.size(), what, " '", text, "': ", key,
                " must be an integer, got '", value, "'");
    if (key == "w") {
      OCTET_CHECK(!has_w, what, " '", text, "': w given twice");
      OCTET_CHECK(v >= 1 && v <= kPbMaxWeightBits, what, " '", text, "': w (weight bits) must be in 1..",
                  kPbMaxWeightBits, ", got ", v);
      c.w_bits = static_cast<int>(v), has_w = true;
    } else if (key == "a") {
      OCTET_CHECK(!has_a, what, " '", text, "': a given twice");
      OCTET_CHECK(v >= kPbMinActivationBits && v <= kPbMaxActivationBits, what, " '", text,
                  "': a (activation bits) must be in ", kPbMinActivationBits, "..", kPbMaxActivationBits, ", got ", v);
      c.a_bits = static_cast<int>(v), has_a = true;
    } else if (key == "clip") {
      OCTET_CHECK(v == 0 || v == 1, what, " '", text, "': clip must be 0 or 1, got ", v);
      c.clip_search = v == 1;
    } else if (key == "row_step") {
      OCTET_CHECK(v == 0 || v == 1, what, " '", text, "': row_step must be 0 or 1, got ", v);
      c.row_step = v == 1;
    } else if (key == "a_shift") {
      OCTET_CHECK(v >= 0 && v <= kPbMaxActShift, what, " '", text, "': a_shift must be in 0..", kPbMaxActShift,
                  ", got ", v);
      c.a_shift = static_cast<int>(v);
    } else {
      OCTET_FAIL(what, " '", text, "': unknown key '", key, "'; ", usage);
    }
  }
  OCTET_CHECK(has_w && has_a, what, " '", text, "': ", has_w ? "a" : "w", " is missing; ", usage);
  check_pb_config(c, what);
  return c;
}

std::string precision_name(const LayerPrecision& p) { return p ? p->name() : std::string("float"); }

PrecisionPlan uniform_plan(const QuantSpec& spec, const std::string& source) {
  PrecisionPlan p;
  p.default_spec = spec;
  p.source = source.empty() ? spec.name() : source;
  return p;
}

std::vector<ConvertedLayer> quantizable_layers(const Module& model) {
  std::vector<ConvertedLayer> out;
  for (const auto& [name, m] : model.named_modules()) {
    if (dynamic_cast<const Linear*>(m.get()))
      out.push_back({name, "Linear", current_precision(*m)});
    else if (dynamic_cast<const LSTM*>(m.get()))
      out.push_back({name, "LSTM", current_precision(*m)});
  }
  return out;
}

std::string final_layer_name(const Module& model) {
  const auto layers = quantizable_layers(model);
  return !layers.empty() && layers.back().type == "Linear" ? layers.back().name : std::string();
}

std::vector<ConvertedLayer> convert_model(Module& model, const PrecisionPlan& plan) {
  const std::string src = plan.source.empty() ? std::string("precision plan") : plan.source;
  std::vector<ConvertedLayer> layers = quantizable_layers(model);
  // What the plan asks of this model (a usage error: the CLI exits 2).
  OCTET_USAGE_CHECK(!layers.empty(), src, ": the model (", model.type_name(),
                    ") has no Linear or LSTM layers to quantize");
  std::set<std::string> names;
  for (const auto& l : layers) names.insert(l.name);
  for (const auto& [name, p] : plan.layers)
    OCTET_USAGE_CHECK(
        names.count(name), src, ": '", name,
        "' is not a quantizable layer of the model; its Linear and LSTM layers are: ", layer_list(layers));
  const std::string final_layer = final_layer_name(model);
  std::map<std::string, std::shared_ptr<Module>> modules;
  for (const auto& [name, m] : model.named_modules()) modules.emplace(name, m);
  bool any = false;
  for (auto& l : layers) {
    auto it = plan.layers.find(l.name);
    l.precision = it != plan.layers.end() ? it->second : l.name == final_layer ? std::nullopt : plan.default_spec;
    any = any || l.precision.has_value();
  }
  OCTET_CHECK(any, src, ": nothing to quantize: every layer stays float (the final output layer '", final_layer,
              "' stays float unless the plan names it); layers: ", layer_list(layers));
  for (const auto& l : layers) set_precision(*modules.at(l.name), l.precision);
  return layers;
}

void reset_to_float(Module& model) {
  for (const auto& [name, m] : model.named_modules()) set_precision(*m, std::nullopt);
}

std::string describe_layers(const std::vector<ConvertedLayer>& layers) {
  std::string s;
  for (const auto& l : layers) s += (s.empty() ? "" : ", ") + l.name + ": " + precision_name(l.precision);
  return s;
}

void save_quant_state(const Module& model, NamedTensors& tensors, std::string& assignment) {
  assignment.clear();
  for (const auto& [name, m] : model.named_modules()) {
    if (auto* lin = dynamic_cast<const Linear*>(m.get())) {
      if (!lin->inference()) continue;
      lin->inference()->weight_->save(name + ".weight.", tensors);
      assignment += name + " Linear " + lin->inference()->spec().name() + "\n";
    } else if (auto* lstm = dynamic_cast<const LSTM*>(m.get())) {
      if (!lstm->inference()) continue;
      const QuantLstm& q = *lstm->inference();
      for (int64_t l = 0; l < q.num_layers_; ++l) {
        q.ih_[l]->save(name + ".weight_ih_l" + std::to_string(l) + ".", tensors);
        q.hh_[l]->save(name + ".weight_hh_l" + std::to_string(l) + ".", tensors);
      }
      assignment += name + " LSTM " + q.spec().name() + "\n";
    }
  }
}

std::vector<ConvertedLayer> load_quant_state(Module& model, const NamedTensors& tensors, const std::string& assignment,
                                             const std::string& what) {
  std::map<std::string, Tensor> left(tensors.begin(), tensors.end());
  OCTET_CHECK(left.size() == tensors.size(), what, ": quantized layer data holds a tensor name twice");
  std::map<std::string, std::shared_ptr<Module>> modules;
  for (const auto& [name, m] : model.named_modules()) modules.emplace(name, m);
  // Parse everything before touching the model.
  struct Entry {
    std::string name, type;
    QuantSpec spec;
  };
  std::vector<Entry> entries;
  std::stringstream in(assignment);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    std::stringstream ls(line);
    Entry e;
    std::string spec, extra;
    OCTET_CHECK(static_cast<bool>(ls >> e.name >> e.type >> spec) && !(ls >> extra), what,
                ": quantized layer assignment line ", line_no, " is not '<layer> <type> <precision>': '", line, "'");
    e.spec = parse_quant_spec_name(spec, detail::str_cat(what, ": quantized layer assignment line ", line_no));
    auto it = modules.find(e.name);
    OCTET_CHECK(it != modules.end(), what, ": the quantized layer '", e.name, "' is not in the model");
    const bool is_linear = dynamic_cast<Linear*>(it->second.get()) != nullptr,
               is_lstm = dynamic_cast<LSTM*>(it->second.get()) != nullptr;
    OCTET_CHECK((e.type == "Linear" && is_linear) || (e.type == "LSTM" && is_lstm), what, ": the quantized layer '",
                e.name, "' is stored as ", e.type, " but the model's is a ", it->second->type_name());
    for (const auto& o : entries) OCTET_CHECK(o.name != e.name, what, ": the layer '", e.name, "' is listed twice");
    entries.push_back(e);
  }
  OCTET_CHECK(!entries.empty(), what, ": the quantized layer assignment is empty");
  // Build every layer first, so a bad tensor leaves the model as it was.
  std::vector<std::function<void()>> apply;
  for (const auto& e : entries) {
    Module& m = *modules.at(e.name);
    if (auto* lin = dynamic_cast<Linear*>(&m)) {
      auto w = load_quant_matmul(e.spec, lin->out_features_, lin->in_features_, left, e.name + ".weight.", what);
      auto q = std::make_shared<QuantLinear>(w, lin->bias_);
      apply.push_back([lin, q] { lin->set_inference(q); });
    } else {
      auto* lstm = dynamic_cast<LSTM*>(&m);
      std::vector<std::shared_ptr<QuantMatmul>> ih, hh;
      const int64_t g4 = 4 * lstm->hidden_size_;
      for (int64_t l = 0; l < lstm->num_layers_; ++l) {
        const std::string k = std::to_string(l);
        ih.push_back(load_quant_matmul(e.spec, g4, l == 0 ? lstm->input_size_ : lstm->hidden_size_, left,
                                       e.name + ".weight_ih_l" + k + ".", what));
        hh.push_back(load_quant_matmul(e.spec, g4, lstm->hidden_size_, left, e.name + ".weight_hh_l" + k + ".", what));
      }
      auto q = std::make_shared<QuantLstm>(*lstm, ih, hh);
      apply.push_back([lstm, q] { lstm->set_inference(q); });
    }
  }
  OCTET_CHECK(left.empty(), what, ": unexpected quantized layer data '", left.empty() ? "" : left.begin()->first, "'");
  for (const auto& l : quantizable_layers(model)) set_precision(*modules.at(l.name), std::nullopt);
  for (auto& f : apply) f();
  return quantizable_layers(model);
}

}  // namespace octet::quant
