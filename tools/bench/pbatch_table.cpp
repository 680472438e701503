// `octet bench pbatch` (tools/bench/pbatch_table.h).
#include "tools/bench/pbatch_table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include <time.h>

#include "core/cpu/isa.h"
#include "core/cuda.h"
#include "core/octet.h"
#include "quant/cpu/pbatch.h"
#include "quant/cpu/qgemm.h"
#include "quant/pbatch.h"
#include "quant/qgemm.h"

#ifdef OCTET_CPU_X86
#include "core/cpu/x86_intrin.h"
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

// One size's times (seconds per call).
struct SizeTimes {
  int64_t n = 0;
  double fp32 = 0, int8 = 0;  // int8 0: no int8 kernel on this device
  std::string fp32_src, int8_src;
  std::vector<std::vector<double>> pb;  // [w index][a index]
};

SizeTimes measure_size(const PbBenchOptions& o, int threads, Device dev, int64_t n, const std::function<void()>& sync) {
  SizeTimes st;
  st.n = n;
  const bool on_cuda = dev.is_cuda();
  Generator gen(1234 + static_cast<uint64_t>(n));
  const Tensor w_host = randn({n, n}, {}, &gen);
  const Tensor x_host = randn({o.batch, n}, {}, &gen);
  const Tensor w = w_host.to(dev), x = x_host.to(dev), w_t = w_host.t().contiguous().to(dev);
  // FP32: octet's own ops, then the hand GEMV (CPU, batch 1).
  const double t_linear = median_time(
      o, threads, [&] { (void)linear(x, w); }, sync);
  const double t_matmul = median_time(
      o, threads, [&] { (void)matmul(x, w_t); }, sync);
  st.fp32 = std::min(t_linear, t_matmul);
  st.fp32_src = t_linear <= t_matmul ? "linear" : "matmul";
#ifdef OCTET_CPU_X86
  if (!on_cuda && o.batch == 1 && have_avx512_gemv()) {
    std::vector<float> y(static_cast<size_t>(n));
    const float* wp = w_host.data<float>();
    const float* xp = x_host.data<float>();
    const double t_gemv = median_time(
        o, threads,
        [&] { parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) { gemv_avx512_rows(wp, xp, n, y.data(), r0, r1); }); },
        sync);
    if (t_gemv < st.fp32) {
      st.fp32 = t_gemv;
      st.fp32_src = "avx512 gemv";
    }
  }
#endif
  // The int8 baseline (quant::qlinear: s8 weights, u8 activations quantized per call): on the CPU the
  // fastest of its GEMM paths (quant/cpu/qgemm.h), each forced in turn.
  try {
    const quant::QLinearWeights qw = quant::qlinear_prepare(w, o.clip_search);
    auto time_int8 = [&] {
      return median_time(
          o, threads, [&] { (void)quant::qlinear(qw, x); }, sync);
    };
    if (on_cuda) {
      st.int8 = time_int8(), st.int8_src = "qlinear";
    } else {
      namespace qc = quant::cpu;
      for (qc::QgemmPath p :
           {qc::QgemmPath::avx512_vnni, qc::QgemmPath::dnnl, qc::QgemmPath::avx2, qc::QgemmPath::portable}) {
        if (!qc::qgemm_path_supported(p)) continue;
        const qc::QgemmPath prev = qc::set_qgemm_path(p);
        const double t = time_int8();
        qc::set_qgemm_path(prev);
        if (st.int8 == 0 || t < st.int8) st.int8 = t, st.int8_src = std::string(qc::qgemm_path_name(p));
      }
    }
  } catch (const Error&) {
    // No int8 kernel for this device in this build: n/a.
  }
  for (int wb : o.w_bits) {
    const quant::PbWeights pw = quant::pb_preprocess(w, wb, o.clip_search);
    st.pb.emplace_back();
    for (int ab : o.a_bits)
      st.pb.back().push_back(median_time(
          o, threads, [&] { (void)quant::pb_linear(pw, x, ab); }, sync));
  }
  return st;
}

std::string cell(double fp32, double t) { return fmt("%.2fx", fp32 / t) + " (" + fmt("%.1f", t * 1e6) + ")"; }

