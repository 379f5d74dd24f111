// The CLI11 side of app/cli/command_line.h: the only file of the CLI that includes CLI11.
#include "app/cli/command_line.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
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

// Other tools' names for Phasor's flags (nanoGPT's train.py and sample.py,
// Hugging Face's generate), read as the flag they stand for where the command
// has that flag and not one of the alias's own name.
const std::map<std::string, std::string>& flag_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"--max-new-tokens", "--tokens"}, {"--max-tokens", "--tokens"},   {"--num-tokens", "--tokens"},
      {"--start", "--prompt"},          {"--max-iters", "--steps"},     {"--learning-rate", "--lr"},
      {"--batch-size", "--batch"},      {"--block-size", "--seq-len"},  {"--n-layer", "--n-layers"},
      {"--n-head", "--n-heads"},        {"--n-embd", "--d-model"},      {"--out-dir", "--run-dir"},
      {"--init-from-checkpoint", "--init-from"}};
  return aliases;
}

// The long names ("--steps") of a command's options.
std::vector<std::string> long_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options())
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  return names;
}

bool has_flag(const CLI::App& command, const std::string& name) {
  const std::vector<std::string> names = long_names(command);
  return std::find(names.begin(), names.end(), name) != names.end();
}

// What a flag the command lacks stands for: itself with '-' for '_'
// (--max_iters), then an alias of that; empty where neither is the command's.
std::string canonical_flag(const CLI::App& command, const std::string& given) {
  std::string name = given;
  std::replace(name.begin(), name.end(), '_', '-');
  if (has_flag(command, name)) return name;
  const auto alias = flag_aliases().find(name);
  if (alias != flag_aliases().end() && has_flag(command, alias->second)) return alias->second;
  return "";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The command's flags nearest an unknown one (its aliases count as the flag
// they stand for): those within a third of its length in edits, the nearest first.
std::vector<std::string> suggestions(const CLI::App& command, const std::string& unknown) {
  std::vector<std::pair<size_t, std::string>> near;
  const auto consider = [&](const std::string& spelled, const std::string& flag) {
    const size_t d = edit_distance(unknown, spelled);
    if (d > std::max<size_t>(2, unknown.size() / 3)) return;
    const auto it = std::find_if(near.begin(), near.end(), [&](const auto& n) { return n.second == flag; });
    if (it == near.end()) near.emplace_back(d, flag);
    else it->first = std::min(it->first, d);
  };
  for (const std::string& name : long_names(command)) consider(name, name);
  for (const auto& [alias, flag] : flag_aliases())
    if (has_flag(command, flag)) consider(alias, flag);
  std::sort(near.begin(), near.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < near.size() && i < 3; ++i) out.push_back(near[i].second);
  return out;
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

CLI::App* CommandLine::command_named(const std::string& name) const {
  for (CLI::App* command : commands_)
    if (command->get_name() == name) return command;
  return nullptr;
}

std::optional<size_t> CommandLine::parse(int argc, char** argv, int& status) {
  // Other tools' spellings of the command's flags, read as its own (said on stderr).
  std::vector<std::string> args(argv, argv + argc);
  CLI::App* command = argc > 1 ? command_named(args[1]) : nullptr;
  for (size_t i = 2; command && i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i].rfind("--", 0) != 0) continue;
    const size_t equals = args[i].find('=');
    const std::string name = args[i].substr(0, equals);
    if (has_flag(*command, name)) continue;
    const std::string flag = canonical_flag(*command, name);
    if (flag.empty()) continue;
    std::fprintf(stderr, "phasor: %s %s read as %s\n", args[1].c_str(), name.c_str(), flag.c_str());
    args[i] = flag + (equals == std::string::npos ? "" : args[i].substr(equals));
  }
  std::vector<char*> rewritten;
  for (std::string& a : args) rewritten.push_back(a.data());
  try {
    refuse_out_of_range_integers(*app_);
    app_->parse(static_cast<int>(rewritten.size()), rewritten.data());
  } catch (const CLI::ExtrasError& e) {
    // An unknown flag, named alone (CLI11 lists the values around it too), with the flags it may have meant.
    for (size_t i = 2; command && i < args.size(); ++i) {
      const std::string name = args[i].substr(0, args[i].find('='));
      if (name.rfind("--", 0) != 0 || name == "--" || has_flag(*command, name)) continue;
      const std::vector<std::string> near = suggestions(*command, name);
      std::string hint;
      for (size_t j = 0; j < near.size(); ++j) hint += (j == 0 ? "; did you mean " : j + 1 == near.size() ? " or " : ", ") + near[j];
      std::fprintf(stderr, "phasor: %s: unknown flag %s%s%s (see phasor %s --help)\n", args[1].c_str(), name.c_str(), hint.c_str(),
                   near.empty() ? "" : "?", args[1].c_str());
      return status = 2, std::nullopt;
    }
    std::fprintf(stderr, "phasor: %s (see phasor --help)\n", one_line(e.what()).c_str());
    return status = 2, std::nullopt;
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
