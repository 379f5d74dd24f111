// The checks of stdout of app/cli/standard_output.h.
#include "app/cli/standard_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "tensor/error.h"

namespace phasor::cli {

void check_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
    fail("cannot write the output to standard output: ", errno != 0 ? std::strerror(errno) : "a write failed");
}

int finish_stdout(int status) {
  errno = 0;
  std::cout.flush();  // with stdio synchronised, this flushes stdout itself: its errno is the reason
  int reason = errno;
  bool failed = !std::cout.good();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) failed = true;
  if (reason == 0) reason = errno;
  errno = 0;
  if (::close(STDOUT_FILENO) != 0 && errno != EBADF) failed = true, reason = reason != 0 ? reason : errno;
  if (!failed || status != 0) return status;  // a command that failed already said why, in one line
  std::fprintf(stderr, "phasor: cannot write the output to standard output: %s\n",
               reason != 0 ? std::strerror(reason) : "a write failed");
  return 1;
}

}  // namespace phasor::cli
