#include "app/frontends/sweep.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "app/frontends/cli.hpp"
#include "linkwidth/error.hpp"
#include "report/writers.hpp"

namespace po = boost::program_options;

namespace lw {

namespace {

const char kSweepUsage[] =
    "usage: linkwidth sweep --targets FILE --output FILE.jsonl [options] [measurement options]\n"
    "\n"
    "Measures the targets one after another, each in a child `linkwidth MODE TARGET --json`,\n"
    "and appends one JSON record per target to the output (JSON Lines). FILE lists one target\n"
    "a line, optionally followed by a mode (capacity, measure, availbw, hops); '#' starts a\n"
    "comment; '-' reads the list from stdin. Options not listed here (--max-time, --port,\n"
    "--max-rate, ...) are passed to every measurement.\n";

// "--name", "--name=value", "-q" or "-h": the sweep's own option (as its
// Boost description declares it), or null for one passed to the children.
const po::option_description* own_option(const po::options_description& opts,
                                         const std::string& tok) {
  if (tok.size() == 2 && tok[0] == '-' && tok[1] != '-') return opts.find_nothrow(tok, false);
  if (tok.compare(0, 2, "--") != 0) return nullptr;
  return opts.find_nothrow(tok.substr(2, tok.find('=') == std::string::npos
                                             ? std::string::npos
                                             : tok.find('=') - 2),
                           false, false, false);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

const nlohmann::json* field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto* f = field(j, key);
  return f && f->is_string() ? f->get<std::string>() : std::string();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string number_or_empty(const nlohmann::json& j, const char* key) {
  const auto* f = field(j, key);
  if (!f || !f->is_number()) return "";
  std::ostringstream o;
  o.precision(10);
  o << f->get<double>();
  return o.str();
}

// The measurement in a few words: "49.52 Mbit/s", "C 49.52 Mbit/s, A 30.1 Mbit/s", "hop 2".
std::string record_result(const nlohmann::json& r) {
  if (record_status(r) != "ok") {
    const auto* e = field(r, "error");
    return e ? string_field(*e, "message") : std::string("-");
  }
  const auto* c = field(r, "capacity_bps");
  const auto* a = field(r, "availbw_bps");
  const auto* h = field(r, "bottleneck_hop");
  std::string s;
  if (c && c->is_number()) s = format_rate(c->get<double>());
  if (a && a->is_number())
    s = (s.empty() ? "" : "C " + s + ", ") + "A " + format_rate(a->get<double>());
  if (h && h->is_number_integer()) s += (s.empty() ? "" : ", ") + std::string("hop ") + h->dump();
  return s.empty() ? "-" : s;
}

}  // namespace

bool is_sweep_mode(const std::string& m) {
  Command c;
  return from_name(m, &c);
}

SweepOptions parse_sweep_cli(const std::vector<std::string>& args) {
  SweepOptions o;
  po::options_description opts("Sweep options");
  // clang-format off
  opts.add_options()
    ("help,h", "show this help")
    ("targets", po::value(&o.targets), "the target list: one TARGET [MODE] a line; - = stdin")
    ("output", po::value(&o.output), "JSON Lines file, one record per target (appended and flushed as each ends)")
    ("resume", po::bool_switch(&o.resume), "skip targets (target and mode) already in the output; a cut-off last line is dropped")
    ("mode", po::value(&o.mode), "mode of lines that name none: capacity (default), measure, availbw or hops")
    ("target-time", po::value(&o.target_time_s), "per-target budget in seconds, after which the run is stopped (default: its --max-time + 10)")
    ("pause", po::value(&o.pause_s), "seconds to wait between targets (default 0)")
    ("summary", po::value(&o.summary), "write the summary as CSV to this file instead of a table on stdout")
    ("quiet,q", po::bool_switch(&o.quiet), "no progress line on stderr (there is none unless stderr is a terminal)");
  // clang-format on
  std::ostringstream help;
  help << kSweepUsage << "\n" << opts;
  o.help_text = help.str();

  // Split: our own options (and their values) here, the rest to the children.
  std::vector<std::string> own;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& tok = args[i];
    const po::option_description* opt = own_option(opts, tok);
    if (!opt) {
      if (tok == "--json" || tok == "-J") continue;  // every child gets it anyway
      o.child_args.push_back(tok);
      continue;
    }
    own.push_back(tok);
    if (opt->semantic()->max_tokens() > 0 && tok.find('=') == std::string::npos && i + 1 < args.size()) {
      own.push_back(args[++i]);
    }
  }
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(own).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::string m = e.what();
    if (!m.empty() && m.back() != '.') m += ".";
    throw UsageError(m);
  }
  if (vm.count("help")) {
    o.show_help = true;
    return o;
  }
  require(vm.count("targets") && !o.targets.empty(),
          "sweep needs --targets FILE (or --targets - for stdin).");
  require(vm.count("output") && !o.output.empty(), "sweep needs --output FILE.jsonl.");
  require(o.output != "-", "--output must be a file (the records are appended and resumed).");
  require(!vm.count("summary") || !o.summary.empty(), "--summary needs a file name.");
  require(is_sweep_mode(o.mode), "--mode must be capacity, measure, availbw or hops.");
  require(std::isfinite(o.target_time_s) && o.target_time_s >= 0 && o.target_time_s <= 86400,
          "--target-time must be between 0 (automatic) and 86400 seconds.");
  require(std::isfinite(o.pause_s) && o.pause_s >= 0 && o.pause_s <= 3600,
          "--pause must be between 0 and 3600 seconds.");
  for (const auto& a : o.child_args) {
    require(a != "--dry-run", "sweep has no --dry-run; try it on one target first.");
    require(a.compare(0, 11, "--save-pcap") != 0,
            "--save-pcap cannot be used with sweep (every target would overwrite the file).");
    require(a != "--help", "--help takes no other options.");
  }
  return o;
}

