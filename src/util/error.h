// korch::Error: the one exception type korch throws for bad input or unsupported
// models. Its message is a single line meant for the user: what went wrong, where
// (node / tensor), and what to do about it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace korch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Raised when an operator needs the value of a graph input at import time (a shape, axes,
// pads...). Callers that know the value (e.g. `korch check` with a data set) may bind the
// input as a constant and import again.
class ConstantInputRequired : public Error {
 public:
  ConstantInputRequired(const std::string& message, std::string input_name)
      : Error(message), input_name_(std::move(input_name)) {}
  const std::string& input_name() const { return input_name_; }

 private:
  std::string input_name_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& value, const Rest&... rest) {
  os << value;
  append(os, rest...);
}
}  // namespace detail

// Concatenates its arguments with operator<< into a string.
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str_cat(args...));
}

}  // namespace korch

// Internal invariant: a violated one is a korch bug, reported as an Error rather than a crash.
#define KORCH_CHECK(cond, ...)                                                                                \
  do {                                                                                                        \
    if (!(cond))                                                                                              \
      ::korch::fail("internal check failed (", #cond, ") at ", __FILE__, ":", __LINE__, ": ", ##__VA_ARGS__); \
  } while (0)
