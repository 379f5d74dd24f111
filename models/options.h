#pragma once
// Option tables: one row per field of an options struct (ModelConfig here,
// TrainOptions in app/train.h) with its name, member, bound and help. The
// one row serves the JSON form (fields_to_json, read_field), validate()
// (check_bounds) and the `phasor train` flag, --<name> with '-' for '_'
// (app/cli/field_flags.h).
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "tensor/error.h"

namespace phasor {

// What validate() asks of a number (NaN meets none but Any), besides its row's
// upper limit `max` (which no infinity meets).
enum class Bound { Any, Positive, NonNegative, AboveOne, OpenUnit, HalfOpenUnit };

// Upper limits shared by several rows.
// Sizes: any int64, because validate() bounds them together, with a message
// that says why (more than 2^31 parameters, or 2^31 tokens per step).
inline constexpr double kMaxSize = 9223372036854775807.0;
inline constexpr double kMaxCount = 1e12;               // steps and step periods: far past any run
inline constexpr double kMaxUnsigned = 18446744073709551615.0;  // an unsigned field: its whole 64-bit range

// How the flag takes its value: --name VALUE, or --name alone for true (bool fields only).
enum class Flag { Value, Switch };

template <class Options>
struct Field {
  using Member = std::variant<int64_t Options::*, uint64_t Options::*, int Options::*, double Options::*, bool Options::*,
                              std::string Options::*, Position Options::*, CmhaInit Options::*>;
  std::string_view name;       // the JSON key
  Member member;
  Bound bound = Bound::Any;
  double max = kMaxUnsigned;   // the largest value validate() accepts (every number has one)
  std::string_view help = {};  // an enum field's help lists its names
  Flag flag = Flag::Value;
};

// The fields of ModelConfig, in the order of its flags in `phasor train --help`.
inline constexpr Field<ModelConfig> kModelConfigFields[] = {
    // name            member                         bound              max        help
    {"position",        &ModelConfig::position},
    {"vocab_size",      &ModelConfig::vocab_size,      Bound::Positive,     kMaxSize,  "vocabulary size (256: one token per byte)"},
    {"d_model",         &ModelConfig::d_model,         Bound::Positive,     kMaxSize,  "model width"},
    {"n_layers",        &ModelConfig::n_layers,        Bound::Positive,     kMaxSize,  "transformer blocks"},
    {"n_heads",         &ModelConfig::n_heads,         Bound::Positive,     kMaxSize,  "attention heads"},
    {"d_ff",            &ModelConfig::d_ff,            Bound::Positive,     kMaxSize,  "SwiGLU hidden width"},
    {"max_seq_len",     &ModelConfig::max_seq_len,     Bound::Positive,     1048576,   "the most positions a learned-position model takes (at most 2^20)"},
    {"rope_base",       &ModelConfig::rope_base,       Bound::AboveOne,     1e12,      "base of the rotary frequencies (at most 1e12)"},
    {"norm_eps",        &ModelConfig::norm_eps,        Bound::Positive,     1,         "RMSNorm epsilon (at most 1)"},
    {"tie_embeddings",  &ModelConfig::tie_embeddings,  Bound::Any,          1,         "true|false: the output head shares the token embedding"},
    {"xpos_scale_base", &ModelConfig::xpos_scale_base, Bound::Positive,     1e6,       "XPos scale base S (xpos only; at most 1e6)"},
    {"cmha_init",       &ModelConfig::cmha_init},
    {"max_rel_pos",     &ModelConfig::max_rel_pos,     Bound::Positive,     1048576,   "complexformer-seed's relative-position clamp R: a bias table of R + 1 distances (1 to 2^20)"},
};

// The names of an enum-valued field's values (config.h's tables).
template <class E>
struct EnumNames;
template <>
struct EnumNames<Position> {
  static std::string_view name(Position p) { return position_name(p); }
  static Position parse(std::string_view s) { return parse_position(s); }
  static std::string all(std::string_view separator) { return position_names(separator); }
};
template <>
struct EnumNames<CmhaInit> {
  static std::string_view name(CmhaInit i) { return cmha_init_name(i); }
  static CmhaInit parse(std::string_view s) { return parse_cmha_init(s); }
  static std::string all(std::string_view separator) { return cmha_init_names(separator); }
};
template <class T>
inline constexpr bool is_enum_field = std::is_same_v<T, Position> || std::is_same_v<T, CmhaInit>;

// The type of a member pointer's field: int64_t for &ModelConfig::d_model.
template <class Options, class Member>
using field_type = std::remove_cvref_t<decltype(std::declval<Options&>().*std::declval<Member>())>;

// Every field under its name (an enum by its name).
template <class Options>
nlohmann::json fields_to_json(const Options& o, std::type_identity_t<std::span<const Field<Options>>> fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field<Options>& f : fields)
    std::visit(
        [&](auto member) {
          const auto& value = o.*member;
          if constexpr (is_enum_field<field_type<Options, decltype(member)>>)
            j[std::string(f.name)] = std::string(EnumNames<field_type<Options, decltype(member)>>::name(value));
          else
            j[std::string(f.name)] = value;
        },
        f.member);
  return j;
}

