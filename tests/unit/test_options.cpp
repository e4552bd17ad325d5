// The option table (app/options.hpp): every option declared once, with help,
// a default the help states truly, a range or set of names, and one clear
// sentence (exit 2) for a value outside it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <set>

#include "app/frontends/cli.hpp"
#include "usage_rejection.hpp"
#include "app/frontends/main_app.hpp"
#include "app/plumbing/options.hpp"
#include "linkwidth/error.hpp"

using namespace lw;

namespace {

using test::rejection;

// A command that takes the option.
std::string command_for(const OptionSpec& o) {
  for (Command c : {Command::kCapacity, Command::kAvailbw, Command::kMeasure, Command::kHops})
    if (o.commands & command_bit(c)) return name(c);
  return "";
}

bool is_int_field(const OptionSpec& o) {
  return std::holds_alternative<int Config::*>(o.field) ||
         std::holds_alternative<std::uint64_t Config::*>(o.field);
}

std::string number_text(const OptionSpec& o, double v) {
  char buf[64];
  if (is_int_field(o))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool one_sentence(const std::string& s) {
  return !s.empty() && s.back() == '.' && s.find('\n') == std::string::npos;
}

}  // namespace

TEST_CASE("every option has help, a default, and a check", "[options]") {
  const Config defaults;
  std::set<std::string> names;
  for (const OptionSpec& o : option_table()) {
    const std::string n = long_name(o);
    INFO("--" << n);
    CHECK(names.insert(n).second);  // declared once
    CHECK(std::string(o.help).size() > 10);
    CHECK(!command_for(o).empty());
    if (o.commands != kAllCommands) CHECK(one_sentence(o.wrong_command ? o.wrong_command : ""));
    if (o.kind == OptionKind::kSwitch) continue;  // off unless given
    // The help states the default, unless it is "not given" (--capacity:
    // measure the capacity first).
    if (o.kind != OptionKind::kFile && !o.range.unset_zero) {
      CHECK(std::string(o.help).find("default") != std::string::npos);
    }
    // A value with a field is checked: a range, a set of names, or a file name.
    const bool free_text = std::holds_alternative<std::string Config::*>(o.field) &&
                           o.kind == OptionKind::kPlain;  // --interface, --source
    if (!free_text) {
      CHECK((o.range.has || o.kind == OptionKind::kChoice || o.kind == OptionKind::kFile));
      REQUIRE(o.error != nullptr);
      CHECK(one_sentence(o.error));
      CHECK(std::string(o.error).rfind("--" + n, 0) == 0);  // names the option first
    }
    // The default is valid, and is the one the help states.
    CHECK(check_option(o, defaults, false).empty());
    const std::string help = o.help;
    const auto at = help.find("default ");
    if (at == std::string::npos || n == "theta") continue;  // theta: 1% of C, a fraction
    const std::string token = help.substr(at + 8, help.find_first_of(" ,;:)", at + 8) - (at + 8));
    const nlohmann::json value = field_json(o, defaults);
    if (value.is_number()) {
      CHECK(parse_si(token, "default") == Approx(value.get<double>()));
    } else if (value.is_string() && o.kind == OptionKind::kChoice) {
      CHECK(token == value.get<std::string>());
    }
  }
  CHECK(names.count("max-rate"));
  CHECK(names.count("hop-markers"));
  CHECK_NOTHROW(validate(defaults));
}

TEST_CASE("a value outside an option's range is one sentence, exit 2", "[options]") {
  for (const OptionSpec& o : option_table()) {
    if (!o.range.has) continue;
    const std::string n = "--" + long_name(o);
    const std::string cmd = command_for(o);
    const Range& r = o.range;
    std::vector<double> bad = {r.lo_open ? r.lo : r.lo - (is_int_field(o) ? 1 : r.lo / 2 + 0.5)};
    if (std::isfinite(r.hi)) bad.push_back(r.hi_open ? r.hi : r.hi * 2 + 1);
    if (r.unset_zero) bad.push_back(0);  // 0 means "not given" only when not given
    for (double v : bad) {
      const std::string text = number_text(o, v);
      INFO(n << " " << text);
      CHECK(rejection({cmd, "198.18.0.2", n, text}) == o.error);
    }
    // The ends themselves (when closed) are accepted.
    if (!r.lo_open && !(r.unset_zero && r.lo == 0)) {
      INFO(n << " " << number_text(o, r.lo));
      std::vector<std::string> args = {cmd, "198.18.0.2", n, number_text(o, r.lo)};
      if (n == "--trains") args.insert(args.end(), {"--min-trains", "1"});  // min <= max
      // One load packet holds one train length only.
      if (n == "--max-load-packets") args.insert(args.end(), {"--length-ratio", "1"});
      CHECK(rejection(args) == "");
    }
  }
}

TEST_CASE("unknown names, non-numbers and unknown options are rejected", "[options]") {
  for (const OptionSpec& o : option_table()) {
    const std::string n = "--" + long_name(o);
    const std::string cmd = command_for(o);
    INFO(n);
    if (o.kind == OptionKind::kChoice) {
      CHECK(rejection({cmd, "198.18.0.2", n, "bogus"}) == o.error);
    } else if (o.kind == OptionKind::kPlain && o.range.has) {
      CHECK(rejection({cmd, "198.18.0.2", n, "abc"}).find("'" + n + "' is invalid") !=
            std::string::npos);
    } else if (o.kind == OptionKind::kSi) {
      CHECK(rejection({cmd, "198.18.0.2", n, "abc"}) == n + " 'abc' is not a number.");
    }
    if (o.commands != kAllCommands) {
      for (Command c : {Command::kCapacity, Command::kAvailbw, Command::kMeasure, Command::kHops}) {
        if (o.commands & command_bit(c)) continue;
        std::vector<std::string> args = {name(c), "198.18.0.2", n};
        if (o.kind != OptionKind::kSwitch) args.push_back("10M");
        CHECK(rejection(args) == o.wrong_command);
      }
    }
  }
  CHECK(rejection({"capacity", "198.18.0.2", "--bogus"}) == "unrecognised option '--bogus'.");
  CHECK(run_main({"capacity", "198.18.0.2", "--bogus"}) == 2);
  CHECK(run_main({"capacity", "198.18.0.2", "--max-bytes", "1"}) == 2);
  CHECK(run_main({"hops", "198.18.0.2", "--hop-markers", "both"}) == 2);
}

TEST_CASE("the help text lists every option under its section", "[options]") {
  const std::string help = parse_cli({"help"}).help_text;
  const auto avail = help.find("Available bandwidth (availbw, measure):");
  const auto hops = help.find("Bottleneck hop (hops):");
  REQUIRE(avail != std::string::npos);
  REQUIRE(hops != std::string::npos);
  for (const OptionSpec& o : option_table()) {
    const std::string n = "--" + long_name(o) + " ";
    INFO(n);
    const auto at = help.find(n);
    REQUIRE(at != std::string::npos);
    CHECK((o.group == OptionGroup::kGeneral) == (at < avail));
    CHECK((o.group == OptionGroup::kHops) == (at > hops));
    CHECK(help.find(std::string(o.help).substr(0, 30)) != std::string::npos);
  }
}

TEST_CASE("params are the table's keys with the Config's values", "[options]") {
  Config c = parse_cli({"capacity", "198.18.0.2", "--port", "4000", "--max-rate", "250M",
                        "--source-port", "5000", "--max-replies", "50"})
                 .config;
  const nlohmann::json p = params_json(c);
  // The keys the JSON documents have always carried (README, scripts).
  const std::set<std::string> keys = {
      "interface",      "source",     "port",          "source_port",        "packet_size",
      "load_packets",   "markers",    "drain_packets", "train_dispersion_s", "max_load_packets",
      "length_ratio",   "min_trains", "max_trains",    "precision",          "max_load",
      "max_time_s",     "max_bytes",  "max_rate_bps",  "max_replies_per_s",  "discovery_tries",
      "reply_timeout_s"};
  std::set<std::string> got;
  for (auto it = p.begin(); it != p.end(); ++it) got.insert(it.key());
  CHECK(got == keys);
  CHECK(p.at("port") == 4000);
  CHECK(p.at("source_port") == 5000);
  CHECK(p.at("max_rate_bps") == 250e6);
  CHECK(p.at("max_replies_per_s") == 50.0);
  CHECK(p.at("max_bytes").is_number_unsigned());
  const nlohmann::json h = params_json(c, ParamSet::kHops);
  CHECK(h.size() == keys.size() + 5);
  CHECK(h.at("hop_markers") == "auto");
  // And back, for the capacity replay.
  const Config back = config_from_params(p);
  CHECK(back.port == 4000);
  CHECK(back.max_rate_bps == 250e6);
  nlohmann::json missing = p;
  missing.erase("max_trains");
  CHECK_THROWS(config_from_params(missing));
}

TEST_CASE("a recorded configuration goes through the same validation", "[options]") {
  Config c;
  CHECK_NOTHROW(recorded_config(c, "hops"));
  c.max_hops = 200;  // no command line allows it
  try {
    recorded_config(c, "hops");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == "bad_capture");
    CHECK(e.exit_code() == ExitCode::kUsage);
    CHECK(std::string(e.what()) == "the recorded hops configuration is out of range");
  }
  c = Config{};
  c.icmp_rate = 1e6;  // the replay used to check only > 0
  CHECK_THROWS_AS(recorded_config(c, "hops"), Error);
  c = Config{};
  c.calibration_rate = 0;  // a field without a flag
  CHECK_THROWS_AS(recorded_config(c, "avail-bw"), Error);
  // Names: a record naming an unknown method is damaged, not a default.
  nlohmann::json j = config_json(Config{});
  CHECK(j.at("method") == "fleet");
  CHECK(j.at("command") == "capacity");
  j["method"] = "bisect";
  CHECK_THROWS_AS(config_from_json(j), Error);
}

TEST_CASE("enum names round-trip", "[options]") {
  for (Command c : {Command::kCapacity, Command::kAvailbw, Command::kMeasure, Command::kHops}) {
    Command back{};
    REQUIRE(from_name(name(c), &back));
    CHECK(back == c);
  }
  Method m{};
  CHECK(from_name("linkwidth", &m));
  CHECK(m == Method::kLinkwidth);
  CHECK_FALSE(from_name("Fleet", &m));
  HopMarkers h{};
  CHECK(from_name("ttl", &h));
  CHECK_FALSE(from_name("", &h));
  CHECK(front_end({"sweep"}) == FrontEnd::kSweep);
  CHECK(front_end({"analyze", "x"}) == FrontEnd::kAnalyze);
  CHECK(front_end({"capacity", "x"}) == FrontEnd::kMeasure);
}
