// `octet bench pbatch`: the PrecisionBatching kernel against FP32 GEMV and the int8 baseline, at
// batch 1 by default. FP32 is the best of octet's matmul / linear (oneDNN SGEMM underneath) and a
// plain AVX-512 GEMV written here; int8 is quant::qlinear (quant/qgemm.h) on the fastest of its CPU
// GEMM paths (VNNI, oneDNN, AVX2, portable), each forced in turn. Two layouts:
//   paper_layout (--paper-layout): Table I of the paper (Lam et al.): one row per method, PBatch-n
//     (a=k) for each weight and activation width, Int8, Float32; one column per size N x N; cells the
//     speedup over FP32 (time in us);
//   otherwise, per size N one row per weight width: FP32's time, pb_linear's speedup per activation
//     width, the ideal 32 / (n + 1) and int8's speedup.
// Times include the activations' quantization; medians of repeated runs after a warm-up; nothing
// is asserted. More threads than cores is warned about (the times then measure the sharing).
//   bench::PbBenchOptions o;  o.sizes = {1024};  o.threads = {1, 2};
//   bench::run_pbatch_bench(o, std::cout);   // a markdown table per thread count
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace octet::bench {

struct PbBenchOptions {
  std::vector<int64_t> sizes{512, 1024, 2048, 4096};
  std::vector<int> w_bits{1, 2, 4, 8};
  std::vector<int> a_bits{8, 16, 32};
  std::vector<int> threads{1};
  std::string device = "cpu";  // cpu, cuda or cuda:N
  int64_t batch = 1;
  int reps = 31;              // timed samples per measurement (the median is reported)
  double min_time = 0.05;     // seconds per measurement, split over the samples
  bool cpu_time = false;      // one thread: time by its CPU time, not the wall clock
  bool clip_search = false;   // the weights' clip search does not change the kernel's time
  bool paper_layout = false;  // Table I as the paper lays it out: methods as rows, sizes as columns
};

void run_pbatch_bench(const PbBenchOptions& o, std::ostream& out);

}  // namespace octet::bench
