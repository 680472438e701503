// Zero-point int8 GEMV benchmark (quant/qgemm.h): qlinear (int8 weights, per-row uint8 activation
// quantization included, float output) against the FP32 product x W^T (oneDNN SGEMM through
// matmul, W^T pre-transposed), for square layers 512..4096 at batch 1, 8 and 32 (where oneDNN's
// GEMM takes over), every supported CPU path of quant/cpu/qgemm.h forced in turn. Times per call
// in microseconds, best of --reps runs of enough calls to last ~20 ms; a markdown table on stdout.
//   build/tools/bench/octet_bench_qgemm [--threads 1] [--reps 5] [--size 4096] [--batch B] [--cpu-time]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/qgemm.h"
#include "quant/qgemm.h"

using namespace octet;
namespace qc = octet::quant::cpu;

namespace {

bool g_cpu_time = false;

// Wall time, or with --cpu-time this thread's CPU time (one thread only: it leaves out the time
// the thread waits for a core, so loaded machines give steadier numbers).
double now() {
  if (!g_cpu_time) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double run_time(int64_t n, const std::function<void()>& fn) {
  const double t0 = now();
  for (int64_t i = 0; i < n; ++i) fn();
  return now() - t0;
}

// Seconds per call of fn: best of `reps` runs of n calls, n chosen so a run lasts ~20 ms (after
// the calibration runs, which warm up).
double per_call(int reps, const std::function<void()>& fn) {
  int64_t n = 1;
  for (;;) {
    const double t = run_time(n, fn);
    if (t > 0.02 || n >= (int64_t{1} << 20)) break;
    n *= t < 0.002 ? 10 : 2;
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) best = std::min(best, run_time(n, fn));
  return best / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  int64_t only_size = 0, only_batch = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--size") && i + 1 < argc)
      only_size = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc)
      only_batch = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--cpu-time"))
      g_cpu_time = true;
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps N] [--size N] [--batch N] [--cpu-time]\n", argv[0]);
      return 2;
    }
  }
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time needs --threads 1\n");
    return 2;
  }
  set_num_threads(threads);
  NoGradGuard no_grad;
  std::vector<qc::QgemmPath> paths;
  for (qc::QgemmPath p : {qc::QgemmPath::automatic, qc::QgemmPath::portable, qc::QgemmPath::avx2,
                          qc::QgemmPath::avx512_vnni, qc::QgemmPath::dnnl})
    if (qc::qgemm_path_supported(p)) paths.push_back(p);

  std::printf("threads %d, best of %d, %s; times in us per call (int8: qlinear incl. activation quantization)\n\n",
              threads, reps, g_cpu_time ? "thread CPU time" : "wall time");
  std::printf("| size | batch | fp32 matmul |");
  for (qc::QgemmPath p : paths) std::printf(" int8 %s |", std::string(qc::qgemm_path_name(p)).c_str());
  std::printf(" fp32 / int8 automatic |\n|---|---|---|");
  for (size_t i = 0; i < paths.size(); ++i) std::printf("---|");
  std::printf("---|\n");

  Generator gen(1);
  for (int64_t size : {512, 1024, 2048, 4096}) {
    if (only_size != 0 && size != only_size) continue;
    const Tensor w = randn({size, size}, {}, &gen);
    const Tensor wt = w.t().contiguous();
    const quant::QLinearWeights qw = quant::qlinear_prepare(w, /*clip_search=*/false);
    for (int64_t batch : only_batch != 0 ? std::vector<int64_t>{only_batch} : std::vector<int64_t>{1, 8, 32}) {
      const Tensor x = randn({batch, size}, {}, &gen);
      const double fp32 = per_call(reps, [&] { matmul(x, wt); });
      std::printf("| %lld | %lld | %.1f |", static_cast<long long>(size), static_cast<long long>(batch), fp32 * 1e6);
      double automatic = 0.0;
      for (qc::QgemmPath p : paths) {
        const qc::QgemmPath prev = qc::set_qgemm_path(p);
        const double t = per_call(reps, [&] { quant::qlinear(qw, x); });
        qc::set_qgemm_path(prev);
        if (p == qc::QgemmPath::automatic) automatic = t;
        std::printf(" %.1f |", t * 1e6);
      }
      std::printf(" %.2fx |\n", fp32 / automatic);
      std::fflush(stdout);
    }
  }
  return 0;
}
