// Errors: every failure is a zenith::Error whose message starts with its source in brackets,
// e.g. "[conv2d] input has 3 channels, weight expects 1".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace zenith {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace zenith

// ZENITH_CHECK(x.dim() == 4, "[conv2d] expected a 4-d input, got ", x.shape());
#define ZENITH_CHECK(cond, ...)                                                \
  do {                                                                         \
    if (!(cond)) throw ::zenith::Error(::zenith::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ZENITH_FAIL(...) throw ::zenith::Error(::zenith::detail::concat(__VA_ARGS__))
