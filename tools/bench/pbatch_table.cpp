// `octet bench pbatch` (tools/bench/pbatch_table.h).
#include "tools/bench/pbatch_table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include <time.h>

#include "core/cpu/isa.h"
#include "core/cuda.h"
#include "core/octet.h"
#include "quant/cpu/pbatch.h"
#include "quant/pbatch.h"
#include "quant/qgemm.h"

#ifdef OCTET_CPU_X86
// GCC 12's AVX-512 headers build unmasked intrinsics on a self-initialized "undefined" vector,
// which -Wuninitialized reports once inlined (GCC bug 105593); the values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace octet::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds: wall clock, or with cpu_time on one thread that thread's CPU time (on a machine shared
// with other jobs, time spent descheduled does not count). Other threads' CPU time is only updated
// at scheduler ticks, so with more threads it is always the wall clock.
bool use_cpu_time(const PbBenchOptions& o, int threads) { return o.cpu_time && threads == 1; }

double now(const PbBenchOptions& o, int threads) {
  if (!use_cpu_time(o, threads)) return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Median seconds per call of fn: a warm-up, a calibration to size the samples so that `reps`
// samples take about min_time in all (short samples, so that a preempted one is an outlier the
// median drops), then the median sample. `sync` ends each sample (CUDA).
double median_time(const PbBenchOptions& o, int threads, const std::function<void()>& fn,
                   const std::function<void()>& sync) {
  fn();
  sync();
  int64_t calls = 0;
  const double t0 = now(o, threads);
  double elapsed = 0.0;
  while (elapsed < 0.005 || calls < 2) {
    fn();
    sync();
    ++calls;
    elapsed = now(o, threads) - t0;
  }
  const int reps = std::max(1, o.reps);
  const double per_call = elapsed / static_cast<double>(calls);
  const int64_t inner = std::max<int64_t>(1, static_cast<int64_t>(o.min_time / reps / per_call));
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    const double s0 = now(o, threads);
    for (int64_t i = 0; i < inner; ++i) fn();
    sync();
    samples.push_back((now(o, threads) - s0) / static_cast<double>(inner));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

#ifdef OCTET_CPU_X86
// y[r] = sum_k w[r, k] x[k], four rows at a time with FMA: the hand-written FP32 baseline (a
// benchmark only, so FMA is fine here). K a multiple of 16 or a masked tail.
__attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl,avx512bw"))) void gemv_avx512_rows(const float* w,
                                                                                             const float* x, int64_t k,
                                                                                             float* y, int64_t r0,
                                                                                             int64_t r1) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (k % 16)) - 1u);
  const int64_t kb = k - k % 16;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    const float* w0 = w + r * k;
    for (int64_t i = 0; i < kb; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k + i), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + 2 * k + i), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + 3 * k + i), xv, a3);
    }
    if (tail) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + kb);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + kb), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + k + kb), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + 2 * k + kb), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + 3 * k + kb), xv, a3);
    }
    y[r] = _mm512_reduce_add_ps(a0);
    y[r + 1] = _mm512_reduce_add_ps(a1);
    y[r + 2] = _mm512_reduce_add_ps(a2);
    y[r + 3] = _mm512_reduce_add_ps(a3);
  }
  for (; r < r1; ++r) {
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < kb; i += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + i), _mm512_loadu_ps(x + i), a);
    if (tail) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w + r * k + kb), _mm512_maskz_loadu_ps(tail, x + kb), a);
    y[r] = _mm512_reduce_add_ps(a);
  }
}
#endif

