// The tensor collectives of core/distributed.h on the byte collectives of core/mpi/comm.h. An
// all-reduce is a reduce-scatter and an all-gather: each rank receives chunk `rank` of every
// rank's tensor (MPI_Ialltoall), adds them in rank order, and every rank gathers the reduced
// chunks (MPI_Iallgather) -- the bytes of a ring all-reduce, 2 (P-1)/P of the tensor per rank, with
// an order of additions that does not depend on MPI's algorithm choice.
#include "core/distributed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/mpi/comm.h"

namespace octet::dist {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0 && n < (1L << 24)) ? static_cast<int>(n) : 0;
}

// A contiguous CPU tensor of t's values: t itself, or a host copy (CUDA tensors are staged through
// the host until the NCCL path lands).
Tensor host_operand(const Tensor& t, const char* op) {
  OCTET_CHECK(t.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(t.is_contiguous(), op, ": expected a contiguous tensor, got shape ", t.shape(),
              " with strides that are not");
  return t.device().is_cpu() ? t : t.to(Device::cpu());
}

// out[i] = in[0][i] + in[1][i] + ... + in[P-1][i], in that order (then / P for an average).
// Floating values add in their own type (bf16 in f32, rounded once); integers add modulo 2^64
// and wrap to their type, as PyTorch's integer sums do.
template <typename T>
void reduce_chunks(const T* in, int ranks, int64_t chunk, ReduceOp op, T* out) {
  using Acc = std::conditional_t<std::is_same_v<T, BFloat16>, float,
                                 std::conditional_t<std::is_floating_point_v<T>, T, uint64_t>>;
  for (int64_t i = 0; i < chunk; ++i) {
    Acc a = static_cast<Acc>(in[i]);
    for (int r = 1; r < ranks; ++r) a = static_cast<Acc>(a + static_cast<Acc>(in[r * chunk + i]));
    if constexpr (std::is_floating_point_v<Acc>) {
      if (op == ReduceOp::average) a = a / static_cast<Acc>(ranks);
    }
    out[i] = static_cast<T>(a);
  }
}

void reduce_chunks(DType dtype, const void* in, int ranks, int64_t chunk, ReduceOp op, void* out) {
  dispatch_all(dtype,
               [&]<typename T>() { reduce_chunks(static_cast<const T*>(in), ranks, chunk, op, static_cast<T*>(out)); });
}

void check_op(ReduceOp op, DType dtype, const char* what) {
  OCTET_CHECK(op == ReduceOp::sum || op == ReduceOp::average, what, ": unknown ReduceOp ", static_cast<int>(op));
  OCTET_CHECK(op == ReduceOp::sum || dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16, what,
              ": an average needs a floating dtype (f32, f64, bf16), got ", dtype, "; use ReduceOp::sum");
}

// Elements per rank's chunk: ceil(n / ranks), in whole KiB when a chunk is too large for an int count.
int64_t chunk_of(int64_t n, int ranks, size_t esize) {
  int64_t chunk = (n + ranks - 1) / ranks;
  const auto per_kib = static_cast<int64_t>(1024 / esize);
  if (chunk * static_cast<int64_t>(esize) > (int64_t{1} << 31) - 1) chunk = (chunk + per_kib - 1) / per_kib * per_kib;
  return chunk;
}

}  // namespace

bool mpi_built() { return mpi::built(); }

int launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_SIZE", "PMIX_SIZE"})
    if (const int n = env_int(name); n > 0) return n;
  return 1;
}

ProcessGroup::ProcessGroup() {
  const int launched = launched_world_size();
  if (!mpi::built()) {
    OCTET_CHECK(launched == 1, "distributed: this job was launched as ", launched,
                " processes, but octet was built without MPI (install libopenmpi-dev and openmpi-bin, e.g. with "
                "tools/scripts/setup.sh, and configure again with -DOCTET_MPI=ON)");
    return;
  }
  if (launched == 1 && !mpi::initialized()) return;  // started alone: no MPI needed
  mpi::init();
  rank_ = mpi::rank();
  size_ = mpi::size();
  local_rank_ = mpi::local_rank();
}

