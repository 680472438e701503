// What the processes of a data-parallel run agree on, each through one collective (without a
// process group every answer is this process's own): whether to stop and by which signal, the
// train sums of every rank's shard, the INT8 layers' gradient cosine distances (so DCLR gives every
// rank the same learning-rate factors), whether any rank says yes, and the recipe itself.
//   DistributedAgreement agree(training_group());
//   if (agree.stop_requested(opts.stop, opts.stop_signal)) ...;   RunningSums all = agree.sum(epoch);
#pragma once

#include <atomic>

#include "core/distributed.h"
#include "tools/train/batch_stats.h"
#include "tools/train/int8_run.h"
#include "tools/train/recipe.h"

namespace octet::train {

class DistributedAgreement {
 public:
  explicit DistributedAgreement(dist::ProcessGroup* group = nullptr) : group_(group) {}
  dist::ProcessGroup* group() const { return group_; }
  int world_size() const { return group_ ? group_->size() : 1; }
  // Rank 0 (or the only process) writes the run folder and the log.
  bool writer() const { return !group_ || group_->rank() == 0; }

  // A stop asked for (`stop` set by a signal or the caller) on any rank stops every rank after this
  // step; stop_signal() is then the signal that asked for it (the lowest number, if ranks got several).
  bool stop_requested(const std::atomic<bool>* stop, const std::atomic<int>* stop_signal);
  int stop_signal() const { return stop_signal_; }
  // Whether `mine` holds on any rank.
  bool any(bool mine) const;
  // The statistics of every rank's shard together (r itself with one process).
  RunningSums sum(const RunningSums& r) const;
  // Each INT8 layer's gradient cosine distance d_c becomes its mean over the ranks.
  void average_int8_distances(const Int8Run& int8) const;
  // Every rank must train the same resolved recipe: a hash of it is compared across the ranks, and
  // the first key that differs is named in the Error (one more comparison per key, only then).
  void check_same_recipe(const Recipe& recipe) const;

 private:
  dist::ProcessGroup* group_;
  int stop_signal_ = 0;
};

}  // namespace octet::train