// Sets the field called `key` from `v`; false when no field has that name.
// A value of the wrong type (or an unknown enum name) is a phasor::Error.
template <class Options>
bool read_field(Options& o, std::type_identity_t<std::span<const Field<Options>>> fields, const std::string& key, const nlohmann::json& v) {
  for (const Field<Options>& f : fields) {
    if (f.name != key) continue;
    std::visit(
        [&](auto member) {
          using T = field_type<Options, decltype(member)>;
          auto& out = o.*member;
          if constexpr (std::is_same_v<T, std::string> || is_enum_field<T>) {
            PHASOR_CHECK(v.is_string(), "config: '", key, "' must be a string, got ", v.dump());
          } else if constexpr (std::is_same_v<T, bool>) {
            PHASOR_CHECK(v.is_boolean(), "config: '", key, "' must be true or false, got ", v.dump());
          } else if constexpr (std::is_unsigned_v<T>) {
            // Every value of the type: 2^63..2^64-1 are number_unsigned in JSON, so get<int64_t>() would see them negative.
            PHASOR_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), "config: '", key,
                         "' must be a non-negative integer, got ", v.dump());
            if constexpr (sizeof(T) < sizeof(uint64_t))
              PHASOR_CHECK(v.get<uint64_t>() <= std::numeric_limits<T>::max(), "config: '", key, "' must be at most ",
                           std::numeric_limits<T>::max(), ", got ", v.dump());
          } else if constexpr (std::is_integral_v<T>) {
            PHASOR_CHECK(v.is_number_integer(), "config: '", key, "' must be an integer, got ", v.dump());
            // A field must not take the low bits of a wider value (2^32 + 1 threads read as 1, 2^63 steps as -2^63).
            bool fits = !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
            if constexpr (sizeof(T) < sizeof(int64_t))
              fits = fits && v.get<int64_t>() >= std::numeric_limits<T>::min() && v.get<int64_t>() <= std::numeric_limits<T>::max();
            PHASOR_CHECK(fits, "config: '", key, "' must be an integer in [", std::numeric_limits<T>::min(), ", ",
                         std::numeric_limits<T>::max(), "], got ", v.dump());
          } else {
            PHASOR_CHECK(v.is_number(), "config: '", key, "' must be a number, got ", v.dump());
          }
          if constexpr (is_enum_field<T>) out = EnumNames<T>::parse(v.get<std::string>());
          else out = v.get<T>();
        },
        f.member);
    return true;
  }
  return false;
}

inline bool within(double v, Bound b) {
  switch (b) {
    case Bound::Any: return true;
    case Bound::Positive: return v > 0;
    case Bound::NonNegative: return v >= 0;
    case Bound::AboveOne: return v > 1;
    case Bound::OpenUnit: return v > 0 && v < 1;
    case Bound::HalfOpenUnit: return v >= 0 && v < 1;
  }
  return false;
}

inline const char* bound_text(Bound b) {
  switch (b) {
    case Bound::Any: return "anything";
    case Bound::Positive: return "positive";
    case Bound::NonNegative: return "non-negative";
    case Bound::AboveOne: return "> 1";
    case Bound::OpenUnit: return "in (0, 1)";
    case Bound::HalfOpenUnit: return "in [0, 1)";
  }
  return "?";
}

// A limit as written in the table: 2147483648, not 2.14748e+09.
inline std::string exact_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// Throws "<context>: <name> must be <bound>, got <value>" for the first number
// out of its bound, and "<context>: <name> must be at most <max>, got <value>"
// for one above its row's limit (an infinity included; a NaN where the bound is
// Any is left to the cross-field rules, which name it).
template <class Options>
void check_bounds(const Options& o, std::type_identity_t<std::span<const Field<Options>>> fields, std::string_view context) {
  for (const Field<Options>& f : fields)
    std::visit(
        [&](auto member) {
          using T = field_type<Options, decltype(member)>;
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            const T value = o.*member;
            PHASOR_CHECK(within(static_cast<double>(value), f.bound), context, ": ", f.name, " must be ", bound_text(f.bound),
                         ", got ", value);
            PHASOR_CHECK(!(static_cast<double>(value) > f.max), context, ": ", f.name, " must be at most ", exact_text(f.max), ", got ",
                         value);
          }
        },
        f.member);
}

}  // namespace phasor
