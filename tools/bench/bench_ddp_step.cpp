// One data-parallel training step (forward, loss, backward through DistributedDataParallel) of
// ResNet-50 or of the LSTM language model, split into compute and communication: the time the
// backward waited for gradients after its last kernel (exposed communication), the time the same
// buckets take to all-reduce on their own (communication), and the share of it the backward hid
// (overlap = 1 - exposed / communication), and the same step on the bare model with no
// communication at all: on a CPU the hidden all-reduce still takes cores and memory bandwidth
// from the backward, and the difference of the two steps is its whole cost. Run it alone and
// under mpirun with the same global batch to compare 1 process x 2 threads with 2 processes x 1
// thread; rank 0 prints a row of the RESULTS.md table:
//   ./build/tools/bench/octet_bench_ddp_step --model resnet50 --batch 16 --threads 2
//   mpirun --oversubscribe -np 2 ./build/tools/bench/octet_bench_ddp_step --model resnet50 --batch 16 --threads 1
//   ... --model lstm_lm [--hidden 2048 --vocab 33278 --bptt 35]   (the PrecisionBatching paper's LM)
// --batch is the global batch (images, or token streams); each rank takes batch / ranks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/octet.h"
#include "tools/bench/bench_util.h"

namespace {

using namespace octet;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Args {
  std::string model = "resnet50";
  int64_t batch = 16, threads = 1, steps = 4, hidden = 2048, vocab = 33278, bptt = 35;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--model")
      a.model = v;
    else if (k == "--batch")
      a.batch = std::atoll(v);
    else if (k == "--threads")
      a.threads = std::atoll(v);
    else if (k == "--steps")
      a.steps = std::atoll(v);
    else if (k == "--hidden")
      a.hidden = std::atoll(v);
    else if (k == "--vocab")
      a.vocab = std::atoll(v);
    else if (k == "--bptt")
      a.bptt = std::atoll(v);
    else
      OCTET_FAIL("octet_bench_ddp_step: unknown option ", k);
  }
  OCTET_CHECK(a.model == "resnet50" || a.model == "lstm_lm", "--model: resnet50 or lstm_lm, got ", a.model);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  dist::ProcessGroup& pg = dist::ProcessGroup::world();
  set_num_threads(static_cast<int>(a.threads));
  OCTET_CHECK(a.batch % pg.size() == 0, "--batch ", a.batch, " does not divide among ", pg.size(), " ranks");
  const int64_t local = a.batch / pg.size();
  manual_seed(0);
  std::shared_ptr<Module> net =
      a.model == "resnet50"
          ? build_model(ModelOptions().name("resnet50").num_classes(1000))
          : build_model(ModelOptions().name("lstm_lm").vocab_size(a.vocab).hidden_size(a.hidden).dropout(0));
  if (a.model == "resnet50") fuse(*net, zeros({1, 3, 224, 224}));  // as the trainer runs it
  auto ddp = std::make_shared<DistributedDataParallel>(net, pg);
  ddp->train();
  Generator g(1 + static_cast<uint64_t>(pg.rank()));
  Tensor x, y;
  if (a.model == "resnet50") {
    x = randn({local, 3, 224, 224}, DType::f32, &g);
    y = (rand({local}, DType::f64, &g) * 999.0).to(DType::i64);
  } else {
    x = (rand({local, a.bptt}, DType::f64, &g) * static_cast<double>(a.vocab - 1)).to(DType::i64);
    y = (rand({local * a.bptt}, DType::f64, &g) * static_cast<double>(a.vocab - 1)).to(DType::i64);
  }
  // One step through `m`: the DDP wrapper, or the bare model (no communication).
  auto step = [&](Module& m) {
    m.zero_grad();
    Tensor out = m(x);
    if (a.model == "lstm_lm") out = out.reshape({-1, a.vocab});
    cross_entropy(out, y).backward();
  };
  step(*ddp);  // warm-up: allocations, oneDNN primitives
  // DDP and bare steps alternate, so both see the same machine.
  double step_s = 0, bare_s = 0, exposed_s = 0;
  for (int64_t s = 0; s < a.steps; ++s) {
    pg.barrier();
    double t0 = now();
    step(*ddp);
    step_s += now() - t0;
    exposed_s += ddp->last_wait_s();
    pg.barrier();
    t0 = now();
    step(*net);
    bare_s += now() - t0;
  }
  step_s /= static_cast<double>(a.steps), bare_s /= static_cast<double>(a.steps);
  exposed_s /= static_cast<double>(a.steps);
  // The same buckets all-reduced with nothing else running: the communication a step needs.
  const NamedTensors params = ddp->named_parameters();
  std::vector<Tensor> buckets;
  int64_t numel = 0;
  for (const auto& idx : ddp->bucket_indices()) {
    int64_t n = 0;
    for (size_t i : idx) n += params[i].second.numel();
    buckets.push_back(zeros({n}));
    numel += n;
  }
  double comm_s = 0;
  for (int64_t s = 0; s < a.steps && pg.size() > 1; ++s) {
    pg.barrier();
    const double t0 = now();
    std::vector<dist::Work> works;
    for (const Tensor& b : buckets) works.push_back(pg.all_reduce_async(b, dist::ReduceOp::average));
    for (dist::Work& w : works) w.wait();
    comm_s += now() - t0;
  }
  comm_s /= static_cast<double>(a.steps);
  step_s = octet::bench::max_over_ranks(step_s, pg), bare_s = octet::bench::max_over_ranks(bare_s, pg);
  exposed_s = octet::bench::max_over_ranks(exposed_s, pg), comm_s = octet::bench::max_over_ranks(comm_s, pg);
  if (pg.rank() == 0) {
    const std::string overlap = pg.size() > 1 ? std::to_string(1.0 - exposed_s / comm_s).substr(0, 4) : "-";
    std::printf("| %s | %d x %lld | %lld | %.1f | %.3f | %.3f | %.3f | %.3f | %s | %.3f |\n", a.model.c_str(),
                pg.size(), static_cast<long long>(a.threads), static_cast<long long>(a.batch),
                static_cast<double>(numel) * 4 / 1048576.0, step_s, bare_s, comm_s, exposed_s, overlap.c_str(),
                step_s - bare_s);
  }
  return 0;
}
