// A one-line progress bar on stderr (only when stderr is a terminal): done/total, rate, ETA and
// whatever stats the caller passes. A message printed while the bar is shown part-way calls
// end_line() first, so that it starts on a line of its own.
//   ProgressBar bar("epoch 3/10", n_batches, enabled);  bar.update(i + 1, "loss 0.41 acc 87.1%");
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace octet::train {

class ProgressBar {
 public:
  // `unit_per_step` scales the rate (e.g. samples per batch) for the "/s" figure. `out` (stderr; a
  // test's terminal) is drawn on only when it is a terminal.
  ProgressBar(std::string label, int64_t total, bool enabled, double unit_per_step = 1.0, const char* unit = "it",
              std::FILE* out = stderr);
  void update(int64_t done, const std::string& stats);
  void finish(const std::string& stats);
  // Ends the line of a bar drawn part-way (nothing otherwise); the next update draws it anew.
  void end_line();
  // Whether bars are drawn at all: stderr is a terminal.
  static bool terminal();

 private:
  void draw(int64_t done, const std::string& stats, bool final);
  std::string label_;
  int64_t total_;
  std::FILE* out_;
  bool enabled_;
  bool line_open_ = false;  // a bar is drawn and its line not ended
  double unit_per_step_;
  const char* unit_;
  int64_t start_done_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace octet::train
