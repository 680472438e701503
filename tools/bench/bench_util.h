// Timing helper shared by the benchmark programs.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/distributed.h"
#include "core/ops/reduce.h"
#include "core/tensor.h"

namespace octet::bench {

// Best-of-`reps` wall time of fn in seconds, after one warm-up call.
inline double best_time(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// s in single quotes for the shell.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Runs a shell command, returning what it printed (stdout and stderr) and its exit status (-1: it
// did not start). A peer benchmark (a PyTorch script) runs so, between octet's own rounds.
inline std::pair<std::string, int> run_capture(const std::string& cmd) {
  std::fflush(stdout);
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {"", -1};
  std::string text;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p)) text += buf;
  const int status = pclose(p);
  return {text, WIFEXITED(status) ? WEXITSTATUS(status) : status};
}

// The comma-separated fields of each line of a peer script's output `text` that starts with
// "RESULT," and has `n` fields (empty if none); `last` gets the last non-empty line, to say why
// when there is none, and `about` (if given) the script's "pytorch ..." version line.
inline std::vector<std::vector<std::string>> result_lines(const std::string& text, size_t n, std::string& last,
                                                          std::string* about = nullptr) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (about && line.rfind("pytorch ", 0) == 0) *about = line;
    if (!line.empty()) last = line;
    if (line.rfind("RESULT,", 0) != 0) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() == n) out.push_back(f);
  }
  return out;
}

// Options given as "--name value" pairs: each name's setter takes the value. Returns "" when all
// parsed, else what is wrong (an unknown name, a missing or malformed value) for the usage error.
using OptionSetters = std::map<std::string, std::function<void(const std::string&)>>;
// The setter that reads an option's value into `field` by its type (a number or the text itself).
template <typename T>
std::function<void(const std::string&)> into(T& field) {
  return [&field](const std::string& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      field = v;
    } else if constexpr (std::is_floating_point_v<T>) {
      field = static_cast<T>(std::stod(v));
    } else {
      const long long x = std::stoll(v);
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) throw std::out_of_range(v);
      field = static_cast<T>(x);
    }
  };
}

inline std::string parse_options(int argc, char** argv, const OptionSetters& setters) {
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    const auto it = setters.find(name);
    if (it == setters.end()) return "unknown option '" + name + "'";
    if (i + 1 >= argc) return "option '" + name + "' needs a value";
    try {
      it->second(argv[i + 1]);
    } catch (const std::exception&) {
      return "option '" + name + "': cannot read '" + argv[i + 1] + "'";
    }
  }
  return "";
}

// The largest of every rank's `v` (a step waits for its slowest rank), on every rank.
inline double max_over_ranks(double v, const dist::ProcessGroup& pg) {
  Tensor t = pg.all_gather(full({1}, v, TensorOptions(DType::f64)));
  return max(t).item();
}

}  // namespace octet::bench
