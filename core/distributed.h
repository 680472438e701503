// Data-parallel building blocks: the job's processes (a ProcessGroup over MPI's world: rank, size,
// local rank) and collectives on tensors -- all-reduce (sum, average), broadcast, all-gather,
// reduce-scatter, barrier -- for any contiguous tensor of any dtype. CPU tensors go through MPI,
// CUDA tensors through NCCL (or through the host in a build without NCCL). Deterministic: on the
// CPU a reduction adds the ranks' values in rank order (MPI moves the bytes; octet does the
// arithmetic); on GPUs NCCL's order follows its algorithm, which it picks from the size and the
// topology alone. Either way the same inputs give the same bits on every run and on every rank. Every collective
// finishes within the group's time-out or throws an octet::Error (a dead or stuck rank never hangs the others). A job
// of one process (started without mpirun, or octet built without MPI) needs no communication.
//   dist::ProcessGroup& pg = dist::ProcessGroup::world();   // mpirun -np 4 ./app: size() == 4
//   pg.all_reduce(grad, dist::ReduceOp::average);
//   pg.broadcast(weight, /*root=*/0);
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/tensor.h"

namespace octet::dist {

namespace nccl {
struct Peers;
}

enum class ReduceOp : uint8_t { sum, average };

// Rank r's part [first, last) of n elements cut into parts of per_rank, in rank order (the last
// parts shorter or empty): how sharded optimizer state and reduce-scattered gradients split a
// flattened parameter.
inline std::pair<int64_t, int64_t> part_of(int64_t n, int64_t per_rank, int64_t r) {
  const int64_t first = std::min(n, per_rank * r);
  return {first, std::min(n, first + per_rank)};
}

// True when octet was built with MPI (CMake option OCTET_MPI).
bool mpi_built();
// The number of processes the launcher started for this job, from its environment (mpirun's
// OMPI_COMM_WORLD_SIZE, srun's SLURM_STEP_NUM_TASKS, PMI_SIZE); 1 when started alone.
int launched_world_size();
// True when a launcher (mpirun, srun) started this process, even as the only one: its output then
// reaches the user through the launcher, whose own output may be a file while this one is a pty.
bool launched_by_launcher();

class Work;

class ProcessGroup {
 public:
  // Every process of the job (MPI_COMM_WORLD), MPI started on first use. A job launched with more
  // than one process in a build without MPI is an Error that says what to install.
  static ProcessGroup& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This process's rank among those on its host: the GPU it should use.
  int local_rank() const { return local_rank_; }
  // The number of hosts the job's processes run on (by host name).
  int num_hosts() const;

  // Seconds a collective may wait for the other ranks before it throws (default 300).
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds);

  // t = the reduction of every rank's t (in place).
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum) const;
  // The same, started now and finished by the returned Work (t is written at its end).
  Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum) const;
  // t = root's t on every rank.
  void broadcast(const Tensor& t, int root = 0) const;
  // [size, *t.shape]: row r is rank r's t (every rank's t has the same shape and dtype).
  Tensor all_gather(const Tensor& t) const;
  // t [size * k, ...] -> [k, ...]: this rank's k rows of the reduction of every rank's t.
  Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum) const;
  // A reduce-scatter in place, started now and finished by the returned Work: t (its numel a
  // multiple of size()) is cut into size() equal parts, and part r of rank r's t becomes the
  // reduction of every rank's part r -- on the CPU the same bits all_reduce gives there. The other
  // parts keep this rank's values.
  Work reduce_scatter_async(const Tensor& t, ReduceOp op = ReduceOp::sum) const;
  void barrier() const;
  // The first rank whose `text` differs from rank 0's, or -1 when all agree: start-up checks that
  // every rank built the same thing (a recipe, a model's layout), compared by a 64-bit hash.
  int first_rank_differing(std::string_view text) const;

  // Ends every process of the job now, after printing `message` on this one's stderr: the way
  // out when this rank fails while the others may wait in a collective.
  [[noreturn]] void abort(const std::string& message, int code = 1) const;

 private:
  ProcessGroup();
  nccl::Peers peers() const;
  Work reduce_async(const Tensor& t, ReduceOp op, bool scatter_only) const;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  double timeout_s_ = 300.0;
};

// An all-reduce (or reduce-scatter) in flight. done() drives it without blocking; wait() finishes it (or throws at
// the group's time-out). Destroying an unfinished Work finishes it.
class Work {
 public:
  Work();
  ~Work();
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  bool done();
  void wait();

  struct State;

 private:
  friend class ProcessGroup;
  std::shared_ptr<State> state_;  // shared with the group's queue of first stages
};

}  // namespace octet::dist
