// Batch-1, token-by-token latency of the PrecisionBatching paper's LM (an LstmLm of 1 layer, hidden
// 650 and 2048, vocabulary 10000, random weights) with its LSTM in FP32, int8 (the zero-point
// baseline) and PrecisionBatching at w in {1, 2, 4, 8} x a in {8, 16}; the embedding and the
// decoder stay float, as in the paper (the uniform plan of quant/precision.h). Per configuration: the
// median over repeats of the mean time per token of the whole model (ids [1, 1] -> logits, the
// state carried) and of its LSTM alone (the quantized part), under NoGradGuard in eval mode. The
// repeats go round the configurations (each preprocessed once), so load from other processes
// changing over time skews them alike.
//   build/tools/bench/octet_bench_pbatch_lm [--threads 2] [--tokens 20] [--repeats 7]
//                                           [--hidden 650,2048] [--vocab 10000] [--device cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "layers/quantized.h"

using namespace octet;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int64_t threads = 2, tokens = 20, repeats = 7, vocab = 10000;
  std::vector<int64_t> hidden{650, 2048};
  std::string device = "cpu";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds per call of fn(i) over a block of a.tokens calls; reading one output element back waits
// for a GPU.
template <typename F>
double block_time(const Args& a, F&& fn) {
  const auto t0 = Clock::now();
  Tensor last;
  for (int64_t i = 0; i < a.tokens; ++i) last = fn(i);
  (void)last.reshape({-1}).narrow(0, 0, 1).to(Device::cpu());
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(a.tokens);
}

struct Config {
  std::string name;
  std::shared_ptr<QuantLstm> lstm;  // null: FP32
  std::vector<double> model_s, lstm_s;
};

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

  // Preprocessed once; the repeats then go round the configurations, so a machine whose load
  // changes over time skews them all alike.
  std::vector<Config> configs;
  configs.push_back({"fp32", nullptr, {}, {}});
  configs.push_back({"int8", std::make_shared<ZeroPointLstm>(*lm.lstm_), {}, {}});
  for (int w : {1, 2, 4, 8})
    for (int act : {8, 16}) {
      const quant::PbConfig c{w, act, true};
      configs.push_back({quant::pb_config_name(c), std::make_shared<PbLstm>(*lm.lstm_, c), {}, {}});
    }
  for (int64_t r = 0; r <= a.repeats; ++r)
    for (Config& c : configs) {
      lm.lstm_->set_inference(c.lstm);
      LstmState state, lstate;
      const double model_s = block_time(a, [&](int64_t i) {
        auto [logits, next] = lm.forward(ids.narrow(0, i, 1).reshape({1, 1}), state);
        state = next;
        return logits;
      });
      const double lstm_s = block_time(a, [&](int64_t) {
        auto [y, next] = lm.lstm_->forward(emb, lstate);
        lstate = next;
        return y;
      });
      if (r == 0) continue;  // warm-up
      c.model_s.push_back(model_s);
      c.lstm_s.push_back(lstm_s);
    }
  lm.lstm_->set_inference(nullptr);

  std::printf("\n### LstmLm 1 x %lld hidden, vocab %lld, batch 1, %s, %lld thread(s)\n\n",
              static_cast<long long>(hidden), static_cast<long long>(a.vocab), device.str().c_str(),
              static_cast<long long>(a.threads));
  std::printf("| config | model us/token | speedup | LSTM us/token | LSTM speedup |\n|---|---:|---:|---:|---:|\n");
  const double base_model = median(configs[0].model_s), base_lstm = median(configs[0].lstm_s);
  for (const Config& c : configs) {
    const double m = median(c.model_s), l = median(c.lstm_s);
    std::printf("| %s | %.1f | %.2fx | %.1f | %.2fx |\n", c.name.c_str(), 1e6 * m, base_model / m, 1e6 * l,
                base_lstm / l);
  }
  std::fflush(stdout);
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
