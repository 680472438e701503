// Optimizer update throughput: 32-bit vs 8-bit state for Adam and SGD momentum on 2^26 f32
// parameters (CPU). Reports ms per update per 1B parameters and the effective bandwidth (bytes
// the update must read and write / time) as a fraction of this machine's copy bandwidth measured
// in the same run.
//   build/tools/bench/octet_bench_optim [--threads N] [--log2n 26] [--reps 5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/octet.h"
#include "tools/bench/bench_util.h"

using namespace octet;
using octet::bench::best_time;
int main(int argc, char** argv) {
  int threads = 2, reps = 5, log2n = 26;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--log2n"))
      log2n = std::atoi(argv[i + 1]);
  }
  set_num_threads(threads);
  const int64_t n = int64_t{1} << log2n;
  // Copy bandwidth (STREAM "copy"): read + write of a buffer as large as the parameter, as the
  // larger of memcpy and a plain loop, split over the threads.
  Tensor a = zeros({n}), b = zeros({n});
  const float* src = a.data<float>();
  float* dst = b.data<float>();
  double tcopy = std::min(best_time(reps,
                                    [&] {
                                      parallel_for(0, n, 1 << 18, [&](int64_t lo, int64_t hi) {
                                        std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo) * 4);
                                      });
                                    }),
                          best_time(reps, [&] {
                            parallel_for(0, n, 1 << 18, [&](int64_t lo, int64_t hi) {
                              for (int64_t i = lo; i < hi; ++i) dst[i] = src[i];
                            });
                          }));
  double copy_bw = 2.0 * 4.0 * static_cast<double>(n) / tcopy;

  Generator g(0);
  Tensor p = randn({n}, DType::f32, &g);
  p.requires_grad_(true);
  p.set_grad(randn({n}, DType::f32, &g) * 1e-3);
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Optimizer>()> make;
    double bytes_per_param;  // what the update must read and write
  };
  const double code = 1.0 + 4.0 / 2048;  // u8 code + the block's share of an f32 absmax
  std::vector<Case> cases = {
      {"Adam 32-bit",
       [&] {
         return std::make_unique<Adam>(NamedTensors{{"p", p}}, AdamOptions(1e-3));
       },
       4 * 4 + 3 * 4},
      {"Adam 8-bit",
       [&] {
         return std::make_unique<Adam>(NamedTensors{{"p", p}}, AdamOptions(1e-3), StateOptions().bits(8));
       },
       2 * 4 + 4 + 4 * code},
      {"SGD momentum 32-bit",
       [&] {
         return std::make_unique<SGD>(NamedTensors{{"p", p}}, SGDOptions(1e-3).momentum(0.9));
       },
       3 * 4 + 2 * 4},
      {"SGD momentum 8-bit",
       [&] {
         return std::make_unique<SGD>(NamedTensors{{"p", p}}, SGDOptions(1e-3).momentum(0.9), StateOptions().bits(8));
       },
       2 * 4 + 4 + 2 * code},
  };
  std::printf("octet optimizer update: 2^%d = %lld f32 parameters, %d thread(s), best of %d\n", log2n,
              static_cast<long long>(n), threads, reps);
  std::printf("copy bandwidth (read+write, same run): %.1f GB/s\n\n", copy_bw / 1e9);
  std::printf("| %-20s | %10s | %16s | %12s | %10s | %8s |\n", "optimizer", "ms/update", "ms per 1B params",
              "state B/param", "GB/s", "% copy");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(), std::string(12, '-').c_str(),
              std::string(18, '-').c_str(), std::string(14, '-').c_str(), std::string(12, '-').c_str(),
              std::string(10, '-').c_str());
  for (const Case& c : cases) {
    auto opt = c.make();
    double t = best_time(reps, [&] { opt->step(); });
    double bw = c.bytes_per_param * static_cast<double>(n) / t;
    std::printf("| %-20s | %10.1f | %16.1f | %12.3f | %10.1f | %7.1f%% |\n", c.name, t * 1e3,
                t * 1e3 * 1e9 / static_cast<double>(n),
                static_cast<double>(opt->state_bytes()) / static_cast<double>(n), bw / 1e9, 100.0 * bw / copy_bw);
  }
  return 0;
}
