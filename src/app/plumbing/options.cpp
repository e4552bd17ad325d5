#include "app/plumbing/options.hpp"

#include <cmath>
#include <type_traits>

#include "linkwidth/error.hpp"

namespace lw {

namespace {

using G = OptionGroup;
using K = OptionKind;
using P = ParamSet;

// Ranges: Closed(lo, hi) is lo <= v <= hi; AboveTo(lo, hi) is lo < v <= hi;
// Between(lo, hi) is lo < v < hi; Above(lo) is v > lo.
constexpr Range Closed(double lo, double hi) { return {true, lo, false, hi, false, false}; }
constexpr Range AboveTo(double lo, double hi) { return {true, lo, true, hi, false, false}; }
constexpr Range Between(double lo, double hi) { return {true, lo, true, hi, true, false}; }
constexpr Range Above(double lo) { return {true, lo, true, HUGE_VAL, false, false}; }
constexpr Range Unset0(Range r) { return r.unset_zero = true, r; }
constexpr Range kNoRange{};

const CommandMask kAvailbwOnly = 1u << static_cast<int>(Command::kAvailbw);
const CommandMask kMeasureOnly = 1u << static_cast<int>(Command::kMeasure);

// The order is the order of `linkwidth help` within each group, and the order
// in which the command line's values are checked.
// clang-format off
const std::vector<OptionSpec> kTable = {
  {"help,h", G::kGeneral, "show this help", K::kSwitch, {}, kNoRange, nullptr, nullptr},
  {"json,J", G::kGeneral, "print one JSON document on stdout", K::kSwitch, &Config::json, kNoRange, nullptr, nullptr},
  {"dry-run", G::kGeneral, "print the planned packets and schedule; send nothing", K::kSwitch, &Config::dry_run, kNoRange, nullptr, nullptr},
  {"verbose,v", G::kGeneral, "per-train details on stderr", K::kSwitch, &Config::verbose, kNoRange, nullptr, nullptr},
  {"interface,i", G::kGeneral, "outgoing interface (default: from the routing table)", K::kPlain, &Config::interface, kNoRange, nullptr, "interface", P::kCommon},
  {"ipv4,4", G::kGeneral, "a host name's IPv4 address (default: the resolver's first answer)", K::kSwitch, {}, kNoRange, nullptr, nullptr},
  {"ipv6,6", G::kGeneral, "a host name's IPv6 address (default: the resolver's first answer)", K::kSwitch, {}, kNoRange, nullptr, nullptr},
  {"source,s", G::kGeneral, "source IPv4 or IPv6 address, of the target's family (default: from the routing table)", K::kPlain, &Config::source, kNoRange, nullptr, "source", P::kCommon},
  {"port,p", G::kGeneral, "destination port to use, closed or listening (default: discover one; see README, open-port markers)", K::kPlain, &Config::port, Closed(0, 65535), "--port must be between 1 and 65535.", "port", P::kCommon},
  {"source-port", G::kGeneral, "source port (default: reserve one from the kernel)", K::kPlain, &Config::sport, Closed(0, 65535), "--source-port must be between 1 and 65535.", "source_port", P::kCommon},
  {"packet-size,l", G::kGeneral, "IP bytes of each load packet, 64..1500 (default 1500, never above the MTU)", K::kPlain, &Config::packet_size, Closed(64, 1500), "--packet-size must be between 64 and 1500 bytes (an IP datagram that fits the MTU).", "packet_size", P::kCommon},
  {"load-packets,n", G::kGeneral, "load packets per train; 0 = size automatically (default 0)", K::kPlain, &Config::load_packets, Closed(0, 10000), "--load-packets must be between 1 and 10000 (or 0 for automatic).", "load_packets", P::kCommon},
  {"markers", G::kGeneral, "reply-drawing SYN markers per train, 2..16 (default 2: head and tail)", K::kPlain, &Config::markers, Closed(2, 16), "--markers must be between 2 and 16.", "markers", P::kCommon},
  {"drain-packets", G::kGeneral, "MTU packets sent right before the head marker to empty shaper token buckets (default 2)", K::kPlain, &Config::drain_packets, Closed(0, 16), "--drain-packets must be between 0 and 16.", "drain_packets", P::kCommon},
  {"train-dispersion", G::kGeneral, "automatic sizing aims at this train dispersion, seconds (default 0.003)", K::kPlain, &Config::target_dispersion_s, AboveTo(0, 1), "--train-dispersion must be above 0 and at most 1 second.", "train_dispersion_s", P::kCommon},
  {"length-ratio", G::kGeneral, "alternate trains of N and ratio*N load packets and use the slope; 1 = one length (default 2)", K::kPlain, &Config::length_ratio, Closed(1, 8), "--length-ratio must be between 1 and 8.", "length_ratio", P::kCommon},
  {"max-load-packets", G::kGeneral, "upper bound on load packets per train, every train (default 1000; at least --length-ratio)", K::kPlain, &Config::max_load_packets, Closed(1, 10000), "--max-load-packets must be between 1 and 10000.", "max_load_packets", P::kCommon},
  {"min-trains", G::kGeneral, "trains before the stopping rule applies (default 5)", K::kPlain, &Config::min_trains, Closed(1, 1000), "--min-trains must be between 1 and 1000.", "min_trains", P::kCommon},
  {"trains,t", G::kGeneral, "at most this many trains (default 40; measure and availbw 24, hops 8)", K::kPlain, &Config::max_trains, Closed(1, 1000), "--trains must be between 1 and 1000.", "max_trains", P::kCommon},
  {"precision", G::kGeneral, "stop when the 95% interval is within +-this fraction (default 0.01)", K::kPlain, &Config::precision, Between(0, 1), "--precision must be between 0 and 1.", "precision", P::kCommon},
  {"max-load", G::kGeneral, "average probing rate as a fraction of the capacity (default 0.1)", K::kPlain, &Config::max_load, AboveTo(0, 0.5), "--max-load must be above 0 and at most 0.5 (a probe must stay a small share).", "max_load", P::kCommon},
  {"max-bytes", G::kGeneral, "hard cap on probe bytes per run, K/M/G suffixes (default 50M)", K::kSi, &Config::max_bytes, Closed(10e3, 10e9), "--max-bytes must be between 10K and 10G.", "max_bytes", P::kCommon},
  {"shaper-stream", G::kGeneral, "bytes of the stream that looks for a token bucket the capacity trains did not show, K/M suffixes (default: a tenth of a second at the trains' rate, 64K..1M; it keeps to --max-load)", K::kSi, &Config::shaper_stream_bytes, Unset0(Closed(64e3, 100e6)), "--shaper-stream must be between 64K and 100M bytes.", nullptr},
  {"no-shaper-stream", G::kGeneral, "send no such stream: look for a token bucket only when the capacity trains show one", K::kSwitch, &Config::no_shaper_stream, kNoRange, nullptr, nullptr},
  {"max-rate", G::kGeneral, "peak probing rate in bit/s, K/M/G suffixes, 100K..100G; a faster path is reported as a lower bound (default 1G)", K::kSi, &Config::max_rate_bps, Closed(100e3, 100e9), "--max-rate must be between 100K and 100G bit/s.", "max_rate_bps", P::kCommon},
  {"max-replies", G::kGeneral, "replies asked of one host per second at most, 5..10000; lowered at run time if the host limits its RSTs (default 100)", K::kPlain, &Config::max_replies, Closed(5, 10000), "--max-replies must be between 5 and 10000 replies per second.", "max_replies_per_s", P::kCommon},
  {"save-pcap", G::kGeneral, "write every probe and reply of the run to this pcap file (ns timestamps)", K::kFile, &Config::save_pcap, kNoRange, "--save-pcap needs a file name.", nullptr},
  {"tries", G::kGeneral, "marker discovery rounds before 'filtered', at least 3: closed ports, service ports, bare ACKs (default 3)", K::kPlain, &Config::discovery_tries, Closed(1, 10), "--tries must be between 1 and 10.", "discovery_tries", P::kCommon},
  {"reply-timeout", G::kGeneral, "longest wait for replies, in discovery and after each train, seconds (default 1; after a train never under 3 RTTs of the path)", K::kPlain, &Config::reply_timeout_s, Closed(0.001, 10), "--reply-timeout must be between 0.001 and 10 seconds.", "reply_timeout_s", P::kCommon},

  {"method", G::kAvailbw, "fleet (default): fleets of paced trains, noise-derived thresholds, grey region, response-curve fit; linkwidth: the paper's binary search as published", K::kChoice, &Config::method, kNoRange, "--method must be 'fleet' or 'linkwidth'.", nullptr},
  {"capacity", G::kAvailbw, "skip the capacity phase and search up to this rate (K/M/G)", K::kSi, &Config::capacity_bps, Unset0(Closed(1e5, 1e11)), "--capacity must be between 100K and 100G bit/s.", nullptr, P::kNone, kAvailbwOnly, "--capacity only applies to 'availbw' (measure measures it)."},
  {"no-hops", G::kAvailbw, "measure: skip locating the bottleneck hop", K::kSwitch, {}, kNoRange, nullptr, nullptr, P::kNone, kMeasureOnly, "--no-hops only applies to 'measure'."},
  {"max-time", G::kAvailbw, "hard cap on the run time, seconds (default 20 for capacity, 30 otherwise)", K::kPlain, &Config::max_time_s, AboveTo(0, 3600), "--max-time must be above 0 and at most 3600 seconds.", "max_time_s", P::kCommon},
  {"resolution", G::kAvailbw, "fleet: stop when the avail-bw range is narrower than this fraction of the capacity (default 0.03)", K::kPlain, &Config::resolution, Closed(0.001, 0.5), "--resolution must be between 0.001 and 0.5 (a fraction of the capacity).", nullptr},
  {"fleet", G::kAvailbw, "fleet: trains per tested rate (default 6)", K::kPlain, &Config::fleet_trains, Closed(1, 50), "--fleet must be between 1 and 50.", nullptr},
  {"fleet-fraction", G::kAvailbw, "fleet: share of agreeing trains that decides a rate, above 0.5 (default 0.66)", K::kPlain, &Config::fleet_fraction, AboveTo(0.5, 1), "--fleet-fraction must be above 0.5 and at most 1.", nullptr},
  {"train-time", G::kAvailbw, "fleet: shortest paced train, seconds (default 0.005)", K::kPlain, &Config::train_time_s, Closed(0.0005, 1), "--train-time must be between 0.0005 and 1 second.", nullptr},
  {"min-train-packets", G::kAvailbw, "fleet: fewest load packets per paced train (default 10)", K::kPlain, &Config::min_train_packets, Closed(2, 10000), "--min-train-packets must be between 2 and 10000.", nullptr},
  {"search-markers", G::kAvailbw, "fleet: SYN markers per paced train, 2..16 (default 6; the ratio runs from the one a fifth into the load to the tail)", K::kPlain, &Config::avail_markers, Closed(2, 16), "--search-markers must be between 2 and 16.", nullptr},
  {"calibration-trains", G::kAvailbw, "fleet: low-rate trains that measure the timing noise (default 8)", K::kPlain, &Config::calibration_trains, Closed(3, 100), "--calibration-trains must be between 3 and 100.", nullptr},
  {"epsilon", G::kAvailbw, "linkwidth: convergence parameter ε (default 0.1)", K::kPlain, &Config::epsilon, Between(0, 1), "--epsilon must be between 0 and 1.", nullptr},
  {"theta", G::kAvailbw, "linkwidth: granularity θ in bit/s, K/M/G (default 1% of the capacity)", K::kSi, &Config::theta_bps, Unset0(Above(0)), "--theta must be above 0 bit/s.", nullptr},
  {"pairs", G::kAvailbw, "linkwidth: packet pairs per train (npackets/2, default 10)", K::kPlain, &Config::pairs, Closed(1, 5000), "--pairs must be between 1 and 5000.", nullptr},
  {"pair-gap", G::kAvailbw, "linkwidth: fixed inter-pair gap Δr_t, seconds (default 0.0001)", K::kPlain, &Config::pair_gap_s, Closed(0, 0.1), "--pair-gap must be between 0 and 0.1 s.", nullptr},
  {"train-delay", G::kAvailbw, "linkwidth: inter-train delay, seconds; never below the 10% load rule (default 0)", K::kPlain, &Config::train_delay_s, Closed(0, 60), "--train-delay must be between 0 and 60 s.", nullptr},

  {"hop-markers", G::kHops, "auto (per hop: router's own address if it answers TCP, else TTL), ttl or addr (default auto)", K::kChoice, &Config::hop_markers, kNoRange, "--hop-markers must be auto, ttl or addr.", "hop_markers", P::kHops},
  {"max-hops", G::kHops, "longest path to discover, 1..64 (default 30)", K::kPlain, &Config::max_hops, Closed(1, 64), "--max-hops must be between 1 and 64.", "max_hops", P::kHops},
  {"icmp-rate", G::kHops, "ICMP errors per second a router sends us (default 1, Linux icmp_ratelimit; 10 over IPv6, net.ipv6.icmp.ratelimit)", K::kPlain, &Config::icmp_rate, AboveTo(0, 10000), "--icmp-rate must be above 0 and at most 10000 per second.", "icmp_rate", P::kHops},
  {"icmp-burst", G::kHops, "ICMP errors a router sends in a burst (default 6)", K::kPlain, &Config::icmp_burst, Closed(2, 10000), "--icmp-burst must be between 2 and 10000 (a train needs two replies per hop).", "icmp_burst", P::kHops},
  {"min-step", G::kHops, "relative dispersion rise that makes a choke point (default 0.15)", K::kPlain, &Config::min_step, AboveTo(0, 10), "--min-step must be above 0 and at most 10.", "min_step", P::kHops},
};
// clang-format on

}  // namespace

void require(bool ok, const std::string& sentence) {
  if (!ok) throw UsageError(sentence);
}

CommandMask command_bit(Command c) { return 1u << static_cast<int>(c); }

const std::vector<OptionSpec>& option_table() { return kTable; }

std::string long_name(const OptionSpec& o) {
  const std::string f = o.flags;
  return f.substr(0, f.find(','));
}

const OptionSpec* find_option(const std::string& name) {
  for (const auto& o : kTable)
    if (long_name(o) == name) return &o;
  return nullptr;
}

nlohmann::json field_json(const OptionSpec& o, const Config& c) {
  return std::visit(
      [&](auto p) -> nlohmann::json {
        if constexpr (std::is_same_v<decltype(p), std::monostate>) {
          return nullptr;
        } else {
          return c.*p;
        }
      },
      o.field);
}

bool in_range(const Range& r, double v, bool given) {
  if (!r.has) return true;
  if (r.unset_zero && !given && v == 0) return true;
  const bool lo_ok = r.lo_open ? v > r.lo : v >= r.lo;
  const bool hi_ok = r.hi_open ? v < r.hi : v <= r.hi;
  return lo_ok && hi_ok;
}

std::string check_option(const OptionSpec& o, const Config& c, bool given) {
  if (o.kind == OptionKind::kFile) {
    const auto* p = std::get_if<std::string Config::*>(&o.field);
    return given && p && (c.**p).empty() ? o.error : "";
  }
  if (!o.range.has) return "";
  const nlohmann::json v = field_json(o, c);
  if (!v.is_number()) return "";
  return in_range(o.range, v.get<double>(), given) ? "" : o.error;
}

void validate(const Config& c) {
  for (const auto& o : kTable) {
    const std::string why = check_option(o, c, false);
    if (!why.empty()) throw UsageError(why);
  }
  require(c.min_trains <= c.max_trains, "--min-trains cannot exceed --trains.");
  require(c.max_load_packets >= std::ceil(c.length_ratio),
          "--max-load-packets must be at least --length-ratio (capacity trains come in two "
          "lengths, N and ratio x N load packets, N >= 1).");
  require(c.calibration_rate > 0 && c.calibration_rate <= 1,
          "the calibration rate must be above 0 and at most 1 (a fraction of the capacity).");
  require(c.max_fleets >= 1 && c.max_fleets <= 1000, "the fleet count must be between 1 and 1000.");
}

Config recorded_config(const Config& c, const std::string& phase) {
  try {
    validate(c);
  } catch (const UsageError&) {
    throw Error("analyze", "the recorded " + phase + " configuration is out of range",
                "bad_capture", ExitCode::kUsage);
  }
  return c;
}

nlohmann::json params_json(const Config& c, ParamSet set) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& o : kTable) {
    if (!o.param) continue;
    if (o.param_set == ParamSet::kCommon ||
        (set == ParamSet::kHops && o.param_set == ParamSet::kHops)) {
      j[o.param] = field_json(o, c);
    }
  }
  return j;
}

Config config_from_params(const nlohmann::json& params) {
  Config c;
  for (const auto& o : kTable) {
    if (!o.param || o.param_set != ParamSet::kCommon) continue;
    // Recorded runs from before --max-replies lack its key (the fuzz seed
    // pcap_run_records is one): the default then, as those runs had.
    if (std::string(o.param) == "max_replies_per_s" && !params.contains(o.param)) continue;
    const nlohmann::json& v = params.at(o.param);
    std::visit(
        [&](auto p) {
          if constexpr (!std::is_same_v<decltype(p), std::monostate>) {
            c.*p = v.get<std::remove_reference_t<decltype(c.*p)>>();
          }
        },
        o.field);
  }
  return c;
}

}  // namespace lw
