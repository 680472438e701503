// Token-by-token decoding of a GPT with its key/value cache (Gpt::forward_cached), measured as LLM
// inference is: per-token latency at batch 1 after a prompt of `context` tokens, for each context,
// beside the bytes each token must read (the weights once, and the cached keys and values) and the
// floor those bytes set at this machine's read bandwidth, measured in the same run, and the time
// of a full pass over the context (decoding without the cache). Random weights (speed does not
// depend on them), in f32 and with the blocks' Linear layers in int8 (the zero-point baseline) or
// PrecisionBatching (lm_head stays float, as `octet eval --pbatch` keeps the final layer).
//   ./build/tools/bench/octet_bench_decode --width 1024 --layers 12 --heads 16 --contexts 128,1024
//   [--precisions f32,int8,w8a8,w4a16,w4a8,w2a8] [--vocab 8192] [--tokens 16] [--threads 2]
//   [--python python3] [--torch-script PATH|none]
// With f32, PyTorch decodes the same model shape with its own cache (bench_decode_torch.py) right
// after octet's row of each context: a "PyTorch f32" row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "models/gpt.h"
#include "quant/precision.h"
#include "tools/bench/bench_util.h"

namespace {

using namespace octet;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Args {
  int64_t width = 1024, layers = 12, heads = 16, vocab = 8192, tokens = 16, threads = 2;
  std::string contexts = "128,1024";
  std::string precisions = "f32";  // f32, int8, or PrecisionBatching's w8a8, w4a16, ... (quant_spec names)
  std::string python = "python3", script = std::string(OCTET_BENCH_DIR) + "/bench_decode_torch.py";
};

// PyTorch's median ms per token at `context` (bench_decode_torch.py, the same model shape), or a
// negative number with `about` saying why there is none.
double torch_ms(const Args& a, int64_t context, std::string& about) {
  const std::string cmd = octet::bench::shell_quote(a.python) + " " + octet::bench::shell_quote(a.script) +
                          " --width " + std::to_string(a.width) + " --layers " + std::to_string(a.layers) +
                          " --heads " + std::to_string(a.heads) + " --vocab " + std::to_string(a.vocab) + " --tokens " +
                          std::to_string(a.tokens) + " --threads " + std::to_string(a.threads) + " --contexts " +
                          std::to_string(context);
  const auto [text, status] = octet::bench::run_capture(cmd);
  std::string last;
  const auto lines = octet::bench::result_lines(text, 3, last, &about);  // RESULT,context,ms
  if (!lines.empty()) return std::stod(lines[0][2]);
  about = "PyTorch " + std::string(status == -1 ? "not run" : "failed") + ": " + last;
  return -1;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<int64_t> list_of(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& w : words_of(text)) out.push_back(std::stoll(w));
  return out;
}

// Bits per weight of a precision's Linear layers: 32, 8 (int8) or PrecisionBatching's w.
int weight_bits(const std::string& precision) {
  if (precision == "f32") return 32;
  const quant::QuantSpec spec = quant::parse_quant_spec_name(precision, "--precisions");
  return spec.kind == quant::QuantSpec::Kind::int8 ? 8 : spec.pb.w_bits;
}

// Read bandwidth (bytes/s): the best of a few sums over a buffer far larger than the caches,
// split over the threads as the decode's GEMVs are.
double read_bandwidth() {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of f32
  Tensor a = full({n}, 1.0);
  const float* p = a.data<float>();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> part(64, 0.0);
    const double t0 = now();
    parallel_for(0, 64, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        float s[16] = {};
        for (int64_t i = c * (n / 64), e = i + n / 64; i < e; i += 16)
          for (int k = 0; k < 16; ++k) s[k] += p[i + k];
        for (float v : s) part[static_cast<size_t>(c)] += v;
      }
    });
    best = std::min(best, now() - t0);
    if (part[0] < 0) std::printf("%f", part[0]);  // keeps the sums
  }
  return 4.0 * static_cast<double>(n) / best;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::string problem = octet::bench::parse_options(argc, argv,
                                                          {
                                                              {"--width", octet::bench::into(a.width)},
                                                              {"--layers", octet::bench::into(a.layers)},
                                                              {"--heads", octet::bench::into(a.heads)},
                                                              {"--vocab", octet::bench::into(a.vocab)},
                                                              {"--tokens", octet::bench::into(a.tokens)},
                                                              {"--threads", octet::bench::into(a.threads)},
                                                              {"--contexts", octet::bench::into(a.contexts)},
                                                              {"--precisions", octet::bench::into(a.precisions)},
                                                              {"--python", octet::bench::into(a.python)},
                                                              {"--torch-script", octet::bench::into(a.script)},
                                                          });
  OCTET_CHECK(problem.empty(), "octet_bench_decode: ", problem);
  set_num_threads(static_cast<int>(a.threads));
  const std::vector<int64_t> contexts = list_of(a.contexts);
  OCTET_CHECK(!contexts.empty() && a.tokens >= 1, "octet_bench_decode: --contexts and --tokens");
  const int64_t longest = *std::max_element(contexts.begin(), contexts.end());
  manual_seed(0);
  Gpt gpt(GptOptions()
              .vocab_size(a.vocab)
              .context_length(longest + a.tokens)
              .num_layers(a.layers)
              .num_heads(a.heads)
              .width(a.width));
  gpt.eval();
  // The blocks' Linear weights (quantized but for f32) and lm_head's (float, as the final layer
  // stays), read once per token; biases, norms and the token's embedding row are noise.
  const double block_weights = static_cast<double>(a.layers * 12 * a.width * a.width);
  const double head_bytes = 4.0 * static_cast<double>(a.vocab * a.width);
  const double bandwidth = read_bandwidth();
  std::printf(
      "GPT width %lld, %lld layers, %lld heads, vocabulary %lld, f32; %lld threads; read bandwidth %.1f GB/s\n\n",
      static_cast<long long>(a.width), static_cast<long long>(a.layers), static_cast<long long>(a.heads),
      static_cast<long long>(a.vocab), static_cast<long long>(a.threads), bandwidth / 1e9);
  std::printf(
      "| precision | context | ms per token (median of %lld) | tokens/s | weights MB per token | K/V MB per token | "
      "floor ms | floor / measured | without the cache: ms per token |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      static_cast<long long>(a.tokens));
  Generator g(1);
  std::string torch_about;
  for (const std::string& precision : words_of(a.precisions)) {
    quant::reset_to_float(gpt);
    if (precision != "f32")
      quant::convert_model(gpt, quant::uniform_plan(quant::parse_quant_spec_name(precision, "--precisions")));
    const double weight_bytes = block_weights * weight_bits(precision) / 8.0 + head_bytes;
    for (int64_t context : contexts) {
      const Tensor prompt = (rand({1, context}, DType::f64, &g) * static_cast<double>(a.vocab - 1)).to(DType::i64);
      GptCache cache;
      gpt.forward_cached(prompt, cache);
      std::vector<double> times;
      for (int64_t t = 0; t < a.tokens; ++t) {
        const Tensor id = (rand({1, 1}, DType::f64, &g) * static_cast<double>(a.vocab - 1)).to(DType::i64);
        const double t0 = now();
        const Tensor logits = gpt.forward_cached(id, cache);
        (void)logits.data<float>()[0];
        times.push_back(now() - t0);
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      // Without the cache: one full pass over the context for the same token (once).
      double full_s = 0;
      {
        NoGradGuard no_grad;
        const double t0 = now();
        const Tensor logits = gpt(prompt);
        (void)logits.data<float>()[0];
        full_s = now() - t0;
      }
      // Each token reads every key and value of its context, once per layer.
      const double kv_bytes = 2.0 * 4.0 * static_cast<double>(a.layers * (context + a.tokens / 2) * a.width);
      const double floor_s = (weight_bytes + kv_bytes) / bandwidth;
      std::printf("| %s | %lld | %.2f | %.1f | %.0f | %.1f | %.2f | %.2f | %.0f |\n", precision.c_str(),
                  static_cast<long long>(context), median * 1e3, 1.0 / median, weight_bytes / 1e6, kv_bytes / 1e6,
                  floor_s * 1e3, floor_s / median, full_s * 1e3);
      // The peer, right after octet's f32 row of the same context (the two alternate by context).
      if (precision == "f32" && a.script != "none") {
        std::string about;
        const double ms = torch_ms(a, context, about);
        if (ms > 0)
          std::printf("| PyTorch f32 | %lld | %.2f | %.1f | %.0f | %.1f | %.2f | %.2f | |\n",
                      static_cast<long long>(context), ms, 1e3 / ms, weight_bytes / 1e6, kv_bytes / 1e6, floor_s * 1e3,
                      floor_s / (ms / 1e3));
        torch_about = about;
      }
    }
  }
  if (!torch_about.empty()) std::printf("\n%s\n", torch_about.c_str());
  return 0;
}
