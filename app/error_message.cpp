#include "app/error_message.h"

#include <cstdio>
#include <new>

namespace phasor {

std::string one_line(const char* message) {
  std::string out;
  for (const char* p = message; *p; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return out;
}

std::string error_message(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr)
    return "out of memory: an allocation failed (the input asks for more memory than this machine or its limits allow)";
  return one_line(e.what());
}

}  // namespace phasor
