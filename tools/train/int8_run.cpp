#include "tools/train/int8_run.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace octet::train {

namespace {

// The stats a checkpoint stores, with their dtypes; the order of state_dict().
// An optional one (clip_ratio, which came later) may be missing from a checkpoint: it then loads
// as 0, and a layer with quant.clip_relative searches at its next backward pass.
// A per-rank one differs between the processes of a data-parallel run, each of which quantizes its
// own shard of the batch: the searched gradient clip (kept between DSGC searches), the clip ratio
// (quant.clip_relative) and max|x|. The others are the same on every rank (the weights, the step
// counts, d_c averaged over the ranks by DistributedAgreement).
struct StatField {
  const char* name;
  DType dtype;
  bool optional = false;
  bool per_rank = false;
};
constexpr StatField kStatFields[] = {{"input_clip", DType::f32, false, true}, {"weight_clip", DType::f32},
                                     {"grad_clip", DType::f32, false, true},  {"cos_distance", DType::f64},
                                     {"backward_steps", DType::i64},          {"searches", DType::i64},
                                     {"clip_ratio", DType::f32, true, true}};

double stat_value(const quant::Int8Stats& s, const std::string& field) {
  if (field == "input_clip") return s.input_clip;
  if (field == "weight_clip") return s.weight_clip;
  if (field == "grad_clip") return s.grad_clip;
  if (field == "cos_distance") return s.cos_distance;
  if (field == "backward_steps") return static_cast<double>(s.backward_steps);
  if (field == "clip_ratio") return s.clip_ratio;
  return static_cast<double>(s.searches);
}

void set_stat(quant::Int8Stats& s, const std::string& field, const Tensor& t) {
  if (field == "input_clip") s.input_clip = t.item<float>();
  if (field == "weight_clip") s.weight_clip = t.item<float>();
  if (field == "grad_clip") s.grad_clip = t.item<float>();
  if (field == "cos_distance") s.cos_distance = t.item<double>();
  if (field == "backward_steps") s.backward_steps = t.item<int64_t>();
  if (field == "searches") s.searches = t.item<int64_t>();
  if (field == "clip_ratio") s.clip_ratio = t.item<float>();
}

// The per-layer values of the telemetry, in this order.
constexpr const char* kTelemetry[] = {"cos_distance", "grad_clip", "input_clip", "weight_clip", "lr_scale"};

}  // namespace

Int8Run::Int8Run(std::vector<quant::Int8Module> layers) : layers_(std::move(layers)), above_warn_(layers_.size()) {}

double Int8Run::lr_scale(size_t i) const { return quant::dclr_scale(*layers_.at(i).layer); }

void Int8Run::apply_dclr(Optimizer& opt) const { octet::apply_dclr(opt, layers_); }

std::vector<std::string> Int8Run::after_backward(int64_t step) {
  std::vector<std::string> warned;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const quant::Int8Layer& l = *layers_[i].layer;
    const double d = l.stats.cos_distance, limit = l.config.cos_distance_warn_;
    // A NaN d_c before the first backward pass is "not measured yet"; after one it is a gradient
    // with non-finite values, which counts as above any limit.
    const bool diverged = std::isnan(d) && l.stats.backward_steps > 0;
    const bool above = d > limit || diverged;
    if (above && !above_warn_[i]) {
      warned.push_back(layers_[i].name);
      if (diverged)
        spdlog::warn(
            "INT8 layer {}: its output gradient has non-finite values at step {} (d_c is NaN); its lr factor drops "
            "to quant.dclr_beta = {:.3g} with DCLR on",
            layers_[i].name, step, l.config.dclr_beta_);
      else
        spdlog::warn(
            "INT8 layer {}: gradient cosine distance d_c = {:.4g} rose above quant.cos_distance_warn = {:.4g} at step "
            "{} (gradient clip {:.4g}, lr factor {:.3g}); a d_c that keeps growing comes before INT8 training diverges",
            layers_[i].name, d, limit, step, l.stats.grad_clip, lr_scale(i));
    } else if (!above && above_warn_[i])
      spdlog::info("INT8 layer {}: d_c = {:.4g} is back below {:.4g} at step {}", layers_[i].name, d, limit, step);
    above_warn_[i] = above;
  }
  return warned;
}

MetricRecord Int8Run::record(int64_t step, double epoch) const {
  MetricRecord r{"int8", {{"step", static_cast<double>(step)}, {"epoch", epoch}}};
  double max_d = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const quant::Int8Stats& s = layers_[i].layer->stats;
    for (const char* field : kTelemetry)
      r.values[layers_[i].name + "." + field] = std::string(field) == "lr_scale" ? lr_scale(i) : stat_value(s, field);
    if (!std::isnan(s.cos_distance) && !(s.cos_distance <= max_d)) max_d = s.cos_distance;
  }
  r.values["max_cos_distance"] = max_d;
  return r;
}