bool have_avx512_gemv() {
#ifdef OCTET_CPU_X86
  return octet::cpu::isa_supported(octet::cpu::Isa::avx512);
#else
  return false;
#endif
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void run_table(const PbBenchOptions& o, int threads, Device dev, std::ostream& out) {
  set_num_threads(threads);
  const bool on_cuda = dev.is_cuda();
  const std::function<void()> sync =
      on_cuda ? std::function<void()>([] { octet::cuda::synchronize(); }) : std::function<void()>([] {});
  out << "\n### PrecisionBatching vs FP32 GEMV, batch " << o.batch << ", " << dev << ", " << threads
      << (threads == 1 ? " thread" : " threads");
  if (!on_cuda) out << ", kernel " << quant::cpu::pb_kernel_name(quant::cpu::pb_kernel());
  out << (use_cpu_time(o, threads) ? ", thread CPU time" : ", wall clock");
  out << "\n\nload average before: " << load_average() << "\n\n";
  out << "Cells: speedup over FP32 (time in us); pb_linear and int8 qlinear include the activations' "
         "quantization. "
         "FP32: the best of octet matmul/linear (oneDNN)"
      << (have_avx512_gemv() && !on_cuda ? " and an AVX-512 FMA GEMV" : "") << ".\n\n";
  out << "| N | w bits | FP32 us (best of) |";
  for (int a : o.a_bits) out << " a" << a << " |";
  out << " ideal 32/(n+1) | int8 qlinear |\n|---|---|---|";
  for (size_t i = 0; i < o.a_bits.size(); ++i) out << "---|";
  out << "---|---|\n";
  for (int64_t n : o.sizes) {
    Generator gen(1234 + static_cast<uint64_t>(n));
    const Tensor w_host = randn({n, n}, {}, &gen);
    const Tensor x_host = randn({o.batch, n}, {}, &gen);
    const Tensor w = w_host.to(dev), x = x_host.to(dev), w_t = w_host.t().contiguous().to(dev);
    // FP32: octet's own ops, then the hand GEMV (CPU, batch 1).
    const double t_linear = median_time(
        o, threads, [&] { (void)linear(x, w); }, sync);
    const double t_matmul = median_time(
        o, threads, [&] { (void)matmul(x, w_t); }, sync);
    double fp32 = std::min(t_linear, t_matmul);
    std::string fp32_src = t_linear <= t_matmul ? "linear" : "matmul";
#ifdef OCTET_CPU_X86
    if (!on_cuda && o.batch == 1 && have_avx512_gemv()) {
      std::vector<float> y(static_cast<size_t>(n));
      const float* wp = w_host.data<float>();
      const float* xp = x_host.data<float>();
      const double t_gemv = median_time(
          o, threads,
          [&] {
            parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) { gemv_avx512_rows(wp, xp, n, y.data(), r0, r1); });
          },
          sync);
      if (t_gemv < fp32) {
        fp32 = t_gemv;
        fp32_src = "avx512 gemv";
      }
    }
#endif
    // The int8 baseline (quant::qlinear: s8 weights, u8 activations quantized per call): one time per size.
    std::string int8_cell = "n/a";
    try {
      const quant::QLinearWeights qw = quant::qlinear_prepare(w, o.clip_search);
      const double t_int8 = median_time(
          o, threads, [&] { (void)quant::qlinear(qw, x); }, sync);
      int8_cell = fmt("%.2fx", fp32 / t_int8) + " (" + fmt("%.1f", t_int8 * 1e6) + ")";
    } catch (const Error&) {
      // No int8 kernel for this device in this build: the column stays n/a.
    }
    for (int wb : o.w_bits) {
      const quant::PbWeights pw = quant::pb_preprocess(w, wb, o.clip_search);
      out << "| " << n << " | " << wb << " | " << fmt("%.1f", fp32 * 1e6) << " (" << fp32_src << ") |";
      for (int ab : o.a_bits) {
        const double t = median_time(
            o, threads, [&] { (void)quant::pb_linear(pw, x, ab); }, sync);
        out << " " << fmt("%.2fx", fp32 / t) << " (" << fmt("%.1f", t * 1e6) << ") |";
      }
      out << " " << fmt("%.1fx", 32.0 / (wb + 1)) << " | " << int8_cell << " |\n";
      out.flush();
    }
  }
}

}  // namespace

void run_pbatch_bench(const PbBenchOptions& o, std::ostream& out) {
  const Device dev = Device::parse(o.device);
  OCTET_CHECK(!dev.is_cuda() || octet::cuda::is_available(), "bench pbatch: --device ", o.device,
              " but no CUDA device is available in this build or on this machine");
  OCTET_CHECK(o.batch >= 1, "bench pbatch: expected --batch >= 1, got ", o.batch);
  for (int64_t n : o.sizes) OCTET_CHECK(n >= 1, "bench pbatch: expected sizes >= 1, got ", n);
  for (int b : o.w_bits) quant::check_pb_config({b, quant::kPbMinActivationBits, false}, "bench pbatch --w-bits");
  for (int b : o.a_bits) quant::check_pb_config({1, b, false}, "bench pbatch --a-bits");
  const int saved = get_num_threads();
  for (int t : o.threads) {
    OCTET_CHECK(t >= 1, "bench pbatch: expected --threads >= 1, got ", t);
    run_table(o, t, dev, out);
  }
  set_num_threads(saved);
}

}  // namespace octet::bench
