// Where an 8-bit optimizer update spends its time on the CPU: one quantization block (256
// elements, in L1) at a time, the parts of BlockwiseState::for_each_block timed separately --
// dequantize a buffer, Adam's rule on the f32 block, absmax + encode of a buffer -- beside the
// 32-bit rule on the same data. Reports ns, cycles and instructions per element (hardware counters
// through perf_event_open where the kernel allows it; "-" otherwise).
//   build/tools/bench/octet_bench_8bit_parts [--isa portable|avx2|avx512] [--blocks 4096]
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "optim/cpu/rule_loop.h"
#include "quant/blockwise.h"
#include "tools/bench/bench_util.h"

using namespace octet;

namespace {

// One hardware counter of this thread (-1 when unavailable).
struct Counter {
  int fd = -1;
  explicit Counter(uint64_t config) {
    perf_event_attr a{};
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = config;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  ~Counter() {
    if (fd >= 0) close(fd);
  }
  void start() const {
    if (fd < 0) return;
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  }
  double stop() const {
    if (fd < 0) return -1;
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    uint64_t v = 0;
    return read(fd, &v, sizeof v) == sizeof v ? static_cast<double>(v) : -1;
  }
};

void row(const char* name, double elements, int reps, const std::function<void()>& fn) {
  static const Counter cycles(PERF_COUNT_HW_CPU_CYCLES), instructions(PERF_COUNT_HW_INSTRUCTIONS);
  const double t = bench::best_time(reps, fn);
  cycles.start();
  instructions.start();
  fn();
  const double ins = instructions.stop(), cyc = cycles.stop();
  auto cell = [&](double v) { return v < 0 ? std::string("-") : std::to_string(v / elements).substr(0, 5); };
  std::printf("| %-34s | %8.3f | %8s | %8s |\n", name, t * 1e9 / elements, cell(cyc).c_str(), cell(ins).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int64_t blocks = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--blocks")) {
      blocks = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--isa")) {
      bool found = false;
      for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (argv[i + 1] != cpu::isa_name(isa)) continue;
        if (!cpu::isa_supported(isa)) return std::fprintf(stderr, "--isa %s: not supported here\n", argv[i + 1]), 2;
        cpu::set_active_isa(isa);
        found = true;
      }
      if (!found) return std::fprintf(stderr, "--isa must be portable, avx2 or avx512\n"), 2;
    } else {
      return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
  }
  constexpr int64_t kBlock = 256;
  const cpu::Isa isa = cpu::active_isa();
  Generator gen(0);
  // One block's parameter, gradient and f32 state, reused: the data stays in L1, as in the update.
  std::vector<float> p = randn({kBlock}, DType::f32, &gen).to_vector<float>();
  std::vector<float> g = (randn({kBlock}, DType::f32, &gen) * 1e-3).to_vector<float>();
  std::vector<float> m = (randn({kBlock}, DType::f32, &gen) * 1e-3).to_vector<float>();
  std::vector<float> v = (randn({kBlock}, DType::f32, &gen) * 1e-3).to_vector<float>();
  for (float& x : v) x *= x;
  const float* signed_map = quant::quant_map(quant::QuantMap::dynamic_signed).data();
  const float* unsigned_map = quant::quant_map(quant::QuantMap::dynamic_unsigned_nonzero).data();
  std::vector<uint8_t> cm(kBlock), cv(kBlock);
  float am = 0, av = 0;
  quant::quantize_block(m.data(), kBlock, signed_map, cm.data(), &am);
  quant::quantize_block(v.data(), kBlock, unsigned_map, cv.data(), &av);
  const AdamRule<float> rule{.step_size = 1e-3f, .bias_c2_sqrt = 0.9f, .b1 = 0.9f, .b2 = 0.999f, .one_b1 = 0.1f,
                             .one_b2 = 1e-3f, .eps = 1e-8f, .wd = 0, .shrink = 1, .l2 = false, .decay = false,
                             .amsgrad = false, .buffers = 2};
  std::vector<float> ps = p, ms = m, vs = v;
  float* bufs[2] = {ms.data(), vs.data()};
  const double n = static_cast<double>(blocks * kBlock);
  const int reps = 5;
  std::printf("8-bit Adam update by part: %lld blocks of %lld (in L1), one thread, CPU loops %s\n\n",
              static_cast<long long>(blocks), static_cast<long long>(kBlock), std::string(cpu::isa_name(isa)).c_str());
  std::printf("| %-34s | %8s | %8s | %8s |\n", "part (per element)", "ns", "cycles", "instr.");
  std::printf("|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str());
  row("dequantize, signed map", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b) quant::dequantize_block(cm.data(), kBlock, am, signed_map, ms.data());
  });
  row("Adam rule on the f32 block", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b) {
      std::memcpy(ps.data(), p.data(), sizeof(float) * kBlock);
      apply_rule(isa, rule, ps.data(), g.data(), StateBlock<float>{0, kBlock, bufs});
    }
  });
  row("absmax + encode, signed map", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b) quant::quantize_block(m.data(), kBlock, signed_map, cm.data(), &am);
  });
  row("absmax + encode, unsigned map", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b) quant::quantize_block(v.data(), kBlock, unsigned_map, cv.data(), &av);
  });
  std::printf("\n(one 8-bit Adam element = 2 dequantize + rule + 2 encode; the 32-bit update runs the same rule\n"
              "straight on memory: octet_bench_optim times both whole)\n");
}
