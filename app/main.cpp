// The `phasor` command line: the commands of app/cli/commands.cpp, one file
// each in app/cli/, parsed by app/cli/command_line.h. Every failure ends with
// one line on stderr and a non-zero exit status.
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "app/cli/command.h"
#include "app/cli/command_line.h"
#include "app/cli/standard_output.h"
#include "app/distributed.h"
#include "app/error_message.h"
#include "phasor_version.h"
#include "tensor/startup.h"

namespace phasor {
namespace {

// The one line of a failure once a command started; under mpirun, one rank
// failing takes the whole job down, rather than leaving the others waiting.
int report_failure(const std::exception& e) {
  const std::string message = error_message(e);
  if (world().world_size() > 1) {
    std::fprintf(stderr, "phasor: rank %d of %d: %s\n", world().rank(), world().world_size(), message.c_str());
    world().abort(1);
  }
  std::fprintf(stderr, "phasor: %s\n", message.c_str());
  return 1;
}

int run_cli(int argc, char** argv) {
  // OpenBLAS reads its kernels' CPU when it loads: when it mis-detected this
  // one, set it and start again (tensor/startup.h). libgomp's wait policy is
  // left to the user: with OpenBLAS single-threaded inside Phasor's pool, the
  // default (spin briefly, then sleep) is the fastest measured
  // (docs/benchmarks.md, "Thread pool and wait policy").
  use_best_openblas_core(argv);
  const std::vector<std::unique_ptr<cli::Command>> commands = cli::make_commands();
  try {  // before parsing: train reads its config file, which its flags then override
    for (const auto& command : commands)
      if (argc > 1 && command->name() == argv[1]) command->prepare(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "phasor: %s\n", error_message(e).c_str());
    return 1;
  }
  cli::CommandLine line("phasor: train, evaluate and sample ComplexFormer language models", "phasor " PHASOR_VERSION);
  for (const auto& command : commands) command->add_flags(line.add_command(command->name(), command->help()));
  int status = 0;
  const std::optional<size_t> chosen = line.parse(argc, argv, status);
  if (!chosen) return status;  // help, the version, or a refused command line
  try {
    return commands[*chosen]->run(line.flags(*chosen));
  } catch (const std::exception& e) {
    return report_failure(e);
  }
}

}  // namespace
}  // namespace phasor

int main(int argc, char** argv) { return phasor::cli::finish_stdout(phasor::run_cli(argc, argv)); }
