#pragma once
// `linkwidth sweep`: the pure parts. The command line, the target list, the
// resume state read back from an existing JSON Lines file, the record a child
// run becomes, and the progress / summary text. No processes, no files, no
// clocks here (the caller passes times in); src/app/frontends/sweep_run.cpp does those.
//
//   SweepOptions o = parse_sweep_cli({"sweep", "--targets", "t.txt", "--output", "o.jsonl"});
//   std::ifstream in(o.targets);
//   auto targets = parse_targets(in, o.mode);   // throws UsageError("line 3: ...")
#include <istream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/plumbing/config.hpp"
#include "nlohmann/json.hpp"

namespace lw {

struct SweepOptions {
  std::string targets;  // file name, or "-" for stdin
  std::string output;   // the JSON Lines file
  std::string summary;  // --summary FILE: CSV; empty = a table on stdout
  std::string mode = "capacity";
  bool resume = false;
  bool quiet = false;
  double target_time_s = 0;   // per-target budget; 0 = the child's --max-time + kill_margin_s
  double kill_margin_s = 10;  // resolving, port discovery, the last train's replies
  double pause_s = 0;         // between targets
  std::vector<std::string> child_args;  // passed to every `linkwidth MODE TARGET --json`
  bool show_help = false;
  std::string help_text;
};

// args[0] is "sweep". Options the sweep does not know go to the children
// (checked later with parse_cli, once per mode in the list). Throws UsageError.
SweepOptions parse_sweep_cli(const std::vector<std::string>& args);

// The configuration every MODE child gets (the pass-through options checked
// by parse_cli, so a bad one stops the sweep before anything is probed).
// Throws UsageError.
Config child_config(const SweepOptions& o, const std::string& mode);
// --target-time, or the child's --max-time plus the kill margin.
double target_budget_s(const SweepOptions& o, const Config& child);

bool is_sweep_mode(const std::string& mode);  // capacity, measure, availbw, hops

struct SweepTarget {
  std::string target;
  std::string mode;
  int line = 0;  // 1-based line in the list
};

// One target per line: "TARGET [MODE]"; '#' starts a comment; blank lines are
// skipped. A later line naming the same target and mode again is dropped
// (`duplicates` counts them). Throws UsageError naming the line.
std::vector<SweepTarget> parse_targets(std::istream& in, const std::string& default_mode,
                                       int* duplicates = nullptr);

using TargetKey = std::pair<std::string, std::string>;  // (target as written, mode)

// What an existing output file says is done. A record is done unless it was
// interrupted or its child lacked privileges: those are measured again and
// their records dropped, so a resumed file holds each target once.
struct ResumeState {
  std::vector<nlohmann::json> records;  // the records to keep, in file order
  std::set<TargetKey> done;
  int dropped_truncated = 0;   // a last line cut off mid-write
  int dropped_unfinished = 0;  // interrupted or privilege failures
  bool needs_rewrite = false;  // the file must be rewritten from `records`
};

// Throws UsageError when a line other than the last is not a JSON object (a
// damaged file we should not silently shorten).
ResumeState load_resume(std::istream& in);

bool record_is_done(const nlohmann::json& record);
TargetKey record_key(const nlohmann::json& record);

// How one child run ended, as the process layer saw it.
struct ChildOutcome {
  std::string out;       // its stdout (one JSON document, if all went well)
  std::string err_tail;  // the last line it wrote on stderr
  int exit_code = -1;    // -1 if killed by a signal
  int term_signal = 0;
  bool timed_out = false;    // killed after the per-target budget
  bool interrupted = false;  // we forwarded SIGINT/SIGTERM to it
  double elapsed_s = 0;
};

// The line written for one target: the child's document (or an error
// document if there is none or the run failed without saying why) with a
// "sweep" object: index, target, mode, started_at, elapsed_s, exit_code, and
// interrupted when set.
nlohmann::json make_record(const SweepTarget& t, int index, const std::string& started_at,
                           const ChildOutcome& o, double budget_s);

// One line of compact JSON, invalid UTF-8 replaced (no trailing newline).
std::string record_line(const nlohmann::json& record);

// 75 -> "1:15"; 3725 -> "1:02:05"; negative or NaN -> "--:--".
std::string format_duration(double s);
// Mean time per target measured so far times the targets left; NaN if unknown.
double eta_s(double elapsed_s, int measured, int remaining);
std::string progress_line(int done, int total, const SweepTarget& current, double elapsed_s,
                          double eta);

// "ok", or the record's error code.
std::string record_status(const nlohmann::json& record);
// The summary over `records` (in that order): a fixed-width table, or CSV
// with a header line.
std::string summary_table(const std::vector<nlohmann::json>& records);
std::string summary_csv(const std::vector<nlohmann::json>& records);

}  // namespace lw
