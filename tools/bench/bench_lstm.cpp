// Tokens/s of the LSTM language model on the CPU (the PrecisionBatching paper's LM: 1 layer of
// 2048 units, here over a 10000-word vocabulary of synthetic ids), f32:
//  - training: batch 20 x bptt 35, forward with the state carried from the previous batch (cut by
//    detach), cross-entropy, backward, SGD step (lr 1, no momentum); dropout 0.5 as in the paper;
//  - batch-1 inference: one token at a time, the state carried, under NoGradGuard in eval mode.
// tools/bench/bench_lstm_torch.py times the same in PyTorch (same sizes, same thread count).
//   build/tools/bench/octet_bench_lstm [--threads 2] [--steps 5] [--tokens 200] [--hidden 2048]
//                                      [--vocab 10000] [--batch 20] [--bptt 35] [--layers 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "core/octet.h"
#include "optim/sgd.h"

using namespace octet;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor random_ids(const Shape& shape, int64_t vocab, Generator& g) {
  Tensor u = empty(shape, DType::f64);
  u.uniform_(0.0, static_cast<double>(vocab), &g);
  return u.to(DType::i64);
}

struct Args {
  int64_t threads = 2, steps = 5, tokens = 200, hidden = 2048, vocab = 10000, batch = 20, bptt = 35, layers = 1;
};

void train(LstmLm& lm, const Args& a) {
  lm.train();
  SGD opt(lm.named_parameters(), SGDOptions(1.0));
  Generator g(1);
  LstmState state = lm.initial_state(a.batch);
  auto step = [&] {
    Tensor ids = random_ids({a.batch, a.bptt}, a.vocab, g), targets = random_ids({a.batch * a.bptt}, a.vocab, g);
    auto [logits, next] = lm.forward(ids, state);
    state = detach(next);
    Tensor loss = cross_entropy(logits.reshape({-1, a.vocab}), targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item();
  };
  step();  // warm-up: oneDNN kernels, allocator cache
  double best = 1e30, total = 0;
  for (int64_t s = 0; s < a.steps; ++s) {
    auto t0 = Clock::now();
    step();
    const double dt = seconds_since(t0);
    best = std::min(best, dt);
    total += dt;
  }
  const double tokens = static_cast<double>(a.batch * a.bptt);
  std::printf(
      "octet lstm_lm train, %lld layer(s) x %lld hidden, vocab %lld, batch %lld x bptt %lld, %lld thread(s): "
      "mean %.1f ms/step, best %.1f ms -> %.0f tokens/s (mean), %.0f tokens/s (best)\n",
      static_cast<long long>(a.layers), static_cast<long long>(a.hidden), static_cast<long long>(a.vocab),
      static_cast<long long>(a.batch), static_cast<long long>(a.bptt), static_cast<long long>(a.threads),
      1e3 * total / static_cast<double>(a.steps), 1e3 * best, tokens * static_cast<double>(a.steps) / total,
      tokens / best);
}

void infer(LstmLm& lm, const Args& a) {
  lm.eval();
  NoGradGuard ng;
  Generator g(2);
  Tensor ids = random_ids({a.tokens + 10}, a.vocab, g);
  LstmState state = lm.initial_state(1);
  double checksum = 0;
  auto token = [&](int64_t i) {
    auto [logits, next] = lm.forward(ids.narrow(0, i, 1).reshape({1, 1}), state);
    state = next;
    checksum += logits.select(2, 0).item();
  };
  for (int64_t i = 0; i < 10; ++i) token(i);  // warm-up
  auto t0 = Clock::now();
  for (int64_t i = 10; i < a.tokens + 10; ++i) token(i);
  const double dt = seconds_since(t0);
  std::printf(
      "octet lstm_lm batch-1 inference, %lld layer(s) x %lld hidden, vocab %lld, %lld thread(s): %lld tokens in "
      "%.2f s -> %.1f tokens/s (%.2f ms/token; checksum %.3g)\n",
      static_cast<long long>(a.layers), static_cast<long long>(a.hidden), static_cast<long long>(a.vocab),
      static_cast<long long>(a.threads), static_cast<long long>(a.tokens), dt, static_cast<double>(a.tokens) / dt,
      1e3 * dt / static_cast<double>(a.tokens), checksum);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::map<std::string, int64_t*> options = {
      {"--threads", &a.threads}, {"--steps", &a.steps}, {"--tokens", &a.tokens}, {"--hidden", &a.hidden},
      {"--vocab", &a.vocab},     {"--batch", &a.batch}, {"--bptt", &a.bptt},     {"--layers", &a.layers}};
  for (int i = 1; i < argc; i += 2) {
    auto it = options.find(argv[i]);
    if (it == options.end() || i + 1 >= argc) {
      std::fprintf(stderr, "unknown option or missing value: %s\n", argv[i]);
      return 2;
    }
    *it->second = std::atoll(argv[i + 1]);
  }
  set_num_threads(static_cast<int>(a.threads));
  manual_seed(0);
  LstmLm lm(LstmLmOptions().vocab_size(a.vocab).hidden_size(a.hidden).num_layers(a.layers).dropout(0.5));
  train(lm, a);
  infer(lm, a);
  return 0;
}
