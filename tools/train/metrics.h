// Run metrics: one JSON object per line in <run>/metrics.jsonl (machine-readable), and
// <run>/curves.html, a self-contained page with SVG learning curves a person can open (plus, for
// INT8 runs, the d_c, lr factor and gradient clip of the INT8 layers whose d_c peaked highest).
//   MetricsLog log("runs/x");  log.record({{"split","train"}}, {{"step",100},{"loss",0.4}});
//   log.write_curves();
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/train/charts.h"

namespace octet::train {

struct MetricRecord {
  std::string split;                     // "train" (per log interval), "test" or "valid" (per epoch),
                                         // or "int8" (per log interval, INT8 layers' stats: tools/train/int8_run.h)
  std::map<std::string, double> values;  // step, epoch, loss, top1, lr, samples_per_s or tokens_per_s,
                                         // ppl (language models), ...; the counts (step,
                                         // skipped_steps, save_failures, world_size) are written as
                                         // integers, a non-finite value as null
};

class MetricsLog {
 public:
  // Appends to <dir>/metrics.jsonl; with `resume`, earlier records are read back first so the
  // curves cover the whole run (read_metrics with repair: a partial last line is cut off).
  MetricsLog(const std::string& dir, bool resume);
  void record(const MetricRecord& r);
  // Rewrites <dir>/curves.html from every record so far.
  void write_curves() const;
  const std::vector<MetricRecord>& records() const { return records_; }

 private:
  std::string dir_;
  std::ofstream out_;
  std::vector<MetricRecord> records_;
};

// Reads the records of a metrics.jsonl. Lines that are not JSON objects are skipped with one
// warning (they stay in the file); values that are not numbers (null, written for NaN and inf) are
// left out. A last line without its newline is what a run killed mid-write leaves: if it does not
// parse it is dropped with a warning, and with `repair` cut from the file (a whole record missing
// only its newline gets one), so appends that follow start on a line of their own. Throws
// octet::Error only when the file cannot be read.
std::vector<MetricRecord> read_metrics(const std::string& path, bool repair = false);

// The page itself (exposed for tests).
std::string curves_html(const std::vector<MetricRecord>& records, const std::string& title);

}  // namespace octet::train
