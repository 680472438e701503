#include "tools/train/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "core/distributed.h"

namespace octet::train {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  long t = std::lround(s);
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lds", t);
  return buf;
}

namespace {

// A terminal the user watches: not one under mpirun or srun, whose ranks may write to a pty while
// the launcher's own output goes to a file (each redraw would land there as a line).
bool watched_terminal(int fd) { return ::isatty(fd) == 1 && !dist::launched_by_launcher(); }

}  // namespace

bool ProgressBar::terminal() { return watched_terminal(STDERR_FILENO); }

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled, double unit_per_step, const char* unit,
                         std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      out_(out),
      enabled_(enabled && watched_terminal(::fileno(out))),
      unit_per_step_(unit_per_step),
      unit_(unit),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t done, const std::string& stats) {
  if (start_done_ < 0) start_done_ = done - 1;  // a resumed epoch starts part-way
  auto now = std::chrono::steady_clock::now();
  if (!enabled_ || (now - last_draw_ < std::chrono::milliseconds(100) && done < total_)) return;
  last_draw_ = now;
  draw(done, stats, false);
}

void ProgressBar::finish(const std::string& stats) {
  if (enabled_) draw(total_, stats, true);
}

void ProgressBar::end_line() {
  if (!line_open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  line_open_ = false;
}

void ProgressBar::draw(int64_t done, const std::string& stats, bool final) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double steps = static_cast<double>(done - std::max<int64_t>(start_done_, 0));
  double rate = elapsed > 0 ? steps / elapsed : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : NAN;
  const int width = 24;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(out_, "\r\033[2K%s [%s] %lld/%lld %s | %.0f %s/s | %s %s", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), stats.c_str(), rate * unit_per_step_,
               unit_, final ? "took" : "ETA", format_duration(final ? elapsed : eta).c_str());
  if (final) std::fputc('\n', out_);
  line_open_ = !final;
  std::fflush(out_);
}

}  // namespace octet::train
