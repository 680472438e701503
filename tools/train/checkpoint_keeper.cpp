#include "tools/train/checkpoint_keeper.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "tools/train/run_support.h"

namespace octet::train {

namespace fs = std::filesystem;

ResumePoint read_resume_point(const std::string& resume, const std::vector<std::string>& overrides) {
  ResumePoint p;
  p.path = fs::is_directory(resume) ? resume + "/last.safetensors" : resume;
  p.checkpoint = load_checkpoint(p.path);
  const Checkpoint& c = p.checkpoint;
  OCTET_CHECK(c.quant_assignment.empty() && !c.optimizer.empty(), "train --resume: ", p.path,
              " is an export (octet export): it holds a model for inference, not the optimizer state a run "
              "continues from; resume from the run's folder or its last.safetensors");
  p.recipe = parse_stored_recipe(c.recipe_yaml, p.path + " (recipe)", overrides);
  // An override of a key that shapes the weights or the optimizer's state would fail only when the
  // checkpoint is loaded, as a list of every tensor name that does not fit.
  const Recipe stored = parse_stored_recipe(c.recipe_yaml, p.path + " (recipe)");
  const std::string key = first_changed(stored, p.recipe, keys_fixed_on_resume());
  OCTET_USAGE_CHECK(key.empty(), "train --resume ", resume, ": ", key,
                    " cannot change on resume (the checkpoint's weights and optimizer state are for ", key, ": ",
                    stored.value_yaml(key), ", the override asks for ", p.recipe.value_yaml(key),
                    "); start a new run to train with it");
  // A checkpoint outside a run folder (copied elsewhere, or into the current folder) continues in a
  // new run folder, as a new run would make it; its own folder is left as it is.
  p.run_dir = run_dir_of(p.path);
  if (!is_run_folder(p.run_dir)) p.run_dir.clear();
  // A run stopped by train.max_steps: training on would pass the limit by a step each time.
  const int64_t max_steps = p.recipe.integer("train.max_steps"), step = c.state.step;
  const bool epochs_left = c.state.epoch < p.recipe.integer("train.epochs");
  OCTET_CHECK(max_steps == 0 || step < max_steps || !epochs_left, "train: ", p.path, " is at step ", step,
              ", and train.max_steps is ", max_steps, ": nothing to train. Raise train.max_steps to train on (e.g. ",
              "`octet train --resume ", resume, " train.max_steps=", step + max_steps, "`; 0: no limit)");
  std::error_code ec;
  if (!p.run_dir.empty() && fs::equivalent(p.path, p.run_dir + "/last.safetensors", ec)) p.last_on_disk = step;
  return p;
}

void CheckpointKeeper::save(const std::string& name, int64_t step, const Writer& write, bool required) {
  try {
    if (write(folder_.path(name))) {
      if (name == "last.safetensors") last_on_disk_ = step;
      folder_.point_latest();
    }
  } catch (const Error& e) {
    ++failures_;
    if (required || on_save_error_ == "stop") {
      folder_.write_curves();
      OCTET_FAIL("train: cannot write the checkpoint at step ", step, ": ", e.what(), "; ",
                 required ? "stopped" : "stopped (checkpoint.on_save_error: stop)", "; ", on_disk_text(),
                 ". Make room or fix the folder, then continue with `octet train --resume ", folder_.dir(), "`",
                 required ? "" : ", or set checkpoint.on_save_error: continue to train on through failed saves");
    }
    unwritten_[name] = e.what();
    spdlog::warn(
        "cannot write the checkpoint at step {}: {}; training goes on (checkpoint.on_save_error: "
        "continue) and writes {} again at the next save; {} ({} failed saves so far)",
        step, e.what(), name, on_disk_text(), failures_);
    return;
  }
  if (unwritten_.erase(name) > 0) spdlog::info("{}/{} written again after failed saves", folder_.dir(), name);
}

std::string CheckpointKeeper::on_disk_text() const {
  const std::string last = folder_.path("last.safetensors");
  if (last_on_disk_ >= 0) return last + " (step " + std::to_string(last_on_disk_) + ") is intact";
  return fs::exists(last) ? "the previous " + last + " is intact" : "no last.safetensors was written yet";
}

void CheckpointKeeper::check_all_written(int64_t step) const {
  if (unwritten_.empty()) return;
  std::string files;
  for (const auto& [name, why] : unwritten_) files += "; " + folder_.path(name) + ": " + why;
  OCTET_FAIL("train: finished at step ", step, " but its newest checkpoints could not be written (", failures_,
             " failed saves, checkpoint.on_save_error: continue)", files, "; ", on_disk_text());
}

}  // namespace octet::train
