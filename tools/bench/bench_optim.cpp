// Optimizer update throughput: 32-bit vs 8-bit state for Adam and SGD momentum on 2^26 f32
// parameters, on the CPU or a CUDA device. Reports ms per update per 1B parameters and the
// effective bandwidth (bytes the update must read and write / time) as a fraction of the copy
// bandwidth of the same device measured in the same run.
//   build/tools/bench/octet_bench_optim [--threads N] [--log2n 26] [--reps 5]
//                                       [--device cpu|cuda] [--isa portable|avx2|avx512]
//                                       [--optimizers all|adam] [--format table|json]
// --isa picks the CPU loops' instruction set (core/cpu/isa.h; default: the best this CPU has).
// --optimizers adam keeps the Adam rows only; --format json prints one JSON object per line (the
// run, then one per row) for tools/bench/optim_peers.py, which sets it beside PyTorch and
// bitsandbytes. On CUDA every timed call ends with a device synchronize.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cuda.h"
#include "core/octet.h"
#include "tools/bench/bench_util.h"

using namespace octet;
using octet::bench::best_time;
namespace {

// Copy bandwidth (STREAM "copy"): read + write of a buffer as large as the parameter. On the CPU
// the larger of memcpy and a plain loop, split over the threads; on CUDA a device-to-device copy.
double copy_bandwidth(int64_t n, Device device, int reps) {
  Tensor a = zeros({n}, TensorOptions().device(device)), b = zeros({n}, TensorOptions().device(device));
  double t = 0;
  if (device.is_cuda()) {
    t = best_time(reps, [&] {
      b.copy_(a);
      cuda::synchronize();
    });
  } else {
    const float* src = a.data<float>();
    float* dst = b.data<float>();
    t = std::min(best_time(reps,
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
  }
  return 2.0 * 4.0 * static_cast<double>(n) / t;
}

int usage(const char* what) {
  std::fprintf(stderr, "octet_bench_optim: %s\n", what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5, log2n = 26;
  std::string device_name = "cpu", isa_name, optimizers = "all", format = "table";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--log2n"))
      log2n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--device"))
      device_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--isa"))
      isa_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--optimizers"))
      optimizers = argv[i + 1];
    else if (!std::strcmp(argv[i], "--format"))
      format = argv[i + 1];
    else
      return usage((std::string("unknown option ") + argv[i]).c_str());
  }
  if (device_name != "cpu" && device_name != "cuda") return usage("--device must be cpu or cuda");
  if (optimizers != "all" && optimizers != "adam") return usage("--optimizers must be all or adam");
  if (format != "table" && format != "json") return usage("--format must be table or json");
  const Device device = device_name == "cuda" ? Device::cuda(0) : Device::cpu();
  if (device.is_cuda() && !cuda::is_available()) return usage("--device cuda: no CUDA device is available");
  if (!isa_name.empty()) {
    bool found = false;
    for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (isa_name != cpu::isa_name(isa)) continue;
      if (!cpu::isa_supported(isa)) return usage(("--isa " + isa_name + " is not supported here").c_str());
      cpu::set_active_isa(isa);
      found = true;
    }
    if (!found) return usage("--isa must be portable, avx2 or avx512");
  }
  set_num_threads(threads);
  const int64_t n = int64_t{1} << log2n;
  const double copy_bw = copy_bandwidth(n, device, reps);

  Generator g(0);
  Tensor p = randn({n}, DType::f32, &g).to(device);
  p.requires_grad_(true);
  p.set_grad((randn({n}, DType::f32, &g) * 1e-3).to(device));
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Optimizer>()> make;
    double bytes_per_param;  // what the update must read and write
  };
  // u8 code + the block's share of an f32 absmax, at the default block size
  const double code = 1.0 + 4.0 / static_cast<double>(StateOptions().block_size_);
  std::vector<Case> cases = {
      {"Adam 32-bit",
       [&] {
         return std::make_unique<Adam>(NamedTensors{{"p", p}}, AdamOptions(1e-3));
       },
       4 * 4 + 3 * 4},
      {"Adam 8-bit",
       [&] {
         return std::make_unique<Adam>(NamedTensors{{"p", p}}, AdamOptions(1e-3), StateOptions().state_bits(8));
       },
       2 * 4 + 4 + 4 * code},
      {"SGD momentum 32-bit",
       [&] {
         return std::make_unique<SGD>(NamedTensors{{"p", p}}, SGDOptions(1e-3).momentum(0.9));
       },
       3 * 4 + 2 * 4},
      {"SGD momentum 8-bit",
       [&] {
         return std::make_unique<SGD>(NamedTensors{{"p", p}}, SGDOptions(1e-3).momentum(0.9),
                                      StateOptions().state_bits(8));
       },
       2 * 4 + 4 + 2 * code},
  };
  // 4-bit state (CPU rows only; its CUDA kernels have not run yet): a matrix, whose second moment
  // takes the rank-1 path, and the 1-dim parameter, all block-wise.
  Tensor w;
  if (device.is_cpu()) {
    w = randn({int64_t{1} << (log2n / 2), n >> (log2n / 2)}, DType::f32, &g);
    w.requires_grad_(true);
    w.set_grad(randn(w.shape(), DType::f32, &g) * 1e-3);
    const double nibble = 0.5 + 4.0 / 128;  // half a byte + a block's (128) share of its scale
    cases.insert(
        cases.begin() + 2,
        Case{"Adam 4-bit, 1-dim",
             [&] {
               return std::make_unique<Adam>(NamedTensors{{"p", p}}, AdamOptions(1e-3), StateOptions().state_bits(4));
             },
             2 * 4 + 4 + 4 * nibble});
    cases.insert(
        cases.begin() + 2,
        Case{"Adam 4-bit",
             [&] {
               return std::make_unique<Adam>(NamedTensors{{"w", w}}, AdamOptions(1e-3), StateOptions().state_bits(4));
             },
             2 * 4 + 4 + 4 * nibble});
    cases.push_back(Case{"SGD momentum 4-bit",
                         [&] {
                           return std::make_unique<SGD>(NamedTensors{{"w", w}}, SGDOptions(1e-3).momentum(0.9),
                                                        StateOptions().state_bits(4));
                         },
                         2 * 4 + 4 + 2 * nibble});
  }
  if (optimizers == "adam") cases.resize(device.is_cpu() ? 4 : 2);
  const std::string where = device.is_cuda() ? cuda::device_name(0) : "cpu";
  const std::string isa = device.is_cuda() ? "" : std::string(cpu::isa_name(cpu::active_isa()));
  if (format == "json") {
    std::printf(
        "{\"run\": true, \"log2n\": %d, \"n\": %lld, \"threads\": %d, \"device\": \"%s\", \"isa\": \"%s\", "
        "\"reps\": %d, \"copy_gbps\": %.3f}\n",
        log2n, static_cast<long long>(n), threads, where.c_str(), isa.c_str(), reps, copy_bw / 1e9);
  } else if (device.is_cuda()) {
    std::printf("octet optimizer update: 2^%d = %lld f32 parameters on %s, best of %d\n", log2n,
                static_cast<long long>(n), where.c_str(), reps);
  } else {
    std::printf("octet optimizer update: 2^%d = %lld f32 parameters, %d thread(s), CPU loops %s, best of %d\n", log2n,
                static_cast<long long>(n), threads, isa.c_str(), reps);
  }
  if (format == "table") {
    std::printf("copy bandwidth (read+write, same run): %.1f GB/s\n\n", copy_bw / 1e9);
    std::printf("| %-20s | %10s | %16s | %12s | %10s | %8s |\n", "optimizer", "ms/update", "ms per 1B params",
                "state B/param", "GB/s", "% copy");
    std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(), std::string(12, '-').c_str(),
                std::string(18, '-').c_str(), std::string(14, '-').c_str(), std::string(12, '-').c_str(),
                std::string(10, '-').c_str());
  }
  for (const Case& c : cases) {
    auto opt = c.make();
    double t = best_time(reps, [&] {
      opt->step();
      if (device.is_cuda()) cuda::synchronize();
    });
    const double bw = c.bytes_per_param * static_cast<double>(n) / t;
    const double ms_per_1b = t * 1e3 * 1e9 / static_cast<double>(n);
    const double state = static_cast<double>(opt->state_bytes()) / static_cast<double>(n);
    if (format == "json") {
      std::printf(
          "{\"name\": \"%s\", \"ms\": %.4f, \"ms_per_1b\": %.3f, \"state_bytes_per_param\": %.4f, "
          "\"gbps\": %.3f}\n",
          c.name, t * 1e3, ms_per_1b, state, bw / 1e9);
    } else {
      std::printf("| %-20s | %10.1f | %16.1f | %12.3f | %10.1f | %7.1f%% |\n", c.name, t * 1e3, ms_per_1b, state,
                  bw / 1e9, 100.0 * bw / copy_bw);
    }
  }
  return 0;
}
