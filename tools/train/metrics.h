// Run metrics: one JSON object per line in <run>/metrics.jsonl (machine-readable), and
// <run>/curves.html, a self-contained page a person can open: the run's summary (from
// <run>/run.json and the records), SVG learning curves and, for INT8 runs, the layers' d_c as a
// layer x step heat map and the d_c, lr factor and gradient clip of those whose d_c peaked highest.
//   MetricsLog log("runs/x");  log.record({{"split","train"}}, {{"step",100},{"loss",0.4}});
//   log.write_curves();
#pragma once

#include <cstdint>
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

// What curves.html says of the run at its top besides what the records tell (its best evaluation
// and when, progress, wall time: the trainer's "wall_s" in its records): the trainer's knowledge of
// the run, kept in <run>/run.json next to metrics.jsonl.
struct RunFacts {
  std::string recipe;                    // the recipe file the run started from
  std::string model;                     // model.name (or a C++ model's type name)
  int64_t parameters = 0;                // 0: unknown
  std::string device;                    // as the log names it
  int64_t epochs = 0;                    // train.epochs (0: unknown)
  std::vector<std::string> int8_layers;  // in model order: the rows of the d_c heat map
};

class MetricsLog {
 public:
  // Appends to <dir>/metrics.jsonl; with `resume`, earlier records are read back first so the
  // curves cover the whole run (read_metrics with repair: a partial last line is cut off).
  MetricsLog(const std::string& dir, bool resume);
  void record(const MetricRecord& r);
  // This session's facts, written to <dir>/run.json (and shown by write_curves). A resumed run
  // keeps the recipe its first session named (a resume's recipe comes from the checkpoint).
  void set_facts(RunFacts facts);
  const RunFacts& facts() const { return facts_; }
  // Rewrites <dir>/curves.html from every record so far.
  void write_curves() const;
  const std::vector<MetricRecord>& records() const { return records_; }

 private:
  std::string dir_;
  std::ofstream out_;
  std::vector<MetricRecord> records_;
  RunFacts facts_;  // a resume reads back run.json's
};

// Reads the records of a metrics.jsonl. Lines that are not JSON objects are skipped with one
// warning (they stay in the file); values that are not numbers (null, written for NaN and inf) are
// left out. A last line without its newline is what a run killed mid-write leaves: if it does not
// parse it is dropped with a warning, and with `repair` cut from the file (a whole record missing
// only its newline gets one), so appends that follow start on a line of their own. Throws
// octet::Error only when the file cannot be read.
std::vector<MetricRecord> read_metrics(const std::string& path, bool repair = false);

// The page itself (exposed for tests): the run's summary (run_summary_html), its curves and, for
// INT8 runs, the d_c heat map and the charts of its layers.
std::string curves_html(const std::vector<MetricRecord>& records, const std::string& title, const RunFacts& facts = {});
// The summary at the top of the page: recipe, model, parameters, device, the best evaluation (a
// language model's lowest validation perplexity, else the highest top-1 of the per-epoch
// evaluations: valid where the run has them, else test) with its epoch and step, the progress and
// the wall time (the largest "wall_s" of the records: the trainer counts it over every session).
std::string run_summary_html(const std::vector<MetricRecord>& records, const RunFacts& facts);

}  // namespace octet::train
