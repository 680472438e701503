// A process-wide choice among the implementations of one kernel family ("paths"): the CPU ISA of
// the vectorized loops, oneDNN or the plain loops for convolutions, the int8 GEMM, the zero-point
// GEMM, the PrecisionBatching kernel, the CUDA INT8 convolution path. Every family works the same
// way through one Selector:
//   - each choice has one name; "auto" is the automatic choice where a family has one (and
//     "automatic" is read as "auto");
//   - active(): the choice set by set(), else the environment variable's (read once, on first use;
//     an unknown or unsupported name there is an octet::Error naming the variable), else the
//     family's default (the fastest supported path, or auto);
//   - set(v) refuses an unsupported choice (an octet::Error naming the family and the supported
//     choices) and returns the previous one, so a test can run every path and restore the setting.
//   Selector<Isa> sel{"cpu ISA", "OCTET_ISA", {{Isa::portable, "portable"}, {Isa::avx2, "avx2"}},
//                     isa_supported, best_isa};
//   Isa previous = sel.set(sel.parse("avx2"));   ...   sel.set(previous);
#pragma once

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace octet {

template <typename E>
class Selector {
 public:
  struct Choice {
    E value;
    std::string_view name;
  };

  // `what` names the family in errors; `env` is its environment variable (or null); `supported`
  // tells whether this build and machine can run a choice; `fallback` is the default choice.
  Selector(std::string_view what, const char* env, std::vector<Choice> choices, bool (*supported)(E), E (*fallback)())
      : what_(what), env_(env), choices_(std::move(choices)), supported_(supported), fallback_(fallback) {}
  Selector(const Selector&) = delete;
  Selector& operator=(const Selector&) = delete;

  std::string_view name(E v) const {
    for (const Choice& c : choices_)
      if (c.value == v) return c.name;
    return "unknown";
  }

  // The choice named `text`; an octet::Error listing the names otherwise.
  E parse(std::string_view text) const {
    if (text == "automatic") text = "auto";
    for (const Choice& c : choices_)
      if (c.name == text) return c.value;
    OCTET_FAIL("unknown ", what_, " '", std::string(text), "' (expected ", names(), ")");
  }

  bool known(E v) const {
    for (const Choice& c : choices_)
      if (c.value == v) return true;
    return false;
  }
  bool supported(E v) const { return known(v) && supported_(v); }

  // The choices this build and machine can run, in declaration order.
  std::vector<E> supported_choices() const {
    std::vector<E> out;
    for (const Choice& c : choices_)
      if (supported_(c.value)) out.push_back(c.value);
    return out;
  }

  E active() const {
    int a = active_.load(std::memory_order_relaxed);
    if (a >= 0) return static_cast<E>(a);
    const E initial = from_environment();
    int expected = -1;
    active_.compare_exchange_strong(expected, static_cast<int>(initial), std::memory_order_relaxed);
    return static_cast<E>(active_.load(std::memory_order_relaxed));
  }

  E set(E v) {
    OCTET_CHECK(known(v), what_, ": unknown choice ", static_cast<int>(v), " (expected ", names(), ")");
    OCTET_CHECK(supported_(v), what_, ": '", name(v),
                "' is not supported by this build or machine (supported: ", supported_names(), ")");
    const E previous = active();
    active_.store(static_cast<int>(v), std::memory_order_relaxed);
    return previous;
  }

 private:
  std::string names() const {
    std::string s;
    for (const Choice& c : choices_) s += (s.empty() ? "" : ", ") + std::string(c.name);
    return s;
  }
  std::string supported_names() const {
    std::string s;
    for (E v : supported_choices()) s += (s.empty() ? "" : ", ") + std::string(name(v));
    return s;
  }
  E from_environment() const {
    const char* text = env_ ? std::getenv(env_) : nullptr;
    if (text == nullptr || *text == '\0') return fallback_();
    E v{};
    try {
      v = parse(text);
    } catch (const Error& e) {
      OCTET_FAIL("environment variable ", env_, ": ", e.what());
    }
    OCTET_CHECK(supported_(v), "environment variable ", env_, ": ", what_, " '", name(v),
                "' is not supported by this build or machine (supported: ", supported_names(), ")");
    return v;
  }

  std::string_view what_;
  const char* env_;
  std::vector<Choice> choices_;
  bool (*supported_)(E);
  E (*fallback_)();
  mutable std::atomic<int> active_{-1};  // -1: not chosen yet
};

}  // namespace octet
