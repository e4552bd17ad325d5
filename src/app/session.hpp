#pragma once
// What every measurement of one target shares: the checked address, the route,
// the reserved source port, the prober (raw socket + capture) and the closed
// port that discovery found. One session serves the capacity phase and the
// avail-bw phase of `linkwidth measure`, so both use one 5-tuple.
#include <atomic>
#include <memory>
#include <vector>

#include "app/config.hpp"
#include "app/discovery.hpp"
#include "app/net.hpp"
#include "app/prober.hpp"
#include "plan/capacity_plan.hpp"
#include "report/result.hpp"

namespace lw {

struct Session {
  std::uint32_t dst = 0;
  Route route;
  int packet_size = 1500;  // load packet size after clamping to the MTU
  std::unique_ptr<PortReservation> reserved;
  std::unique_ptr<Prober> prober;
  SeqAllocator seqs{0};
  FlowId flow;
  DiscoveryResult disc;
  ReplierInfo replier;            // who answers in the target's name (app/path_checks)
  std::vector<Warning> warnings;  // from setup (packet size clamp, discovery, replier)
  Nanos t_begin = 0;
};

// Resolves and checks the target (lw::Error with exit 2 for forbidden ones).
std::uint32_t checked_target(const Config& c);

// The load packet size: --packet-size, lowered to the interface MTU (warning).
int effective_packet_size(const Config& c, const Route& r, std::vector<Warning>& w);

// Resolve, route, reserve the port, open socket and capture, find a closed
// port. Throws lw::Error on any failure (privileges, filtered target, ...).
// `any_peer`: the capture also takes TCP replies from hosts other than the
// target (hops: markers addressed to routers).
std::unique_ptr<Session> open_session(const Config& c, const std::atomic<bool>& stop,
                                      bool any_peer = false);

// Fills the endpoint fields every result document carries.
void describe_endpoints(const Session& s, const Config& c, CapacityResult& r);

// How long to wait for replies after a train: generous against the measured
// RTT, bounded by --reply-timeout.
Nanos reply_wait(const Session& s, const Config& c);

}  // namespace lw
