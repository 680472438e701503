#include "tools/train/dist_agreement.h"

#include <string>
#include <vector>

#include "tools/train/dist_run.h"

namespace octet::train {

bool DistributedAgreement::stop_requested(const std::atomic<bool>* stop, const std::atomic<int>* stop_signal) {
  const bool mine = stop && stop->load();
  const int sig = mine && stop_signal ? stop_signal->load() : 0;
  std::vector<double> v{mine ? 1.0 : 0.0};
  sum_over_ranks(v, group_);
  if (v[0] == 0) return false;
  constexpr int kSignals = 65;  // 1..64 on Linux
  std::vector<double> asked(kSignals, 0.0);
  if (sig > 0 && sig < kSignals) asked[static_cast<size_t>(sig)] = 1;
  sum_over_ranks(asked, group_);  // every rank takes part: each saw v[0] > 0
  for (int s = 1; s < kSignals && stop_signal_ == 0; ++s)
    if (asked[static_cast<size_t>(s)] > 0) stop_signal_ = s;
  return true;
}

bool DistributedAgreement::any(bool mine) const {
  std::vector<double> v{mine ? 1.0 : 0.0};
  sum_over_ranks(v, group_);
  return v[0] > 0;
}

RunningSums DistributedAgreement::sum(const RunningSums& r) const {
  if (!group_) return r;
  std::vector<double> v{r.loss, static_cast<double>(r.n), static_cast<double>(r.correct),
                        static_cast<double>(r.skipped)};
  sum_over_ranks(v, group_);
  RunningSums g;
  g.loss = v[0], g.n = static_cast<int64_t>(v[1]), g.correct = static_cast<int64_t>(v[2]);
  g.skipped = static_cast<int64_t>(v[3]);
  return g;
}

void DistributedAgreement::average_int8_distances(const Int8Run& int8) const {
  if (!group_) return;
  std::vector<double> d;
  for (const auto& l : int8.layers()) d.push_back(l.layer->stats.cos_distance);
  sum_over_ranks(d, group_);
  for (size_t i = 0; i < d.size(); ++i)
    int8.layers()[i].layer->stats.cos_distance = d[i] / static_cast<double>(group_->size());
}

void DistributedAgreement::check_same_recipe(const Recipe& recipe) const {
  if (!group_) return;
  const int differing = group_->first_rank_differing(recipe.resolved_yaml());
  if (differing < 0) return;
  std::string key;
  for (const SchemaEntry& e : recipe_schema()) {
    if (group_->first_rank_differing(recipe.value_yaml(e.key)) < 0) continue;
    key = e.key;
    break;
  }
  OCTET_FAIL("train: rank ", differing, "'s recipe differs from rank 0's (after its overrides)",
             key.empty() ? ""
                         : " at " + key + " (this rank, " + std::to_string(group_->rank()) + ", has " +
                               recipe.value_yaml(key) + ")",
             ": every process of the job must get the same recipe and overrides");
}

}  // namespace octet::train