ProcessGroup& ProcessGroup::world() {
  static ProcessGroup group;
  return group;
}

void ProcessGroup::set_timeout_s(double seconds) {
  OCTET_CHECK(seconds > 0, "ProcessGroup::set_timeout_s: expected seconds > 0, got ", seconds);
  timeout_s_ = seconds;
}

// ---------------------------------------------------------------- all-reduce, in two stages

struct Work::State {
  Tensor target;           // the caller's tensor, written at the end
  Tensor host;             // its values on the host (target itself for a CPU tensor)
  std::vector<char> send;  // host's bytes, padded to ranks * chunk elements
  std::vector<char> recv;  // stage 1: chunk `rank` of every rank; stage 2: every reduced chunk
  std::vector<char> mine;  // the reduced chunk of this rank
  int64_t chunk = 0;
  size_t esize = 0;
  int ranks = 1;
  ReduceOp op = ReduceOp::sum;
  double timeout_s = 300;
  int stage = 0;  // 1: alltoall in flight, 2: allgather in flight, 3: done
  mpi::Request request;

  // Stage 1 -> 2: waits for the alltoall, adds the chunks, starts the allgather.
  void start_second_stage() {
    mpi::wait(request, timeout_s, "all_reduce");
    reduce_chunks(host.dtype(), recv.data(), ranks, chunk, op, mine.data());
    request = mpi::allgather(mine.data(), recv.data(), chunk * static_cast<int64_t>(esize));
    stage = 2;
  }
  // Stage 2 -> 3 once the allgather is in.
  bool finish_if_done() {
    if (stage != 2 || !mpi::test(request)) return stage == 3;
    std::memcpy(host.raw_data(), recv.data(), static_cast<size_t>(host.numel()) * esize);
    if (!target.device().is_cpu()) target.copy_(host);
    stage = 3;
    return true;
  }
};

namespace {

// MPI matches collectives by the order each rank starts them, so every rank must start the
// all-gathers of its all-reduces in one order too. A second stage therefore starts only at points
// every rank reaches in the same sequence: when its Work is waited on, or when the group starts
// another collective -- and then the second stages of every earlier all-reduce start first, in
// the order they began. These are the all-reduces still in stage 1, oldest first.
std::deque<std::shared_ptr<Work::State>>& first_stage_queue() {
  static std::deque<std::shared_ptr<Work::State>> queue;
  return queue;
}

// Starts the second stage of every queued all-reduce up to and including `upto` (all: null).
void start_second_stages(const Work::State* upto = nullptr) {
  auto& queue = first_stage_queue();
  while (!queue.empty()) {
    std::shared_ptr<Work::State> s = queue.front();
    queue.pop_front();
    s->start_second_stage();
    if (s.get() == upto) return;
  }
}

}  // namespace

Work::Work() = default;
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&&) noexcept = default;
Work::~Work() {
  if (state_ && state_->stage != 3) {
    try {
      wait();
    } catch (...) {  // a destructor must not throw: the job's time-out already said what failed
    }
  }
}

bool Work::done() {
  if (!state_) return true;
  if (state_->stage == 1) {
    mpi::test(state_->request);  // lets MPI progress; the second stage waits for an ordered point
    return false;
  }
  return state_->finish_if_done();
}

void Work::wait() {
  if (!state_) return;
  if (state_->stage == 1) start_second_stages(state_.get());
  while (!state_->finish_if_done()) mpi::wait(state_->request, state_->timeout_s, "all_reduce");
}

