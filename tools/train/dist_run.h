// Data-parallel runs of the trainer: the process group a run spans (the job's world when it was
// launched as several processes by mpirun or srun, else none), and the sums of the numbers every
// rank computes on its own shard (training and evaluation statistics).
//   if (dist::ProcessGroup* g = training_group()) sum_over_ranks({loss_sum, n}, g);
#pragma once

#include <vector>

#include "core/distributed.h"

namespace octet::train {

// The job's world when launched as more than one process, else null (one process: nothing to
// share). An Error when the launcher started several processes but octet has no MPI.
dist::ProcessGroup* training_group();

// values = their sum over the ranks of g (f64, deterministic); unchanged without g.
void sum_over_ranks(std::vector<double>& values, const dist::ProcessGroup* g);

// Rank 0 of a job over several hosts warns when Open MPI's launcher would notice a lost host late:
// its daemons' TCP keepalive starts after 300 s of quiet by default, so after a cut link mpirun
// waits minutes for the host's daemon (the ranks themselves stop at train.dist_timeout_s). The
// warning gives the mpirun options (README, data-parallel training).
void warn_of_launcher_keepalive(const dist::ProcessGroup& g);

}  // namespace octet::train
