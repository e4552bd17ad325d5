#include "app/frontends/cli.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "app/plumbing/options.hpp"
#include "linkwidth/error.hpp"
#include "linkwidth/ip_addr.hpp"

namespace po = boost::program_options;

namespace lw {

namespace {

const char kUsage[] =
    "usage: linkwidth COMMAND TARGET [options]\n"
    "\n"
    "Commands:\n"
    "  capacity TARGET   capacity of the path to TARGET (SYN-RST-SYN trains)\n"
    "  availbw TARGET    available bandwidth (capacity first, unless --capacity)\n"
    "  measure TARGET    capacity and available bandwidth in one result\n"
    "  hops TARGET       which hop is the bottleneck (recursive trains; default 8 trains)\n"
    "  sweep --targets FILE --output FILE.jsonl   many targets, one JSON line each\n"
    "                    (see 'linkwidth sweep --help')\n"
    "  analyze FILE      re-run the estimators on a --save-pcap capture (capacity runs)\n"
    "  help              this text;  version  the version\n"
    "\n"
    "TARGET is an IPv4 address or host name. Needs root or\n"
    "  setcap cap_net_raw,cap_net_admin+ep linkwidth\n";

}  // namespace

double parse_si(const std::string& text, const std::string& what) {
  if (text.empty()) throw UsageError(what + " is empty.");
  // Plain decimal only: stod would also take hex ("0x10"), "inf" and spaces.
  const std::size_t sign = text[0] == '+' || text[0] == '-' ? 1 : 0;
  if (text.find_first_not_of("0123456789.eE+-") == 0 || text.compare(sign, 2, "0x") == 0 ||
      text.compare(sign, 2, "0X") == 0) {
    throw UsageError(what + " '" + text + "' is not a number.");
  }
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw UsageError(what + " '" + text + "' is not a number.");
  }
  double mult = 1;
  std::string rest = text.substr(pos);
  if (!rest.empty()) {
    const char c = rest[0];
    if (c == 'k' || c == 'K')
      mult = 1e3;
    else if (c == 'm' || c == 'M')
      mult = 1e6;
    else if (c == 'g' || c == 'G')
      mult = 1e9;
    else
      throw UsageError(what + " '" + text + "' has an unknown unit (use K, M or G).");
    rest = rest.substr(1);
    if (!rest.empty() && rest != "b" && rest != "B" && rest != "bit" && rest != "bps") {
      throw UsageError(what + " '" + text + "' has an unknown unit (use K, M or G).");
    }
  }
  if (!std::isfinite(v)) throw UsageError(what + " '" + text + "' is not a finite number.");
  return v * mult;
}

namespace {

bool given(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) && !vm[name].defaulted();
}

// The option's Boost value: typed into the Config field where Boost converts
// it (its "'--port' is invalid" for "http"), else a string converted below.
po::value_semantic* semantic(const OptionSpec& o, Config& c) {
  if (o.kind == OptionKind::kSwitch) {
    if (const auto* p = std::get_if<bool Config::*>(&o.field)) return po::bool_switch(&(c.**p));
    return po::bool_switch();
  }
  if (o.kind == OptionKind::kSi || o.kind == OptionKind::kChoice) return po::value<std::string>();
  return std::visit(
      [&](auto p) -> po::value_semantic* {
        using F = decltype(p);
        if constexpr (std::is_same_v<F, int Config::*> || std::is_same_v<F, double Config::*> ||
                      std::is_same_v<F, std::string Config::*> ||
                      std::is_same_v<F, std::uint64_t Config::*>) {
          return po::value(&(c.*p));
        } else {
          throw std::logic_error("option table: a plain option needs a typed field");
        }
      },
      o.field);
}

// Stores a K/M/G value into its field after the range check (on the value as
// written, before rounding to the field's type).
void store_si(const OptionSpec& o, Config& c, const std::string& text) {
  const double v = parse_si(text, "--" + long_name(o));
  require(in_range(o.range, v, true), o.error);
  if (const auto* p = std::get_if<std::uint64_t Config::*>(&o.field)) {
    c.** p = static_cast<std::uint64_t>(std::llround(v));
  } else {
    c.*std::get<double Config::*>(o.field) = v;
  }
}

void store_choice(const OptionSpec& o, Config& c, const std::string& text) {
  std::visit(
      [&](auto p) {
        using F = decltype(p);
        if constexpr (std::is_same_v<F, Method Config::*> ||
                      std::is_same_v<F, HopMarkers Config::*>) {
          require(from_name(text, &(c.*p)), o.error);
        } else {
          throw std::logic_error("option table: a choice needs an enum field");
        }
      },
      o.field);
}

// Defaults that depend on the command (the help text states them).
void command_defaults(Config& c, const po::variables_map& vm) {
  if (!given(vm, "max-time") && c.command != Command::kCapacity) c.max_time_s = 30;
  // hops: fewer trains by default (each costs every router two ICMP errors).
  if (c.command == Command::kHops && !given(vm, "trains")) c.max_trains = 8;
  // measure, availbw: the capacity phase is one of two and its trains stop at
  // 24. Past that they seldom narrow the interval: in the random-path
  // benchmark at 752207d 32 of 60 runs sent all 40 (a median 4.1 s), where
  // cross traffic held the trains' interval wider than --precision or the
  // reply gaps or our own shaper gave the estimate anyway; 19 of the 21 runs
  // that stopped on precision did so by the 19th train.
  if ((c.command == Command::kMeasure || c.command == Command::kAvailbw) && !given(vm, "trains"))
    c.max_trains = std::max(24, c.min_trains);
  if (c.command == Command::kHops && !given(vm, "min-trains"))
    c.min_trains = std::min(3, c.max_trains);
}

