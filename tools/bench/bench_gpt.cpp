// A GPT training step (models/gpt.h): forward, cross-entropy, backward and an AdamW step (lr 3e-4,
// weight decay 0.1), f32 or (--precision bf16) bf16 mixed precision (octet's AutocastGuard,
// PyTorch's torch.autocast), on random tokens, beside the same model in PyTorch
// (bench_gpt_torch.py), the two alternating round by round: tokens/s of the best step and the
// process's peak memory (resident size on the CPU, allocated memory on a GPU). --int8-linear 1 adds
// the same model (the same initial weights) with INT8-trained Linear layers (quant.int8_linear:
// quant::enable_int8_linear with the default config, DSGC included) to the rounds; the peak memory
// is then the process's, both models together. --dropout P trains with dropout P (the recipes' 0.1:
// attention probabilities, residual branches and embeddings) on both sides.
//   build/tools/bench/octet_bench_gpt [--device cpu|cuda] [--layers 6] [--width 384] [--heads 6]
//       [--context 256] [--batch 16] [--vocab 8192] [--steps 3] [--rounds 2] [--threads N]
//       [--precision f32|bf16] [--dropout 0] [--int8-linear 0|1] [--python python3]
//       [--torch-script PATH|none]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "core/cuda.h"
#include "core/octet.h"
#include "quant/int8_model.h"
#include "tools/bench/bench_util.h"

using namespace octet;
using octet::bench::run_capture;
using octet::bench::shell_quote;