Config child_config(const SweepOptions& o, const std::string& mode) {
  std::vector<std::string> args = {mode, "sweep-target", "--json"};
  args.insert(args.end(), o.child_args.begin(), o.child_args.end());
  try {
    return parse_cli(args).config;
  } catch (const UsageError& e) {
    std::string msg = e.what();
    if (msg == "only one TARGET may be given.") {
      msg = "unexpected argument among the measurement options; targets go in --targets.";
    }
    throw UsageError(mode + " targets: " + msg);
  }
}

double target_budget_s(const SweepOptions& o, const Config& child) {
  return o.target_time_s > 0 ? o.target_time_s : child.max_time_s + o.kill_margin_s;
}

std::vector<SweepTarget> parse_targets(std::istream& in, const std::string& default_mode,
                                       int* duplicates) {
  std::vector<SweepTarget> out;
  std::set<TargetKey> seen;
  if (duplicates) *duplicates = 0;
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    const std::string text = trim(raw.substr(0, raw.find('#')));
    if (text.empty()) continue;
    std::istringstream words(text);
    SweepTarget t;
    t.line = line;
    words >> t.target;
    std::string mode, extra;
    words >> mode >> extra;
    const std::string where = "line " + std::to_string(line) + ": ";
    require(extra.empty(), where + "expected 'TARGET [MODE]', got '" + text + "'.");
    require(t.target[0] != '-', where + "target '" + t.target + "' starts with '-'.");
    t.mode = mode.empty() ? default_mode : mode;
    require(is_sweep_mode(t.mode),
            where + "unknown mode '" + t.mode + "' (capacity, measure, availbw or hops).");
    if (!seen.insert({t.target, t.mode}).second) {
      if (duplicates) ++*duplicates;
      continue;
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool record_is_done(const nlohmann::json& r) {
  const auto* s = field(r, "sweep");
  if (!s || !s->is_object()) return false;
  const auto* intr = field(*s, "interrupted");
  if (intr && intr->is_boolean() && intr->get<bool>()) return false;
  const auto* code = field(*s, "exit_code");
  return !(code && code->is_number_integer() &&
           code->get<int>() == static_cast<int>(ExitCode::kPrivilege));
}

TargetKey record_key(const nlohmann::json& r) {
  const auto* s = field(r, "sweep");
  if (s && s->is_object()) return {string_field(*s, "target"), string_field(*s, "mode")};
  return {string_field(r, "target"), string_field(r, "type")};
}

ResumeState load_resume(std::istream& in) {
  ResumeState st;
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  std::size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    const std::size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos || nl + 1 == text.size();
    const std::string raw = text.substr(pos, nl == std::string::npos ? nl : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (nl == std::string::npos) st.needs_rewrite = true;  // no final newline
    if (trim(raw).empty()) {
      st.needs_rewrite = true;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      // A crash mid-write leaves a cut-off last line: drop it. Anywhere else
      // the file was damaged some other way; shortening it is the user's call.
      require(last, "line " + std::to_string(line) +
                        " of the output is not a JSON record; repair or remove it.");
      ++st.dropped_truncated;
      st.needs_rewrite = true;
      continue;
    }
    if (!record_is_done(j) || st.done.count(record_key(j))) {
      ++st.dropped_unfinished;
      st.needs_rewrite = true;
      continue;
    }
    st.done.insert(record_key(j));
    st.records.push_back(std::move(j));
  }
  return st;
}

nlohmann::json make_record(const SweepTarget& t, int index, const std::string& started_at,
                           const ChildOutcome& o, double budget_s) {
  nlohmann::json doc = nlohmann::json::parse(o.out, nullptr, false);
  const bool have_doc = !doc.is_discarded() && doc.is_object();
  if (!have_doc) doc = nlohmann::json::object();
  std::string how = o.exit_code >= 0 ? "exited with code " + std::to_string(o.exit_code)
                                     : "was killed by signal " + std::to_string(o.term_signal);
  if (!o.err_tail.empty()) how += " (" + o.err_tail + ")";
  char budget[32];
  std::snprintf(budget, sizeof budget, "%g", budget_s);
  if (o.timed_out) {
    doc = error_json(t.mode, t.target,
                     {"target_timeout", "no result within the per-target budget of " +
                                            std::string(budget) + " s; the run was stopped"},
                     doc);
  } else if (!have_doc) {
    doc = error_json(t.mode, t.target,
                     {o.interrupted ? "interrupted" : "no_result",
                      "linkwidth " + t.mode + " " + how + " without a result"},
                     nullptr);
  } else if (o.exit_code != 0 && !o.interrupted && !doc.contains("error")) {
    const auto* why = field(doc, "stop_reason");
    if (why && why->is_string()) how += ", stop_reason " + why->get<std::string>();
    doc["error"] = {{"code", "measurement_failed"}, {"message", "linkwidth " + t.mode + " " + how}};
  }
  nlohmann::json s = {{"index", index},
                      {"target", t.target},
                      {"mode", t.mode},
                      {"line", t.line},
                      {"started_at", started_at},
                      {"elapsed_s", o.elapsed_s},
                      {"budget_s", budget_s},
                      {"exit_code", o.exit_code >= 0 ? nlohmann::json(o.exit_code) : nullptr}};
  if (o.term_signal) s["signal"] = o.term_signal;
  if (o.interrupted) s["interrupted"] = true;
  doc["sweep"] = std::move(s);
  return doc;
}

std::string record_line(const nlohmann::json& record) {
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

double eta_s(double elapsed_s, int measured, int remaining) {
  if (measured <= 0) return NAN;
  return elapsed_s / measured * remaining;
}

std::string progress_line(int done, int total, const SweepTarget& current, double elapsed_s,
                          double eta) {
  std::ostringstream o;
  o << "[" << done << "/" << total << "] " << current.target << " " << current.mode << "  elapsed "
    << format_duration(elapsed_s) << "  ETA " << format_duration(eta);
  return o.str();
}

std::string record_status(const nlohmann::json& r) {
  const auto* e = field(r, "error");
  if (!e) return "ok";
  const std::string code = string_field(*e, "code");
  return code.empty() ? "error" : code;
}

std::string summary_table(const std::vector<nlohmann::json>& records) {
  std::size_t wt = 6, ws = 6;
  for (const auto& r : records) {
    wt = std::max(wt, record_key(r).first.size());
    ws = std::max(ws, record_status(r).size());
  }
  wt = std::min<std::size_t>(wt, 40);
  std::ostringstream o;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4s  %-*s  %-8s  %-*s  %7s  %s\n", "#", int(wt), "target", "mode",
                int(ws), "status", "time", "result");
  o << buf;
  int ok = 0;
  for (const auto& r : records) {
    const auto key = record_key(r);
    const auto* s = field(r, "sweep");
    const std::string idx = s ? (field(*s, "index") ? field(*s, "index")->dump() : "") : "";
    const double el = s && field(*s, "elapsed_s") && field(*s, "elapsed_s")->is_number()
                          ? field(*s, "elapsed_s")->get<double>()
                          : NAN;
    const std::string status = record_status(r);
    ok += status == "ok";
    std::snprintf(buf, sizeof buf, "%4s  %-*s  %-8s  %-*s  %7s  %s\n", idx.c_str(), int(wt),
                  key.first.c_str(), key.second.c_str(), int(ws), status.c_str(),
                  format_duration(el).c_str(), record_result(r).c_str());
    o << buf;
  }
  o << records.size() << (records.size() == 1 ? " target, " : " targets, ") << ok << " ok, "
    << records.size() - ok << " failed\n";
  return o.str();
}

std::string summary_csv(const std::vector<nlohmann::json>& records) {
  std::ostringstream o;
  o << "index,target,mode,status,capacity_bps,availbw_bps,bottleneck_hop,elapsed_s,exit_code\n";
  for (const auto& r : records) {
    const auto key = record_key(r);
    const auto* s = field(r, "sweep");
    const nlohmann::json none;
    const nlohmann::json& sw = s ? *s : none;
    const auto* idx = field(sw, "index");
    const auto* code = field(sw, "exit_code");
    o << (idx ? idx->dump() : "") << "," << csv_field(key.first) << "," << csv_field(key.second)
      << "," << csv_field(record_status(r)) << "," << number_or_empty(r, "capacity_bps") << ","
      << number_or_empty(r, "availbw_bps") << "," << number_or_empty(r, "bottleneck_hop") << ","
      << number_or_empty(sw, "elapsed_s") << "," << (code && code->is_number() ? code->dump() : "")
      << "\n";
  }
  return o.str();
}

}  // namespace lw
