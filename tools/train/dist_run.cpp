// tools/train/dist_run.h
#include "tools/train/dist_run.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace octet::train {

dist::ProcessGroup* training_group() {
  if (dist::launched_world_size() <= 1) return nullptr;
  return &dist::ProcessGroup::world();
}

void sum_over_ranks(std::vector<double>& values, const dist::ProcessGroup* g) {
  if (g == nullptr || g->size() == 1 || values.empty()) return;
  Tensor t = empty({static_cast<int64_t>(values.size())}, TensorOptions(DType::f64));
  std::memcpy(t.data<double>(), values.data(), values.size() * sizeof(double));
  g->all_reduce(t, dist::ReduceOp::sum);
  std::memcpy(values.data(), t.data<double>(), values.size() * sizeof(double));
}

void warn_of_launcher_keepalive(const dist::ProcessGroup& g) {
  const int hosts = g.num_hosts();
  if (g.rank() != 0 || hosts < 2) return;
  const char* v = std::getenv("OMPI_MCA_oob_tcp_keepalive_time");
  const long keepalive = v != nullptr ? std::strtol(v, nullptr, 10) : 300;
  if (keepalive > 0 && keepalive <= 30) return;
  spdlog::warn(
      "this job spans {} hosts and Open MPI's daemons check their links only after {} s of quiet: if a host's "
      "link is cut, the ranks stop after train.dist_timeout_s but mpirun may wait minutes for that host. Start "
      "mpirun with --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3",
      hosts, keepalive > 0 ? std::to_string(keepalive) : std::string("infinite"));
}

}  // namespace octet::train
