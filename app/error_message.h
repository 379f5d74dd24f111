#pragma once
// The one line a failure is reported with, by the `phasor` CLI (after
// "phasor: ") and by the Python module (as the exception's message).
#include <exception>
#include <string>

namespace phasor {

// A message as one line: names and values from the command line or from files
// may hold newlines or other control bytes, which are written as \xNN.
std::string one_line(const char* message);

// The one line for an exception. An allocation the machine (or a limit such as
// ulimit -v) cannot satisfy is said as such: std::bad_alloc's own text names no cause.
std::string error_message(const std::exception& e);

}  // namespace phasor
