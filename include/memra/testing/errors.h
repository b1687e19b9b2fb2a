// memra/testing/errors.h — the text of the error a call raises, for the bad-input tests
// (EXPECT_THAT(error_message([&] { ... }), HasSubstr("the field it names"))).
//
// Every memra failure is a memra::Error whose message names the file, field or value at fault
// (DESIGN.md); a bad-input test asserts on that text. A call that throws nothing yields
// "<no error>", which no expected substring matches, so the test fails and says why. Anything
// other than memra::Error propagates (gtest reports it as an unexpected exception).
//
// provides: error_message
#pragma once

#include <string>
#include <utility>

#include "memra/error.h"

namespace memra::testing {

template <class F>
std::string error_message(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const memra::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace memra::testing
