#pragma once
// The `phasor` command line's face of CLI11, so that only command_line.cpp
// includes CLI11's headers: Flags, through which a command (app/cli/command.h)
// declares its flags and reads what was given, and CommandLine, the parser
// app/main.cpp builds from every command.
// May include: the standard library only.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace phasor::cli {

// The flags of one command. Each option is bound to a variable CLI11 writes
// when the flag is given; the conditions after it apply to the option added last.
class Flags {
 public:
  explicit Flags(CLI::App* command) : command_(command) {}

  // An option taking a value. A name without dashes is positional.
  Flags& option(const std::string& name, std::string& value, const std::string& help);
  Flags& option(const std::string& name, std::vector<std::string>& value, const std::string& help);
  Flags& option(const std::string& name, std::vector<int64_t>& value, const std::string& help);
  Flags& option(const std::string& name, int& value, const std::string& help);
  Flags& option(const std::string& name, int64_t& value, const std::string& help);
  Flags& option(const std::string& name, uint64_t& value, const std::string& help);
  Flags& option(const std::string& name, double& value, const std::string& help);
  Flags& option(const std::string& name, bool& value, const std::string& help);  // --name true|false
  // A switch: --name alone sets value to true.
  Flags& flag(const std::string& name, bool& value, const std::string& help);

  Flags& required();
  Flags& positive();      // a number > 0
  Flags& non_negative();  // a number >= 0
  Flags& within(int lo, int hi);
  Flags& within(int64_t lo, int64_t hi);
  // Finite and within [lo, hi]: CLI11's ranges let NaN through, and refused with the flag's name.
  Flags& finite_within(double lo, double hi);
  Flags& one_of(const std::vector<std::string>& names);
  // The required model file of a command (positional without dashes): a checkpoint
  // folder or a run folder stands for its model file (app/checkpoint_path.h).
  Flags& checkpoint(const std::string& name, std::string& value);

  // After parsing: how often `name` ("--steps") was given, and the names of every option given, in the order added.
  size_t count(const std::string& name) const;
  std::vector<std::string> given() const;

 private:
  Flags& added(CLI::Option* option) {
    last_ = option;
    return *this;
  }
  CLI::App* command_;
  CLI::Option* last_ = nullptr;
};

// The command line: a description, --version and one subcommand per command.
class CommandLine {
 public:
  CommandLine(const std::string& description, const std::string& version_line);
  ~CommandLine();
  // A new subcommand; its flags are added through the Flags returned (valid as long as this).
  Flags& add_command(const std::string& name, const std::string& help);
  // The index (in the order added) of the command argv gives; none when argv
  // asked for help or the version (printed; status 0) or was refused (one
  // line on stderr; status 2).
  std::optional<size_t> parse(int argc, char** argv, int& status);
  // The flags of the command at `index`.
  const Flags& flags(size_t index) const { return flags_.at(index); }

 private:
  CLI::App* command_named(const std::string& name) const;  // null when no command has that name

  std::unique_ptr<CLI::App> app_;
  std::vector<CLI::App*> commands_;
  std::deque<Flags> flags_;  // a deque: the references add_command returned stay valid
};

}  // namespace phasor::cli
