#include "app/session.hpp"

#include <algorithm>
#include <random>

#include "app/path_checks.hpp"
#include "linkwidth/error.hpp"

namespace lw {

std::uint32_t checked_target(const Config& c) {
  const std::uint32_t addr = resolve_ipv4(c.target);
  std::string why = forbidden_target_reason(addr);
  if (why.empty()) why = local_target_reason(addr);
  if (!why.empty()) {
    throw Error("target", "refusing to probe " + format_ipv4(addr) + ": it is " + why,
                "forbidden_target", ExitCode::kUsage);
  }
  return addr;
}

int effective_packet_size(const Config& c, const Route& r, std::vector<Warning>& w) {
  if (c.packet_size <= r.mtu) return c.packet_size;
  w.push_back({"packet_size_clamped", "packet size lowered from " + std::to_string(c.packet_size) +
                                          " to the MTU of " + r.interface + " (" +
                                          std::to_string(r.mtu) + ")"});
  return r.mtu;
}

std::unique_ptr<Session> open_session(const Config& c, const std::atomic<bool>& stop,
                                      bool any_peer) {
  auto s = std::make_unique<Session>();
  s->t_begin = mono_now();
  s->dst = checked_target(c);
  s->route = find_route(s->dst, c.interface, c.source);
  s->packet_size = effective_packet_size(c, s->route, s->warnings);
  s->reserved = std::make_unique<PortReservation>(s->route.source, c.sport);
  s->prober = std::make_unique<Prober>(s->route, s->dst, s->reserved->port(), stop, c, any_peer);
  std::random_device rd;
  s->seqs = SeqAllocator(static_cast<std::uint32_t>(rd()));
  s->flow = FlowId{s->route.source, s->dst, s->reserved->port(), 0};
  const std::vector<int> candidates =
      c.port > 0 ? std::vector<int>{c.port} : default_candidate_ports();
  s->disc = discover_closed_port(*s->prober, s->flow, candidates, c.discovery_tries,
                                 from_seconds(c.reply_timeout_s), s->seqs);
  s->flow.dport = static_cast<std::uint16_t>(s->disc.port);
  s->warnings.insert(s->warnings.end(), s->disc.warnings.begin(), s->disc.warnings.end());
  s->replier = check_replier(*s, c, s->warnings);
  return s;
}

void describe_endpoints(const Session& s, const Config& c, CapacityResult& r) {
  r.target = c.target;
  r.target_addr = format_ipv4(s.dst);
  r.source = format_ipv4(s.route.source);
  r.interface = s.route.interface;
  r.source_port = s.reserved->port();
  r.port = s.disc.port;
  r.rtt_s = s.disc.rtt_s;
  r.replier = s.replier;
}

Nanos reply_wait(const Session& s, const Config& c) {
  return std::min(from_seconds(c.reply_timeout_s),
                  std::max<Nanos>(100 * kMs, from_seconds(20 * s.disc.rtt_s)));
}

}  // namespace lw
