#include "tools/train/run_folder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "core/serialization.h"
#include "tools/train/run_support.h"

namespace octet::train {

RunFolder::~RunFolder() { close(); }

void RunFolder::open(const Recipe& recipe, const std::string& dir, const std::string& resumed_from, RunFacts facts) {
  dir_ = dir;
  if (!writer_) return;  // another rank's run: rank 0 writes its folder
  const bool new_folder = dir_.empty(), resuming = !resumed_from.empty();
  if (new_folder) dir_ = new_run_dir(recipe);
  add_file_log(path("train.log"));
  file_log_ = true;
  if (resuming && new_folder) spdlog::info("{} is not in a run folder: the run continues in {}", resumed_from, dir_);
  if (!new_folder) point_latest();  // it has a checkpoint already
  write_file_atomic(path("recipe.yaml"), recipe.resolved_yaml());
  metrics_ = std::make_unique<MetricsLog>(dir_, resuming);
  // Wall time goes on from the last record of the sessions before (their time between a record
  // and a stop is lost: at most a log interval each).
  for (const MetricRecord& r : metrics_->records())
    if (auto w = r.values.find("wall_s"); w != r.values.end() && std::isfinite(w->second))
      wall_before_ = std::max(wall_before_, w->second);
  metrics_->set_facts(std::move(facts));
  if (recipe.boolean("log.tensorboard")) tb_ = std::make_unique<TensorBoardWriter>(path("tensorboard"));
}

void RunFolder::close() {
  if (!file_log_) return;
  drop_file_logs();
  file_log_ = false;
}

double RunFolder::wall_s() const {
  return wall_before_ + std::chrono::duration<double>(Clock::now() - session_start_).count();
}

void RunFolder::point_latest() {
  if (latest_points_here_ || !writer_) return;
  point_latest_at(dir_);
  latest_points_here_ = true;
}

void RunFolder::record_eval(const EvalResult& ev, int64_t step, double epoch, Device device,
                            const std::map<std::string, double>& extra) {
  if (metrics_) train::record_eval(*metrics_, tb_.get(), ev, step, epoch, device, extra);
}

void RunFolder::record_train(const MetricRecord& rec, const std::vector<std::string>& scalars, const Int8Run& int8) {
  if (!metrics_) return;
  metrics_->record(rec);
  const auto step = static_cast<int64_t>(rec.values.at("step"));
  if (!int8.empty()) metrics_->record(int8.record(step, rec.values.at("epoch")));
  if (!tb_) return;
  for (const std::string& k : scalars) tb_->add_scalar("train/" + k, static_cast<float>(rec.values.at(k)), step);
  if (!int8.empty()) int8.add_scalars(*tb_, step);
  tb_->flush();
}

void RunFolder::write_curves() const {
  if (metrics_) metrics_->write_curves();
}

}  // namespace octet::train
