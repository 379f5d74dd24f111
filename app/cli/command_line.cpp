// The CLI11 side of app/cli/command_line.h: the only file of the CLI that includes CLI11.
#include "app/cli/command_line.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <CLI/CLI.hpp>

#include "app/checkpoint_path.h"
#include "app/error_message.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

// CLI11 clamps an integer beyond 64 bits to the nearest bound (a typo of 20
// digits would ask for 2^63-1 steps); every integer flag refuses one instead.
void refuse_out_of_range_integers(CLI::App& app) {
  const auto in_range = [](bool unsigned_flag) {
    return CLI::Validator(
        [unsigned_flag](std::string& value) -> std::string {
          errno = 0;
          char* end = nullptr;
          if (!value.empty() && value[0] == '-' && unsigned_flag)  // CLI11 would wrap -1 to 2^64-1
            return "value " + value + " is negative; this flag takes 0 to 2^64-1";
          if (!value.empty() && value[0] == '-') (void)std::strtoll(value.c_str(), &end, 0);
          else (void)std::strtoull(value.c_str(), &end, 0);
          return errno == ERANGE ? "value " + value + " is out of the 64-bit integer range" : std::string();
        },
        "");
  };
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* option : command->get_options())
      if (option->get_type_name() == "INT" || option->get_type_name() == "UINT") option->check(in_range(option->get_type_name() == "UINT"));
}

// CLI11's ranges let NaN through (every comparison with it is false), and
// PositiveNumber lets huge values through: every number flag is finite and
// within [lo, hi], refused otherwise with the flag's name.
CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return "value " + value + " is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) {
          std::ostringstream range;
          range << "value " << value << " is outside [" << lo << ", " << hi << "]";
          return range.str();
        }
        return std::string();
      },
      "");
}

}  // namespace

// The overloads differ in type only: CLI11 names and converts each by its type.
Flags& Flags::option(const std::string& name, std::string& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, std::vector<std::string>& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, std::vector<int64_t>& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, int& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, int64_t& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, uint64_t& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, double& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::option(const std::string& name, bool& value, const std::string& help) {
  return added(command_->add_option(name, value, help));
}
Flags& Flags::flag(const std::string& name, bool& value, const std::string& help) {
  return added(command_->add_flag(name, value, help));
}

Flags& Flags::required() {
  last_->required();
  return *this;
}
Flags& Flags::positive() {
  last_->check(CLI::PositiveNumber);
  return *this;
}
Flags& Flags::non_negative() {
  last_->check(CLI::NonNegativeNumber);
  return *this;
}
Flags& Flags::within(int lo, int hi) {
  last_->check(CLI::Range(lo, hi));
  return *this;
}
Flags& Flags::within(int64_t lo, int64_t hi) {
  last_->check(CLI::Range(lo, hi));
  return *this;
}
Flags& Flags::finite_within(double lo, double hi) {
  last_->check(finite_range(lo, hi));
  return *this;
}
Flags& Flags::one_of(const std::vector<std::string>& names) {
  last_->check(CLI::IsMember(names));
  return *this;
}

Flags& Flags::checkpoint(const std::string& name, std::string& value) {
  option(name, value, "model.safetensors, or its checkpoint folder, or a run folder (its latest checkpoint)").required();
  last_->transform(CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          value = model_file_of(value);
          return std::string();
        } catch (const Error& e) {
          return e.what();
        }
      },
      ""));
  return *this;
}

size_t Flags::count(const std::string& name) const { return command_->count(name); }

std::vector<std::string> Flags::given() const {
  std::vector<std::string> names;
  for (const CLI::Option* option : command_->get_options())
    if (option->count() > 0) names.push_back(option->get_name());
  return names;
}

CommandLine::CommandLine(const std::string& description, const std::string& version_line)
    : app_(std::make_unique<CLI::App>(description)) {
  app_->require_subcommand(1);
  // Every option's help shows its default (the value its variable holds before parsing); subcommands inherit this.
  app_->option_defaults()->always_capture_default();
  app_->set_version_flag("--version", version_line, "print the version this build was made from");
}

CommandLine::~CommandLine() = default;

Flags& CommandLine::add_command(const std::string& name, const std::string& help) {
  commands_.push_back(app_->add_subcommand(name, help));
  return flags_.emplace_back(commands_.back());
}

std::optional<size_t> CommandLine::parse(int argc, char** argv, int& status) {
  try {
    refuse_out_of_range_integers(*app_);
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return status = app_->exit(e), std::nullopt;
  } catch (const CLI::CallForAllHelp& e) {
    return status = app_->exit(e), std::nullopt;
  } catch (const CLI::CallForVersion& e) {
    return status = app_->exit(e), std::nullopt;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "phasor: %s (see phasor --help)\n", one_line(e.what()).c_str());
    return status = 2, std::nullopt;
  }
  for (size_t i = 0; i < commands_.size(); ++i)
    if (*commands_[i]) return i;
  return status = 0, std::nullopt;  // not reached: one subcommand is required
}

}  // namespace phasor::cli
