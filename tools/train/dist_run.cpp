// tools/train/dist_run.h
#include "tools/train/dist_run.h"

#include <cstring>

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

}  // namespace octet::train
