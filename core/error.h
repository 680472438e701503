// octet::Error and OCTET_CHECK: every failure caused by user input (a bad shape, dtype, device,
// file or argument) throws octet::Error with a message naming the op and what was expected.
//   OCTET_CHECK(x.dim() == 4, "conv2d: expected 4-D input [N,C,H,W], got ", x.shape());
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace octet {

// Shapes print as [2, 3, 4] in error messages.
inline std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An Error in what octet was asked to do (a command line, a recipe or override: nothing was done),
// not in doing it. The `octet` CLI exits 2 for it and 1 for any other Error.
class UsageError : public Error {
 public:
  using Error::Error;
};

// fn()'s Errors as UsageErrors: for what the user asked for (a recipe, a command-line value) when
// the code that judges it throws plain Errors (a parser shared with files octet wrote itself).
template <typename Fn>
auto as_usage_error(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

namespace detail {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

}  // namespace octet

#define OCTET_CHECK(cond, ...)                                                \
  do {                                                                        \
    if (!(cond)) throw ::octet::Error(::octet::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define OCTET_FAIL(...) throw ::octet::Error(::octet::detail::str_cat(__VA_ARGS__))

// OCTET_CHECK for what the user asked for (a command line, a recipe): throws octet::UsageError.
#define OCTET_USAGE_CHECK(cond, ...)                                               \
  do {                                                                             \
    if (!(cond)) throw ::octet::UsageError(::octet::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define OCTET_USAGE_FAIL(...) throw ::octet::UsageError(::octet::detail::str_cat(__VA_ARGS__))
