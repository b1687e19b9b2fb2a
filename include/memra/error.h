// memra/error.h — the one error type of the project.
//
// Every public API reports failure by throwing memra::Error whose message names where the
// problem is ("gguf model.gguf: tensor 'blk.3.attn_q.weight': offset 1024 past end of file
// (size 900)"), so that a user can act on it without a debugger. Contexts nest: a loader
// that catches an Error from a lower layer re-throws it with its own prefix (with_context).
//
// provides: Error, fail(...), MEMRA_CHECK(cond, ...), ErrorContext
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace memra {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}

  // The same error with "<context>: " in front (the outer layer names the file/tensor).
  Error with_context(std::string_view context) const {
    return Error(std::string(context) + ": " + what());
  }
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws Error with the arguments streamed together: fail("tensor '", name, "': n_dims ", n).
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

// Runs `body`; an Error escaping it gets `context` prefixed. For loaders:
//   with_context("gguf " + path, [&] { parse(); });
template <class F>
decltype(auto) with_context(std::string_view context, F&& body) {
  try {
    return std::forward<F>(body)();
  } catch (const Error& e) {
    throw e.with_context(context);
  }
}

}  // namespace memra

// Precondition check that names the failed condition and the offending values.
#define MEMRA_CHECK(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) ::memra::fail(__VA_ARGS__, " [check failed: " #cond "]");           \
  } while (0)
