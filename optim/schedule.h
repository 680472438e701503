// Learning-rate schedules as functions of training progress in (fractional) epochs, applied every
// step: lr = initial_lr * factor(epoch) for every parameter group. Being pure functions of the
// epoch, they need no state in a checkpoint: resuming at step s recomputes the same lr. The one
// exception, PlateauSchedule, follows the evaluation loss; its state() goes into checkpoints.
//   auto sched = linear_warmup_schedule(5, 0.01, cosine_schedule(95, 0.0));
//   for (int64_t s = 0; ...; ++s) { apply_schedule(opt, *sched, double(s) / steps_per_epoch); opt.step(); }
// Compute the epoch as steps / steps_per_epoch (not by summing 1/steps_per_epoch), so that the
// epoch is exact at epoch boundaries and step-wise schedules switch exactly there.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "optim/optimizer.h"

namespace octet {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  // The lr multiplier at `epoch` >= 0.
  virtual double factor(double epoch) const = 0;
};

// factor = value.
class ConstantSchedule : public LrSchedule {
 public:
  explicit ConstantSchedule(double value = 1.0);
  double factor(double epoch) const override { return value_; }

 private:
  double value_;
};

// factor = gamma ^ floor(epoch / step_size)  (torch StepLR).
class StepSchedule : public LrSchedule {
 public:
  StepSchedule(double step_size, double gamma);
  double factor(double epoch) const override;

 private:
  double step_size_, gamma_;
};

// factor = gamma ^ (number of milestones <= epoch)  (torch MultiStepLR).
class MultiStepSchedule : public LrSchedule {
 public:
  MultiStepSchedule(std::vector<double> milestones, double gamma);
  double factor(double epoch) const override;

 private:
  std::vector<double> milestones_;
  double gamma_;
};

// Cosine annealing from 1 at epoch 0 to eta_min_factor at total_epochs, flat after:
// factor = eta_min + (1 - eta_min) * (1 + cos(pi * min(epoch, total) / total)) / 2.
class CosineSchedule : public LrSchedule {
 public:
  CosineSchedule(double total_epochs, double eta_min_factor = 0.0);
  double factor(double epoch) const override;

 private:
  double total_epochs_, eta_min_factor_;
};

// Linear warm-up from start_factor to 1 over warmup_epochs, times after(0) so the ramp meets the
// next schedule; then after(epoch - warmup_epochs). A null `after` means constant 1.
class LinearWarmupSchedule : public LrSchedule {
 public:
  LinearWarmupSchedule(double warmup_epochs, double start_factor, std::shared_ptr<const LrSchedule> after);
  double factor(double epoch) const override;

 private:
  double warmup_epochs_, start_factor_;
  std::shared_ptr<const LrSchedule> after_;
};

// Decays by gamma whenever the evaluation loss has not improved on the best so far for more than
// `patience` evaluations in a row (torch ReduceLROnPlateau in mode "min" without threshold or
// cooldown). PyTorch's word_language_model example: gamma 0.25, patience 0 (lr / 4 after every
// epoch whose validation loss is not a new best).
class PlateauSchedule : public LrSchedule {
 public:
  struct State {
    double factor = 1.0;
    double best = HUGE_VAL;  // best loss seen
    int64_t bad = 0;         // evaluations since the best
  };
  PlateauSchedule(double gamma, int64_t patience = 0);
  double factor(double epoch) const override { return state_.factor; }
  // After each evaluation: returns whether the factor dropped. A non-finite loss never improves.
  bool observe(double loss);
  const State& state() const { return state_; }
  void set_state(const State& s);

 private:
  double gamma_;
  int64_t patience_;
  State state_;
};

std::shared_ptr<LrSchedule> constant_schedule(double value = 1.0);
std::shared_ptr<LrSchedule> step_schedule(double step_size, double gamma);
std::shared_ptr<LrSchedule> multistep_schedule(std::vector<double> milestones, double gamma);
std::shared_ptr<LrSchedule> cosine_schedule(double total_epochs, double eta_min_factor = 0.0);
std::shared_ptr<LrSchedule> linear_warmup_schedule(double warmup_epochs, double start_factor,
                                                   std::shared_ptr<const LrSchedule> after = nullptr);

// Sets every group's lr to initial_lr(group) * schedule.factor(epoch).
void apply_schedule(Optimizer& opt, const LrSchedule& schedule, double epoch);

}  // namespace octet
