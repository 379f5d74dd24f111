#pragma once
// phasor::Error is the one exception type the library throws for misuse.
// Messages name the op and the offending shapes, dtypes or values.
#include <sstream>
#include <stdexcept>
#include <string>

namespace phasor {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: fail("matmul: ", a.shape(), " vs ", b.shape()).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw Error(os.str());
}

}  // namespace phasor

// Cheap check: the message pieces are only formatted when the condition fails.
#define PHASOR_CHECK(cond, ...)            \
  do {                                     \
    if (!(cond)) ::phasor::fail(__VA_ARGS__); \
  } while (0)
