// `octet sweep CKPT [--w-bits 1,2,4,8] [--a-bits 8,16,32] [-o DIR]`: the checkpoint evaluated with
// every PrecisionBatching (w, a) of the model's quantizable layers (the uniform plan of
// quant/precision.h: all but the final output layer), with the int8 baseline and in FP32, each with
// its batch-1 latency: the model's forward on one example (a language model: one token at a time,
// its state carried), the median over repeats of the mean time per sample or token. Prints a
// markdown table; with an output folder also sweep.csv and sweep.html (accuracy or perplexity
// against latency, the Pareto front marked: configurations no other one beats on both).
//   SweepResult r = run_sweep("runs/latest", SweepOptions{});
//   std::printf("%s", sweep_markdown(r).c_str());   write_sweep("sweep", r);
#pragma once

#include <string>
#include <vector>

#include "quant/precision.h"
#include "tools/train/task.h"

namespace octet::cli {

struct SweepOptions {
  std::vector<int> w_bits{1, 2, 4, 8};
  std::vector<int> a_bits{8, 16, 32};
  std::string data_root, device;
  int64_t threads = 2;
  int64_t repeats = 5;  // latency: timed blocks, the median reported
  int64_t steps = 20;   // latency: forwards (tokens) per timed block
};

struct SweepRow {
  std::string config;        // "fp32", "int8", "w4a16"
  train::EvalResult result;  // the last split evaluate_all reports (test)
  double latency_s = 0;
  double speedup = 0;  // FP32 latency / this latency
  bool pareto = false;
};

struct SweepResult {
  std::string checkpoint, device, layers;  // layers: "lstm: quantized, decoder: float"
  bool lm = false;                         // perplexity (lower is better) instead of top-1
  std::vector<SweepRow> rows;              // fp32 first, then int8, then (w, a) in order
  double quality(const SweepRow& r) const { return lm ? r.result.perplexity() : r.result.top1; }
};

SweepResult run_sweep(const std::string& path, const SweepOptions& opts);
// Marks the Pareto front: a row no other row beats on latency and quality at once.
void mark_pareto(SweepResult& r);
std::string sweep_markdown(const SweepResult& r);
std::string sweep_csv(const SweepResult& r);
std::string sweep_html(const SweepResult& r);
// <dir>/sweep.csv and <dir>/sweep.html (the folder is created); returns their paths.
std::vector<std::string> write_sweep(const std::string& dir, const SweepResult& r);

}  // namespace octet::cli
