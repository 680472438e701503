// The tensor collectives of core/distributed.h on the byte collectives of core/mpi/comm.h. An
// all-reduce is a reduce-scatter and an all-gather: the tensor is cut into one part per rank; each
// rank receives its part of every rank's tensor (MPI_Ialltoallv), adds them in rank order into its
// own part, and every rank gathers the reduced parts in place (MPI_Iallgatherv) -- the bytes of a
// ring all-reduce, 2 (P-1)/P of the tensor per rank, with no copy of the tensor, and an order of
// additions that does not depend on MPI's algorithm choice. CUDA tensors go through NCCL
// (core/nccl/comm.h) when octet has it, and through the host otherwise.
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
#include "core/nccl/comm.h"

namespace octet::dist {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0 && n < (1L << 24)) ? static_cast<int>(n) : 0;
}

void check_operand(const Tensor& t, const char* op) {
  OCTET_CHECK(t.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(t.is_contiguous(), op, ": expected a contiguous tensor, got shape ", t.shape(),
              " with strides that are not");
}

// True when t's collective runs on NCCL: a CUDA tensor in a build with NCCL.
bool on_nccl(const Tensor& t) { return !t.device().is_cpu() && nccl::built(); }

// A contiguous CPU tensor of t's values: t itself, or a host copy (CUDA tensors without NCCL).
Tensor host_operand(const Tensor& t, const char* op) {
  check_operand(t, op);
  return t.device().is_cpu() ? t : t.to(Device::cpu());
}

// out[i] = in[0][i] + in[1][i] + ... + in[P-1][i], in that order (then / P for an average), where
// in[r] = in + r * count. Rank by rank over the whole part, so the loops vectorize; the additions of
// each element keep their order. Floating values add in their own type (bf16 in f32, rounded once);
// integers wrap to their type, as PyTorch's integer sums do.
template <typename T>
void reduce_parts(const T* in, int ranks, int64_t count, ReduceOp op, T* out) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    std::vector<float> acc(in, in + count);
    for (int r = 1; r < ranks; ++r)
      for (int64_t i = 0; i < count; ++i) acc[static_cast<size_t>(i)] += static_cast<float>(in[r * count + i]);
    const float p = static_cast<float>(ranks);
    for (int64_t i = 0; i < count; ++i)
      out[i] = BFloat16(op == ReduceOp::average ? acc[static_cast<size_t>(i)] / p : acc[static_cast<size_t>(i)]);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (out != in) std::memcpy(out, in, static_cast<size_t>(count) * sizeof(T));
    for (int r = 1; r < ranks; ++r) {
      const T* part = in + r * count;
      for (int64_t i = 0; i < count; ++i) out[i] += part[i];
    }
    if (op == ReduceOp::average)
      for (int64_t i = 0; i < count; ++i) out[i] /= static_cast<T>(ranks);
  } else {
    using U = std::make_unsigned_t<T>;  // modular addition: no signed overflow
    if (out != in) std::memcpy(out, in, static_cast<size_t>(count) * sizeof(T));
    for (int r = 1; r < ranks; ++r) {
      const T* part = in + r * count;
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(static_cast<U>(out[i]) + static_cast<U>(part[i]));
    }
  }
}

void reduce_parts(DType dtype, const void* in, int ranks, int64_t count, ReduceOp op, void* out) {
  dispatch_all(dtype,
               [&]<typename T>() { reduce_parts(static_cast<const T*>(in), ranks, count, op, static_cast<T*>(out)); });
}

void check_op(ReduceOp op, DType dtype, const char* what) {
  OCTET_CHECK(op == ReduceOp::sum || op == ReduceOp::average, what, ": unknown ReduceOp ", static_cast<int>(op));
  OCTET_CHECK(op == ReduceOp::sum || dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16, what,
              ": an average needs a floating dtype (f32, f64, bf16), got ", dtype, "; use ReduceOp::sum");
}

// The parts of n elements among `ranks`: counts (n / ranks, the first n % ranks one more) and
// their offsets.
void parts_of(int64_t n, int ranks, std::vector<int>& counts, std::vector<int>& displs, const char* what) {
  OCTET_CHECK(n / ranks < (int64_t{1} << 31) - 1, what, ": ", n, " elements are too many for MPI's int counts");
  counts.assign(static_cast<size_t>(ranks), 0);
  displs.assign(static_cast<size_t>(ranks), 0);
  int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(n / ranks + (r < n % ranks ? 1 : 0));
    displs[static_cast<size_t>(r)] = static_cast<int>(at);
    at += counts[static_cast<size_t>(r)];
  }
  OCTET_CHECK(at < (int64_t{1} << 31), what, ": ", n, " elements are too many for MPI's int offsets");
}

}  // namespace