// The option table as Boost's description, in its three help sections, each
// value bound to its field of `c`.
po::options_description table_options(Config& c) {
  po::options_description opts("Options");
  po::options_description avail("Available bandwidth (availbw, measure)");
  po::options_description hops_opts("Bottleneck hop (hops)");
  for (const OptionSpec& o : option_table()) {
    po::options_description& group = o.group == OptionGroup::kGeneral   ? opts
                                     : o.group == OptionGroup::kAvailbw ? avail
                                                                        : hops_opts;
    group.add_options()(o.flags, semantic(o, c), o.help);
  }
  opts.add(avail);
  opts.add(hops_opts);
  return opts;
}

}  // namespace

FrontEnd front_end(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "sweep") return FrontEnd::kSweep;
  if (!args.empty() && args[0] == "analyze") return FrontEnd::kAnalyze;
  return FrontEnd::kMeasure;
}

const char kAnalyzeUsage[] = "usage: linkwidth analyze FILE [--json] [-v]";
const char kAnalyzeHelp[] =
    "usage: linkwidth analyze FILE [--json] [-v]\n"
    "Re-runs the estimators on a capture written by --save-pcap (capacity,\n"
    "availbw, measure and hops runs) and prints the live command's document.\n";

AnalyzeOptions parse_analyze_cli(const std::vector<std::string>& args) {
  AnalyzeOptions o;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json" || a == "-J") {
      o.json = true;
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else if (a == "-h" || a == "--help") {
      o.show_help = true;
      return o;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("analyze: unknown option '" + a + "'; " + kAnalyzeUsage + ".");
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      throw UsageError("analyze takes one FILE.");
    }
  }
  return o;
}

CliResult parse_cli(const std::vector<std::string>& args) {
  CliResult r;
  Config& c = r.config;

  const po::options_description opts = table_options(c);
  std::ostringstream help;
  help << kUsage << "\n" << opts;
  r.help_text = help.str();

  if (args.empty()) throw UsageError("no command given; try 'linkwidth help'.");
  const std::string& cmd = args[0];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    r.show_help = true;
    return r;
  }
  if (cmd == "version" || cmd == "--version" || cmd == "-V") {
    r.show_version = true;
    for (std::size_t i = 1; i < args.size(); ++i) {
      require(args[i] == "--json" || args[i] == "-J",
              "'version' takes only --json, not '" + args[i] + "'.");
      r.config.json = true;
    }
    return r;
  }
  require(cmd.empty() || cmd[0] != '-',
          "no command given before '" + cmd + "'; try 'linkwidth help'.");
  require(from_name(cmd, &c.command), "unknown command '" + cmd + "'; try 'linkwidth help'.");

  po::options_description all;
  all.add(opts).add_options()("target", po::value(&c.target));
  po::positional_options_description pos;
  pos.add("target", 1);
  po::variables_map vm;
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::too_many_positional_options_error&) {
    throw UsageError("only one TARGET may be given.");
  } catch (const po::error& e) {
    std::string m = e.what();
    if (!m.empty() && m.back() != '.') m += ".";
    throw UsageError(m);
  }
  if (vm["help"].as<bool>()) {
    r.show_help = true;
    return r;
  }
  require(!c.target.empty(), "no TARGET given; usage: linkwidth " + cmd + " TARGET.");
  const bool want4 = vm["ipv4"].as<bool>(), want6 = vm["ipv6"].as<bool>();
  require(!(want4 && want6), "-4 and -6 exclude each other.");
  c.family = want4 ? 4 : want6 ? 6 : 0;
  if (const auto lit = IpAddr::parse(c.target)) {
    require(c.family == 0 || c.family == lit->family(),
            "-" + std::to_string(c.family) + " given, but " + c.target + " is an IPv" +
                std::to_string(lit->family()) + " address.");
  }
  command_defaults(c, vm);
  // Each option in the table's order: the command takes it, its value
  // converts, and it is in range.
  for (const OptionSpec& o : option_table()) {
    const std::string name = long_name(o);
    const bool on_line = given(vm, name);
    if (on_line && !(o.commands & command_bit(c.command))) throw UsageError(o.wrong_command);
    if (on_line && o.kind == OptionKind::kSi) store_si(o, c, vm[name].as<std::string>());
    if (on_line && o.kind == OptionKind::kChoice) store_choice(o, c, vm[name].as<std::string>());
    const std::string why = check_option(o, c, on_line);
    require(why.empty(), why);
  }
  c.measure_hops = !vm["no-hops"].as<bool>();
  c.icmp_rate_given = given(vm, "icmp-rate");
  validate(c);  // what ties fields together (and the table once more, as replay sees it)
  return r;
}

}  // namespace lw
