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

}  // namespace octet::train
