#include "app/runs/dry_run.hpp"

#include <algorithm>
#include <string>

#include "app/plumbing/discovery.hpp"
#include "app/plumbing/net.hpp"
#include "app/plumbing/options.hpp"
#include "app/plumbing/session.hpp"
#include "app/runs/capacity_run.hpp"
#include "app/runs/capacity_tally.hpp"
#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"
#include "plan/hops_plan.hpp"
#include "report/writers.hpp"
#include "send/packet_builder.hpp"

namespace lw {

nlohmann::json plan_packets_json(const Train& t) {
  PacketBuilder builder;
  nlohmann::json packets = nlohmann::json::array();
  for (const Probe& p : t.probes) {
    std::string flags;
    if (p.flags & kSyn) flags += "S";
    if (p.flags & kRst) flags += "R";
    if (p.flags & kAck) flags += "A";
    packets.push_back({{"index", p.index},
                       {"role", role_name(p.role)},
                       {"flags", flags},
                       {"seq", p.seq},
                       {"ip_len", p.ip_len},
                       {"ttl", p.ttl},
                       {"offset_s", to_seconds(p.offset)},
                       {"wire_bytes", builder.build(p).size()}});
  }
  return packets;
}

nlohmann::json plan_header(const Config& c, IpAddr* dst, Route* route,
                           std::vector<Warning>* warnings) {
  *dst = checked_target(c);
  nlohmann::json plan;
  plan["type"] = "plan";
  plan["command"] = c.command;
  plan["target"] = c.target;
  plan["target_addr"] = format_scoped(*dst);
  try {
    *route = find_route(*dst, c.interface, c.source);
  } catch (const Error& e) {
    warnings->push_back({WarningCode::kNoRoute, e.report()});
    route->interface = c.interface;
  }
  return plan;
}

nlohmann::json plan_capacity(const Config& c) {
  IpAddr dst;
  Route route;
  std::vector<Warning> warnings;
  nlohmann::json plan = plan_header(c, &dst, &route, &warnings);
  const int L = effective_packet_size(c, route, warnings);
  const int n = c.load_packets > 0 ? c.load_packets : sizing_load_packets(c.max_load_packets);
  FlowId flow{route.source, dst, static_cast<std::uint16_t>(c.sport),
              static_cast<std::uint16_t>(c.port > 0 ? c.port : default_candidate_ports()[0])};
  SeqAllocator seqs(1000);
  const Train t = make_capacity_train(train_params(c, flow, n, L), 0, seqs);
  const nlohmann::json packets = plan_packets_json(t);
  plan["params"] = params_json(c);
  plan["params"]["packet_size"] = L;
  plan["source"] = format_scoped(route.source);
  plan["interface"] = route.interface;
  plan["first_train"] = {{"load_packets", n}, {"bytes", t.total_bytes()}, {"packets", packets}};
  plan["schedule"] = {
      {"discovery",
       "SYNs to closed-port candidates, then to service ports (443, 80, ...), then bare ACKs, "
       "up to " + std::to_string(discovery_rounds(c.discovery_tries)) +
           " rounds; the markers below are for a closed port (open_syn adds a closer RST after "
           "each SYN, ack turns the SYNs into bare ACKs)"},
      {"sizing", c.load_packets > 0
                     ? "fixed load packets per train"
                     : "first train sizes the rest: N = ceil(train_dispersion * C / (8 L)), "
                       "clamped to [min(8, max_load_packets / length_ratio), max_load_packets / length_ratio]"},
      {"idle",
       "after each train: max(train time at C_b / max_load, 2 N L / C_b), C_b the lower quartile "
       "of the per-train rates (at most the estimate; lower when long trains read faster than "
       "short ones: lost load); before each: bytes sent over elapsed time under max_load x C_b"},
      {"stop", "precision reached after min_trains, or max_trains / max_time / max_bytes"},
      {"shaper",
       std::string("when the trains show a token bucket, up to 4 streams of RST load with 40 "
                   "SYN markers, back to back, each at most 32 MB; ") +
           (c.no_shaper_stream
                ? "otherwise none (--no-shaper-stream)"
                : c.shaper_stream_bytes > 0
                      ? "otherwise one stream of " + std::to_string(static_cast<long long>(
                                                         c.shaper_stream_bytes)) +
                            " bytes paced at 0.95 of the trains' rate, 24 markers (the routine "
                            "check), confirmed by more only where it finds a bucket"
                      : "otherwise one stream of a tenth of a second at 0.95 of the trains' rate, "
                        "64 KB to 1 MB, 24 markers, within --max-load (the routine check), confirmed by more only "
                        "where it finds a bucket")}};
  // The trains' bytes, and every shaper stream the byte cap lets through.
  plan["caps"] = {{"max_trains", c.max_trains},
                  {"max_time_s", c.max_time_s},
                  {"max_bytes", c.max_bytes},
                  {"max_rate_bps", c.max_rate_bps},
                  {"worst_case_bytes", c.max_bytes}};
  plan["warnings"] = warnings_json(warnings);
  return plan;
}

nlohmann::json plan_hops(const Config& c) {
  IpAddr dst;
  Route route;
  std::vector<Warning> warnings;
  nlohmann::json plan = plan_header(c, &dst, &route, &warnings);
  const int L = std::min(c.packet_size, route.mtu);
  const int n = c.load_packets > 0 ? c.load_packets : sizing_load_packets(c.max_load_packets);
  const FlowId flow{route.source, dst, static_cast<std::uint16_t>(c.sport),
                    static_cast<std::uint16_t>(c.port > 0 ? c.port : default_candidate_ports()[0])};
  SeqAllocator seqs(1000);
  RecursiveTrainParams p;
  p.flow = flow;
  const int H = std::min(4, c.max_hops);
  for (int k = 1; k <= H; ++k) {
    p.hops.push_back({k, 0, k == H ? MarkerKind::kTarget : MarkerKind::kTtl});
  }
  p.load_packets = n;
  p.packet_size = static_cast<std::uint16_t>(L);
  p.drain_packets = c.drain_packets;
  RecursiveTrain rt = make_recursive_train(p, 0, seqs);
  space_to_rate(rt.train, c.max_rate_bps);
  const nlohmann::json packets = plan_packets_json(rt.train);
  plan["params"] = params_json(c);
  plan["params"]["packet_size"] = L;
  plan["source"] = format_scoped(route.source);
  plan["interface"] = route.interface;
  plan["first_train"] = {{"load_packets", n},
                         {"bytes", rt.train.total_bytes()},
                         {"example_hops", H},
                         {"packets", packets}};
  plan["schedule"] = {
      {"discovery", "marker discovery as for capacity, then one SYN per TTL 1.." +
                        std::to_string(c.max_hops) + " in the same 5-tuple"},
      {"markers", "hop-markers " + std::string(name(c.hop_markers)) +
                      ": ttl = TTL-limited SYNs (ICMP time exceeded), addr = SYNs to the "
                      "router's own address (RST/ACK)"},
      {"pacing",
       "each TTL-marked router gets 2 ICMP per train within --icmp-rate/--icmp-burst; "
       "idle = train time at the slowest hop / max_load"},
      {"stop", "max_trains / max_time / max_bytes"}};
  plan["caps"] = {
      {"max_trains", c.max_trains}, {"max_time_s", c.max_time_s}, {"max_bytes", c.max_bytes}};
  plan["warnings"] = warnings_json(warnings);
  return plan;
}

}  // namespace lw
