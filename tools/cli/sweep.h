// `octet sweep CKPT`: a checkpoint evaluated with every PrecisionBatching (w, a) of its quantizable
// layers and with the paper's baselines (Lam et al., Tables II and III), each with its batch-1
// latency: the model's forward on one example (a language model: one token at a time, its state
// carried), the median over repeats of the mean time per sample or token.
//   - FP32; int8 (the zero-point baseline, quant/qgemm.h);
//   - same bits, W = A at 1, 4, 8 (standard quantized inference: weights and activations at the same
//     precision, activations scaled per row). They run on the PrecisionBatching kernel at a = w, which
//     computes exactly that integer product; at 1 bit the activations take the reference's 1-bit fake
//     quantization, round(x / max|x|) on 3 levels, which is the kernel's a = 2;
//   - 16-bit weights: the weights rounded to IEEE half precision, FP32 arithmetic (no 16-bit kernel
//     here: its latency is FP32's);
//   - PrecisionBatching at every (w, a), for each scheme asked (PbConfig::scheme: octet, paper).
// The layers: the uniform plan of quant/precision.h (all but the final output layer, as the paper's LM
// keeps its decoder float), or with all_layers every one (the paper's MNIST network). Prints the
// paper's table form (rows: method and bits; columns: quality, latency, speedups) and its Table II
// grid; with an output folder also sweep.csv and sweep.html (quality against latency, the Pareto
// front marked: configurations no other one beats on both).
// With --search (run_search): per-layer precision, as the paper picks bits per layer (Table III): layer
// by layer, the lowest PrecisionBatching (w, a) that keeps the quality within a budget of FP32's, and
// the plan file `octet eval --pbatch` and `octet export --pbatch` read.
//   SweepResult r = run_sweep("runs/latest", SweepOptions{});
//   std::printf("%s", sweep_markdown(r).c_str());   write_sweep("sweep", r);
//   SearchResult s = run_search("runs/latest", SweepOptions{}, parse_budget("1%"));  plan_yaml(s);
#pragma once

#include <string>
#include <vector>

#include "quant/precision.h"
#include "tools/train/task.h"

namespace octet::cli {

struct SweepOptions {
  std::vector<int> w_bits{1, 2, 4, 8};
  std::vector<int> a_bits{8, 16, 32};
  std::vector<int> same_bits{1, 4, 8};        // the W = A baselines (1..8); empty: none
  bool w16 = true;                            // the 16-bit-weights baseline
  std::vector<std::string> schemes{"octet"};  // PrecisionBatching schemes: octet, paper
  bool all_layers = false;                    // convert the final output layer too
  std::string data_root, device;
  int64_t threads = 2;
  int64_t repeats = 5;  // latency: timed blocks, the median reported
  int64_t steps = 20;   // latency: forwards (tokens) per timed block
  int64_t limit = 0;    // evaluate the first N test examples (a language model: tokens); 0: all
};

struct SweepRow {
  std::string method;            // "FP32", "int8", "W = A", "16-bit weights", "PrecisionBatching", "plan"
  std::string config;            // "fp32", "int8", "w1a1", "w16", "w4a16", "w4a16-paper"
  int w_bits = 32, a_bits = 32;  // as the paper's tables show them
  train::EvalResult result;      // the last split evaluate_all reports (test)
  double latency_s = 0;
  double speedup = 0;       // FP32 latency / this latency
  double speedup_int8 = 0;  // int8 latency / this latency (0: no int8 row)
  bool pareto = false;
};

struct SweepResult {
  std::string checkpoint, device, layers;  // layers: "lstm: quantized, decoder: float"
  bool lm = false;                         // perplexity (lower is better) instead of top-1
  std::vector<SweepRow> rows;              // fp32 first, int8, the baselines, then (w, a) in order
  double quality(const SweepRow& r) const { return lm ? r.result.perplexity() : r.result.top1; }
};

SweepResult run_sweep(const std::string& path, const SweepOptions& opts);
// Speedups over the rows "fp32" and "int8", and the Pareto front: a row no other row beats on latency
// and quality at once.
void finish_rows(SweepResult& r);
void mark_pareto(SweepResult& r);
// The paper's table form (method, W and A bits, quality, loss, latency, speedups, Pareto), then
// Table II's grid (rows: weight bits; columns: activation bits 32, 16, 8 and = W; cells: quality).
std::string sweep_markdown(const SweepResult& r);
std::string sweep_grid_markdown(const SweepResult& r);
std::string sweep_csv(const SweepResult& r);
std::string sweep_html(const SweepResult& r);
// <dir>/sweep.csv and <dir>/sweep.html (the folder is created); returns their paths.
std::vector<std::string> write_sweep(const std::string& dir, const SweepResult& r);

// ---- the per-layer search

// A quality budget: "1%" (relative to FP32's quality) or "0.5" (in the metric's units: perplexity, or
// accuracy points). An Error naming --budget otherwise.
struct Budget {
  double value = 1.0;
  bool relative = true;
  std::string text() const;
};
Budget parse_budget(const std::string& text);

struct SearchResult {
  bool lm = false;
  std::string checkpoint, device, budget, search_split;  // search_split: "valid" or "test"
  double fp32_search = 0, bound = 0;                     // FP32's quality on the search split, and the worst allowed
  double plan_search = 0;                                // the plan's quality on the search split
  int evaluations = 0;
  // Every quantizable layer in named_modules() order with its precision (unsearched ones float).
  std::vector<quant::ConvertedLayer> layers;
  std::vector<SweepRow> rows;  // fp32, int8, plan: on the last split, with latency and speedups
};
// Layer by layer in named_modules() order (the others float, or as already chosen), the first of the
// candidates (the PrecisionBatching (w, a) of opts, for each scheme, by w, then a, ascending) whose
// model keeps the quality on the search split (valid for a language model, else test) within the
// budget; a layer none keeps stays float. Searched: the layers run_sweep converts.
SearchResult run_search(const std::string& path, const SweepOptions& opts, const Budget& budget);
// The plan as a plan file (tools/cli/quant_plan.h): every quantizable layer named.
std::string plan_yaml(const SearchResult& s);
// The assignment in the paper's notation: "(4,8)(1,8)(1,8)" (float: "(32)").
std::string plan_notation(const SearchResult& s);
std::string search_markdown(const SearchResult& s);

// (w, a) with the clip search and the scheme named ("octet" or "paper"); an Error naming --scheme for
// another name.
quant::PbConfig pb_config_for(int w_bits, int a_bits, const std::string& scheme);

}  // namespace octet::cli
