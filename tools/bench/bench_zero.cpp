// Sharded optimizer state (ZeRO stage 1, Optimizer::shard_state; recipe train.shard_optimizer)
// against unsharded DDP: one training step (forward, loss, backward through
// DistributedDataParallel, Adam step) of the LSTM LM, ResNet-50 or the GPT, with 32- or 8-bit
// state. Rank 0 prints one row of the RESULTS.md table: this rank's optimizer-state bytes, the
// process's peak resident memory (the largest over the ranks) and the mean step time (the slowest
// rank's). Run it alone and under mpirun, sharded and not, with the same global batch:
//   mpirun --oversubscribe -np 2 ./build/tools/bench/octet_bench_zero --model gpt --bits 8 --shard 1
// Sharded, the gradients are reduce-scattered (DistributedDataParallel::shard_gradients, as the
// trainer does); --scatter 0 all-reduces them whole instead, as before ZeRO's communication.
//   --model lstm_lm|resnet50|gpt  --bits 32|8|4  --shard 0|1  [--scatter 1|0] [--batch B] [--steps S]
//   [--threads T]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "core/octet.h"
#include "optim/adam.h"
#include "tools/bench/bench_util.h"

namespace {

using namespace octet;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Args {
  std::string model = "gpt";
  int64_t bits = 32, shard = 0, scatter = 1, batch = 0, steps = 3, threads = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  const std::string problem = octet::bench::parse_options(argc, argv,
                                                          {
                                                              {"--model", octet::bench::into(a.model)},
                                                              {"--bits", octet::bench::into(a.bits)},
                                                              {"--shard", octet::bench::into(a.shard)},
                                                              {"--scatter", octet::bench::into(a.scatter)},
                                                              {"--batch", octet::bench::into(a.batch)},
                                                              {"--steps", octet::bench::into(a.steps)},
                                                              {"--threads", octet::bench::into(a.threads)},
                                                          });
  OCTET_CHECK(problem.empty(), "octet_bench_zero: ", problem);
  OCTET_CHECK(a.model == "resnet50" || a.model == "lstm_lm" || a.model == "gpt",
              "--model: lstm_lm, resnet50 or gpt, got ", a.model);
  OCTET_CHECK(a.bits == 32 || a.bits == 8 || a.bits == 4, "--bits: 32, 8 or 4, got ", a.bits);
  if (a.batch == 0) a.batch = a.model == "resnet50" ? 6 : 12;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  dist::ProcessGroup& pg = dist::ProcessGroup::world();
  set_num_threads(static_cast<int>(a.threads));
  OCTET_CHECK(a.batch % pg.size() == 0, "--batch ", a.batch, " does not divide among ", pg.size(), " ranks");
  const int64_t local = a.batch / pg.size(), vocab = 8192, bptt = 64;
  manual_seed(0);
  std::shared_ptr<Module> net;
  if (a.model == "resnet50") {
    net = build_model(ModelOptions().name("resnet50").num_classes(1000));
    fuse(*net, zeros({1, 3, 224, 224}));
  } else if (a.model == "lstm_lm") {
    net = build_model(ModelOptions().name("lstm_lm").vocab_size(33278).embed_dim(650).hidden_size(650).dropout(0));
  } else {
    net =
        std::make_shared<Gpt>(GptOptions().vocab_size(vocab).context_length(256).num_layers(6).num_heads(6).width(384));
  }
  auto ddp = std::make_shared<DistributedDataParallel>(net, pg);
  ddp->train();
  Adam opt(net->named_parameters(), AdamOptions(1e-4), StateOptions().state_bits(a.bits));
  if (a.shard) opt.shard_state(pg);
  if (a.shard && a.scatter) ddp->shard_gradients([&](const std::string& name) { return opt.shard_size(name); });
  Generator g(1 + static_cast<uint64_t>(pg.rank()));
  Tensor x, y;
  const int64_t classes = a.model == "resnet50" ? 1000 : a.model == "lstm_lm" ? 33278 : vocab;
  if (a.model == "resnet50") {
    x = randn({local, 3, 224, 224}, DType::f32, &g);
    y = (rand({local}, DType::f64, &g) * 999.0).to(DType::i64);
  } else {
    x = (rand({local, bptt}, DType::f64, &g) * static_cast<double>(classes - 1)).to(DType::i64);
    y = (rand({local * bptt}, DType::f64, &g) * static_cast<double>(classes - 1)).to(DType::i64);
  }
  auto step = [&] {
    opt.zero_grad();
    Tensor out = (*ddp)(x);
    if (a.model != "resnet50") out = out.reshape({-1, classes});
    cross_entropy(out, y).backward();
    opt.step();
  };
  step();  // warm-up: the state, allocations, oneDNN primitives
  double step_s = 0;
  for (int64_t s = 0; s < a.steps; ++s) {
    pg.barrier();
    const double t0 = now();
    step();
    step_s += now() - t0;
  }
  step_s = octet::bench::max_over_ranks(step_s / static_cast<double>(a.steps), pg);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double peak_mib = octet::bench::max_over_ranks(static_cast<double>(u.ru_maxrss) / 1024.0, pg);
  const double state_mb = octet::bench::max_over_ranks(static_cast<double>(opt.state_bytes()) / 1e6, pg);
  if (pg.rank() == 0)
    std::printf("| %s | %lld-bit | %d x %lld | %s | %lld | %.1f | %.0f | %.3f |\n", a.model.c_str(),
                static_cast<long long>(a.bits), pg.size(), static_cast<long long>(a.threads),
                !a.shard    ? "DDP"
                : a.scatter ? "sharded"
                            : "sharded, all-reduce",
                static_cast<long long>(net->num_parameters()), state_mb, peak_mib, step_s);
  return 0;
}
