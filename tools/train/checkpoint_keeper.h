// The checkpoints of a run: where a resumed run continues from, and the saves of last.safetensors
// and best.safetensors into the run folder with checkpoint.on_save_error's policy. A checkpoint that
// cannot be written (a full disk, a folder made read-only) leaves the previous one under its name
// (core/serialization.h); `stop` ends the run with an error saying so, `continue` warns, trains on
// and writes again at the next save. A file whose newest save failed is "unwritten" until a later
// save of it succeeds, and a run cannot finish while one is.
//   CheckpointKeeper keeper(folder, recipe.text("checkpoint.on_save_error"));
//   keeper.save("last.safetensors", step, [&](const std::string& path) { save_checkpoint(path, ...); return true; });
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/run_folder.h"

namespace octet::train {

// Where `octet train --resume` continues: the checkpoint (a file, or a run folder's
// last.safetensors), its recipe with the caller's overrides, and its run folder.
struct ResumePoint {
  Checkpoint checkpoint;
  Recipe recipe;
  std::string path;           // the checkpoint file
  std::string run_dir;        // its run folder; empty when it is not in one (the run continues in a new one)
  int64_t last_on_disk = -1;  // the step of the run folder's last.safetensors, where known
};
// An Error for an export (no optimizer state), an override of a key that shapes the weights or the
// optimizer's state, or a run that train.max_steps has already stopped.
ResumePoint read_resume_point(const std::string& resume, const std::vector<std::string>& overrides);

class CheckpointKeeper {
 public:
  // on_save_error: "stop" or "continue" (the recipe checked it).
  CheckpointKeeper(RunFolder& folder, std::string on_save_error)
      : folder_(folder), on_save_error_(std::move(on_save_error)) {}
  // Writes the checkpoint `name` of step `step` into the run folder by `write(path)`, which returns
  // whether this process wrote it (rank 0 alone does; every rank calls save, as writing may gather
  // state from all). `required`: a save the run cannot go on without (the one a stop by signal or
  // max_steps ends with), an error whatever on_save_error says.
  using Writer = std::function<bool(const std::string& path)>;
  void save(const std::string& name, int64_t step, const Writer& write, bool required = false);

  // Whether the newest save of `name` failed.
  bool unwritten(const std::string& name) const { return unwritten_.count(name) > 0; }
  int64_t failures() const { return failures_; }
  // The step of last.safetensors on disk (a resumed run's, until its first save).
  void set_last_on_disk(int64_t step) { last_on_disk_ = step; }
  // What last.safetensors on disk holds, for errors: "<dir>/last.safetensors (step 40) is intact".
  std::string on_disk_text() const;
  // The end of a run at step `step`: an Error naming the files whose newest save failed.
  void check_all_written(int64_t step) const;

 private:
  RunFolder& folder_;
  std::string on_save_error_;
  int64_t failures_ = 0;
  int64_t last_on_disk_ = -1;
  std::map<std::string, std::string> unwritten_;  // file name -> why its newest save failed
};

}  // namespace octet::train
