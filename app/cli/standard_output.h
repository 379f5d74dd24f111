#pragma once
// Output to stdout that cannot be written (a full disk, a closed pipe) is a
// failure of the command, said in one line like any other.
// May include: the standard library only.

namespace phasor::cli {

// For output streamed as it is made (generate): throws phasor::Error at the first failed write.
void check_stdout();

// What the process exits with once a command returned `status`: what stdout
// still buffers is flushed, and a write that failed now or earlier (a printf's
// error stays in ferror) turns status 0 into 1, with the one-line error.
// Descriptor 1 is closed too, so an error only close() reports is seen;
// nothing is written to stdout after this.
int finish_stdout(int status);

}  // namespace phasor::cli
