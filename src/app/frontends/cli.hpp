#pragma once
// The command line's one front: which front-end a command line is for
// (front_end), and each front-end's parser. Measurement commands are parsed
// from the option table (app/options.hpp) into a validated Config; sweep and
// analyze have their own few options. Throws UsageError with one clear
// sentence (exit 2).
//
//   switch (front_end(args)) { case FrontEnd::kSweep: ...; case FrontEnd::kMeasure: ... }
//   CliResult r = parse_cli({"capacity", "198.18.0.2", "--max-rate", "100M"});
#include <string>
#include <vector>

#include "app/plumbing/config.hpp"
#include "app/plumbing/options.hpp"  // require()

namespace lw {

// What args[0] asks for: a measurement (capacity, availbw, measure, hops;
// also anything unknown, which parse_cli rejects), sweep or analyze.
enum class FrontEnd { kMeasure, kSweep, kAnalyze };
FrontEnd front_end(const std::vector<std::string>& args);

struct CliResult {
  Config config;
  bool show_help = false;
  bool show_version = false;
  std::string help_text;
};

// help, version and the measurement commands.
CliResult parse_cli(const std::vector<std::string>& args);

// `linkwidth analyze FILE [--json] [-v]`.
struct AnalyzeOptions {
  std::string file;  // empty: none given (an error the caller reports, in JSON if asked)
  bool json = false;
  bool verbose = false;
  bool show_help = false;
};
extern const char kAnalyzeUsage[];
extern const char kAnalyzeHelp[];
// args[0] == "analyze". An unknown option or a second FILE throws UsageError.
AnalyzeOptions parse_analyze_cli(const std::vector<std::string>& args);

// "50M" -> 50e6; "1.5G" -> 1.5e9; plain numbers pass. Throws UsageError.
double parse_si(const std::string& text, const std::string& what);

}  // namespace lw
