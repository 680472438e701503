// Batch-1, token-by-token latency of the PrecisionBatching paper's LM (an LstmLm of 1 layer, hidden
// 650 and 2048, vocabulary 10000, random weights) with its LSTM in FP32, int8 (the zero-point
// baseline) and PrecisionBatching at w in {1, 2, 4, 8} x a in {8, 16}; the embedding and the
// decoder stay float, as in the paper (quant/precision.h's uniform plan). Per configuration: the
// median over repeats of the mean time per token of the whole model (ids [1, 1] -> logits, the
// state carried) and of its LSTM alone (the quantized part), under NoGradGuard in eval mode.
//   build/tools/bench/octet_bench_pbatch_lm [--threads 2] [--tokens 50] [--repeats 5]
//                                           [--hidden 650,2048] [--vocab 10000] [--device cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/precision.h"

using namespace octet;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int64_t threads = 2, tokens = 50, repeats = 5, vocab = 10000;
  std::vector<int64_t> hidden{650, 2048};
  std::string device = "cpu";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median over repeats of the mean seconds per call of fn(i), i = token index; one warm-up block.
template <typename F>
double per_token(const Args& a, F&& fn) {
  std::vector<double> times;
  for (int64_t r = 0; r <= a.repeats; ++r) {
    const auto t0 = Clock::now();
    Tensor last;
    for (int64_t i = 0; i < a.tokens; ++i) last = fn(i);
    (void)last.reshape({-1}).narrow(0, 0, 1).to(Device::cpu());  // waits for a GPU
    if (r > 0)
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(a.tokens));
  }
  return median(times);
}

void run(const Args& a, int64_t hidden, Device device) {
  manual_seed(0);
  LstmLm lm(LstmLmOptions().vocab_size(a.vocab).hidden_size(hidden).num_layers(1).dropout(0.0));
  lm.to(device);
  lm.eval();
  NoGradGuard ng;
  Generator g(1);
  Tensor u = empty({a.tokens}, DType::f64);
  u.uniform_(0.0, static_cast<double>(a.vocab), &g);
  const Tensor ids = u.to(DType::i64).to(device);
  const Tensor emb = randn({1, 1, hidden}, {}, &g).to(device);  // the LSTM's input, for its own timing

  std::vector<std::pair<std::string, std::optional<quant::QuantSpec>>> configs{{"fp32", std::nullopt},
                                                                               {"int8", quant::QuantSpec::int8()}};
  for (int w : {1, 2, 4, 8})
    for (int act : {8, 16}) {
      auto s = quant::QuantSpec::pbatch(quant::PbConfig{w, act, true});
      configs.emplace_back(s.name(), s);
    }
  std::printf("\n### LstmLm 1 x %lld hidden, vocab %lld, batch 1, %s, %lld thread(s)\n\n",
              static_cast<long long>(hidden), static_cast<long long>(a.vocab), device.str().c_str(),
              static_cast<long long>(a.threads));
  std::printf("| config | model us/token | speedup | LSTM us/token | LSTM speedup |\n|---|---:|---:|---:|---:|\n");
  double base_model = 0, base_lstm = 0;
  for (const auto& [name, spec] : configs) {
    if (spec)
      quant::convert_model(lm, quant::uniform_plan(*spec));
    else
      quant::reset_to_float(lm);
    LstmState state;
    const double model_s = per_token(a, [&](int64_t i) {
      auto [logits, next] = lm.forward(ids.narrow(0, i, 1).reshape({1, 1}), state);
      state = next;
      return logits;
    });
    LstmState lstate;
    const double lstm_s = per_token(a, [&](int64_t) {
      auto [y, next] = lm.lstm_->forward(emb, lstate);
      lstate = next;
      return y;
    });
    if (!spec) base_model = model_s, base_lstm = lstm_s;
    std::printf("| %s | %.1f | %.2fx | %.1f | %.2fx |\n", name.c_str(), 1e6 * model_s, base_model / model_s,
                1e6 * lstm_s, base_lstm / lstm_s);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "missing value: %s\n", argv[i]);
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--threads") {
      a.threads = std::atoll(v.c_str());
    } else if (k == "--tokens") {
      a.tokens = std::atoll(v.c_str());
    } else if (k == "--repeats") {
      a.repeats = std::atoll(v.c_str());
    } else if (k == "--vocab") {
      a.vocab = std::atoll(v.c_str());
    } else if (k == "--device") {
      a.device = v;
    } else if (k == "--hidden") {
      a.hidden.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) a.hidden.push_back(std::atoll(item.c_str()));
    } else {
      std::fprintf(stderr, "unknown option: %s\n", argv[i]);
      return 2;
    }
  }
  if (a.threads < 1 || a.tokens < 1 || a.repeats < 1 || a.vocab < 1 || a.hidden.empty()) {
    std::fprintf(stderr, "threads, tokens, repeats, vocab and hidden must be positive\n");
    return 2;
  }
  try {
    set_num_threads(static_cast<int>(a.threads));
    const Device device = Device::parse(a.device);
    for (int64_t h : a.hidden) run(a, h, device);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
