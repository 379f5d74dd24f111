#pragma once
// A subcommand of the `phasor` CLI: its name, its one-line help, its flags
// and what it runs. Each command is one file of app/cli/ (eval.cpp, ...)
// whose factory is listed once, in the table of app/cli/commands.cpp;
// app/main.cpp builds the command line from that table. A command's work
// lives in app/ (evaluate.h, curvature.h, ...), where Python reaches it too;
// its file here only reads the flags, checks them and prints.
// May include: app/cli/command_line.h; a command's file also app/, models/ and below.
#include <memory>
#include <string>
#include <vector>

#include "app/cli/command_line.h"

namespace phasor::cli {

class Command {
 public:
  Command(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  virtual ~Command() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }

  // Before the command line is parsed, when argv[1] names this command
  // (train reads its --config file here, so that its flags override the file).
  virtual void prepare(int /*argc*/, char** /*argv*/) {}
  // Declares the flags, bound to this command's members.
  virtual void add_flags(Flags& flags) = 0;
  // Runs with the flags parsed; returns the exit status. A failure throws
  // (app/main.cpp prints its one line).
  virtual int run(const Flags& flags) = 0;

 private:
  std::string name_, help_;
};

// Every command, in the order of `phasor --help` (app/cli/commands.cpp).
std::vector<std::unique_ptr<Command>> make_commands();

}  // namespace phasor::cli
