// Where an 8-bit optimizer update spends its time on the CPU: one quantization block (256
// elements, in L1) at a time, the parts of BlockwiseState::for_each_block timed separately --
// dequantize a buffer, Adam's rule on the f32 block, absmax + encode of a buffer -- beside the
// 32-bit rule on the same data. Reports ns, cycles and instructions per element (hardware counters
// through perf_event_open where the kernel allows it; "-" otherwise). With AVX-512, also the two
// code searches it could use (quant/cpu/blockwise.h): the threshold tree in 16 registers (in use)
// and the code table of quant/code_table.h read with vpgatherdd (written here only, checked to give
// the same codes), and the 4-bit encode and decode (quant/lowbit.h) for comparison.
//   build/tools/bench/octet_bench_8bit_parts [--isa portable|avx2|avx512] [--blocks 4096]
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "optim/cpu/rule_loop.h"
#include "quant/block_code.h"
#include "quant/blockwise.h"
#include "quant/code_table.h"
#include "quant/cpu/blockwise.h"
#include "quant/lowbit.h"
#include "tools/bench/bench_util.h"

#ifdef OCTET_CPU_X86
#include "core/cpu/x86_intrin.h"
#endif

using namespace octet;

namespace {

#ifdef OCTET_CPU_X86
// The code table search (quant/block_code.h, table_code) on 16 lanes, the entry read by a gather:
// what the issue asked to time against the tree on AVX-512. n: a multiple of 16.
OCTET_TARGET_AVX512 void encode_table_gather_avx512(const float* x, int64_t n, float absmax, const quant::CodeTable& t,
                                                    uint8_t* codes) {
  const __m512 a = _mm512_set1_ps(absmax);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), a);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());
    const __m512i b = _mm512_castps_si512(v);
    const __m512i key =
        _mm512_min_epu32(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(static_cast<int>(t.a1)));
    const __m512i d = _mm512_sub_epi32(key, _mm512_set1_epi32(static_cast<int>(t.a0)));
    const __mmask16 regular = _mm512_cmpge_epu32_mask(key, _mm512_set1_epi32(static_cast<int>(t.a0)));
    const __m512i mask = _mm512_set1_epi32(static_cast<int>((1u << t.shift) - 1));
    __m512i idx = _mm512_maskz_add_epi32(regular, _mm512_srli_epi32(d, t.shift), _mm512_set1_epi32(1));
    const __m512i low = _mm512_mask_mov_epi32(_mm512_min_epu32(key, mask), regular, _mm512_and_si512(d, mask));
    const __mmask16 neg = _mm512_movepi32_mask(b);
    idx = t.negatives_one_entry ? _mm512_mask_mov_epi32(idx, neg, _mm512_set1_epi32(static_cast<int>(t.half)))
                                : _mm512_mask_add_epi32(idx, neg, idx, _mm512_set1_epi32(static_cast<int>(t.half)));
    const __m512i e = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(t.entry), 4);
    const __m512i base = _mm512_srli_epi32(e, 24);
    const __m512i delta = _mm512_srai_epi32(_mm512_slli_epi32(e, 8), 28);
    const __mmask16 past = _mm512_cmpgt_epu32_mask(low, _mm512_and_si512(e, _mm512_set1_epi32(0xFFFFF)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i),
                     _mm512_cvtepi32_epi8(_mm512_mask_add_epi32(base, past, base, delta)));
  }
}
#endif

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
  const AdamRule<float> rule{.step_size = 1e-3f,
                             .bias_c2_sqrt = 0.9f,
                             .b1 = 0.9f,
                             .b2 = 0.999f,
                             .one_b1 = 0.1f,
                             .one_b2 = 1e-3f,
                             .eps = 1e-8f,
                             .wd = 0,
                             .shrink = 1,
                             .l2 = false,
                             .decay = false,
                             .amsgrad = false,
                             .buffers = 2};
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
#ifdef OCTET_CPU_X86
  if (isa == cpu::Isa::avx512) {
    for (auto [name, map, data, codes] :
         {std::tuple{"signed", signed_map, &m, &cm}, std::tuple{"unsigned", unsigned_map, &v, &cv}}) {
      const quant::CodeTable* table = quant::code_table(map);
      quant::cpu::SearchTree scratch;
      const quant::cpu::SearchTree& tree = quant::cpu::search_tree(map, scratch);
      const float a = quant::cpu::block_absmax(isa, data->data(), kBlock);
      std::vector<uint8_t> by_table(kBlock);
      encode_table_gather_avx512(data->data(), kBlock, a, *table, by_table.data());
      quant::cpu::detail::encode_avx512(data->data(), kBlock, a, tree, codes->data());
      if (by_table != *codes) return std::fprintf(stderr, "the gather search gave other codes\n"), 1;
      // Named captures: clang before 16 cannot capture a structured binding.
      row((std::string("encode only (tree), ") + name + " map").c_str(), n, reps, [&, in = data, out = codes] {
        for (int64_t b = 0; b < blocks; ++b)
          quant::cpu::detail::encode_avx512(in->data(), kBlock, a, tree, out->data());
      });
      row((std::string("encode only (gathers), ") + name + " map").c_str(), n, reps, [&, in = data] {
        for (int64_t b = 0; b < blocks; ++b) encode_table_gather_avx512(in->data(), kBlock, a, *table, by_table.data());
      });
    }
  }
#endif
  // The 4-bit codes of the same buffers (128-element blocks, as optim/lowbit_state.h runs them).
  std::vector<uint8_t> packed(kBlock / 2);
  row("4-bit absmax + encode, signed", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t k = 0; k < kBlock; k += 128) {
        const float a = quant::absmax4(m.data() + k, 128);
        quant::encode4(m.data() + k, 128, nullptr, a, quant::QuantMap4::dynamic_signed, packed.data() + k / 2);
      }
  });
  row("4-bit decode, signed", n, reps, [&] {
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t k = 0; k < kBlock; k += 128)
        quant::decode4(packed.data() + k / 2, 128, nullptr, am, quant::QuantMap4::dynamic_signed, ms.data() + k);
  });
  std::printf(
      "\n(one 8-bit Adam element = 2 dequantize + rule + 2 encode; the 32-bit update runs the same rule\n"
      "straight on memory: octet_bench_optim times both whole)\n");
}