namespace {

struct Args {
  std::string device = "cpu", precision = "f32", python = "python3",
              script = std::string(OCTET_BENCH_DIR) + "/bench_gpt_torch.py";
  int64_t layers = 6, width = 384, heads = 6, context = 256, batch = 16, vocab = 8192, threads = 0;
  double dropout = 0.0;
  int steps = 3, rounds = 2;
  bool int8_linear = false;
};

struct Result {
  double tokens_per_s = 0, step_ms = 0, peak_mib = 0;
  bool ok = false;
  std::string about;
};

double peak_mib(Device dev) {
  if (dev.is_cuda()) return static_cast<double>(cuda::memory_stats().peak_allocated) / (1024.0 * 1024.0);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

Result time_octet(const Args& a, Device dev, Gpt& gpt, AdamW& opt, const Tensor& x, const Tensor& y) {
  const DType precision = a.precision == "bf16" ? DType::bf16 : DType::f32;
  auto step = [&] {
    Tensor loss;
    {
      AutocastGuard autocast(precision);
      loss = cross_entropy(gpt(x).reshape({-1, a.vocab}), y.reshape({-1}));
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (dev.is_cuda()) cuda::synchronize();
  };
  const double best = octet::bench::best_time(a.steps, step);
  return {static_cast<double>(a.batch * a.context) / best, best * 1e3, peak_mib(dev), true, ""};
}

Result time_torch(const Args& a) {
  const std::string cmd = shell_quote(a.python) + " " + shell_quote(a.script) + " --device " + a.device + " --layers " +
                          std::to_string(a.layers) + " --width " + std::to_string(a.width) + " --heads " +
                          std::to_string(a.heads) + " --context " + std::to_string(a.context) + " --batch " +
                          std::to_string(a.batch) + " --vocab " + std::to_string(a.vocab) + " --steps " +
                          std::to_string(a.steps) + " --threads " + std::to_string(a.threads) + " --precision " +
                          a.precision + " --dropout " + std::to_string(a.dropout);
  const auto [text, status] = run_capture(cmd);
  Result r;
  std::string last;
  for (const auto& f : octet::bench::result_lines(text, 4, last, &r.about)) {  // RESULT,tokens/s,step ms,peak MiB
    r.tokens_per_s = std::stod(f[1]), r.step_ms = std::stod(f[2]), r.peak_mib = std::stod(f[3]);
    r.ok = true;
  }
  if (!r.ok) r.about = "PyTorch " + std::string(status == -1 ? "not run" : "failed") + ": " + last;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::string problem = octet::bench::parse_options(argc, argv,
                                                          {
                                                              {"--device", octet::bench::into(a.device)},
                                                              {"--precision", octet::bench::into(a.precision)},
                                                              {"--layers", octet::bench::into(a.layers)},
                                                              {"--width", octet::bench::into(a.width)},
                                                              {"--heads", octet::bench::into(a.heads)},
                                                              {"--context", octet::bench::into(a.context)},
                                                              {"--batch", octet::bench::into(a.batch)},
                                                              {"--vocab", octet::bench::into(a.vocab)},
                                                              {"--steps", octet::bench::into(a.steps)},
                                                              {"--dropout", octet::bench::into(a.dropout)},
                                                              {"--rounds", octet::bench::into(a.rounds)},
                                                              {"--threads", octet::bench::into(a.threads)},
                                                              {"--python", octet::bench::into(a.python)},
                                                              {"--torch-script", octet::bench::into(a.script)},
                                                              {"--int8-linear", octet::bench::into(a.int8_linear)},
                                                          });
  if (!problem.empty()) {
    std::fprintf(stderr, "%s: %s\n", "octet_bench_gpt", problem.c_str());
    return 2;
  }
  if (a.precision != "f32" && a.precision != "bf16") {
    std::fprintf(stderr, "octet_bench_gpt: --precision is f32 or bf16, got %s\n", a.precision.c_str());
    return 2;
  }
  try {
    const Device dev = Device::parse(a.device);
    if (a.threads > 0) set_num_threads(static_cast<int>(a.threads));
    manual_seed(0);
    Gpt gpt(GptOptions().vocab_size(a.vocab).context_length(a.context).num_layers(a.layers).num_heads(a.heads).width(
        a.width).dropout(a.dropout));
    gpt.to(dev);
    AdamW opt(gpt.named_parameters(), AdamWOptions(3e-4).weight_decay(0.1));
    Generator g(1);
    Tensor ids = (rand({a.batch, a.context + 1}, {}, &g) * static_cast<double>(a.vocab)).to(DType::i64).to(dev);
    const Tensor x = ids.narrow(1, 0, a.context).contiguous(), y = ids.narrow(1, 1, a.context).contiguous();
    // The INT8 twin: the same weights, its block projections trained in INT8.
    std::unique_ptr<Gpt> q;
    std::unique_ptr<AdamW> q_opt;
    if (a.int8_linear) {
      q = std::make_unique<Gpt>(
          GptOptions().vocab_size(a.vocab).context_length(a.context).num_layers(a.layers).num_heads(a.heads).width(
              a.width).dropout(a.dropout));
      q->to(dev);
      q->load_state_dict(gpt.state_dict());
      quant::enable_int8_linear(*q, quant::Int8Config{}, /*keep_first_last_float=*/true, 0);
      q_opt = std::make_unique<AdamW>(q->named_parameters(), AdamWOptions(3e-4).weight_decay(0.1));
    }
    Result ours, int8, theirs;
    for (int round = 0; round < a.rounds; ++round) {
      const Result o = time_octet(a, dev, gpt, opt, x, y);
      if (o.tokens_per_s > ours.tokens_per_s) ours = o;
      if (q) {
        const Result i = time_octet(a, dev, *q, *q_opt, x, y);
        if (i.tokens_per_s > int8.tokens_per_s) int8 = i;
      }
      if (a.script == "none") continue;
      const Result t = time_torch(a);
      if (t.ok && t.tokens_per_s > theirs.tokens_per_s) theirs = t;
      if (!t.ok && !theirs.ok) theirs.about = t.about;
    }
    std::printf("## GPT training step (AdamW), %s: octet vs PyTorch on %s\n\n", a.precision.c_str(), a.device.c_str());
    if (a.precision == "bf16") std::printf("- octet %s\n", autocast::describe(DType::bf16, dev).c_str());
    std::printf("- %lld layers, width %lld, %lld heads, context %lld, batch %lld, vocabulary %lld: %lld parameters\n",
                static_cast<long long>(a.layers), static_cast<long long>(a.width), static_cast<long long>(a.heads),
                static_cast<long long>(a.context), static_cast<long long>(a.batch), static_cast<long long>(a.vocab),
                static_cast<long long>(gpt.num_parameters()));
    std::printf("- octet %d threads; %s; best of %d steps in each of %d alternating rounds\n\n", get_num_threads(),
                theirs.about.empty() ? "PyTorch not run" : theirs.about.c_str(), a.steps, a.rounds);
    std::printf("| | tokens/s | step ms | peak MiB |\n|---|---:|---:|---:|\n");
    std::printf("| octet | %.0f | %.1f | %.0f |\n", ours.tokens_per_s, ours.step_ms, ours.peak_mib);
    if (q) {
      std::printf("| octet, INT8 Linear layers | %.0f | %.1f | %.0f |\n", int8.tokens_per_s, int8.step_ms,
                  int8.peak_mib);
      std::printf("| INT8 / octet | %.2f | %.2f | |\n", int8.tokens_per_s / ours.tokens_per_s,
                  int8.step_ms / ours.step_ms);
    }
    if (theirs.ok) {
      std::printf("| PyTorch | %.0f | %.1f | %.0f |\n", theirs.tokens_per_s, theirs.step_ms, theirs.peak_mib);
      std::printf("| octet / PyTorch | %.2f | | |\n", ours.tokens_per_s / theirs.tokens_per_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "octet_bench_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
