#pragma once
// The option table: every measurement option declared once (name, Config
// field, range, help, which commands take it, its key under "params" in the
// JSON documents). The parser (app/cli.cpp), the help text, the validation of
// a Config (the command line and the replay of a recorded run alike) and the
// "params" object are all derived from it.
//
//   for (const OptionSpec& o : option_table()) ...
//   validate(config);                       // throws UsageError("--port must be ...")
//   nlohmann::json p = params_json(config);  // {"packet_size": 1500, ...}
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "app/plumbing/config.hpp"
#include "nlohmann/json.hpp"

namespace lw {

// The help section an option is listed under.
enum class OptionGroup { kGeneral, kAvailbw, kHops };

// How the text after the option becomes a field value.
enum class OptionKind {
  kSwitch,  // no value: sets a bool (help, -4/-6, --no-hops are handled by the parser)
  kPlain,   // Boost's conversion to the field's type ("'--port' is invalid" otherwise)
  kSi,      // a number with K/M/G (parse_si), then stored in the field
  kChoice,  // one of an enum's names (linkwidth/run_names.hpp)
  kFile,    // a file name that may not be empty
};

// Which "params" object of the JSON documents echoes the field.
enum class ParamSet { kNone, kCommon, kHops };

// Bit per Command (1 << int(Command)).
using CommandMask = unsigned;
inline constexpr CommandMask kAllCommands = 0xF;
CommandMask command_bit(Command c);

// lo <= v <= hi, each end open or closed; NaN is never in range. With
// unset_zero, 0 means "not given" and passes validate() (the option was not
// on the command line), while a 0 given on the command line is checked.
struct Range {
  bool has = false;
  double lo = 0;
  bool lo_open = false;
  double hi = 0;
  bool hi_open = false;
  bool unset_zero = false;
};

using FieldRef = std::variant<std::monostate, bool Config::*, int Config::*, double Config::*,
                              std::uint64_t Config::*, std::string Config::*, Method Config::*,
                              HopMarkers Config::*>;

struct OptionSpec {
  const char* flags;  // Boost syntax: "packet-size,l"
  OptionGroup group;
  const char* help;  // the line in `linkwidth help` (the man page is generated from it)
  OptionKind kind;
  FieldRef field;     // monostate: the parser handles it (help, -4, -6, --no-hops)
  Range range;        // checked by validate()
  const char* error;  // the one sentence when the value is out of range or not a name
  const char* param;  // key under "params"; nullptr for none
  ParamSet param_set = ParamSet::kNone;
  CommandMask commands = kAllCommands;  // commands that take it
  const char* wrong_command = nullptr;  // the sentence when another command is given it
};

const std::vector<OptionSpec>& option_table();
// "packet-size" from "packet-size,l".
std::string long_name(const OptionSpec& o);
const OptionSpec* find_option(const std::string& long_name);

// The field's value in Config `c` as JSON (null for no field).
nlohmann::json field_json(const OptionSpec& o, const Config& c);
// Whether `v` is in `r` (always true without a range).
bool in_range(const Range& r, double v, bool given);
// "" when the option's value in `c` is valid, else its error sentence. `given`:
// the option was on the command line (a 0 then counts, see Range::unset_zero).
std::string check_option(const OptionSpec& o, const Config& c, bool given);

// Every range of the table, the fields without a flag, and the checks that
// tie fields together: the one validation of the command line and of a
// recorded run's configuration. Throws UsageError(sentence) on the first
// failure.
void validate(const Config& c);

// A recorded run's configuration through validate(): returns it, or throws
// lw::Error(analyze, "the recorded PHASE configuration is out of range",
// bad_capture, exit 2).
Config recorded_config(const Config& c, const std::string& phase);

// The "params" object of the capacity (and availbw / measure) documents; with
// ParamSet::kHops also the hops options (the hops document's params).
nlohmann::json params_json(const Config& c, ParamSet set = ParamSet::kCommon);

// The inverse for the capacity phase's replay: the "params" object a run's
// head recorded, back into a Config (the fields without a params key keep
// their defaults; so does max_replies_per_s in records older than it). A missing key or a value of
// the wrong type throws nlohmann::json's exception (a damaged record, never a default).
Config config_from_params(const nlohmann::json& params);

// Throws UsageError(sentence) unless `ok`: the option table's checks, the
// fields without a flag (recorded in every run's configuration: the replay
// checks them like the rest) and every front-end's own.
void require(bool ok, const std::string& sentence);

}  // namespace lw
