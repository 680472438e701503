// Options declared once: an options struct lists each option in one X-macro line (type, name,
// default, allowed range, one line of documentation), and OCTET_OPTIONS turns that list into the
// members (`lr_`), the fluent setters (`.lr(0.1)`), the range check shared by C++ callers and
// recipes, and a table of the options by name (what the recipe schema, its defaults, param_groups
// and `octet schema` are built from). In the spirit of libtorch's TORCH_ARG, with the field table.
//   #define OCTET_SGD_OPTIONS(X) X(double, lr, 1e-3, kNonNegative, "learning rate") X(bool, nesterov, ...)
//   struct SGDOptions { OCTET_OPTIONS(SGDOptions, OCTET_SGD_OPTIONS) };
//   SGDOptions().lr(0.1).fields();  // [{"lr", 0.1, >= 0, "learning rate"}, {"nesterov", false, ...}]
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"

namespace octet {

// Two coefficients, as Adam's betas (written [a, b] in a recipe).
using Betas = std::pair<double, double>;
// The values an option may hold.
using OptionValue = std::variant<bool, int64_t, double, std::pair<double, double>, std::vector<std::string>,
                                 std::string, std::vector<int64_t>>;

// The numbers an option allows (each element, for a pair or a list); `text` says it as errors and
// the schema do. A text option may instead be one of `choices` ("A|B").
struct OptionRange {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  const char* text = "";
  const char* choices = nullptr;
  bool contains(double x) const { return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi); }
  bool any() const { return *text == '\0' && choices == nullptr; }
  // The choices, split at '|' (empty: any text).
  std::vector<std::string> choice_list() const {
    std::vector<std::string> out;
    for (const char* c = choices; c != nullptr && *c != '\0';) {
      const char* end = c;
      while (*end != '\0' && *end != '|') ++end;
      out.emplace_back(c, end);
      c = *end == '|' ? end + 1 : end;
    }
    return out;
  }
};
// The bounds below take finite values only (+inf is outside: the upper end is open).
inline constexpr OptionRange kAnyValue{};
inline constexpr OptionRange kNonNegative{0.0, std::numeric_limits<double>::infinity(), false, true, ">= 0"};
inline constexpr OptionRange kPositive{0.0, std::numeric_limits<double>::infinity(), true, true, "> 0"};
inline constexpr OptionRange kUnitClosed{0.0, 1.0, false, false, "in [0, 1]"};
inline constexpr OptionRange kUnitHalfOpen{0.0, 1.0, false, true, "in [0, 1)"};
inline constexpr OptionRange kAtLeastOne{1.0, std::numeric_limits<double>::infinity(), false, true, ">= 1"};
// One of the texts `list` ("A|B").
constexpr OptionRange one_of(const char* list) {
  OptionRange r;
  r.choices = list;
  return r;
}

// One option of a struct, as its table lists it.
struct OptionInfo {
  const char* name;
  OptionValue value;  // the struct's current value (of a default-made struct: the default)
  OptionRange range;
  const char* doc;
};

// What is wrong with an options struct: the option (a key's last part) and what, e.g. {"lr",
// "expected >= 0, got -1"}. Callers say whose options they are: "SGD: lr: ..." or a recipe's line.
struct OptionProblem {
  std::string key, text;
};

namespace detail {

inline std::optional<OptionProblem> out_of_range(const char* name, double x, const OptionRange& r) {
  if (r.contains(x)) return std::nullopt;
  return OptionProblem{name, str_cat("expected ", r.text, ", got ", x)};
}
// The first problem of `v` against `r` (numbers, each number of a pair or list, and a text among
// choices; a flag or a list of names has none).
template <typename T>
std::optional<OptionProblem> range_problem(const char* name, const T& v, const OptionRange& r) {
  if constexpr (std::is_same_v<T, std::pair<double, double>>) {
    if (auto p = out_of_range(name, v.first, r)) return p;
    return out_of_range(name, v.second, r);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    for (int64_t x : v)
      if (auto p = out_of_range(name, static_cast<double>(x), r)) return p;
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, std::string>) {
    const std::vector<std::string> choices = r.choice_list();
    if (choices.empty()) return std::nullopt;
    for (const std::string& c : choices)
      if (v == c) return std::nullopt;
    std::string list;
    for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
    return OptionProblem{name, str_cat("expected one of ", list, ", got \"", v, "\"")};
  } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    return out_of_range(name, static_cast<double>(v), r);
  } else {
    return std::nullopt;
  }
}
// `v` as the option `field` of type T takes it; a value of another type is an Error naming it.
template <typename T>
void set_option(T& field, const char* name, const OptionValue& v) {
  if (const T* x = std::get_if<T>(&v)) {
    field = *x;
    return;
  }
  if constexpr (std::is_same_v<T, double>) {
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      field = static_cast<double>(*i);  // 1 for 1.0
      return;
    }
  }
  OCTET_FAIL("option ", name, ": a value of another type");
}

}  // namespace detail

// Within a struct: its members, setters, table, range check and by-name setter, from LIST(X), each
// X(type, name, default, range, doc).
#define OCTET_OPTION_MEMBER(type, name, dflt, range, doc) type name##_ = dflt;
#define OCTET_OPTION_SETTER(type, name, dflt, range, doc) \
  Self& name(type v) {                                    \
    name##_ = std::move(v);                               \
    return static_cast<Self&>(*this);                     \
  }
#define OCTET_OPTION_INFO(type, name, dflt, range, doc) \
  out.push_back({#name, ::octet::OptionValue(name##_), range, doc});
#define OCTET_OPTION_CHECK(type, name, dflt, range, doc) \
  if (auto p = ::octet::detail::range_problem(#name, name##_, range)) return p;
#define OCTET_OPTION_SET(type, name, dflt, range, doc)  \
  if (key == #name) {                                   \
    ::octet::detail::set_option(name##_, #name, value); \
    return true;                                        \
  }
#define OCTET_OPTIONS(SelfType, LIST)                                               \
  using Self = SelfType;                                                            \
  LIST(OCTET_OPTION_MEMBER)                                                         \
  LIST(OCTET_OPTION_SETTER)                                                         \
  /* Every option with its value, range and documentation, in declaration order. */ \
  std::vector<::octet::OptionInfo> option_table() const {                           \
    std::vector<::octet::OptionInfo> out;                                           \
    LIST(OCTET_OPTION_INFO)                                                         \
    return out;                                                                     \
  }                                                                                 \
  /* The first option outside its declared range. */                                \
  std::optional<::octet::OptionProblem> range_problem() const {                     \
    LIST(OCTET_OPTION_CHECK)                                                        \
    return std::nullopt;                                                            \
  }                                                                                 \
  /* Sets option `key` (false: no such option). */                                  \
  bool set_option(const std::string& key, const ::octet::OptionValue& value) {      \
    LIST(OCTET_OPTION_SET)                                                          \
    return false;                                                                   \
  }

}  // namespace octet
