// The run folder and its logs: checkpoint.dir/<run name> (new, or the resumed run's) with
// train.log, recipe.yaml (the resolved recipe), metrics.jsonl, run.json, curves.html and, if the
// recipe asks, tensorboard/; <checkpoint.dir>/latest pointing at it once it has a checkpoint; and
// the wall time of the run over all its sessions. Only the writer (rank 0 of several processes)
// touches the folder; another rank's RunFolder records nothing.
//   RunFolder f(/*writer=*/true, Clock::now());  f.open(recipe, "", false, facts);
//   f.record_eval(ev, step, epoch, device);  f.write_curves();  f.close();
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "core/device.h"
#include "tools/train/int8_run.h"
#include "tools/train/metrics.h"
#include "tools/train/recipe.h"
#include "tools/train/task.h"
#include "tools/train/tensorboard.h"

namespace octet::train {

class RunFolder {
 public:
  using Clock = std::chrono::steady_clock;
  // `session_start`: when this session of the run began (wall_s counts from it).
  RunFolder(bool writer, Clock::time_point session_start) : writer_(writer), session_start_(session_start) {}
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // Opens `dir` (a resumed run's folder), or a new folder (numbered if the name is taken) when `dir`
  // is empty, and starts its logs; a resumed run's metrics are read back. `resumed_from`: the
  // checkpoint a resumed run continues (empty for a new run). The writer alone touches the folder.
  void open(const Recipe& recipe, const std::string& dir, const std::string& resumed_from, RunFacts facts);
  // The file logs end (train.log); the folder stays as it is.
  void close();

  bool writer() const { return writer_; }
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Seconds of the run so far, over all its sessions: the "wall_s" of metric records.
  double wall_s() const;
  // <checkpoint.dir>/latest -> this run (once; call when it has a checkpoint to evaluate or resume).
  void point_latest();

  // An evaluation's record (metrics.jsonl, TensorBoard); `extra` values go into the record.
  void record_eval(const EvalResult& ev, int64_t step, double epoch, Device device,
                   const std::map<std::string, double>& extra = {});
  // A train interval's record, its `scalars` also to TensorBoard as "train/<key>", and the INT8
  // layers' record and scalars at the same step.
  void record_train(const MetricRecord& rec, const std::vector<std::string>& scalars, const Int8Run& int8);
  // curves.html from every record so far.
  void write_curves() const;

 private:
  bool writer_;
  Clock::time_point session_start_;
  std::string dir_;
  double wall_before_ = 0;  // the wall time of the sessions before a resume
  bool latest_points_here_ = false;
  bool file_log_ = false;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tb_;
};

}  // namespace octet::train
