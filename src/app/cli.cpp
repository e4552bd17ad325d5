#include "app/cli.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <sstream>

#include "linkwidth/error.hpp"

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

void require(bool ok, const std::string& sentence) {
  if (!ok) throw UsageError(sentence);
}

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

CliResult parse_cli(const std::vector<std::string>& args) {
  CliResult r;
  Config& c = r.config;
  std::string max_bytes = "50M";
  std::string max_rate = "1G";
  std::string capacity, theta;
  bool no_hops = false;

  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
    ("help,h", "show this help")
    ("json,J", po::bool_switch(&c.json), "print one JSON document on stdout")
    ("dry-run", po::bool_switch(&c.dry_run), "print the planned packets and schedule; send nothing")
    ("verbose,v", po::bool_switch(&c.verbose), "per-train details on stderr")
    ("interface,i", po::value(&c.interface), "outgoing interface (default: from the routing table)")
    ("source,s", po::value(&c.source), "source IPv4 address (default: from the routing table)")
    ("port,p", po::value(&c.port), "closed destination port to use (default: discover one)")
    ("source-port", po::value(&c.sport), "source port (default: reserve one from the kernel)")
    ("packet-size,l", po::value(&c.packet_size), "IP bytes of each load packet, 64..1500 (default 1500, never above the MTU)")
    ("load-packets,n", po::value(&c.load_packets), "load packets per train; 0 = size automatically (default 0)")
    ("markers", po::value(&c.markers), "reply-drawing SYN markers per train, 2..16 (default 2: head and tail)")
    ("drain-packets", po::value(&c.drain_packets), "MTU packets sent right before the head marker to empty shaper token buckets (default 2)")
    ("train-dispersion", po::value(&c.target_dispersion_s), "automatic sizing aims at this train dispersion, seconds (default 0.003)")
    ("length-ratio", po::value(&c.length_ratio), "alternate trains of N and ratio*N load packets and use the slope; 1 = one length (default 2)")
    ("max-load-packets", po::value(&c.max_load_packets), "upper bound for automatic sizing (default 1000)")
    ("min-trains", po::value(&c.min_trains), "trains before the stopping rule applies (default 5)")
    ("trains,t", po::value(&c.max_trains), "at most this many trains (default 40)")
    ("precision", po::value(&c.precision), "stop when the 95% interval is within +-this fraction (default 0.01)")
    ("max-load", po::value(&c.max_load), "average probing rate as a fraction of the capacity (default 0.1)")
    ("max-bytes", po::value(&max_bytes), "hard cap on probe bytes per run, K/M/G suffixes (default 50M)")
    ("max-rate", po::value(&max_rate), "peak probing rate in bit/s, K/M/G suffixes, 100K..100G; a faster path is reported as a lower bound (default 1G)")
    ("max-replies", po::value(&c.max_replies), "replies asked of one host per second at most, 5..10000; lowered at run time if the host limits its RSTs (default 100)")
    ("save-pcap", po::value(&c.save_pcap), "write every probe and reply of the run to this pcap file (ns timestamps)")
    ("tries", po::value(&c.discovery_tries), "closed-port discovery rounds before 'filtered' (default 3)")
    ("reply-timeout", po::value(&c.reply_timeout_s), "longest wait for replies, in discovery and after each train, seconds (default 1)");
  po::options_description avail("Available bandwidth (availbw, measure)");
  avail.add_options()
    ("method", po::value(&c.method), "fleet (default): fleets of paced trains, noise-derived thresholds, grey region, response-curve fit; linkwidth: the paper's binary search as published")
    ("capacity", po::value(&capacity), "skip the capacity phase and search up to this rate (K/M/G)")
    ("no-hops", po::bool_switch(&no_hops), "measure: skip locating the bottleneck hop")
    ("max-time", po::value(&c.max_time_s), "hard cap on the run time, seconds (default 20 for capacity, 30 otherwise)")
    ("resolution", po::value(&c.resolution), "fleet: stop when the avail-bw range is narrower than this fraction of the capacity (default 0.03)")
    ("fleet", po::value(&c.fleet_trains), "fleet: trains per tested rate (default 6)")
    ("fleet-fraction", po::value(&c.fleet_fraction), "fleet: share of agreeing trains that decides a rate, above 0.5 (default 0.66)")
    ("train-time", po::value(&c.train_time_s), "fleet: shortest paced train, seconds (default 0.005)")
    ("min-train-packets", po::value(&c.min_train_packets), "fleet: fewest load packets per paced train (default 10)")
    ("search-markers", po::value(&c.avail_markers), "fleet: SYN markers per paced train, 2..16 (default 6)")
    ("calibration-trains", po::value(&c.calibration_trains), "fleet: low-rate trains that measure the timing noise (default 8)")
    ("epsilon", po::value(&c.epsilon), "linkwidth: convergence parameter ε (default 0.1)")
    ("theta", po::value(&theta), "linkwidth: granularity θ in bit/s, K/M/G (default 1% of the capacity)")
    ("pairs", po::value(&c.pairs), "linkwidth: packet pairs per train (npackets/2, default 10)")
    ("pair-gap", po::value(&c.pair_gap_s), "linkwidth: fixed inter-pair gap Δr_t, seconds (default 0.0001)")
    ("train-delay", po::value(&c.train_delay_s), "linkwidth: inter-train delay, seconds; never below the 10% load rule (default 0)");
  po::options_description hops_opts("Bottleneck hop (hops)");
  hops_opts.add_options()
    ("hop-markers", po::value(&c.hop_markers), "auto (per hop: router's own address if it answers TCP, else TTL), ttl or addr (default auto)")
    ("max-hops", po::value(&c.max_hops), "longest path to discover, 1..64 (default 30)")
    ("icmp-rate", po::value(&c.icmp_rate), "ICMP errors per second a router sends us (default 1, Linux icmp_ratelimit)")
    ("icmp-burst", po::value(&c.icmp_burst), "ICMP errors a router sends in a burst (default 6)")
    ("min-step", po::value(&c.min_step), "relative dispersion rise that makes a choke point (default 0.15)");
  // clang-format on
  opts.add(avail);
  opts.add(hops_opts);
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
  require(cmd == "capacity" || cmd == "availbw" || cmd == "measure" || cmd == "hops",
          "unknown command '" + cmd + "'; try 'linkwidth help'.");
  c.command = cmd;

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
  if (vm.count("help")) {
    r.show_help = true;
    return r;
  }
  require(!c.target.empty(), "no TARGET given; usage: linkwidth " + cmd + " TARGET.");
  require(!vm.count("save-pcap") || !c.save_pcap.empty(), "--save-pcap needs a file name.");
  const double max_bytes_v = parse_si(max_bytes, "--max-bytes");
  require(max_bytes_v >= 10e3 && max_bytes_v <= 10e9, "--max-bytes must be between 10K and 10G.");
  c.max_bytes = static_cast<std::uint64_t>(std::llround(max_bytes_v));
  c.max_rate_bps = parse_si(max_rate, "--max-rate");
  require(c.max_rate_bps >= 100e3 && c.max_rate_bps <= 100e9,
          "--max-rate must be between 100K and 100G bit/s.");
  require(c.max_replies >= 5 && c.max_replies <= 10000,
          "--max-replies must be between 5 and 10000 replies per second.");
  if (!vm.count("max-time") && cmd != "capacity") c.max_time_s = 30;
  if (!capacity.empty()) {
    require(cmd == "availbw", "--capacity only applies to 'availbw' (measure measures it).");
    c.capacity_bps = parse_si(capacity, "--capacity");
    require(c.capacity_bps >= 1e5 && c.capacity_bps <= 1e11,
            "--capacity must be between 100K and 100G bit/s.");
  }
  require(!no_hops || cmd == "measure", "--no-hops only applies to 'measure'.");
  c.measure_hops = !no_hops;
  if (!theta.empty()) {
    c.theta_bps = parse_si(theta, "--theta");
    require(c.theta_bps > 0, "--theta must be above 0 bit/s.");
  }
  require(c.method == "fleet" || c.method == "linkwidth",
          "--method must be 'fleet' or 'linkwidth'.");
  require(c.resolution >= 0.001 && c.resolution <= 0.5,
          "--resolution must be between 0.001 and 0.5 (a fraction of the capacity).");
  require(c.fleet_trains >= 1 && c.fleet_trains <= 50, "--fleet must be between 1 and 50.");
  require(c.fleet_fraction > 0.5 && c.fleet_fraction <= 1,
          "--fleet-fraction must be above 0.5 and at most 1.");
  require(c.train_time_s >= 0.0005 && c.train_time_s <= 1,
          "--train-time must be between 0.0005 and 1 second.");
  require(c.min_train_packets >= 2 && c.min_train_packets <= 10000,
          "--min-train-packets must be between 2 and 10000.");
  require(c.avail_markers >= 2 && c.avail_markers <= 16,
          "--search-markers must be between 2 and 16.");
  require(c.calibration_trains >= 3 && c.calibration_trains <= 100,
          "--calibration-trains must be between 3 and 100.");
  require(c.epsilon > 0 && c.epsilon < 1, "--epsilon must be between 0 and 1.");
  require(c.pairs >= 1 && c.pairs <= 5000, "--pairs must be between 1 and 5000.");
  require(c.pair_gap_s >= 0 && c.pair_gap_s <= 0.1, "--pair-gap must be between 0 and 0.1 s.");
  require(c.train_delay_s >= 0 && c.train_delay_s <= 60,
          "--train-delay must be between 0 and 60 s.");
  // hops: fewer trains by default (each costs every router two ICMP errors).
  if (cmd == "hops" && !vm.count("trains")) c.max_trains = 8;
  if (cmd == "hops" && !vm.count("min-trains")) c.min_trains = std::min(3, c.max_trains);

  require(c.port >= 0 && c.port <= 65535, "--port must be between 1 and 65535.");
  require(c.sport >= 0 && c.sport <= 65535, "--source-port must be between 1 and 65535.");
  require(c.packet_size >= 64 && c.packet_size <= 1500,
          "--packet-size must be between 64 and 1500 bytes (an IP datagram that fits the MTU).");
  require(c.load_packets >= 0 && c.load_packets <= 10000,
          "--load-packets must be between 1 and 10000 (or 0 for automatic).");
  require(c.markers >= 2 && c.markers <= 16, "--markers must be between 2 and 16.");
  require(c.drain_packets >= 0 && c.drain_packets <= 16,
          "--drain-packets must be between 0 and 16.");
  require(c.target_dispersion_s > 0 && c.target_dispersion_s <= 1,
          "--train-dispersion must be above 0 and at most 1 second.");
  require(c.length_ratio >= 1 && c.length_ratio <= 8, "--length-ratio must be between 1 and 8.");
  require(c.max_load_packets >= 1 && c.max_load_packets <= 10000,
          "--max-load-packets must be between 1 and 10000.");
  require(c.min_trains >= 1 && c.min_trains <= 1000, "--min-trains must be between 1 and 1000.");
  require(c.max_trains >= 1 && c.max_trains <= 1000, "--trains must be between 1 and 1000.");
  require(c.min_trains <= c.max_trains, "--min-trains cannot exceed --trains.");
  require(c.precision > 0 && c.precision < 1, "--precision must be between 0 and 1.");
  require(c.max_load > 0 && c.max_load <= 0.5,
          "--max-load must be above 0 and at most 0.5 (a probe must stay a small share).");
  require(c.max_time_s > 0 && c.max_time_s <= 3600,
          "--max-time must be above 0 and at most 3600 seconds.");
  require(c.discovery_tries >= 1 && c.discovery_tries <= 10, "--tries must be between 1 and 10.");
  require(c.reply_timeout_s >= 0.001 && c.reply_timeout_s <= 10,
          "--reply-timeout must be between 0.001 and 10 seconds.");
  require(c.hop_markers == "auto" || c.hop_markers == "ttl" || c.hop_markers == "addr",
          "--hop-markers must be auto, ttl or addr.");
  require(c.max_hops >= 1 && c.max_hops <= 64, "--max-hops must be between 1 and 64.");
  require(c.icmp_rate > 0 && c.icmp_rate <= 10000,
          "--icmp-rate must be above 0 and at most 10000 per second.");
  require(c.icmp_burst >= 2 && c.icmp_burst <= 10000,
          "--icmp-burst must be between 2 and 10000 (a train needs two replies per hop).");
  require(c.min_step > 0 && c.min_step <= 10, "--min-step must be above 0 and at most 10.");
  return r;
}

}  // namespace lw