bool mpi_built() { return mpi::built(); }

constexpr const char* kLauncherSizeVars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_SIZE", "PMIX_SIZE"};

int launched_world_size() {
  for (const char* name : kLauncherSizeVars)
    if (const int n = env_int(name); n > 0) return n;
  return 1;
}

bool launched_by_launcher() {
  for (const char* name : kLauncherSizeVars)
    if (env_int(name) > 0) return true;
  return false;
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

int ProcessGroup::num_hosts() const {
  std::vector<std::string> hosts = mpi::host_names();
  std::sort(hosts.begin(), hosts.end());
  return std::max<int>(1, static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin()));
}

void ProcessGroup::set_timeout_s(double seconds) {
  OCTET_CHECK(seconds > 0, "ProcessGroup::set_timeout_s: expected seconds > 0, got ", seconds);
  timeout_s_ = seconds;
}

// ---------------------------------------------------------------- all-reduce, in two stages

struct Work::State {
  Tensor target;                    // the caller's tensor, written at the end
  Tensor host;                      // its values on the host (target itself for a CPU tensor)
  std::vector<int> counts, displs;  // each rank's part of the tensor
  std::vector<char> recv;           // this rank's part of every rank's tensor
  int esize = 0;
  int ranks = 1, rank = 0;
  ReduceOp op = ReduceOp::sum;
  double timeout_s = 300;
  int stage = 0;              // 1: alltoallv in flight, 2: allgatherv (or the NCCL all-reduce) in flight, 3: done
  bool scatter_only = false;  // a reduce-scatter: no second stage
  mpi::Request request;
  nccl::Request gpu_request;  // the NCCL all-reduce of a CUDA tensor (no first stage)
  bool gpu = false;

  // Stage 1 -> 2: waits for the alltoallv, adds the parts into this rank's part of host, starts
  // the allgatherv.
  void start_second_stage() {
    mpi::wait(request, timeout_s, "all_reduce");
    const size_t me = static_cast<size_t>(rank);
    char* mine = static_cast<char*>(host.raw_data()) + static_cast<size_t>(displs[me]) * static_cast<size_t>(esize);
    reduce_parts(host.dtype(), recv.data(), ranks, counts[me], op, mine);
    if (scatter_only) return finish();
    request = mpi::allgatherv_in_place(host.raw_data(), counts.data(), displs.data(), esize);
    stage = 2;
  }
  // Stage 2 -> 3 once the allgatherv (or the NCCL all-reduce) is in.
  bool finish_if_done() {
    if (stage != 2 || !(gpu ? nccl::test(gpu_request) : mpi::test(request))) return stage == 3;
    finish();
    return true;
  }
  void wait_second_stage() {
    if (stage != 2) return;
    if (gpu)
      nccl::wait(gpu_request, timeout_s, "all_reduce");
    else
      mpi::wait(request, timeout_s, "all_reduce");
    finish();
  }
  void finish() {
    if (!gpu && !target.device().is_cpu()) target.copy_(host);
    stage = 3;
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
  state_->wait_second_stage();
}

nccl::Peers ProcessGroup::peers() const { return nccl::Peers{rank_, size_, timeout_s_}; }

Work ProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) const { return reduce_async(t, op, false); }

Work ProcessGroup::reduce_scatter_async(const Tensor& t, ReduceOp op) const {
  OCTET_CHECK(t.defined() && t.numel() % size_ == 0,
              "reduce_scatter_async: expected a number of elements divisible by "
              "the group size ",
              size_, ", got ", t.defined() ? t.numel() : 0);
  return reduce_async(t, op, true);
}