Work ProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) const {
  const char* what = "all_reduce";
  Tensor host = host_operand(t, what);
  check_op(op, t.dtype(), what);
  Work w;
  if (size_ == 1 || t.numel() == 0) return w;
  start_second_stages();
  auto s = std::make_shared<Work::State>();
  s->target = t, s->host = host, s->op = op, s->ranks = size_, s->timeout_s = timeout_s_;
  s->esize = dtype_size(t.dtype());
  s->chunk = chunk_of(t.numel(), size_, s->esize);
  const size_t chunk_bytes = static_cast<size_t>(s->chunk) * s->esize;
  s->send.assign(chunk_bytes * static_cast<size_t>(size_), 0);
  std::memcpy(s->send.data(), host.raw_data(), static_cast<size_t>(t.numel()) * s->esize);
  s->recv.resize(s->send.size());
  s->mine.resize(chunk_bytes);
  s->request = mpi::alltoall(s->send.data(), s->recv.data(), static_cast<int64_t>(chunk_bytes));
  s->stage = 1;
  first_stage_queue().push_back(s);
  w.state_ = std::move(s);
  return w;
}

void ProcessGroup::all_reduce(const Tensor& t, ReduceOp op) const { all_reduce_async(t, op).wait(); }

// ---------------------------------------------------------------- the others

void ProcessGroup::broadcast(const Tensor& t, int root) const {
  const char* what = "broadcast";
  OCTET_CHECK(root >= 0 && root < size_, what, ": root ", root, " is not a rank of a group of ", size_);
  Tensor host = host_operand(t, what);
  if (size_ == 1 || t.numel() == 0) return;
  start_second_stages();
  if (!t.device().is_cpu()) host = host.clone();
  mpi::Request r = mpi::broadcast(host.raw_data(), t.numel() * static_cast<int64_t>(dtype_size(t.dtype())), root);
  mpi::wait(r, timeout_s_, what);
  if (!t.device().is_cpu()) Tensor(t).copy_(host);  // the handle shares t's storage
}

Tensor ProcessGroup::all_gather(const Tensor& t) const {
  const char* what = "all_gather";
  const Tensor host = host_operand(t, what);
  Shape shape = t.shape();
  shape.insert(shape.begin(), size_);
  Tensor out = empty(shape, TensorOptions(t.dtype()));
  if (size_ == 1) {
    out.copy_(host.reshape(shape));
  } else if (t.numel() > 0) {
    start_second_stages();
    mpi::Request r =
        mpi::allgather(host.raw_data(), out.raw_data(), t.numel() * static_cast<int64_t>(dtype_size(t.dtype())));
    mpi::wait(r, timeout_s_, what);
  }
  return t.device().is_cpu() ? out : out.to(t.device());
}

Tensor ProcessGroup::reduce_scatter(const Tensor& t, ReduceOp op) const {
  const char* what = "reduce_scatter";
  const Tensor host = host_operand(t, what);
  check_op(op, t.dtype(), what);
  OCTET_CHECK(t.dim() >= 1 && t.size(0) % size_ == 0, what, ": expected a first dimension divisible by the group size ",
              size_, ", got shape ", t.shape());
  Shape shape = t.shape();
  shape[0] /= size_;
  Tensor out = empty(shape, TensorOptions(t.dtype()));
  const int64_t chunk = out.numel();
  const size_t esize = dtype_size(t.dtype());
  if (chunk > 0) {
    std::vector<char> recv(static_cast<size_t>(chunk) * esize * static_cast<size_t>(size_));
    if (size_ == 1) {
      std::memcpy(recv.data(), host.raw_data(), recv.size());
    } else {
      start_second_stages();
      mpi::Request r = mpi::alltoall(host.raw_data(), recv.data(), chunk * static_cast<int64_t>(esize));
      mpi::wait(r, timeout_s_, what);
    }
    reduce_chunks(t.dtype(), recv.data(), size_, chunk, op, out.raw_data());
  }
  return t.device().is_cpu() ? out : out.to(t.device());
}

void ProcessGroup::barrier() const {
  if (size_ == 1) return;
  start_second_stages();
  mpi::Request r = mpi::barrier();
  mpi::wait(r, timeout_s_, "barrier");
}

void ProcessGroup::abort(const std::string& message, int code) const {
  if (size_ == 1) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::_Exit(code);
  }
  mpi::abort(code, message.c_str());
}

}  // namespace octet::dist
