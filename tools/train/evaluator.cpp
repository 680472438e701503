#include "tools/train/evaluator.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include "layers/distributed.h"
#include "tools/train/run_support.h"

namespace octet::train {

const EvalResult& Evaluator::after_epoch(int64_t epoch, int64_t epochs, int64_t step, const RunningSums& train) {
  last_ = task_.evaluate_epoch(model_);
  const double n = static_cast<double>(train.n), none = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, double> train_values = {
      {"train_loss", train.n > 0 ? train.mean_loss() : none},
      {"train_top1", train.n > 0 ? 100.0 * static_cast<double>(train.correct) / n : none},
      {"wall_s", folder_.wall_s()}};
  if (language_model()) train_values["train_ppl"] = std::exp(train_values["train_loss"]);
  folder_.record_eval(last_, step, static_cast<double>(epoch + 1), device_, train_values);
  spdlog::info("epoch {}/{}: train {}, {}{}", epoch + 1, epochs, sums_text(train, language_model()),
               describe_eval(last_), memory_text(device_));
  return last_;
}

EvalResult Evaluator::final_test(int64_t step, int64_t epochs) {
  if (!language_model()) return last_;
  const std::string best = folder_.path("best.safetensors");
  const bool writer = agree_.writer();
  if (agree_.any(writer && std::filesystem::exists(best))) {
    if (writer) load_model_from(model_, load_checkpoint(best).model, best, "this run's model");
    if (agree_.group()) broadcast_weights(model_, *agree_.group());
  }
  EvalResult r = task_.evaluate_all(model_).back();
  folder_.record_eval(r, step, static_cast<double>(epochs), device_, {{"wall_s", folder_.wall_s()}});
  folder_.write_curves();
  spdlog::info("{} (the checkpoint of the best validation loss)", describe_eval(r));
  return r;
}

}  // namespace octet::train