Work ProcessGroup::reduce_async(const Tensor& t, ReduceOp op, bool scatter_only) const {
  const char* what = scatter_only ? "reduce_scatter" : "all_reduce";
  check_operand(t, what);
  check_op(op, t.dtype(), what);
  Work w;
  if (size_ == 1 || t.numel() == 0) return w;
  start_second_stages();
  auto s = std::make_shared<Work::State>();
  s->target = t, s->op = op, s->ranks = size_, s->rank = rank_, s->timeout_s = timeout_s_;
  s->scatter_only = scatter_only;
  if (on_nccl(t)) {
    s->gpu = true;
    const bool average = op == ReduceOp::average;
    if (scatter_only) {  // in place: this rank's part of t receives the reduction
      const int64_t part = t.numel() / size_;
      char* mine = static_cast<char*>(t.raw_data()) + rank_ * part * static_cast<int64_t>(dtype_size(t.dtype()));
      s->gpu_request = nccl::reduce_scatter(peers(), t.device().index, t.raw_data(), mine, part, t.dtype(), average);
    } else {
      s->gpu_request = nccl::all_reduce(peers(), t.device().index, t.raw_data(), t.numel(), t.dtype(), average);
    }
    s->stage = 2;
    w.state_ = std::move(s);
    return w;
  }
  Tensor host = host_operand(t, what);
  // The reduced parts are written into host: a CPU tensor itself, or a host copy of a GPU one.
  s->host = host;
  s->esize = static_cast<int>(dtype_size(t.dtype()));
  parts_of(t.numel(), size_, s->counts, s->displs, what);
  s->recv.resize(static_cast<size_t>(s->counts[static_cast<size_t>(rank_)]) * static_cast<size_t>(size_) *
                 static_cast<size_t>(s->esize));
  s->request = mpi::alltoallv(s->host.raw_data(), s->counts.data(), s->displs.data(), s->recv.data(), s->esize);
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
  check_operand(t, what);
  if (size_ == 1 || t.numel() == 0) return;
  start_second_stages();
  if (on_nccl(t)) {
    nccl::Request r = nccl::broadcast(peers(), t.device().index, t.raw_data(), t.numel(), t.dtype(), root);
    nccl::wait(r, timeout_s_, what);
    return;
  }
  Tensor host = host_operand(t, what);
  mpi::Request r = mpi::broadcast(host.raw_data(), t.numel() * static_cast<int64_t>(dtype_size(t.dtype())), root);
  mpi::wait(r, timeout_s_, what);
  if (!t.device().is_cpu()) Tensor(t).copy_(host);  // host is a copy; the handle shares t's storage
}

Tensor ProcessGroup::all_gather(const Tensor& t) const {
  const char* what = "all_gather";
  check_operand(t, what);
  Shape shape = t.shape();
  shape.insert(shape.begin(), size_);
  if (on_nccl(t) && size_ > 1) {
    Tensor out = empty(shape, TensorOptions(t.dtype()).device(t.device()));
    if (t.numel() > 0) {
      start_second_stages();
      nccl::Request r = nccl::all_gather(peers(), t.device().index, t.raw_data(), out.raw_data(), t.numel(), t.dtype());
      nccl::wait(r, timeout_s_, what);
    }
    return out;
  }
  const Tensor host = host_operand(t, what);
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
  check_operand(t, what);
  check_op(op, t.dtype(), what);
  OCTET_CHECK(t.dim() >= 1 && t.size(0) % size_ == 0, what, ": expected a first dimension divisible by the group size ",
              size_, ", got shape ", t.shape());
  Shape shape = t.shape();
  shape[0] /= size_;
  if (on_nccl(t) && size_ > 1) {
    Tensor out = empty(shape, TensorOptions(t.dtype()).device(t.device()));
    if (out.numel() > 0) {
      start_second_stages();
      nccl::Request r = nccl::reduce_scatter(peers(), t.device().index, t.raw_data(), out.raw_data(), out.numel(),
                                             t.dtype(), op == ReduceOp::average);
      nccl::wait(r, timeout_s_, what);
    }
    return out;
  }
  const Tensor host = host_operand(t, what);
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
    reduce_parts(t.dtype(), recv.data(), size_, chunk, op, out.raw_data());
  }
  return t.device().is_cpu() ? out : out.to(t.device());
}

void ProcessGroup::barrier() const {
  if (size_ == 1) return;
  start_second_stages();
  mpi::Request r = mpi::barrier();
  mpi::wait(r, timeout_s_, "barrier");
}

int ProcessGroup::first_rank_differing(std::string_view text) const {
  uint64_t value = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) value = (value ^ c) * 1099511628211ull;
  Tensor mine = empty({1}, TensorOptions(DType::i64));
  std::memcpy(mine.raw_data(), &value, sizeof value);
  const Tensor all = all_gather(mine);
  const auto* v = static_cast<const uint64_t*>(all.raw_data());
  for (int r = 1; r < size_; ++r)
    if (v[r] != v[0]) return r;
  return -1;
}

void ProcessGroup::abort(const std::string& message, int code) const {
  if (size_ == 1) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::_Exit(code);
  }
  mpi::abort(code, message.c_str());
}

}  // namespace octet::dist
