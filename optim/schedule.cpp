#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace octet {

ConstantSchedule::ConstantSchedule(double value) : value_(value) {
  OCTET_CHECK(value >= 0.0, "constant_schedule: expected value >= 0, got ", value);
}

StepSchedule::StepSchedule(double step_size, double gamma) : step_size_(step_size), gamma_(gamma) {
  OCTET_CHECK(step_size > 0.0, "step_schedule: expected step_size > 0, got ", step_size);
  OCTET_CHECK(gamma >= 0.0, "step_schedule: expected gamma >= 0, got ", gamma);
}
double StepSchedule::factor(double epoch) const { return std::pow(gamma_, std::floor(epoch / step_size_)); }

MultiStepSchedule::MultiStepSchedule(std::vector<double> milestones, double gamma)
    : milestones_(std::move(milestones)), gamma_(gamma) {
  OCTET_CHECK(gamma >= 0.0, "multistep_schedule: expected gamma >= 0, got ", gamma);
}
double MultiStepSchedule::factor(double epoch) const {
  int passed = 0;
  for (double m : milestones_) passed += m <= epoch;
  return std::pow(gamma_, passed);
}

CosineSchedule::CosineSchedule(double total_epochs, double eta_min_factor)
    : total_epochs_(total_epochs), eta_min_factor_(eta_min_factor) {
  OCTET_CHECK(total_epochs > 0.0, "cosine_schedule: expected total_epochs > 0, got ", total_epochs);
  OCTET_CHECK(eta_min_factor >= 0.0, "cosine_schedule: expected eta_min_factor >= 0, got ", eta_min_factor);
}
double CosineSchedule::factor(double epoch) const {
  double e = std::min(std::max(epoch, 0.0), total_epochs_);
  return eta_min_factor_ + (1.0 - eta_min_factor_) * 0.5 * (1.0 + std::cos(std::numbers::pi * e / total_epochs_));
}

LinearWarmupSchedule::LinearWarmupSchedule(double warmup_epochs, double start_factor,
                                           std::shared_ptr<const LrSchedule> after)
    : warmup_epochs_(warmup_epochs), start_factor_(start_factor), after_(std::move(after)) {
  OCTET_CHECK(warmup_epochs >= 0.0, "linear_warmup_schedule: expected warmup_epochs >= 0, got ", warmup_epochs);
  OCTET_CHECK(start_factor >= 0.0, "linear_warmup_schedule: expected start_factor >= 0, got ", start_factor);
}
double LinearWarmupSchedule::factor(double epoch) const {
  if (epoch >= warmup_epochs_) return after_ ? after_->factor(epoch - warmup_epochs_) : 1.0;
  double ramp = start_factor_ + (1.0 - start_factor_) * epoch / warmup_epochs_;
  return ramp * (after_ ? after_->factor(0.0) : 1.0);
}

PlateauSchedule::PlateauSchedule(double gamma, int64_t patience) : gamma_(gamma), patience_(patience) {
  OCTET_CHECK(gamma > 0.0 && gamma <= 1.0, "plateau_schedule: expected 0 < gamma <= 1, got ", gamma);
  OCTET_CHECK(patience >= 0, "plateau_schedule: expected patience >= 0, got ", patience);
}

bool PlateauSchedule::observe(double loss) {
  if (loss < state_.best) {  // false for nan
    state_.best = loss;
    state_.bad = 0;
    return false;
  }
  if (++state_.bad <= patience_) return false;
  state_.factor *= gamma_;
  state_.bad = 0;
  return true;
}

void PlateauSchedule::set_state(const State& s) {
  OCTET_CHECK(std::isfinite(s.factor) && s.factor > 0.0 && s.bad >= 0, "plateau_schedule: invalid state (factor ",
              s.factor, ", bad evaluations ", s.bad, ")");
  state_ = s;
}

std::shared_ptr<LrSchedule> constant_schedule(double value) { return std::make_shared<ConstantSchedule>(value); }
std::shared_ptr<LrSchedule> step_schedule(double step_size, double gamma) {
  return std::make_shared<StepSchedule>(step_size, gamma);
}
std::shared_ptr<LrSchedule> multistep_schedule(std::vector<double> milestones, double gamma) {
  return std::make_shared<MultiStepSchedule>(std::move(milestones), gamma);
}
std::shared_ptr<LrSchedule> cosine_schedule(double total_epochs, double eta_min_factor) {
  return std::make_shared<CosineSchedule>(total_epochs, eta_min_factor);
}
std::shared_ptr<LrSchedule> linear_warmup_schedule(double warmup_epochs, double start_factor,
                                                   std::shared_ptr<const LrSchedule> after) {
  return std::make_shared<LinearWarmupSchedule>(warmup_epochs, start_factor, std::move(after));
}

void apply_schedule(Optimizer& opt, const LrSchedule& schedule, double epoch) {
  OCTET_CHECK(epoch >= 0.0, "apply_schedule: expected epoch >= 0, got ", epoch);  // also refuses nan
  const double f = schedule.factor(epoch);
  OCTET_CHECK(std::isfinite(f) && f >= 0.0, "apply_schedule: factor at epoch ", epoch, " is ", f);
  for (size_t g = 0; g < opt.num_groups(); ++g) opt.set_lr(g, opt.initial_lr(g) * f);
}

}  // namespace octet