// One table per size, rows w bits, columns a bits (octet's first layout).
void print_grid(const PbBenchOptions& o, const SizeTimes& st, std::ostream& out) {
  for (size_t i = 0; i < o.w_bits.size(); ++i) {
    const int wb = o.w_bits[i];
    out << "| " << st.n << " | " << wb << " | " << fmt("%.1f", st.fp32 * 1e6) << " (" << st.fp32_src << ") |";
    for (size_t j = 0; j < o.a_bits.size(); ++j) out << " " << cell(st.fp32, st.pb[i][j]) << " |";
    out << " " << fmt("%.1fx", 32.0 / (wb + 1)) << " | "
        << (st.int8 > 0 ? cell(st.fp32, st.int8) + " " + st.int8_src : std::string("n/a")) << " |\n";
  }
  out.flush();
}

// The paper's Table I: methods as rows, sizes as columns.
void print_paper(const PbBenchOptions& o, const std::vector<SizeTimes>& sizes, std::ostream& out) {
  out << "| Method |";
  for (const auto& st : sizes) out << " " << st.n << "x" << st.n << " |";
  out << "\n|---|";
  for (size_t i = 0; i < sizes.size(); ++i) out << "---:|";
  out << "\n";
  for (size_t i = 0; i < o.w_bits.size(); ++i)
    for (size_t j = 0; j < o.a_bits.size(); ++j) {
      out << "| PBatch-" << o.w_bits[i] << " (a=" << o.a_bits[j] << ") |";
      for (const auto& st : sizes) out << " " << cell(st.fp32, st.pb[i][j]) << " |";
      out << "\n";
    }
  out << "| Int8 |";
  for (const auto& st : sizes) out << " " << (st.int8 > 0 ? cell(st.fp32, st.int8) : std::string("n/a")) << " |";
  out << "\n| Float32 |";
  for (const auto& st : sizes) out << " 1 (" << fmt("%.1f", st.fp32 * 1e6) << ") |";
  out << "\n\nInt8: the fastest int8 path per size:";
  for (const auto& st : sizes) out << " " << st.n << " " << (st.int8 > 0 ? st.int8_src : "n/a") << ";";
  out << " Float32: the fastest FP32 per size:";
  for (const auto& st : sizes) out << " " << st.n << " " << st.fp32_src << ";";
  out << "\n";
  out.flush();
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
  const unsigned cores = std::thread::hardware_concurrency();
  if (!on_cuda && cores > 0 && static_cast<unsigned>(threads) > cores)
    out << "Warning: " << threads << " threads on " << cores
        << " cores: the threads share cores, so the times measure the oversubscription.\n\n";
  out << "Cells: speedup over FP32 (time in us); pb_linear and int8 qlinear include the activations' "
         "quantization. FP32: the best of octet matmul/linear ("
      << (on_cuda ? "cuBLAS" : "oneDNN") << ")" << (have_avx512_gemv() && !on_cuda ? " and an AVX-512 FMA GEMV" : "")
      << "; int8: qlinear on the fastest of its GEMM paths" << (o.paper_layout ? "." : " (named after the cell).")
      << "\n\n";
  if (o.paper_layout) {
    std::vector<SizeTimes> sizes;
    for (int64_t n : o.sizes) sizes.push_back(measure_size(o, threads, dev, n, sync));
    print_paper(o, sizes, out);
    return;
  }
  out << "| N | w bits | FP32 us (best of) |";
  for (int a : o.a_bits) out << " a" << a << " |";
  out << " ideal 32/(n+1) | int8 qlinear |\n|---|---|---|";
  for (size_t i = 0; i < o.a_bits.size(); ++i) out << "---|";
  out << "---|---|\n";
  for (int64_t n : o.sizes) print_grid(o, measure_size(o, threads, dev, n, sync), out);
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
  const unsigned cores = std::thread::hardware_concurrency();
  for (int t : o.threads) {
    OCTET_CHECK(t >= 1, "bench pbatch: expected --threads >= 1, got ", t);
    if (!dev.is_cuda() && cores > 0 && static_cast<unsigned>(t) > cores)
      std::cerr << "warning: bench pbatch --threads " << t << " exceeds this machine's " << cores
                << " cores; the times will measure threads sharing cores\n";
  }
  for (int t : o.threads) {
    run_table(o, t, dev, out);
  }
  set_num_threads(saved);
}

}  // namespace octet::bench
