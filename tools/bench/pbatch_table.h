// `octet bench pbatch`: the PrecisionBatching kernel against FP32 GEMV, laid out like Table I of the
// paper (Lam et al.): for each square size N at batch 1, the FP32 time (the best of octet's matmul /
// linear, oneDNN SGEMM underneath, and a plain AVX-512 GEMV written here), then per weight bits (rows)
// and activation bits (columns) the speedup of pb_linear, activation quantization included, beside
// the ideal 32 / (n + 1) and the int8 baseline quant::qlinear (quant/qgemm.h). Times are medians of repeated runs after
// a warm-up; nothing is asserted.
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
  int reps = 31;             // timed samples per measurement (the median is reported)
  double min_time = 0.05;    // seconds per measurement, split over the samples
  bool cpu_time = false;     // one thread: time by its CPU time, not the wall clock
  bool clip_search = false;  // the weights' clip search does not change the kernel's time
};

void run_pbatch_bench(const PbBenchOptions& o, std::ostream& out);

}  // namespace octet::bench
