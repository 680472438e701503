// The message of the octet::Error a test expects, shared by the test files.
//   EXPECT_NE(error_of([&] { t.at(9); }).find("out of range"), std::string::npos);
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace octet::testing {

// Runs fn, expects an octet::Error, and returns its message ("" and a test failure without one).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an octet::Error";
  return "";
}

}  // namespace octet::testing
