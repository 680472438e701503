// The INT8 layers of a training run, seen from the trainer: DCLR (each layer's lr factor from its
// latest gradient cosine distance d_c, set on the optimizer before every step), telemetry (per-layer
// d_c, clips and lr factor for metrics.jsonl, the curves and TensorBoard; a warning when a layer's
// d_c rises above quant.cos_distance_warn, the supplement's sign of a coming crash) and the
// layers' stats in checkpoints (so a resumed run continues the same DSGC clip schedule and
// stochastic-rounding draws).
//   Int8Run int8(build_int8(recipe, *model));
//   loss.backward();  int8.after_backward(step);  int8.apply_dclr(opt);  opt.step();
//   metrics.record(int8.record(step, epoch));   save_checkpoint(..., int8.state_dict());
#pragma once

#include <string>
#include <vector>

#include "core/distributed.h"
#include "optim/dclr.h"
#include "optim/optimizer.h"
#include "quant/int8_model.h"
#include "tools/train/metrics.h"
#include "tools/train/tensorboard.h"

namespace octet::train {

class Int8Run {
 public:
  explicit Int8Run(std::vector<quant::Int8Module> layers);
  bool empty() const { return layers_.empty(); }
  const std::vector<quant::Int8Module>& layers() const { return layers_; }

  // Layer i's lr factor now: quant::dclr_scale(layer) (1 before its first backward pass or with
  // DCLR off; beta after a non-finite gradient).
  double lr_scale(size_t i) const;
  // Sets every INT8 layer's parameters' lr factor on `opt` (octet::apply_dclr, optim/dclr.h).
  void apply_dclr(Optimizer& opt) const;
  // Call after each backward pass: warns once when a layer's d_c rises above its
  // cos_distance_warn or turns NaN (a non-finite gradient), and notes when it falls back below.
  // Returns the layers warned about.
  std::vector<std::string> after_backward(int64_t step);

  // Split "int8": step, epoch, max_cos_distance, and per layer "<layer>.cos_distance",
  // ".grad_clip", ".input_clip", ".weight_clip", ".lr_scale" (NaN, written as null, before a
  // layer's first backward pass).
  MetricRecord record(int64_t step, double epoch) const;
  // The same values as TensorBoard scalars "int8_<stat>/<layer>" (one section per stat).
  void add_scalars(TensorBoardWriter& tb, int64_t step) const;
  // One line for the log: the layer with the largest d_c and the smallest lr factor.
  std::string summary() const;

  // Every layer's Int8Stats as "<layer>.<stat>" scalars: input_clip, weight_clip, grad_clip
  // (f32), cos_distance (f64), backward_steps, searches (i64), clip_ratio (f32). With `group` of
  // several processes, a collective (every rank calls it): the stats each rank has of its own
  // shard of the batch (input_clip, grad_clip, clip_ratio: the DSGC clip kept between searches)
  // are one per rank, [size], element r rank r's, so that a resumed job continues every rank's
  // clips.
  NamedTensors state_dict(const dist::ProcessGroup* group = nullptr) const;
  // Strict: exactly the keys of state_dict(), with their dtypes; otherwise an Error naming the key,
  // and nothing is changed. Only clip_ratio may be missing (checkpoints from before it): it is 0.
  // A per-rank stat of n ranks gives process `rank` element rank % n (the same count: its own; a
  // job resumed with another count has other shards anyway, and its next DSGC search its own clip).
  void load_state_dict(const NamedTensors& state, int rank = 0);

 private:
  std::vector<quant::Int8Module> layers_;
  std::vector<bool> above_warn_;  // per layer: d_c was above cos_distance_warn at the last check
};

}  // namespace octet::train
