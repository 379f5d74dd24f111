#pragma once
// The flags of an option table (models/options.h): --<name with '-' for '_'>,
// bound to the field, with the row's help. An enum field's flag takes its text
// and help from its names; apply() sets the field after parsing, so an unknown
// name is refused like one in a config file (the message of parse_position,
// exit 1) and only once the command runs.
// May include: app/cli/command_line.h, models/.
#include <algorithm>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/command_line.h"
#include "models/options.h"

namespace phasor::cli {

class FieldFlags {
 public:
  template <class Options>
  void add(Flags& flags, Options& options, std::span<const Field<Options>> fields) {
    for (const Field<Options>& f : fields) {
      std::string flag = "--" + std::string(f.name);
      std::replace(flag.begin(), flag.end(), '_', '-');
      std::visit(
          [&](auto member) {
            using T = field_type<Options, decltype(member)>;
            T& value = options.*member;
            const std::string help = with_default(std::string(f.help), default_text(value));
            if constexpr (is_enum_field<T>) {
              std::string& text = enum_texts_.emplace_back();
              flags.option(flag, text, with_default(EnumNames<T>::all("|"), default_text(value)));
              enum_setters_.push_back([&flags, flag, &text, &value] {
                if (flags.count(flag) > 0) value = EnumNames<T>::parse(text);
              });
            } else if constexpr (std::is_same_v<T, bool>) {
              if (f.flag == Flag::Switch) flags.flag(flag, value, help);
              else flags.option(flag, value, help);
            } else {
              flags.option(flag, value, help);
            }
          },
          f.member);
    }
  }

  // The value a field has when its flag is not given, as its config-file JSON
  // writes it (an enum by name): the options' default, or the --config file's.
  template <class T>
  static std::string default_text(const T& value) {
    if constexpr (is_enum_field<T>) return std::string(EnumNames<T>::name(value));
    else if constexpr (std::is_same_v<T, std::string>) return value.empty() ? "none" : value;
    else return nlohmann::json(value).dump();
  }
  // "help (default X)", or "help (note; default X)" where the help ends in a parenthesis.
  static std::string with_default(std::string help, const std::string& value) {
    if (help.ends_with(")")) return help.substr(0, help.size() - 1) + "; default " + value + ")";
    return help + " (default " + value + ")";
  }

  // Sets the enum fields whose flags were given; throws phasor::Error for an unknown name.
  void apply() const {
    for (const auto& set : enum_setters_) set();
  }

 private:
  std::deque<std::string> enum_texts_;  // CLI11 writes into these: their addresses must stay
  std::vector<std::function<void()>> enum_setters_;
};

}  // namespace phasor::cli
