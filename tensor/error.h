#pragma once
// phasor::Error is the one exception type the library throws for misuse.
// Messages name the op and the offending shapes, dtypes or values.
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

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

// `text` with its control characters written as \xNN, so that a message
// holding text from an untrusted file (a tensor name) stays on one printable line.
inline std::string escape_control_characters(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

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
