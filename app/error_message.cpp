#include "app/error_message.h"

#include <new>

#include "tensor/error.h"

namespace phasor {

std::string one_line(const char* message) { return escape_control_characters(message); }

std::string error_message(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr)
    return "out of memory: an allocation failed (the input asks for more memory than this machine or its limits allow)";
  return one_line(e.what());
}

}  // namespace phasor