void Int8Run::add_scalars(TensorBoardWriter& tb, int64_t step) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const quant::Int8Stats& s = layers_[i].layer->stats;
    for (const char* field : kTelemetry) {
      const double v = std::string(field) == "lr_scale" ? lr_scale(i) : stat_value(s, field);
      if (std::isfinite(v))
        tb.add_scalar(std::string("int8_") + field + "/" + layers_[i].name, static_cast<float>(v), step);
    }
  }
}

std::string Int8Run::summary() const {
  size_t worst = layers_.size(), slowest = layers_.size();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const double d = layers_[i].layer->stats.cos_distance;
    if (!std::isnan(d) && (worst == layers_.size() || d > layers_[worst].layer->stats.cos_distance)) worst = i;
    if (slowest == layers_.size() || lr_scale(i) < lr_scale(slowest)) slowest = i;
  }
  if (worst == layers_.size()) return fmt::format("int8: {} layers, no backward pass yet", layers_.size());
  return fmt::format("int8: {} layers, max d_c {:.4g} ({}), min lr factor {:.3g} ({})", layers_.size(),
                     layers_[worst].layer->stats.cos_distance, layers_[worst].name, lr_scale(slowest),
                     layers_[slowest].name);
}

NamedTensors Int8Run::state_dict(const dist::ProcessGroup* group) const {
  // Several processes: every rank's per-rank stats, gathered (f64 holds each f32 exactly). A run
  // without INT8 layers has none on any rank (the ranks train one recipe): no collective.
  Tensor ranks;  // [size, layers x per-rank fields]
  if (group && group->size() > 1 && !layers_.empty()) {
    std::vector<double> mine;
    for (const quant::Int8Module& l : layers_)
      for (const StatField& f : kStatFields)
        if (f.per_rank) mine.push_back(stat_value(l.layer->stats, f.name));
    ranks = group->all_gather(from_vector(mine, {static_cast<int64_t>(mine.size())}));
  }
  NamedTensors out;
  int64_t column = 0;
  for (const quant::Int8Module& l : layers_)
    for (const StatField& f : kStatFields) {
      const std::string key = l.name + "." + f.name;
      if (f.per_rank && ranks.defined())
        out.emplace_back(key, ranks.select(1, column++).to(f.dtype).contiguous());
      else
        out.emplace_back(key, scalar_tensor(stat_value(l.layer->stats, f.name), f.dtype));
    }
  return out;
}

void Int8Run::load_state_dict(const NamedTensors& state, int rank) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [k, t] : state) {
    OCTET_CHECK(given.emplace(k, &t).second, "INT8 layer stats: key '", k, "' appears twice");
    OCTET_CHECK(t.defined(), "INT8 layer stats: key '", k, "' holds an undefined tensor");
  }
  // Check everything first, so a bad checkpoint changes nothing. Each stat's value for this rank:
  // a scalar, or of a per-rank stat saved by several processes, element rank % n of its n.
  std::vector<std::tuple<quant::Int8Stats*, std::string, Tensor>> targets;
  std::set<std::string> known;
  for (const quant::Int8Module& l : layers_)
    for (const StatField& f : kStatFields) {
      const std::string key = l.name + "." + f.name;
      known.insert(key);
      auto it = given.find(key);
      if (it == given.end() && f.optional) {  // an optional stat left out
        targets.emplace_back(&l.layer->stats, f.name, scalar_tensor(0.0, f.dtype));
        continue;
      }
      OCTET_CHECK(it != given.end(), "INT8 layer stats: missing '", key,
                  "' (the checkpoint is not of an INT8 run with the same INT8 layers)");
      const Tensor& t = *it->second;
      const bool scalar = t.dim() == 0, per_rank = f.per_rank && t.dim() == 1 && t.numel() >= 1;
      OCTET_CHECK(t.dtype() == f.dtype && (scalar || per_rank), "INT8 layer stats: key '", key, "' expected a ",
                  f.dtype, f.per_rank ? " scalar or one per process" : " scalar", ", got ", t.dtype(), " ", t.shape());
      targets.emplace_back(&l.layer->stats, f.name, scalar ? t : t.select(0, rank % t.numel()));
    }
  for (const auto& [k, t] : given)
    OCTET_CHECK(known.count(k), "INT8 layer stats: unexpected key '", k, "' (no such INT8 layer in this run)");
  for (const auto& [stats, field, value] : targets) set_stat(*stats, field, value);
}

}  // namespace octet::train
