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
            if constexpr (is_enum_field<T>) {
              std::string& text = enum_texts_.emplace_back();
              flags.option(flag, text, EnumNames<T>::all("|"));
              enum_setters_.push_back([&flags, flag, &text, &value] {
                if (flags.count(flag) > 0) value = EnumNames<T>::parse(text);
              });
            } else if constexpr (std::is_same_v<T, bool>) {
              if (f.flag == Flag::Switch) flags.flag(flag, value, std::string(f.help));
              else flags.option(flag, value, std::string(f.help));
            } else {
              flags.option(flag, value, std::string(f.help));
            }
          },
          f.member);
    }
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
